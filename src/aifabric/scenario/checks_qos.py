"""Cross-field checks of `fabric.qos` (the switch QoS profile), each naming the field to change.

- The book's rule of thumb (Deep Learning for Network Engineers, Chapter 11): xON < WRED min < WRED max < xOFF,
  so ECN slows the senders before PFC stops a link.
- PFC headroom: what arrives after a pause is sent (the cable both ways, the switch pipeline, frames already on
  the wire) must fit above xOFF: 2 x (cable + switch latency) x the fastest link's speed + 3 frames + a PFC frame.
- xOFF + headroom fits the shared buffer.
- The switch MTU carries a RoCE path-MTU packet with its headers.
- Where the NICs' packets land: CNPs in a queue of their own; RoCEv2 data in a PFC priority while PFC is on, and in
  an ECN-marking WRED queue while DCQCN is the congestion control.
"""

from __future__ import annotations

from ..errors import Problem
from ..units import gbps_to_bytes_per_s
from .qos_spec import QUEUES, QosSpec

KB = 1000
ROCE_HEADERS_BYTES = 62 + 16  # Ethernet, IPv4, UDP, BTH, ICRC, FCS + the RETH (packet/headers.py)
FRAME_OVERHEAD_BYTES = 100  # a full frame in flight: path MTU + headers, as the packet engine counts it
PFC_FRAME_BYTES = 64
P = "fabric.qos"


def headroom_needed_bytes(qos: QosSpec, link_latency_ns: float, switch_latency_ns: float, speed_gbps: float) -> int:
    """Bytes that still arrive after a pause is sent on a link of this speed and latency (packet/switch.py)."""
    flight_s = 2 * (link_latency_ns + switch_latency_ns) * 1e-9
    frame = qos.roce_mtu_bytes + FRAME_OVERHEAD_BYTES
    return int(gbps_to_bytes_per_s(speed_gbps * flight_s)) + 3 * frame + PFC_FRAME_BYTES  # the bits in flight


def threshold_order_problems(qos: QosSpec) -> list[Problem]:
    w, p = qos.wred, qos.pfc
    out = []
    if not w.min_kb < w.max_kb:
        out.append(Problem(f"{P}.wred.max_kb", f"must be greater than wred.min_kb ({w.max_kb:g} <= {w.min_kb:g})"))
    for q, o in w.per_queue.items():
        if q not in w.queues:
            out.append(Problem(f"{P}.wred.per_queue.{q}", f"queue {q} is not in wred.queues {w.queues}"))
        if not o.min_kb < o.max_kb:
            out.append(
                Problem(f"{P}.wred.per_queue.{q}.max_kb", f"must be greater than min_kb ({o.max_kb:g} <= {o.min_kb:g})")
            )
    for q, own in p.per_priority.items():
        if q not in p.priorities:
            out.append(Problem(f"{P}.pfc.per_priority.{q}", f"priority {q} is not in pfc.priorities {p.priorities}"))
        if not own.xon_kb < own.xoff_kb:
            out.append(
                Problem(
                    f"{P}.pfc.per_priority.{q}.xoff_kb",
                    f"must be greater than xon_kb ({own.xoff_kb:g} <= {own.xon_kb:g})",
                )
            )
    if not (p.enabled and w.ecn and w.queues and p.priorities):
        return out
    for q in (q for q in w.queues if q in p.priorities):  # each lossless WRED queue: its thresholds, own or shared
        wmin, wmax = w.of(q)[:2]
        xon, xoff, _ = p.of(q)
        w_at = f"{P}.wred.per_queue.{q}" if q in w.per_queue else f"{P}.wred"
        p_at = f"{P}.pfc.per_priority.{q}" if q in p.per_priority else f"{P}.pfc"
        out += _chain(xon, xoff, p_at, wmin, wmax, w_at)
    return list(dict.fromkeys(out))  # queues sharing thresholds: each problem once


def _chain(xon: float, xoff: float, p_at: str, wmin: float, wmax: float, where: str) -> list[Problem]:
    out = []
    chain = (
        (f"{p_at}.xon_kb", xon),
        (f"{where}.min_kb", wmin),
        (f"{where}.max_kb", wmax),
        (f"{p_at}.xoff_kb", xoff),
    )
    for (a, va), (b, vb) in zip(chain, chain[1:]):
        if not va < vb and not (a.endswith("min_kb") and b.endswith("max_kb")):
            out.append(
                Problem(
                    b,
                    f"must be greater than {a.removeprefix(P + '.')} ({vb:g} <= {va:g} KB): the rule is "
                    "xON < WRED min < WRED max < xOFF, so ECN slows the senders before PFC pauses "
                    "(Deep Learning for Network Engineers, Chapter 11)",
                )
            )
    return out


