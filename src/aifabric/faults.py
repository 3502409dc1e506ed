"""Faults during an iteration (the scenario's `faults:`; *Deep Learning for Network Engineers*, Chapter 10): what
breaks, how the fabric and the job react, and what it costs against the same iteration without them.

- `link_down`: the cable's two directions leave the fabric; routing has converged around them: shortest paths
  over what is left, ECMP re-hashing only the flows whose next hop is gone (resilient hashing:
  `Router.fail`). A dual-port NIC whose one port's cable is down keeps going on the other (its LAG).
- `switch_down`: every cable of the switch down. `nic_down`: every cable of the NIC down.
- `link_degraded`: the cable runs at `factor` of its rate (a lane down, FEC errors, a renegotiated speed); with
  `loss_rate` it loses packets: the packet engine drops them (the run's seeded generator) and RC resends them, the
  flow engine runs the cable at go-back-N's goodput under that loss (`gbn_goodput`).
- `gpu_lost` (at `at_s`): the rank sends nothing from then; its next collective stalls and torch.distributed's NCCL
  watchdog ends the job after its timeout (`gpu_lost_failure`; exit 2 naming the rank and the time).
- `gpu_slow`: the rank's kernels take `factor` x as long (a straggler: thermal throttling, a weak part); a
  tensor-parallel group runs in lockstep, so its merged tasks take the slowest member's time, and every
  collective it is in waits for it. During the run (`at_s`, `up_at_s`): the tasks it computes then stretch.
- A rank left with no path to a peer it must reach from the start: NCCL cannot complete the collective; its
  watchdog ends the job after its timeout (torch.distributed's default for NCCL: 10 minutes). The run is refused
  with that reason (which rank, which peer, which fault).

A fault at `at_s: 0` with no `up_at_s` holds from the start, routing converged around it. A fault during the run
(`at_s > 0`, `up_at_s`, `flaps`) is a list of events of the flow engine's loop (engines/fabric_events.py):

- at `at_s` the links stop (or run at `factor`): the flows crossing a failed link stop, their bytes in flight lost;
- routing sees the failure `detection_s` later and has converged `convergence_s` after that: the transfers whose
  route crosses a failed link are re-hashed over what is left (resilient ECMP: `Router.converged`), the others keep
  their routes; at `up_at_s` the links are whole again and, `convergence_s` later, the moved transfers return;
- a stopped flow resumes with its remaining bytes at its QP's first retransmission that finds a path (RC's ACK
  timeout, 4.096 us x 2^NCCL_IB_TIMEOUT); when its NCCL_IB_RETRY_CNT retransmissions find none the QP fails
  (IBV_WC_RETRY_EXC_ERR), NCCL reports it and the job ends: the run is refused with when and why.

Defaults: `detection_s` 0.3 s, BFD at 100 ms x 3 (RFC 5880: the detection time is the multiplier times the
interval; 100 ms x 3 and 10 ms x 3 are the usual settings, ipSpace.net, "Controlling BGP Convergence Time"; a
cable's loss of light is seen faster: set it lower); `convergence_s` 1 s, the upper end of RFC 7938 section 7's
"sub-second convergence" of eBGP in a data-center Clos (fast fallover, then RIB and FIB updates); NCCL_IB_TIMEOUT
20 and NCCL_IB_RETRY_CNT 7, NCCL's own (src/transport/net_ib.cc). Faults can also be drawn (`kind: draw`) from
failure rates (aifabric.reliability's, or the scenario's) with the scenario's seed.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field, replace

import numpy as np

from .errors import InputError, Problem
from .fabric.graph import NIC, TIER_HOST, TIER_SPINE, TIER_SUPERSPINE, Fabric
from .fabric.routing import Router

DETECTION_S = 0.3  # BFD, 100 ms x 3 (RFC 5880 detection time = multiplier x interval)
CONVERGENCE_S = 1.0  # RFC 7938 section 7: sub-second eBGP convergence in a data-center Clos; its upper end
NCCL_IB_TIMEOUT = 20  # NCCL's default (src/transport/net_ib.cc): ACK timeout 4.096 us x 2^20 = 4.29 s
NCCL_IB_RETRY_CNT = 7  # NCCL's default
TORCH_NCCL_TIMEOUT_S = 600.0  # torch.distributed's default timeout for NCCL process groups (10 minutes)


@dataclass
class Timed:
    """A fault during the run: its links, the fraction of their rate left while it holds (0: down), and when."""

    index: int  # faults[index] (drawn faults: the draw's index)
    kind: str
    target: str
    links: list[int]
    fraction: float
    intervals: list[tuple[float, float]]  # [at, up) per cycle (up: inf when it never comes back)
    detection_s: float
    convergence_s: float
    drawn: bool = False
    rank: int | None = None  # gpu_slow: the straggler (`fraction` is then how many times slower it computes)
    rate_factor: float = 1.0  # link_degraded: the cable's own rate factor (the packet engine's); `fraction` adds the
    loss_rate: float = 0.0  # flow engine's go-back-N goodput under `loss_rate` (gbn_goodput)

    def known(self, k: int) -> tuple[float, float]:
        """When routing knows cycle k's links are down: [at + detection + convergence, up + convergence); a fault
        from the start is known from the start."""
        a, b = self.intervals[k]
        seen = a if a == 0 else a + self.detection_s + self.convergence_s
        return seen, b + self.convergence_s

    def label(self) -> str:
        return f"{'drawn ' if self.drawn else ''}faults[{self.index}] {self.kind} {self.target}"


@dataclass
class FaultEffects:
    down: set[int] = field(default_factory=set)  # links
    degraded: dict[int, float] = field(default_factory=dict)  # link -> fraction of its rate left
    slow: dict[int, float] = field(default_factory=dict)  # rank -> slowdown
    loss: dict[int, tuple[float, float]] = field(default_factory=dict)  # link -> (rate factor, loss rate): packet
    lost: list[tuple[int, float, int]] = field(default_factory=list)  # gpu_lost: (rank, at_s, faults index)
    applied: list[dict] = field(default_factory=list)  # per fault: kind, target, links / rank
    timed: list[Timed] = field(default_factory=list)  # faults during the run
    retransmit_timeout_s: float = 4.096e-6 * 2**NCCL_IB_TIMEOUT
    retry_count: int = NCCL_IB_RETRY_CNT

    def events(self) -> list[tuple[float, dict[int, float], frozenset[int] | None, str, dict[int, float]]]:
        """The faults during the run as the engine's events (engines/fabric_events.py FabricEvent fields): at every
        time something changes, the links whose rate fraction changes then and the ranks whose pace does, and, when
        routing converges then, every link it knows is down."""
        physical: dict[float, list[str]] = {}
        routing: dict[float, list[str]] = {}
        for f in self.timed:
            for k, (a, b) in enumerate(f.intervals):
                cycle = f" (cycle {k + 1} of {len(f.intervals)})" if len(f.intervals) > 1 else ""
                state = "slow" if f.rank is not None else "down" if f.fraction == 0 else "degraded"
                physical.setdefault(a, []).append(f"{f.label()}: {state}{cycle}")
                if math.isfinite(b):
                    back = "its own pace again" if f.rank is not None else "whole again"
                    physical.setdefault(b, []).append(f"{f.label()}: {back}{cycle}")
                if f.fraction == 0 and f.rank is None:
                    s0, s1 = f.known(k)
                    if s1 > s0:
                        routing.setdefault(s0, []).append(f"{f.label()}: routing converged around it{cycle}")
                        if math.isfinite(s1):
                            routing.setdefault(s1, []).append(f"{f.label()}: routing converged back{cycle}")
        touched = sorted({li for f in self.timed for li in f.links})
        ranks = sorted({f.rank for f in self.timed if f.rank is not None})
        out = []
        was_rates: dict[int, float] = dict.fromkeys(touched, 1.0)
        was_pace: dict[int, float] = dict.fromkeys(ranks, 1.0)
        for t in sorted(set(physical) | set(routing)):
            rates: dict[int, float] = {}
            pace: dict[int, float] = {}
            if t in physical:
                now_rates = dict.fromkeys(touched, 1.0)
                now_pace = dict.fromkeys(ranks, 1.0)
                for f in self.timed:
                    if any(a <= t < b for a, b in f.intervals):
                        if f.rank is not None:
                            now_pace[f.rank] = max(now_pace[f.rank], f.fraction)
                        for li in f.links:
                            now_rates[li] = min(now_rates[li], f.fraction)
                rates = {li: v for li, v in now_rates.items() if v != was_rates[li]}  # what changes then
                pace = {r: v for r, v in now_pace.items() if v != was_pace[r]}
                was_rates, was_pace = now_rates, now_pace
            down = None
            if t in routing:
                down = frozenset(
                    li
                    for f in self.timed
                    if f.fraction == 0 and f.rank is None
                    for k in range(len(f.intervals))
                    if f.known(k)[0] <= t < f.known(k)[1]
                    for li in f.links
                )
            out.append((t, rates, down, "; ".join(physical.get(t, []) + routing.get(t, [])), pace))
        return out

    def link_changes(self) -> list[tuple[float, dict[int, tuple[float, float]]]]:
        """The packet engine's view of the faults during the run: at every time a cable's state changes, each
        touched link's (rate factor, loss rate) from then: (0, 0) down, (1, 0) whole."""
        cables = [f for f in self.timed if f.rank is None]
        touched = sorted({li for f in cables for li in f.links})
        times = sorted({x for f in cables for a, b in f.intervals for x in (a, b) if math.isfinite(x)})
        out, was = [], dict.fromkeys(touched, (1.0, 0.0))
        for t in times:
            now = dict.fromkeys(touched, (1.0, 0.0))
            for f in cables:
                if any(a <= t < b for a, b in f.intervals):
                    for li in f.links:
                        r, p = now[li]
                        now[li] = (min(r, f.rate_factor if f.fraction else 0.0), max(p, f.loss_rate))
            changed = {li: v for li, v in now.items() if v != was[li]}
            if changed:
                out.append((t, changed))
            was = now
        return out