def class_problems(qos: QosSpec) -> list[Problem]:
    """Where the NICs' traffic lands: CNPs in a queue of their own (not behind the data they are about), the RoCEv2
    data in a lossless queue while PFC is on, and in an ECN-marking WRED queue while DCQCN reacts to the marks."""
    out = []
    data_q, cnp_q = qos.queue_of(qos.data_dscp), qos.queue_of(qos.cnp_dscp)
    data = f"the RoCEv2 data (data_dscp {qos.data_dscp}) goes to queue {data_q}"
    if qos.data_dscp == qos.cnp_dscp:
        out.append(Problem(f"{P}.cnp_dscp", f"must differ from data_dscp ({qos.data_dscp}): CNPs need their own queue"))
    elif data_q == cnp_q:
        out.append(
            Problem(
                f"{P}.cnp_dscp",
                f"CNPs (DSCP {qos.cnp_dscp}) go to queue {cnp_q} with the RoCEv2 data (data_dscp "
                f"{qos.data_dscp}): CNPs need their own queue "
                "(the book: DSCP 48 -> QoS group 7, strict priority; Deep Learning for Network Engineers, Chapter 11)",
            )
        )
    p, w = qos.pfc, qos.wred
    if p.enabled and p.priorities and data_q not in p.priorities:
        out.append(
            Problem(
                f"{P}.pfc.priorities",
                f"PFC pauses priorities {p.priorities}, but {data}: it would be lossy. Add {data_q}, map the data's "
                "DSCP to a lossless class (classes, data_dscp), or set pfc.enabled: false for lossy RoCE",
            )
        )
    if qos.congestion_control == "dcqcn" and not (w.ecn and data_q in w.queues):
        field, why = ("wred.ecn", "WRED drops instead of marking") if not w.ecn else ("wred.queues", "has no WRED")
        out.append(
            Problem(
                f"{P}.{field}",
                f"DCQCN reacts to ECN marks, but {data}, which {why}: no packet of it would be marked. "
                f"Give queue {data_q} WRED with ecn: true, or set congestion_control: none",
            )
        )
    return out


def dlb_problems(qos: QosSpec, fabric=None) -> list[Problem]:
    """DLB chooses the switches' uplinks itself: it works over the ECMP groups (`load_balancing: ecmp`), not with
    another path choice; the flowlet aging is mode flowlet's."""
    d, out = qos.dlb, []
    if d.mode == "off":
        if d.flowlet_aging_us is not None:
            out.append(Problem(f"{P}.dlb.flowlet_aging_us", "applies to dlb.mode: flowlet (DLB is off)"))
        return out
    if d.mode == "per-packet" and d.flowlet_aging_us is not None:
        out.append(Problem(f"{P}.dlb.flowlet_aging_us", "applies to dlb.mode: flowlet, not per-packet"))
    lb = getattr(fabric, "load_balancing", "ecmp")
    if lb != "ecmp":
        out.append(
            Problem(
                f"{P}.dlb.mode",
                f"DLB {d.mode} chooses the uplinks in place of fabric.load_balancing "
                f"({lb}): set load_balancing: ecmp (the groups DLB balances over) or "
                "dlb.mode: off (Deep Learning for Network Engineers, Chapter 12)",
            )
        )
    return out