def gbn_window(fabric: Fabric, link: int, mtu_bytes: int = 4096) -> int:
    """Packets a go-back-N sender has sent when the NAK for a lost one comes back: one round trip at the cable's
    rate, over the longest NIC-to-NIC path of a two-tier Clos (4 cables, 3 switches, both ways), plus the lost one."""
    cable = max((lk.latency_s for lk in fabric.links if lk.tier not in ("nvlink", "pcie")), default=0.0)
    rtt_s = 2 * (4 * cable + 3 * fabric.switch_latency_s)
    return 1 + math.ceil(fabric.links[link].capacity_bytes_per_s * rtt_s / (mtu_bytes + 82))


def gbn_goodput(loss_rate: float, window: int) -> float:
    """The fraction of a cable's rate a go-back-N sender delivers when each packet is lost with probability
    `loss_rate` and each loss resends the `window` packets sent in a round trip: (1 - p) / (1 + (W - 1) p), the
    utilization of go-back-N ARQ (W. Stallings, Data and Computer Communications, chapter 7: U = (1 - P) / (1 +
    2aP) with W = 2a + 1 frames per round trip). RoCEv2 RC resends from the lost PSN on the responder's NAK (Deep
    Learning for Network Engineers, Chapter 9); a lost last packet waits for the ACK timeout instead, which this
    leaves out."""
    p = float(loss_rate)
    return (1.0 - p) / (1.0 + (window - 1) * p)


def gpu_lost_failure(fx: FaultEffects, graph, timeline) -> InputError | None:
    """A GPU lost during the run (`gpu_lost`): its rank sends nothing from `at_s`; the first collective that needs it
    stalls, NCCL never completes it, and torch.distributed's watchdog ends the job after its timeout (10 minutes by
    default): the job fails then. None when the run was over before the GPU was lost."""
    worst = None
    for rank, at_s, index in fx.lost:
        stall = None
        what = ""
        for t in range(len(graph)):
            end = timeline.end_s[t]
            if end == end and end <= at_s:  # done before the loss (NaN: never finished)
                continue
            if graph.kind[t] != 0:  # a transfer (0: COMPUTE, engines/taskgraph.py, a layer above this one)
                involved = int(graph.rank[t]) == rank or int(graph.dst[t]) == rank
            else:
                involved = rank in graph.ranks_of(t) and graph.comm_s.get(t, 0.0) > 0
            if not involved:
                continue
            start = timeline.start_s[t]
            s_t = max(at_s, start if start == start else at_s)
            if stall is None or s_t < stall:
                name = graph.name[t]
                what = name if graph.kind[t] != 0 else f"a scale-up collective folded into the compute task {name}"
                stall = s_t
        if stall is None:
            continue
        fail_s = stall + TORCH_NCCL_TIMEOUT_S
        if worst is None or fail_s < worst[0]:
            worst = (fail_s, rank, at_s, index, stall, what)
    if worst is None:
        return None
    fail_s, rank, at_s, index, stall, what = worst
    return InputError(
        Problem(
            "faults",
            (
                f"the job fails at {fail_s:.9g} s: rank {rank}'s GPU is lost at {at_s:.6g} s (faults[{index}] gpu_lost). "
                f"Its collective ({what}) waits for it from {stall:.6g} s: NCCL never completes the collective, and torch.distributed's "
                f"watchdog ends the job after its timeout ({TORCH_NCCL_TIMEOUT_S / 60:.0f} minutes, PyTorch's default for "
                "NCCL). Deep Learning for Network Engineers, Chapter 10"
            ),
        )
    )