def check_qos(qos: QosSpec, fabric=None, nic_speed_gbps: float | None = None) -> list[Problem]:
    """Every cross-field problem of the profile; `fabric` (a FabricSpec) for the headroom against its cables."""
    out = threshold_order_problems(qos)
    for name, queues in (("wred.queues", qos.wred.queues), ("pfc.priorities", qos.pfc.priorities)):
        bad = [q for q in queues if not 0 <= q < QUEUES]
        if bad:
            out.append(Problem(f"{P}.{name}", f"queues are 0..7 (got {', '.join(map(str, bad))})"))
    out += class_problems(qos)
    need_mtu = qos.roce_mtu_bytes + ROCE_HEADERS_BYTES
    if qos.mtu_bytes < need_mtu:
        out.append(
            Problem(
                f"{P}.mtu_bytes",
                f"{qos.mtu_bytes} B does not carry a {qos.roce_mtu_bytes} B RoCE payload "
                f"with its headers ({need_mtu} B): raise it (the book: 9216) or lower "
                "roce_mtu_bytes",
            )
        )
    out += dlb_problems(qos, fabric)
    p = qos.pfc
    if p.enabled and fabric is not None:
        speeds = [fabric.link_speed_gbps, nic_speed_gbps or 0.0]
        if getattr(fabric, "superspine_link_speed_gbps", None):
            speeds.append(fabric.superspine_link_speed_gbps)
        need = headroom_needed_bytes(qos, fabric.link_latency_ns, fabric.switch_latency_ns, max(speeds))
        given = [(f"{P}.pfc", p.headroom_kb)] + [
            (f"{P}.pfc.per_priority.{q}", o.headroom_kb) for q, o in sorted(p.per_priority.items())
        ]
        for at, head_kb in given:
            if head_kb is not None and head_kb * KB < need:
                out.append(
                    Problem(
                        f"{at}.headroom_kb",
                        f"{head_kb:g} KB is less than what arrives after a pause "
                        f"on a {max(speeds):g} Gb/s link with {fabric.link_latency_ns:g} "
                        f"ns cables and {fabric.switch_latency_ns:g} ns switches: "
                        f"{need / KB:,.1f} KB (2 x latency x speed + 3 frames)",
                    )
                )
        for at, q in [(f"{P}.pfc", -1)] + [(f"{P}.pfc.per_priority.{q}", q) for q in sorted(p.per_priority)]:
            _, xoff_kb, head_kb = p.of(q)
            headroom = head_kb * KB if head_kb is not None else need
            if xoff_kb * KB + headroom > qos.buffer.shared_mib * (1 << 20):
                out.append(
                    Problem(
                        f"{at}.xoff_kb",
                        f"xOFF {xoff_kb:g} KB + headroom {headroom / KB:,.1f} KB exceed "
                        f"the shared buffer ({qos.buffer.shared_mib:g} MiB)",
                    )
                )
    return out


FLOW_ENGINE_QOS = ("roce_mtu_bytes", "dlb")  # what the flow and analytic engines take from the profile


def unused_settings(s, engine: str, lb: str | None = None) -> list[str]:
    """Settings the scenario gives that this run would not use, each as a note (validate and simulate print them;
    not problems: `compare` varies such fields across engines and load balancings). `fabric.flowlet_gap_us` with
    no flowlets in the fabric, or on the analytic engine (no contention: it spreads each transfer over the paths;
    the flow engine switches flowlets at their gap, engines/flowlet.py); `fabric.qos` fields the flow and analytic
    engines do not model (all but the path MTU's headers and DLB). `lb`: the run's own load balancing
    (`aifabric packet FILE --lb`) over the scenario's."""
    f, out = s.fabric, []
    load_balancing = lb or f.load_balancing
    given = f.model_fields_set
    dlb = f.qos.dlb
    packets = engine in ("packet", "hybrid")
    if f.topology in ("single-switch", "rail-only") or (f.topology == "rail-optimized" and f.spines == 0):
        chosen = [f"fabric.load_balancing: {load_balancing}"] if load_balancing != "ecmp" else []
        chosen += [f"{P}.dlb.mode: {dlb.mode}"] if dlb.mode != "off" else []
        chosen += ["fabric.flowlet_gap_us"] if "flowlet_gap_us" in given else []
        if chosen:  # no uplinks: one path between any two NICs
            out.append(
                f"{'; '.join(chosen)}: not used, a {f.topology} fabric without spines has no equal-cost paths "
                "to balance over"
            )
        given = given - {"flowlet_gap_us"}
    if "flowlet_gap_us" in given:
        if load_balancing != "flowlet" and not (dlb.mode == "flowlet" and dlb.flowlet_aging_us is None):
            has = f"load_balancing: {load_balancing}, {P}.dlb.mode: {dlb.mode}"
            if dlb.mode == "flowlet":
                has += f" with its own flowlet_aging_us {dlb.flowlet_aging_us:g}"
            out.append(
                f"fabric.flowlet_gap_us is not used ({has}): it is the idle gap that ends a flowlet under "
                f"load_balancing: flowlet, and DLB's flowlet aging when {P}.dlb.flowlet_aging_us is not given"
            )
        elif engine == "analytic":
            out.append(
                "fabric.flowlet_gap_us acts on the flow and packet engines (--engine flow: a connection idle for "
                "longer than the gap starts a new flowlet on the least-loaded path): the analytic engine has no "
                "contention and spreads each transfer over the equal-cost paths"
            )
    if "qos" in given and not packets:
        fields = sorted(f.qos.model_fields_set - set(FLOW_ENGINE_QOS))
        if fields:
            act = "acts" if len(fields) == 1 else "act"
            out.append(
                f"{P}: the {engine} engine uses roce_mtu_bytes (each packet's headers) and dlb (flowlets, or "
                f"per-packet's spread over equal-cost paths); {', '.join(fields)} {act} on the packet engine "
                "(--engine packet, or hybrid's packet windows) and in `aifabric fabric config`"
            )
    return out