def _near(name: str, names) -> str:
    close = difflib.get_close_matches(str(name), list(names), n=4, cutoff=0.5)
    return f"; near: {', '.join(close)}" if close else ""


def _cable(fabric: Fabric, target: str) -> list[int] | None:
    for sep in ("<->", "--", "->"):
        if sep in target:
            a, b = (x.strip() for x in target.split(sep, 1))
            return [li for li in fabric.out_links.get(a, []) if fabric.links[li].dst == b] + [
                li for li in fabric.out_links.get(b, []) if fabric.links[li].dst == a
            ]
    return None


def _node_links(fabric: Fabric, node: str, to_switches_only: bool) -> list[int]:
    out = [
        li for li in fabric.out_links.get(node, []) if not to_switches_only or fabric.is_switch(fabric.links[li].dst)
    ]
    back = [
        li
        for li in range(len(fabric.links))
        if fabric.links[li].dst == node and (not to_switches_only or fabric.is_switch(fabric.links[li].src))
    ]
    return out + back


def network_cables(fabric: Fabric) -> list[str]:
    """Every switch-facing cable, once, as A--B (NIC-leaf, leaf-spine, spine-superspine)."""
    seen: dict[frozenset[str], str] = {}
    for link in fabric.links:
        if link.tier in (TIER_HOST, TIER_SPINE, TIER_SUPERSPINE):
            seen.setdefault(frozenset((link.src, link.dst)), f"{link.src}--{link.dst}")
    return sorted(seen.values())


def draw_faults(fabric: Fabric, draw, rng: np.random.Generator) -> list:
    """Faults drawn for one `kind: draw` entry: per network cable and per NIC a Poisson process at its failure
    rate (per component-hour: the entry's `rates`, else aifabric.reliability's) over `window_s`; each at a uniform
    time in the window, lasting `down_s` (or the rest of the run). Deterministic for a generator's seed."""
    from .reliability import DEFAULT_RATES_PER_HOUR
    from .scenario.faults_spec import FaultSpec

    out = []
    pools = {
        "network_cable": ("link_down", network_cables(fabric)),
        "nic": ("nic_down", sorted(n.id for n in fabric.nodes_of_kind(NIC))),
    }
    for what in ("network_cable", "nic"):
        kind, names = pools[what]
        rate = draw.rates.get(what, DEFAULT_RATES_PER_HOUR[what])
        count = int(rng.poisson(rate * len(names) * draw.window_s / 3600.0)) if names else 0
        for _ in range(count):
            target = names[int(rng.integers(len(names)))]
            at = float(rng.uniform(0.0, draw.window_s))
            out.append(
                FaultSpec(
                    kind=kind,
                    target=target,
                    at_s=at,
                    up_at_s=at + draw.down_s if draw.down_s else None,
                    detection_s=draw.detection_s,
                    convergence_s=draw.convergence_s,
                    nccl_ib_timeout=draw.nccl_ib_timeout,
                    nccl_ib_retry_cnt=draw.nccl_ib_retry_cnt,
                )
            )
    return sorted(out, key=lambda f: (f.at_s, str(f.target)))


def _transport(faults, problems: list) -> tuple[float, int]:
    """The QPs' ACK timeout and retry count: NCCL's defaults, or the faults' settings (which must agree)."""
    values = {}
    for name, default in (("nccl_ib_timeout", NCCL_IB_TIMEOUT), ("nccl_ib_retry_cnt", NCCL_IB_RETRY_CNT)):
        given = [(i, getattr(f, name)) for i, f in enumerate(faults) if getattr(f, name) is not None]
        if len({v for _, v in given}) > 1:
            problems.append(
                Problem(
                    f"faults[{given[1][0]}].{name}",
                    f"{given[1][1]} differs from faults[{given[0][0]}]'s {given[0][1]}: the job's QPs have one setting",
                )
            )
        values[name] = given[0][1] if given else default
    return 4.096e-6 * 2 ** values["nccl_ib_timeout"], int(values["nccl_ib_retry_cnt"])


def resolve_faults(fabric: Fabric, faults, seed: int = 0) -> FaultEffects:
    """Each fault's links or rank on this fabric; InputError naming `faults[i].target` (with near names) for
    anything the fabric does not have. `kind: draw` entries are drawn with a generator seeded by `seed`."""
    fx = FaultEffects()
    problems: list[Problem] = []
    fx.retransmit_timeout_s, fx.retry_count = _transport(faults, problems)
    cables = sorted({f"{link.src}--{link.dst}" for link in fabric.links if link.tier not in ("nvlink", "pcie")})
    rng = np.random.default_rng([int(seed), 19])  # its own stream of the scenario's seed (issue 19's draws)
    listed = []
    for i, fault in enumerate(faults):
        if fault.kind == "draw":
            listed += [(i, f, True) for f in draw_faults(fabric, fault, rng)]
        else:
            listed.append((i, fault, False))
    for i, fault, drawn in listed:
        path, t = f"faults[{i}].target", fault.target
        timed = fault.at_s > 0 or fault.up_at_s is not None or fault.flaps > 1
        if timed:
            up = fault.up_at_s if fault.up_at_s is not None else math.inf
            period = fault.flap_period_s or 0.0
            intervals = [(fault.at_s + k * period, up + k * period) for k in range(fault.flaps)]
            det = DETECTION_S if fault.detection_s is None else fault.detection_s
            conv = CONVERGENCE_S if fault.convergence_s is None else fault.convergence_s
        if fault.kind in ("link_down", "link_degraded"):
            links = _cable(fabric, str(t))
            if not links:
                problems.append(Problem(path, f"no cable {t!r} (name it A--B with two node names){_near(t, cables)}"))
                continue
            factor = 1.0 if fault.factor is None else float(fault.factor)
            loss = float(fault.loss_rate or 0.0)
            flow_fraction = factor * gbn_goodput(loss, gbn_window(fabric, links[0])) if loss else factor
            if timed:
                fx.timed.append(
                    Timed(
                        i,
                        fault.kind,
                        str(t),
                        links,
                        0.0 if fault.kind == "link_down" else flow_fraction,
                        intervals,
                        det,
                        conv,
                        drawn,
                        rate_factor=factor,
                        loss_rate=loss,
                    )
                )
            elif fault.kind == "link_down":
                fx.down.update(links)
            else:
                for li in links:
                    fx.degraded[li] = min(fx.degraded.get(li, 1.0), flow_fraction)
                    was = fx.loss.get(li, (1.0, 0.0))
                    fx.loss[li] = (min(was[0], factor), max(was[1], loss))
            fx.applied.append(_applied(fault, t, [fabric.links[li].id for li in links], drawn))
        elif fault.kind in ("switch_down", "nic_down"):
            node = fabric.nodes.get(str(t))
            ok = node is not None and (fabric.is_switch(str(t)) if fault.kind == "switch_down" else node.kind == NIC)
            if not ok:
                kinds = [
                    n
                    for n, nd in fabric.nodes.items()
                    if (fabric.is_switch(n) if fault.kind == "switch_down" else nd.kind == NIC)
                ]
                what = "switch" if fault.kind == "switch_down" else "NIC"
                problems.append(Problem(path, f"no {what} {t!r}{_near(t, kinds)}"))
                continue
            links = _node_links(fabric, str(t), to_switches_only=fault.kind == "nic_down")
            if timed:
                fx.timed.append(Timed(i, fault.kind, str(t), links, 0.0, intervals, det, conv, drawn))
            else:
                fx.down.update(links)
            fx.applied.append(_applied(fault, t, [fabric.links[li].id for li in links], drawn))
        else:  # gpu_slow, gpu_lost
            rank = None
            if isinstance(t, int) or str(t).isdigit():
                rank = int(t)
            elif str(t) in fabric.rank_gpu:
                rank = fabric.rank_gpu.index(str(t))
            if rank is None or not 0 <= rank < fabric.world_size:
                problems.append(
                    Problem(
                        path,
                        f"no GPU {t!r}: a rank 0..{fabric.world_size - 1} or a GPU's name{_near(t, fabric.rank_gpu)}",
                    )
                )
                continue
            if fault.kind == "gpu_lost":
                fx.lost.append((rank, float(fault.at_s), i))
            elif timed:
                fx.timed.append(
                    Timed(i, fault.kind, str(t), [], float(fault.factor), intervals, det, conv, drawn, rank=rank)
                )
            else:
                fx.slow[rank] = max(fx.slow.get(rank, 1.0), float(fault.factor))
            fx.applied.append({**_applied(fault, t, [], drawn), "rank": rank})
            del fx.applied[-1]["links"]
    if problems:
        raise InputError(problems)
    return fx


def _applied(fault, target, links: list[str], drawn: bool) -> dict:
    out = {"kind": fault.kind, "target": str(target), "links": links}
    if fault.factor is not None:
        out["factor"] = float(fault.factor)
    if fault.loss_rate:
        out["loss_rate"] = float(fault.loss_rate)
    if fault.at_s > 0 or fault.up_at_s is not None or fault.flaps > 1:
        out.update(at_s=fault.at_s, up_at_s=fault.up_at_s)
        if fault.kind not in ("gpu_slow", "gpu_lost"):  # routing's reaction
            out.update(
                detection_s=DETECTION_S if fault.detection_s is None else fault.detection_s,
                convergence_s=CONVERGENCE_S if fault.convergence_s is None else fault.convergence_s,
            )
        if fault.flaps > 1:
            out.update(flaps=fault.flaps, flap_period_s=fault.flap_period_s)
    if drawn:
        out["drawn"] = True
    return out


def apply_to_fabric(fabric: Fabric, router: Router, fx: FaultEffects) -> None:
    """Degraded cables at their fraction of the rate; failed links out of routing (converged)."""
    for li, frac in fx.degraded.items():
        link = fabric.links[li]
        fabric.links[li] = replace(link, efficiency=link.efficiency * frac)
    if fx.down:
        router.fail(fx.down)


def slow_down(graph, slow: dict[int, float]) -> int:
    """Stragglers: every compute task on a slow rank (merged lockstep tasks: the slowest member) takes `factor` x
    its compute time; the collectives folded into it keep theirs. Returns the tasks changed."""
    if not slow:
        return 0
    changed = 0
    for t, kind in enumerate(graph.kind):
        if kind != 0:  # COMPUTE
            continue
        factor = max(slow.get(r, 1.0) for r in graph.ranks_of(t))
        if factor == 1.0:
            continue
        comm = graph.comm_s.get(t, 0.0)
        graph.duration_s[t] = comm + (graph.duration_s[t] - comm) * factor
        changed += 1
    return changed


def unreachable(fabric: Fabric, fx: FaultEffects, exc: Exception) -> InputError:
    """The job cannot run: the router found no path (a NIC or every uplink down)."""
    what = "; ".join(f"{a['kind']} {a['target']}" for a in fx.applied if a["kind"] not in ("gpu_slow", "gpu_lost"))
    return InputError(
        Problem(
            "faults",
            f"the job fails: {exc} after {what}. NCCL cannot complete a collective "
            "without a path; its watchdog ends the job after its timeout "
            "(torch.distributed's default for NCCL: 10 minutes). Deep Learning for Network Engineers, Chapter 10",
        )
    )


def job_failed(fx: FaultEffects, exc) -> InputError:
    """A transfer found no path before its QP's retransmissions ran out (engines.fabric_events.JobFailed): the job
    fails then; which faults held when it stopped, and why it ends."""
    t0 = exc.stalled_at_s
    held = [f for f in fx.timed if f.fraction == 0 and f.rank is None and any(a <= t0 < b for a, b in f.intervals)]
    what = "; ".join(f"{f.label()} at {f.intervals[0][0]:.6g} s" for f in held) or "the faults"
    return InputError(
        Problem(
            "faults",
            (
                f"the job fails at {exc.t_s:.6g} s: rank {exc.src} cannot reach rank {exc.dst} after {what}. Its transfer "
                f"stopped at {t0:.6g} s and its QP's {fx.retry_count} retransmissions, {fx.retransmit_timeout_s:.3g} s "
                f"apart (NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT), found no path: the QP fails (IBV_WC_RETRY_EXC_ERR), NCCL "
                "reports it and torch.distributed ends the job (its watchdog would have after "
                f"{TORCH_NCCL_TIMEOUT_S / 60:.0f} minutes). Deep Learning for Network Engineers, Chapter 10"
            ),
        )
    )


def report(
    fx: FaultEffects, run, baseline, router: Router | None, moved_qps: set | None = None, engine_path: str | None = None
) -> dict:
    """What happened and what it cost: each fault, the iteration against the fault-free one, the bytes that
    crossed the failed links without the faults (rerouted), the QPs whose path changed (`moved_qps`: those routing
    moved during the run); with faults during the run, what the event loop did (`during_run`: each event, bytes
    rerouted, time stalled)."""
    t, t0 = run.results.iteration_time_s, baseline.results.iteration_time_s
    rerouted = float(sum(baseline.timeline.link_bytes[li] for li in fx.down)) / max(1, run.workload.iterations)
    moved = len((router.rerouted if router is not None else set()) | (moved_qps or set()))
    out = {
        "faults": fx.applied,
        "iteration_time_s": t,
        "fault_free_iteration_time_s": t0,
        "slowdown": t / t0 if t0 > 0 else float("nan"),
        "bytes_rerouted_per_iteration": rerouted,
        "qps_rerouted": moved,
        "links_down": len(fx.down),
        "links_degraded": len(fx.degraded),
        "slow_ranks": {str(r): f for r, f in sorted(fx.slow.items())},
    }
    log = getattr(run.timeline, "fault_log", None)
    if fx.timed:
        during = log.to_dict() if log is not None else {"events": []}
        during.update(
            run_time_s=run.timeline.makespan_s,
            fault_free_run_time_s=baseline.timeline.makespan_s,
            retransmit_timeout_s=fx.retransmit_timeout_s,
            retry_count=fx.retry_count,
            engine_path=engine_path or "reference",
        )
        out["during_run"] = during
        out["bytes_rerouted_per_iteration"] = rerouted + during.get("bytes_rerouted", 0.0) / max(
            1, run.workload.iterations
        )
    return out
