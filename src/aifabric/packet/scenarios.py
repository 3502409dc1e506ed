"""The seeds' packet-level stories (Ch. 10-12), runnable: `aifabric packet <name> [--explain]`.

- incast: Figure 10-2, four 200 Gb/s senders to GPU-0 on Host-2 (800 Gb/s offered to one 200 Gb/s port);
- polarization: Figure 10-5, two flows hashed onto the same Rail A -> Spine 1 uplink, and what flowlet,
  spraying and adaptive routing make of it;
- pfc-cascade: Figures 11-4..11-6, Rail C pauses Spine 1 on queue 3 only, Spine 1 pauses Rails A and B,
  the pause reaches the NICs, recovery with quanta 0, while a queue-0 flow keeps crossing Spine 1;
- dcqcn: Figure 11-7, ECN marks, CNPs and rate cuts first, PFC as the backstop, then recovery;
- spraying: Figures 12-6/12-7, RDMA Write First/Middle/Last vs Write Only (and UET) under spraying;
- hol-blocking: Figure 10-4, GPU-0's traffic relayed through GPU-1's NIC waits behind GPU-1's own;
- ecmp-uplink: Figure 12-4, three flows hashed onto one Rail-1 uplink, and Figure 12-5's remedies;
- pfc-storm: Chapter 11's PFC watchdog at work: a NIC that keeps sending pauses spreads them through the
  fabric (its rail switch, the spine, the other rail, the NICs behind it) to flows that never go near it, until
  the watchdog on the rail switch's port toward the NIC stops honouring them;
- pfc-deadlock: a cyclic buffer dependency: after two cable failures, down-up paths close a cycle of four ports
  that pause each other; the engine finds the cycle and reports it, the PFC watchdog breaks it;
- pfc-deadlock-loop: the other cause, a routing loop while routing converges: a leaf still sends a flow to a spine
  that has lost its cable to the destination and sends it back; the two ports pause each other, the loop is gone
  when the leaf converges but the deadlock stays until the watchdog;
- connect: Chapter 9, Figures 9-2..9-6, one RDMA Write from its beginning: memory registration, QP creation,
  the CM exchange and the QP state transitions, the Write on the wire and its completion (and, on request,
  the responder refusing a bad R_Key or a P_Key of another partition).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..fabric.ecmp import ecmp_hash, switch_seed
from ..fabric.graph import NIC, RAIL, SPINE, TIER_HOST, TIER_SPINE, Fabric, Node
from ..units import BITS_PER_BYTE, gbps_to_bytes_per_s, ns_to_s
from .config import LbConfig, PacketConfig
from .network import Network
from .sim import DATA
from .stats import PacketStats
from .topo import ecmp_route, five_tuple, leaf_spine, link_between

SCENARIOS = (
    "incast",
    "polarization",
    "pfc-cascade",
    "dcqcn",
    "spraying",
    "hol-blocking",
    "ecmp-uplink",
    "connect",
    "pfc-storm",
    "pfc-deadlock",
    "pfc-deadlock-loop",
)


@dataclass
class ScenarioRun:
    name: str
    title: str
    findings: list[str] = field(default_factory=list)
    table: list[dict] = field(default_factory=list)  # one row per variant, when the scenario compares
    runs: list[tuple[str, Network, PacketStats]] = field(default_factory=list)

    @property
    def net(self) -> Network:
        return self.runs[0][1]

    @property
    def stats(self) -> PacketStats:
        return self.runs[0][2]

    def to_dict(self, series: bool = True) -> dict:
        return {
            "scenario": self.name,
            "title": self.title,
            "findings": self.findings,
            "table": self.table,
            "runs": {label: st.to_dict(series) for label, _, st in self.runs},
        }


def _flow(net: Network, f: Fabric, src: str, dst: str, size: float, qpn: int, t: float = 0.0, **kw):
    ft = five_tuple(f, src, dst, qpn, qpn + 0x1000)
    route = ecmp_route(f, src, dst, ft, net.hash_seed)
    kw.setdefault("name", f"{src}->{dst}")
    if t > 0:
        net.start_at(t, route, size, qpn=qpn, sport=ft.src_port, **kw)
        return None
    return net.add_transfer(route, size, qpn=qpn, sport=ft.src_port, **kw)


def _gbps(bytes_, seconds) -> float:
    return bytes_ * 8 / seconds / 1e9 if seconds > 0 else 0.0


def _port_bytes(net: Network, a: str, b: str) -> int:
    return net.ports[link_between(net.fabric, a, b)].tx_bytes


def _fig10_fabric(isl_gbps: float, spines: list[str]) -> Fabric:
    """Figure 10-1: three hosts, two GPUs each, NIC interface E1 -> Rail A and E2 -> Rail B."""
    hosts = [[f"host{h}/E1" for h in (1, 2, 3)], [f"host{h}/E2" for h in (1, 2, 3)]]
    return leaf_spine(hosts, ["railA", "railB"], spines, 200, spine_rate_gbps=isl_gbps, name="fig10-1")


# -- incast (Figure 10-2) -----------------------------------------------------------------------------
def incast(cfg: PacketConfig | None = None, size_mb: float = 4.0) -> ScenarioRun:
    cfg = cfg or PacketConfig()
    f = _fig10_fabric(400, ["spine1"])
    net = Network(f, cfg)
    dst = "host2/E1"
    senders = ["host1/E1", "host3/E1", "host1/E2", "host3/E2"]
    for i, s in enumerate(senders):
        _flow(net, f, s, dst, size_mb * 1e6, 0x100 + i)
    st = net.run()
    offered = BITS_PER_BYTE * sum(  # bits per second, as the findings say them
        net.ports[link_between(f, s, "railA" if s.endswith("E1") else "railB")].rate_bytes_per_s for s in senders
    )
    cap = net.ports[link_between(f, "railA", dst)].rate_bytes_per_s * BITS_PER_BYTE
    end = max(fl["done_s"] for fl in st.flows)
    q = next(p for p in st.ports if p["port"] == f"railA->{dst}")["queues"]
    q3 = next(x for x in q if x["queue"] == 3)
    r = ScenarioRun("incast", "Figure 10-2: egress congestion toward interface E1 on Host-2")
    r.findings = [
        f"offered load toward {dst}: {offered / 1e9:.0f} Gb/s from {len(senders)} senders at line rate, "
        f"on a {cap / 1e9:.0f} Gb/s port: {offered / cap:.0f}:1, {(offered - cap) / 1e9:.0f} Gb/s too much",
        f"the {len(senders)} x {size_mb:g} MB arrive in {end * 1e6:.0f} us: {_gbps(len(senders) * size_mb * 1e6, end):.0f}"
        f" Gb/s delivered (ideal {len(senders) * size_mb * 8e6 / cap * 1e6:.0f} us at {cap / 1e9:.0f} Gb/s)",
        f"Rail A egress queue 3 toward {dst} peaked at {q3['max_depth_bytes'] / 1e3:.0f} KB; "
        f"{q3['ecn_marks']} packets ECN-marked, {sum(fl['cnp_sent'] for fl in st.flows)} CNPs, "
        f"{st.total_pauses()} PFC pause frames, {st.total_drops()} drops",
    ]
    r.table = [
        {
            "flow": fl["name"],
            "fct_us": fl["fct_s"] * 1e6,
            "cnps": fl["cnp_received"],
            "final_rate_gbps": fl["final_rate_gbps"],
            "retransmissions": fl["retransmissions"],
        }
        for fl in st.flows
    ]
    r.runs.append(("incast", net, st))
    return r


# -- ECMP polarization (Figure 10-5) ------------------------------------------------------------------
def colliding_qpns(
    f: Fabric, pairs: list[tuple[str, str]], switch: str, group: list[int], seed: int, want: int = 0
) -> list[int]:
    """QPNs (searched in order from 0x100) such that every pair's 5-tuple hashes to group[want] at
    `switch`: the book's "the hash picks Spine 1 for both", made reproducible."""
    out, q = [], 0x100
    for src, dst in pairs:
        while True:
            ft = five_tuple(f, src, dst, q, q + 0x1000)
            if ecmp_hash(ft, switch_seed(seed, switch, False)) % len(group) == want:
                out.append(q)
                q += 1
                break
            q += 1
    return out


def polarization(
    cfg: PacketConfig | None = None,
    size_mb: float = 4.0,
    isl_gbps: float = 200,
    modes: tuple[str, ...] = ("ecmp", "flowlet", "spray", "adaptive"),
) -> ScenarioRun:
    cfg = cfg or PacketConfig()
    pairs = [("host1/E1", "host3/E2"), ("host2/E1", "host1/E2")]
    r = ScenarioRun("polarization", "Figure 10-5: ECMP hash polarization on Rail A's uplinks")
    f0 = _fig10_fabric(isl_gbps, ["spine1", "spine2"])
    up = [link_between(f0, "railA", "spine1"), link_between(f0, "railA", "spine2")]
    qpns = colliding_qpns(f0, pairs, "railA", up, 0)
    for mode in modes:
        f = _fig10_fabric(isl_gbps, ["spine1", "spine2"])
        net = Network(f, replace(cfg, lb=replace(cfg.lb, mode=mode)))
        for (s, d), q in zip(pairs, qpns):
            _flow(net, f, s, d, size_mb * 1e6, q)
        st = net.run()
        end = max(fl["done_s"] for fl in st.flows)
        b1, b2 = _port_bytes(net, "railA", "spine1"), _port_bytes(net, "railA", "spine2")
        r.table.append(
            {
                "lb": mode,
                "railA->spine1_MB": b1 / 1e6,
                "railA->spine2_MB": b2 / 1e6,
                "railA->spine1_gbps": _gbps(b1, end),
                "railA->spine2_gbps": _gbps(b2, end),
                "max_fct_us": end * 1e6,
                "out_of_order": sum(fl["out_of_order"] for fl in st.flows),
                "retransmissions": sum(fl["retransmissions"] for fl in st.flows),
            }
        )
        r.runs.append((mode, net, st))
    e = r.table[0]
    r.findings = [
        f"both flows' 5-tuples hash to the Rail A -> Spine 1 uplink (QPNs {', '.join(hex(q) for q in qpns)}): "
        f"offered {2 * 200} Gb/s on it, 0 on Rail A -> Spine 2 (ISLs {isl_gbps:g} Gb/s)",
        f"ECMP: Spine 1 uplink carried {e['railA->spine1_MB']:.1f} MB, Spine 2 uplink {e['railA->spine2_MB']:.1f} MB; "
        f"the transfers took {e['max_fct_us']:.0f} us (one {size_mb:g} MB flow alone: "
        f"{size_mb * 8e6 / 200e9 * 1e6:.0f} us at 200 Gb/s)",
    ]
    for row in r.table[1:]:
        r.findings.append(
            f"{row['lb']}: uplinks {row['railA->spine1_MB']:.1f} / {row['railA->spine2_MB']:.1f} MB, "
            f"{row['max_fct_us']:.0f} us, {row['out_of_order']} out-of-order arrivals, "
            f"{row['retransmissions']} retransmissions"
        )
    return r


# -- PFC cascade (Figures 11-4..11-6) ----------------------------------------------------------------
def pfc_cascade(cfg: PacketConfig | None = None, size_mb: float = 2.0) -> ScenarioRun:
    base = cfg or PacketConfig()
    cfg = replace(
        base,
        switch=replace(base.switch, ecn_enabled=False, pfc_xon_bytes=60_000, pfc_xoff_bytes=150_000),
        dcqcn=replace(base.dcqcn, enabled=False),
    )
    hosts = [["hostA1", "hostA2", "hostA3"], ["hostB1", "hostB2"], ["host3/GPU3", "hostC2"]]
    f = leaf_spine(hosts, ["railA", "railB", "railC"], ["spine1"], 200, spine_rate_gbps=800, name="fig11-4")
    net = Network(f, cfg)
    for i, s in enumerate(["hostA1", "hostA2", "hostB1", "hostB2"]):
        _flow(net, f, s, "host3/GPU3", size_mb * 1e6, 0x100 + i)
    _flow(net, f, "hostA3", "hostC2", size_mb * 1e6, 0x200, dscp=0, name="hostA3->hostC2 (DSCP 0, queue 0)")
    st = net.run()
    r = ScenarioRun("pfc-cascade", "Figures 11-4..11-6: PFC pause cascade from Rail C back to the NICs")

    def pauses(frm: str, to: str) -> int:
        return st.pfc_pause_sent.get((f"{frm}->{to}", 3), 0)

    def resumes(frm: str, to: str) -> int:
        return st.pfc_resume_sent.get((f"{frm}->{to}", 3), 0)

    lossy = next(fl for fl in st.flows if "DSCP 0" in fl["name"])
    q0 = net.ports[link_between(f, "spine1", "railC")]
    r.findings = [
        f"Rail C -> Spine 1: {pauses('railC', 'spine1')} pause frames (CEV 00001000, priority 3 only), "
        f"{resumes('railC', 'spine1')} resumes (quanta 0)",
        f"Spine 1 -> Rail A: {pauses('spine1', 'railA')} pauses, Spine 1 -> Rail B: {pauses('spine1', 'railB')} "
        f"pauses; Rails -> NICs: {sum(pauses(r_, h) for r_, hs in (('railA', hosts[0]), ('railB', hosts[1])) for h in hs)}"
        " pauses",
        f"Spine 1's egress toward Rail C was paused {q0.paused_total[3] * 1e6:.1f} us on queue 3 and "
        f"{q0.paused_total[0] * 1e6:.1f} us on queue 0: the DSCP-0 flow finished in {lossy['fct_s'] * 1e6:.0f} us "
        f"(alone at 200 Gb/s: {size_mb * 8e6 / 200e9 * 1e6:.0f} us)",
        f"drops {st.total_drops()}: PFC kept queue 3 lossless (xOFF {cfg.switch.pfc_xoff_bytes / 1e3:.0f} KB, "
        f"xON {cfg.switch.pfc_xon_bytes / 1e3:.0f} KB; ECN and DCQCN off to let PFC act alone)",
    ]
    r.runs.append(("pfc-cascade", net, st))
    return r


# -- DCQCN timeline (Figure 11-7) ---------------------------------------------------------------------
FIG_11_7 = (
    ("t1", "Rail-1 egress queue 3 toward GPU-0 on Host-3 crosses WRED min"),
    ("t2", "Rail-1 marks ECN 11 on packets to GPU-0 on Host-3"),
    ("t3", "the receiving NIC sends the first CNP"),
    ("t4", "a sending NIC cuts its rate (DCQCN)"),
    ("t5", "Rail-1 ingress from Spine-A crosses xOFF: PFC pause to Spine-A"),
    ("t6", "Spine-A's egress queue 3 toward Rail-1, paused, becomes congested (above WRED min)"),
    ("t7", "Rail-1 egress queue 3 toward GPU-0 on Host-3 falls below WRED min"),
    ("t8", "Rail-1 ingress from Spine-A falls below xON: PFC resume to Spine-A"),
)


def dcqcn(cfg: PacketConfig | None = None, size_mb: float = 6.0) -> ScenarioRun:
    """Deep Learning for Network Engineers, Chapter 11, Figure 11-7: three GPUs behind Rail-2 send to GPU-0 on
    Host-3 behind Rail-1 through Spine-A (800 Gb/s inter-switch link, 200 Gb/s host links: 600 Gb/s offered to
    200). The switch thresholds are the profile's (by default the book's: WRED 150 KB / 3,000 KB, xON 100 KB,
    xOFF 3,200 KB), so ECN acts first and PFC is the backstop; the timeline t1..t8 is read from the events."""
    base = cfg or PacketConfig()
    run_cfg = base.with_(explain=True)  # the timeline is read from the narrated events
    senders = ["host1/GPU0", "host2/GPU0", "host4/GPU0"]
    f = leaf_spine([["host3/GPU0"], senders], ["rail1", "rail2"], ["spineA"], 200, spine_rate_gbps=800, name="fig11-7")
    net = Network(f, run_cfg)
    for i, s in enumerate(senders):
        _flow(net, f, s, "host3/GPU0", size_mb * 1e6, 0x100 + i)
    st = net.run()
    r = ScenarioRun("dcqcn", "Figure 11-7: DCQCN, ECN first and PFC as the backstop")
    log = net.events_log
    eg, isl = "rail1->host3/GPU0", "rail1: ingress from spineA"

    def first(pred, after: float | None = None) -> float | None:
        return next((t for t, _, text in log if pred(text) and (after is None or t > after)), None)

    t = {"t1": first(lambda x: x.startswith(eg) and "rises above WRED min" in x)}
    t["t2"] = first(lambda x: x.startswith(eg) and "marked ECN 11" in x)
    t["t3"] = first(lambda x: "CNP (opcode 0x81" in x)
    t["t4"] = first(lambda x: "CNP received: DCQCN rate" in x)
    t["t5"] = first(lambda x: x.startswith(isl) and "PFC pause" in x)
    t5 = t["t5"]
    t["t6"] = (
        None
        if t5 is None
        else first(lambda x: x.startswith("spineA->rail1: egress") and "rises above WRED min" in x, after=t5)
    )
    t["t7"] = None if t5 is None else first(lambda x: x.startswith(eg) and "falls below WRED min" in x, after=t5)
    t["t8"] = None if t5 is None else first(lambda x: x.startswith(isl) and "PFC resume" in x, after=t5)
    r.table = [{"figure": k, "event": text, "t_us": None if (v := t[k]) is None else v * 1e6} for k, text in FIG_11_7]
    end = max(fl["done_s"] for fl in st.flows)
    pauses = [x for x in st.pfc_frames if x[3] > 0]
    last_pause = max((x[0] for x in pauses), default=None)
    quiet = t["t8"] is not None and (last_pause is None or last_pause < t["t8"])
    c = run_cfg.switch
    r.findings = [
        f"{len(st.flows)} x {size_mb:g} MB to GPU-0 on Host-3 through Spine-A (600 Gb/s offered to a 200 Gb/s port): "
        f"done in {end * 1e6:.0f} us ({_gbps(len(st.flows) * size_mb * 1e6, end):.0f} Gb/s delivered)",
        f"thresholds: xON {c.pfc_xon_bytes / 1e3:,.0f} KB < WRED min {c.wred_min_bytes / 1e3:,.0f} KB < WRED max "
        f"{c.wred_max_bytes / 1e3:,.0f} KB < xOFF {c.pfc_xoff_bytes / 1e3:,.0f} KB",
        f"{st.total_ecn_marks()} ECN marks, {sum(fl['cnp_sent'] for fl in st.flows)} CNPs, "
        f"{st.total_pauses()} PFC pause frames (refreshes every half pause included) / "
        f"{sum(st.pfc_resume_sent.values())} resume{'s' * (sum(st.pfc_resume_sent.values()) != 1)}, "
        f"{st.total_drops()} drops",
        (
            "PFC quiet after t8: no pause frame after the resume; DCQCN alone holds the queue"
            if quiet
            else "PFC not quiet: pause frames after the first resume (the senders' rates had not come down enough)"
        ),
        "final DCQCN rates: "
        + ", ".join(f"{fl['name'].split('->')[0]} {fl['final_rate_gbps']:.1f} Gb/s" for fl in st.flows),
    ]
    r.runs.append(("dcqcn", net, st))
    return r


# -- spraying: Write First/Middle/Last vs Write Only (Figures 12-6/12-7) -------------------------------
def _fig12_fabric(spine2_extra_ns: float) -> Fabric:
    """Figure 12-4: four hosts, GPU-1 NICs on Rail-1, GPU-2 NICs on Rail-2, two spines. Spine-2's
    cables are longer by `spine2_extra_ns` (the path asymmetry that makes sprayed packets reorder)."""
    f = Fabric(name="fig12-4", gpus_per_server=1, switch_latency_s=ns_to_s(500))
    for i, rail in enumerate(("rail1", "rail2")):
        f.add_node(Node(rail, RAIL, index=i))
    for i, sp in enumerate(("spine1", "spine2")):
        f.add_node(Node(sp, SPINE, index=i))
    rate_bytes_per_s = gbps_to_bytes_per_s(200)
    for h in range(1, 5):
        for g, rail in ((1, "rail1"), (2, "rail2")):
            name = f"host{h}/GPU{g}"
            f.add_node(Node(name, NIC, server=h, index=g, ip=(10 << 24) | (g << 16) | h))
            f.add_cable(name, rail, rate_bytes_per_s, ns_to_s(100), TIER_HOST)
    for rail in ("rail1", "rail2"):
        f.add_cable(rail, "spine1", rate_bytes_per_s, ns_to_s(100), TIER_SPINE)
        f.add_cable(rail, "spine2", rate_bytes_per_s, ns_to_s(100 + spine2_extra_ns), TIER_SPINE)
    return f


def spraying(cfg: PacketConfig | None = None, size_mb: float = 2.0, spine2_extra_ns: float = 1000) -> ScenarioRun:
    base = cfg or PacketConfig()
    variants = [
        ("ecmp, Write First/Middle/Last", LbConfig(mode="ecmp"), replace(base.nic, write_only=False, transport="rc")),
        ("spray, Write First/Middle/Last", LbConfig(mode="spray"), replace(base.nic, write_only=False, transport="rc")),
        ("spray, Write Only", LbConfig(mode="spray"), replace(base.nic, write_only=True, transport="rc")),
        ("UET (per-packet entropy)", LbConfig(mode="ecmp"), replace(base.nic, transport="uet")),
    ]
    r = ScenarioRun("spraying", "Figures 12-6/12-7: packet spraying with Write First/Middle/Last vs Write Only")
    for label, lb, nic in variants:
        f = _fig12_fabric(spine2_extra_ns)
        net = Network(f, replace(base, lb=lb, nic=nic))
        _flow(net, f, "host1/GPU1", "host4/GPU2", size_mb * 1e6, 0x100, name=f"host1/GPU1->host4/GPU2 [{label}]")
        _flow(net, f, "host2/GPU1", "host3/GPU2", size_mb * 1e6, 0x101, name=f"host2/GPU1->host3/GPU2 [{label}]")
        st = net.run()
        end = max(fl["done_s"] for fl in st.flows)
        r.table.append(
            {
                "variant": label,
                "placement": st.flows[0]["placement"],
                "max_fct_us": end * 1e6,
                "goodput_gbps": _gbps(2 * size_mb * 1e6, end),
                "out_of_order": sum(fl["out_of_order"] for fl in st.flows),
                "naks": sum(fl["naks"] for fl in st.flows),
                "retransmissions": sum(fl["retransmissions"] for fl in st.flows),
                "bitmap_psns": max(fl["bitmap_peak_psns"] for fl in st.flows),
                "spine1_MB": _port_bytes(net, "rail1", "spine1") / 1e6,
                "spine2_MB": _port_bytes(net, "rail1", "spine2") / 1e6,
            }
        )
        r.runs.append((label, net, st))
    fml, wo, uet = r.table[1], r.table[2], r.table[3]
    r.findings = [
        "Write First/Middle/Last: only the First packet carries the RETH (the base address), so the receiver can "
        "place a Middle/Last packet only in PSN order; a sprayed packet that overtakes another is discarded "
        f"and NAKed: {fml['out_of_order']} out-of-order arrivals, {fml['naks']} NAKs, {fml['retransmissions']} "
        f"retransmitted packets, {fml['max_fct_us']:.0f} us",
        f"Write Only: every packet carries its own RETH and is placed on arrival: {wo['out_of_order']} out-of-order "
        f"arrivals, {wo['retransmissions']} retransmissions, {wo['max_fct_us']:.0f} us",
        f"direct placement (Write Only, UET) remembers which PSNs arrived in a bitmap: at most {wo['bitmap_psns']} and "
        f"{uet['bitmap_psns']} PSNs beyond the expected one, {-(-max(wo['bitmap_psns'], uet['bitmap_psns']) // 8)} "
        "bytes of NIC memory per QP; go-back-N keeps none (it discards instead)",
        f"paths: Spine-2's cables are {spine2_extra_ns:g} ns longer than Spine-1's, so packets sprayed over both "
        "arrive out of order",
    ]
    return r


# -- head-of-line blocking (Figure 10-4) --------------------------------------------------------------------
def hol_blocking(cfg: PacketConfig | None = None, size_mb: float = 4.0) -> ScenarioRun:
    """Deep Learning for Network Engineers, Chapter 10, Figure 10-4: GPU-0's gradients for the other hosts' GPU-1
    go over NVLink to GPU-1 and out of GPU-1's NIC on Rail B (NCCL's PXN); when GPU-1 is sending its own
    gradients, GPU-0's traffic waits behind them at that NIC. Three servers x 2 GPUs on a rail-only fabric at
    200 Gb/s: GPU-0 on Host-1 -> GPU-1 on Host-2 (relayed), GPU-1 on Host-1 -> GPU-1 on Host-3 (its own)."""
    from ..fabric import build
    from ..fabric.routing import Router
    from ..scenario.fabric_spec import ClusterSpec, FabricSpec

    cfg = cfg or PacketConfig()
    cluster = ClusterSpec(servers=3, gpus_per_server=2, nic_speed_gbps=200)
    fabric = FabricSpec(topology="rail-only")
    r = ScenarioRun("hol-blocking", "Figure 10-4: head-of-line blocking at the relaying GPU's NIC")
    relayed_label, own_label = "GPU-0 Host-1 -> GPU-1 Host-2 (via GPU-1's NIC)", "GPU-1 Host-1 -> GPU-1 Host-3"
    results = {}
    for label, pairs in (
        ("relayed transfer alone", [(0, 3, relayed_label)]),
        ("behind GPU-1's own gradients", [(1, 5, own_label), (0, 3, relayed_label)]),
    ):
        f = build(cluster, fabric, "fig10-4")
        router = Router(f, pxn=True)
        net = Network(f, cfg)
        for src, dst, name in pairs:
            route = router.route(src, dst)
            assert route.flow is not None  # between servers: a QP
            qpn = router.qps.pair(
                src, dst, 0, f.rank_nic(route.relay_rank if route.relay_rank is not None else src), f.rank_nic(dst)
            )[0]
            net.add_transfer(route.links, size_mb * 1e6, name=name, qpn=qpn, sport=route.flow.src_port)
        st = net.run()
        nic = next(p for p in st.ports if p["port"] == "s0/nic1->rail1")
        relayed = st.flow(relayed_label)
        results[label] = (relayed["fct_s"],)
        r.table.append(
            {
                "run": label,
                "relayed_fct_us": relayed["fct_s"] * 1e6,
                "nic1_uplink_MB": nic["tx_bytes"] / 1e6,
                "own_fct_us": st.flow(own_label)["fct_s"] * 1e6 if len(pairs) > 1 else None,
            }
        )
        r.runs.append((label, net, st))
    alone, behind = results["relayed transfer alone"][0], results["behind GPU-1's own gradients"][0]
    r.findings = [
        "route of GPU-0's transfer: NVLink to GPU-1, PCIe to GPU-1's NIC, Rail B (rail1 here), then GPU-1 on Host-2: "
        "Rail A's switch has no path to Rail B (rail-only), so NCCL relays through the GPU on the destination's rail",
        f"alone: {size_mb:g} MB in {alone * 1e6:.0f} us ({_gbps(size_mb * 1e6, alone):.0f} Gb/s, the NIC's line rate)",
        f"while GPU-1 sends its own {size_mb:g} MB out of the same NIC: {behind * 1e6:.0f} us "
        f"({behind / alone:.2f}x): GPU-0's packets queue behind GPU-1's at that NIC's 200 Gb/s port (the NIC "
        "serves the two in turns), though GPU-0's own NIC, on Rail A, is idle",
    ]
    return r


# -- three flows on one uplink (Figure 12-4) and what flowlets, spraying and adaptive routing make of it ------
def ecmp_uplink(
    cfg: PacketConfig | None = None,
    size_mb: float = 2.0,
    modes: tuple[str, ...] = ("ecmp", "flowlet", "spray", "adaptive"),
) -> ScenarioRun:
    """Deep Learning for Network Engineers, Chapter 12, Figure 12-4: the GPU-1s of Hosts 1, 2 and 3 (on Rail-1)
    send to GPU-2 on Host 4 (on Rail-2); Rail-1's 5-tuple hash puts all three flows on the same uplink (QPNs
    chosen so that it does, deterministically); then Figure 12-5's flowlets, spraying and adaptive routing."""
    cfg = cfg or PacketConfig()
    senders = ["host1/GPU1", "host2/GPU1", "host3/GPU1"]
    dst = "host4/GPU2"
    f0 = _fig12_fabric(0)
    up = [link_between(f0, "rail1", "spine1"), link_between(f0, "rail1", "spine2")]
    qpns = colliding_qpns(f0, [(s, dst) for s in senders], "rail1", up, 0)
    r = ScenarioRun("ecmp-uplink", "Figure 12-4: three flows hashed onto one Rail-1 uplink")
    for mode in modes:
        f = _fig12_fabric(0)
        net = Network(f, replace(cfg, lb=replace(cfg.lb, mode=mode)))
        for s, q in zip(senders, qpns):
            _flow(net, f, s, dst, size_mb * 1e6, q)
        st = net.run()
        end = max(fl["done_s"] for fl in st.flows)
        b1, b2 = _port_bytes(net, "rail1", "spine1"), _port_bytes(net, "rail1", "spine2")
        r.table.append(
            {
                "lb": mode,
                "rail1->spine1_MB": b1 / 1e6,
                "rail1->spine2_MB": b2 / 1e6,
                "max_fct_us": end * 1e6,
                "ecn_marks": st.total_ecn_marks(),
                "pfc_pauses": st.total_pauses(),
                "retransmissions": sum(fl["retransmissions"] for fl in st.flows),
            }
        )
        r.runs.append((mode, net, st))
    e = r.table[0]
    r.findings = [
        f"the three 5-tuples (QPNs {', '.join(hex(q) for q in qpns)}) hash to Rail-1 -> Spine-1: 600 Gb/s offered to "
        f"a 200 Gb/s uplink while Rail-1 -> Spine-2 idles",
        f"ECMP: Spine-1 uplink {e['rail1->spine1_MB']:.1f} MB, Spine-2 uplink {e['rail1->spine2_MB']:.1f} MB; "
        f"{e['max_fct_us']:.0f} us for 3 x {size_mb:g} MB ({3 * size_mb * 8e6 / 400e9 * 1e6:.0f} us if both "
        "uplinks carried their share; Host-4's 200 Gb/s port bounds it to "
        f"{3 * size_mb * 8e6 / 200e9 * 1e6:.0f} us)",
    ] + [
        f"{row['lb']}: uplinks {row['rail1->spine1_MB']:.1f} / {row['rail1->spine2_MB']:.1f} MB, "
        f"{row['max_fct_us']:.0f} us"
        for row in r.table[1:]
    ]
    return r


# -- connect: one RDMA Write from its beginning (Chapter 9) ----------------------------------------------------------
BOOK_QPN = 0x12345678  # the book's CCN QP: 32 bits, which neither BTH DestQP nor the CM's QPN fields can carry
CCN_QPN = 0x123456  # the same QP's number in the book's Chapter 11 (Figure 11-1): 24 bits
SCN_QPN = 0x00ABCD  # the server's QP: the book gives none
BOOK_PKEY = 0x8012
BOOK_START_PSN = 0x000ABC
BOOK_MTU = 1024
SCN_BUFFER_VA = 0x7F10_0000_0000
CCN_BUFFER_VA = 0x7F20_0000_0000


def connect(
    cfg: PacketConfig | None = None, size_mb: float = 4096 / 1e6, bad_rkey: bool = False, bad_pkey: bool = False
) -> ScenarioRun:
    """Deep Learning for Network Engineers, Chapter 9: the client compute node (CCN) writes into the server's (SCN)
    GPU memory. (a) Each registers memory in a protection domain: the CCN's buffer for Local Read (an L_Key), the
    SCN's for Remote Write (an L_Key and an R_Key, which reaches the CCN out of band); (b) each creates an RC QP in
    that PD with a completion queue, and moves it to INIT with the P_Key 0x8012; (c) REQ -> REP -> RTU move the
    QPs to RTR and RTS (WE-02: QP, RC, starting PSN 0x000abc, P_Key 0x8012, payload size 1024); (d) the Write goes
    out as Eth / IPv4 / UDP 4791 / BTH / RETH / payload (WE-03), the SCN checks P_Key and R_Key and places it,
    and the CCN's CQ gets the work completion. `bad_rkey`: the CCN uses an R_Key the SCN never issued (NAK remote
    access error, the QP to ERR, an error completion); `bad_pkey`: the CCN's QP is left on the default partition
    0xFFFF (the SCN drops every packet and counts it; the CCN retries, then fails)."""
    from .pcap import to_scapy
    from .verbs import LOCAL_WRITE, REMOTE_WRITE, access_names

    base = cfg or PacketConfig()
    size = max(1, int(round(size_mb * 1e6)))
    run_cfg = replace(
        base,
        explain=True,
        trace_flows=(0,),
        trace_by="flow",
        nic=replace(
            base.nic,
            pkey=BOOK_PKEY,
            mtu_bytes=BOOK_MTU,
            cm_setup=True,
            rto_s=min(base.nic.rto_s, 100e-6) if bad_pkey else base.nic.rto_s,
        ),
    )
    f = leaf_spine([["ccn", "scn"]], ["leaf"], [], 200, name="fig9-1")
    net = Network(f, run_cfg)
    ccn, scn = net.devices[net.node_index["ccn"]], net.devices[net.node_index["scn"]]
    # (a) memory: the CCN's buffer (Local Read: no flag, so no R_Key), the SCN's (Remote Write)
    src_mr = net.rnic(ccn).pd.reg_mr(CCN_BUFFER_VA, size, 0)
    dst_mr = net.rnic(scn).pd.reg_mr(SCN_BUFFER_VA, max(size, 1 << 20), LOCAL_WRITE | REMOTE_WRITE)
    assert dst_mr.rkey is not None
    rkey = dst_mr.rkey ^ 0x5500 if bad_rkey else dst_mr.rkey
    flow = _flow(
        net,
        f,
        "ccn",
        "scn",
        size,
        SCN_QPN,
        name="CCN -> SCN RDMA Write",
        local_qpn=CCN_QPN,
        ipsn=BOOK_START_PSN,
        rkey=rkey,
        remote_addr=SCN_BUFFER_VA,
        local_mr=src_mr,
        pkey=0xFFFF if bad_pkey else None,
    )
    st = net.run()
    conn = flow.conn
    r = ScenarioRun("connect", "Chapter 9: an RDMA Write from memory registration to its completion")
    r.table = [
        {"t_us": t * 1e6, "what": cat, "event": text}
        for t, cat, text in net.events_log
        if cat in ("cm", "qp", "transport", "completion")
    ]
    frames = to_scapy(net.captured, net)
    first = next((fr for fr, rec in zip(frames, net.captured) if rec[1] == "pkt" and rec[2] == DATA), None)
    wc = [w for w in net.rnic(ccn).cq.entries if w.wr_id == flow.id]
    setup = (conn.ready_t - conn.setup_start_t) if conn.ready_t is not None else None
    r.findings = [
        f"(a) memory: CCN PD {src_mr.pd.handle}, {size:,} B at {src_mr.addr:#x}, {access_names(src_mr.access)}: "
        f"L_Key {src_mr.lkey:#x}, no R_Key; SCN PD {dst_mr.pd.handle}, {dst_mr.length:,} B at {dst_mr.addr:#x}, "
        f"{access_names(dst_mr.access)}: L_Key {dst_mr.lkey:#x}, R_Key {dst_mr.rkey:#x} (sent to the CCN out of band)",
        f"(b) queue pairs: CCN QP {CCN_QPN:#08x} (the book's {BOOK_QPN:#x} has 32 bits; BTH DestQP and the CM's QPN "
        f"fields have 24, so the story uses the book's Chapter 11 number), SCN QP {SCN_QPN:#08x}; {conn.req.type}, "
        f"each in its PD with a completion queue; P_Key table {', '.join(f'{k:#06x}' for k in conn.req.pd.device.pkey_table)}"
        f": the CCN's QP on index {conn.req.pkey_index} ({conn.req.pkey:#06x}), the SCN's on index "
        f"{conn.resp_pkey_index} ({conn.resp.pd.device.pkey_table[conn.resp_pkey_index]:#06x})",
        (
            f"(c) no connection: a UD QP is not connected (no CM exchange); each datagram names its destination QP "
            f"{SCN_QPN:#08x} and Q_Key in a DETH, both QPs moved INIT -> RTR -> RTS locally"
            if conn.req.type == "UD"
            else f"(c) connection: REQ -> REP -> RTU to QP1 over RoCEv2 (UD, DETH Q_Key 0x80010000): REQ with QPN "
            f"{CCN_QPN:#08x}, {conn.req.type}, starting PSN {conn.ipsn:#08x}, P_Key {conn.path_pkey:#06x}, path MTU "
            f"{BOOK_MTU}; REP with QPN {SCN_QPN:#08x}, starting PSN {conn.resp_ipsn:#08x}; "
            + (
                f"the CCN's QP in RTS {setup * 1e6:.2f} us after the REQ was prepared"
                if setup is not None
                else "no RTS"
            )
        ),
    ]
    if first is not None:
        from scapy.contrib.roce import BTH
        from scapy.layers.inet import IP, UDP

        from .pcap import RETH

        b, ip = first[BTH], first[IP]
        reth = (
            f" / RETH VA {first[RETH].va:#x}, R_Key {first[RETH].rkey:#x}, DMA length {first[RETH].dlen:,}"
            if RETH in first
            else ""
        )
        r.findings.append(
            f"(d) the {'datagram' if conn.req.type == 'UD' else 'Write'}: {flow.n} packet{'s' * (flow.n > 1)} of "
            f"{'at most ' * (flow.n == 1)}{BOOK_MTU} B, PSN {conn.ipsn:#08x}.."
            f"{flow.wire_psn(flow.n - 1):#08x}; the first: Eth / IPv4 {ip.src} > {ip.dst} DSCP {ip.tos >> 2} ECN "
            f"{ip.tos & 3:02b} (ToS {ip.tos:#04x}) / UDP {first[UDP].sport} > {first[UDP].dport} / BTH opcode "
            f"{b.opcode:#04x}, P_Key {b.pkey:#06x}, DestQP {b.dqpn:#08x}, AckReq {b.ackreq}, PSN {b.psn:#08x}{reth} / "
            f"{flow.mtu if flow.n > 1 else size:,} B payload / ICRC"
        )
    if conn.cm_error is not None:
        r.findings.append(f"(c) {conn.cm_error}")
    if bad_pkey:
        r.findings.append(
            f"P_Key check: the SCN dropped {flow.pkey_drops} packets of P_Key {conn.req.pkey:#06x} for a "
            f"QP in partition {conn.resp.pkey:#06x} (counted: {st.pkey_violations.get(('scn',), 0)} P_Key "
            f"violations at the SCN); no NAK, so the CCN timed out {flow.timeouts} times (retry count {conn.retry_cnt})"
        )
    if wc:
        w = wc[0]
        r.findings.append(
            f"(e) completion: the CCN's CQ has work request {w.wr_id}: {w.status.value}, {w.byte_len:,} B, "
            f"QP {w.qp_num:#08x}, at {w.t_s * 1e6:.2f} us; the CCN's QP is {conn.req.state.value}"
        )
    recv = [w for w in net.rnic(scn).cq.entries if w.opcode == "RECV"]
    if recv:  # UD: the datagram lands in a posted receive, and the SCN's CQ says so
        w = recv[0]
        r.findings.append(
            f"(e) the SCN's CQ has a receive completion: {w.status.value}, {w.byte_len:,} B, at {w.t_s * 1e6:.2f} us"
        )
    r.runs.append(("connect", net, st))
    return r


# -- PFC storm (Chapter 11, the PFC watchdog) -------------------------------------------------------------
STORM_NIC = "hostA3"


def _storm_run(cfg: PacketConfig, size_mb: float, start_s: float, stop_s: float):
    hosts = [["hostA1", "hostA2", STORM_NIC], ["hostB1", "hostB2"]]
    f = leaf_spine(hosts, ["railA", "railB"], ["spine1"], 200, spine_rate_gbps=400, name="pfc-storm")
    net = Network(f, cfg)
    _flow(net, f, "hostB1", STORM_NIC, size_mb * 1e6, 0x100, name=f"hostB1->{STORM_NIC} (to the storming NIC)")
    _flow(net, f, "hostB2", "hostA1", size_mb * 1e6, 0x101, name="hostB2->hostA1 (a victim)")
    net.pfc_storm(STORM_NIC, 3, start_s, stop_s)
    return net, net.run()


def pfc_storm(
    cfg: PacketConfig | None = None, size_mb: float = 2.0, start_us: float = 10.0, storm_ms: float = 150.0
) -> ScenarioRun:
    """A NIC (hostA3, behind Rail A) keeps sending PFC pauses for priority 3 from `start_us` for `storm_ms`. Rail A's
    port toward it stops; what Rail A holds for it fills Rail A's ingress from the spine past xOFF, so Rail A pauses
    the spine; the spine's egress toward Rail A, which also carries hostB2's flow to the healthy hostA1, fills the
    spine's ingress from Rail B, which pauses Rail B, which pauses hostB1 and hostB2. The PFC watchdog (every port's;
    Deep Learning for Network Engineers, Chapter 11, Example 11-5; NX-OS default interval 100 ms), at the first pause
    that finds a priority paused past its interval, discards what the queue holds and ignores the pauses for an
    interval: the cascade unwinds, the class is lossy meanwhile. The same run without the watchdog waits for the
    storm to end. ECN and DCQCN are off and xOFF
    150 KB / xON 60 KB, as in the pfc-cascade story, to let PFC act alone."""
    base = cfg or PacketConfig()
    cfg = replace(
        base,
        switch=replace(base.switch, ecn_enabled=False, pfc_xon_bytes=60_000, pfc_xoff_bytes=150_000),
        dcqcn=replace(base.dcqcn, enabled=False),
    )
    wd_s = cfg.switch.pfc_watchdog_s or 0.1
    start_s, stop_s = start_us * 1e-6, storm_ms * 1e-3
    variants = [
        (f"watchdog {wd_s * 1e3:g} ms", replace(cfg, switch=replace(cfg.switch, pfc_watchdog_s=wd_s))),
        ("no watchdog", replace(cfg, switch=replace(cfg.switch, pfc_watchdog_s=None), trace_flows=(), trace_pfc=False)),
    ]
    r = ScenarioRun("pfc-storm", f"PFC storm: {STORM_NIC}'s NIC keeps sending pauses; the PFC watchdog (Chapter 11)")
    for label, c in variants:
        net, st = _storm_run(c, size_mb, start_s, stop_s)
        r.runs.append((label, net, st))
        victim = next(fl for fl in st.flows if "victim" in fl["name"])
        stuck = next(fl for fl in st.flows if "storming" in fl["name"])
        r.table.append(
            {
                "run": label,
                "victim_fct_ms": victim["fct_s"] * 1e3 if victim["fct_s"] else None,
                "to_storming_nic_fct_ms": stuck["fct_s"] * 1e3 if stuck["fct_s"] else None,
                "pause_frames": st.total_pauses(),
                "watchdog_events": sum(st.watchdog.values()),
                "drops": st.total_drops(),
                "retransmissions": sum(fl["retransmissions"] for fl in st.flows),
            }
        )
    net, st = r.runs[0][1], r.runs[0][2]
    first: dict[str, float] = {}
    for t, port, prio, quanta in st.pfc_frames:
        if quanta and prio == 3 and port not in first:
            first[port] = t
    spread = sorted(first.items(), key=lambda kv: kv[1])
    victim = next(fl for fl in st.flows if "victim" in fl["name"])
    wd = sorted(st.watchdog)
    discarded = sum(v for (_, _, why), v in st.drops.items() if why == "pfc-watchdog")
    overrun = sum(v for (_, _, why), v in st.drops.items() if why == "pfc-headroom-overrun")
    r.findings = [
        f"{STORM_NIC} starts pausing priority 3 at {start_us:g} us; the pauses spread in "
        f"{(spread[-1][1] - spread[0][1]) * 1e6:.1f} us to {len(spread)} ports: "
        + ", ".join(f"{p} at {t * 1e6:.1f} us" for p, t in spread),
        f"hostB2's flow to hostA1 never goes near {STORM_NIC}, yet waits behind it on the spine's queue 3 toward Rail A: "
        f"{victim['fct_s'] * 1e3:.3f} ms (alone: {size_mb * 8e6 / 200e9 * 1e3:.3f} ms), with "
        f"{victim['timeouts']} retransmission timeouts",
        f"the watchdog acted on {', '.join(p for p, _ in wd) or 'no port'} (priority 3 paused past {wd_s * 1e3:g} ms): "
        f"{discarded} queued packets discarded and the pauses ignored for {wd_s * 1e3:g} ms, so the cascade unwound; "
        f"while priority 3 was lossy, {overrun} packets overran Rail A's headroom (dropped, resent by go-back-N); "
        f"without the watchdog the victim waits for the storm's end ({storm_ms:g} ms): "
        f"{r.table[1]['victim_fct_ms']:.3f} ms",
    ]
    return r


# -- PFC deadlock (a cyclic buffer dependency) ------------------------------------------------------------
DEADLOCK_FAILED = (("leaf0", "spine1"), ("leaf3", "spine0"))  # the two cables that have failed


def _deadlock_fabric() -> Fabric:
    """Four leaves and two spines at 200 Gb/s, one host per leaf, with leaf0--spine1 and leaf3--spine0 failed: leaf0
    and leaf3 share no spine, so routing (converged) sends their traffic down to another leaf and up again."""
    f = Fabric(name="pfc-deadlock", gpus_per_server=1, switch_latency_s=ns_to_s(500))
    leaves, spines = [f"leaf{i}" for i in range(4)], ["spine0", "spine1"]
    for i, leaf in enumerate(leaves):
        f.add_node(Node(leaf, RAIL, index=i))
    for i, sp in enumerate(spines):
        f.add_node(Node(sp, SPINE, index=i))
    rate_bytes_per_s, lat = gbps_to_bytes_per_s(200), ns_to_s(100)
    for i, leaf in enumerate(leaves):
        f.add_node(Node(f"h{i}", NIC, server=i, index=i, ip=(10 << 24) | (i << 16) | 1))
        f.add_cable(f"h{i}", leaf, rate_bytes_per_s, lat, TIER_HOST)
    for leaf in leaves:
        for sp in spines:
            if (leaf, sp) not in DEADLOCK_FAILED:
                f.add_cable(leaf, sp, rate_bytes_per_s, lat, TIER_SPINE)
    return f


def _qpn_for(f: Fabric, src: str, dst: str, via: str, start: int, seed: int) -> int:
    """The first QPN from `start` whose 5-tuple ECMP hashes through switch `via` (the stories' way of choosing which
    QP shows a path: the hash decides, the story picks the QP)."""
    for qpn in range(start, start + 4096):
        route = ecmp_route(f, src, dst, five_tuple(f, src, dst, qpn, qpn + 0x1000), seed)
        if any(f.links[li].dst == via for li in route):
            return qpn
    raise AssertionError(f"no QPN hashes {src}->{dst} through {via}")


def _deadlock_run(cfg: PacketConfig, size_mb: float):
    f = _deadlock_fabric()
    net = Network(f, cfg)
    size = size_mb * 1e6
    for k, (src, dst, via, what) in enumerate(
        (
            ("h0", "h3", "leaf1", "down-up at leaf1"),
            ("h3", "h0", "leaf2", "down-up at leaf2"),
            ("h1", "h2", "spine1", "via spine1"),
            ("h2", "h1", "spine0", "via spine0"),
        )
    ):
        qpn = _qpn_for(f, src, dst, via, 0x100 + 0x100 * k, net.hash_seed)
        _flow(net, f, src, dst, size, qpn, name=f"{src}->{dst} ({what})")
    return net, net.run()


def _deadlock_variants(cfg: PacketConfig | None) -> list[tuple[str, PacketConfig]]:
    """The deadlock stories' two runs: ECN and DCQCN off, xOFF 150 KB / xON 60 KB (as pfc-cascade), with the PFC
    watchdog (the configured one, or 100 ms) and without it (no per-flow or PFC traces: it stops at the deadlock)."""
    base = cfg or PacketConfig()
    cfg = replace(
        base,
        switch=replace(base.switch, ecn_enabled=False, pfc_xon_bytes=60_000, pfc_xoff_bytes=150_000),
        dcqcn=replace(base.dcqcn, enabled=False),
    )
    wd_s = cfg.switch.pfc_watchdog_s or 0.1
    return [
        (f"watchdog {wd_s * 1e3:g} ms", replace(cfg, switch=replace(cfg.switch, pfc_watchdog_s=wd_s))),
        ("no watchdog", replace(cfg, switch=replace(cfg.switch, pfc_watchdog_s=None), trace_flows=(), trace_pfc=False)),
    ]


def pfc_deadlock(cfg: PacketConfig | None = None, size_mb: float = 4.0) -> ScenarioRun:
    """A PFC deadlock from a cyclic buffer dependency (Hu et al., HotNets 2016: down-up paths after link failures).
    Cables leaf0--spine1 and leaf3--spine0 have failed and routing has converged: h0 (leaf0) reaches h3 (leaf3) over
    leaf0 -> spine0 -> leaf1 -> spine1 -> leaf3, and h3 reaches h0 over leaf3 -> spine1 -> leaf2 -> spine0 -> leaf0
    (down to a leaf and up again). With h1 -> h2 hashed through spine1 and h2 -> h1 through spine0, the ports
    spine0->leaf1, leaf1->spine1, spine1->leaf2 and leaf2->spine0 each carry two flows, and the packets waiting at
    each of them wait for the next: the four pause each other. Nothing moves; the engine finds the cycle
    (packet/deadlock.py) and reports it. The PFC watchdog (100 ms) breaks it by discarding a stuck queue; without
    it the run stops at the deadlock. ECN and DCQCN are off and xOFF 150 KB / xON 60 KB, as in pfc-cascade."""
    variants = _deadlock_variants(cfg)
    r = ScenarioRun(
        "pfc-deadlock",
        "PFC deadlock: down-up paths after two cable failures close a cycle of pauses; "
        "the PFC watchdog breaks it (Chapter 11)",
    )
    for label, c in variants:
        net, st = _deadlock_run(c, size_mb)
        r.runs.append((label, net, st))
        dl = st.deadlocks[0] if st.deadlocks else None
        done = sum(1 for fl in st.flows if fl["done_s"] is not None)
        r.table.append(
            {
                "run": label,
                "deadlock_at_us": dl["t_s"] * 1e6 if dl else None,
                "cycle_ports": len(dl["ports"]) if dl else 0,
                "broken_at_ms": dl["broken_at_s"] * 1e3 if dl and dl["broken_at_s"] else None,
                "flows_done": f"{done} of {len(st.flows)}",
                "last_fct_ms": max(fl["fct_s"] for fl in st.flows) * 1e3 if done == len(st.flows) else None,
                "drops": st.total_drops(),
                "retransmissions": sum(fl["retransmissions"] for fl in st.flows),
            }
        )
    st_wd, st_no = r.runs[0][2], r.runs[1][2]
    r.findings = []
    for label, st in (r.runs[0][0], st_wd), (r.runs[1][0], st_no):
        if not st.deadlocks:
            r.findings.append(f"{label}: no deadlock formed")
            continue
        dl = st.deadlocks[0]
        cycle = " -> ".join(f"{p} (paused by {p.split('->')[1]})" for p in dl["ports"]) + f" -> {dl['ports'][0]}"
        if dl["broken_at_s"] is not None:
            r.findings.append(
                f"{label}: PFC deadlock on priority {dl['priority']} found at {dl['t_s'] * 1e6:.1f} us (no packet left "
                f"the cycle since {dl['since_s'] * 1e6:.1f} us, {dl['bytes_held'] / 1e3:.0f} KB held): {cycle}; the "
                f"watchdog on {dl['broken_by']} broke it at {dl['broken_at_s'] * 1e3:.3f} ms "
                f"({sum(v for k, v in st.drops.items() if k[2] == 'pfc-watchdog')} packets discarded, resent by "
                "go-back-N); every flow completes"
            )
        else:
            done = sum(1 for fl in st.flows if fl["done_s"] is not None)
            r.findings.append(
                f"{label}: the same cycle at {dl['t_s'] * 1e6:.1f} us; nothing will ever move again, so "
                f"the run stops there with {done} of {len(st.flows)} flows done (the engine reports "
                "the deadlock instead of running forever)"
            )
    return r


def _loop_run(cfg: PacketConfig, size_mb: float, converge_s: float):
    f = leaf_spine([["hA"], ["hB"]], ["leafA", "leafB"], ["spine0", "spine1"], 200, name="pfc-deadlock-loop")
    # spine1--leafB has failed: the fabric without it
    for li in sorted(link_between(f, a, b) for a, b in (("spine1", "leafB"), ("leafB", "spine1"))):
        f.out_links[f.links[li].src].remove(li)
    net = Network(f, cfg)
    idx = net.node_index
    leaf_a, spine1, leaf_b = (net.devices[idx[n]] for n in ("leafA", "spine1", "leafB"))
    to_spine1, spine1_down, to_spine0 = (
        link_between(f, *p) for p in (("leafA", "spine1"), ("spine1", "leafA"), ("leafA", "spine0"))
    )
    spine1.fib = {leaf_b.idx: spine1_down}  # converged: down to leafA, which reaches leafB over spine0
    leaf_a.fib = {leaf_b.idx: to_spine1}  # not yet: still hashes the flow onto spine1
    net.log(
        0.0,
        "spine1 has lost its cable to leafB and converged (leafB over leafA and spine0); leafA has not yet: "
        "it still sends hA's flow to spine1, which sends it back (a routing loop; each packet bounces until "
        "its IP TTL of 64 runs out)",
        "routing",
    )

    def converged(_) -> None:
        leaf_a.fib = {leaf_b.idx: to_spine0}
        net.log(
            net.sim.now,
            "leafA has converged: hA's flow goes over spine0; the loop is gone, but what it left in the queues stays",
            "routing",
        )

    net.at(converge_s, converged)
    _flow(net, f, "hA", "hB", size_mb * 1e6, 0x100, name="hA->hB (looping)")
    return net, net.run()


def pfc_deadlock_loop(cfg: PacketConfig | None = None, size_mb: float = 4.0, converge_ms: float = 1.0) -> ScenarioRun:
    """A PFC deadlock from a routing loop while routing converges (Hu et al., HotNets 2016; Guo et al., SIGCOMM 2016):
    spine1 has lost its cable to leafB and converged (to leafB: down to leafA, up to spine0), leafA has not (for
    `converge_ms`) and still sends hA's flow to spine1. Each packet bounces between leafA and spine1 until its TTL runs
    out, so the two ports carry many times the flow: their queues fill, and leafA->spine1 (paused by spine1, whose
    ingress from leafA holds packets for spine1->leafA) and spine1->leafA (paused by leafA, whose ingress from spine1
    holds packets for leafA->spine1) pause each other. Nothing moves, so no TTL runs out: when leafA converges the loop
    is gone from its routing but the looped packets are still queued, paused: the deadlock outlives the loop until
    the watchdog (100 ms) discards a queue. ECN and DCQCN off, xOFF 150 KB / xON 60 KB, as in pfc-deadlock."""
    variants = _deadlock_variants(cfg)
    r = ScenarioRun(
        "pfc-deadlock-loop",
        "PFC deadlock: a routing loop while routing converges pauses itself; the PFC watchdog breaks it (Chapter 11)",
    )
    for label, c in variants:
        net, st = _loop_run(c, size_mb, converge_ms * 1e-3)
        r.runs.append((label, net, st))
        dl = st.deadlocks[0] if st.deadlocks else None
        fl = st.flows[0]
        r.table.append(
            {
                "run": label,
                "deadlock_at_us": dl["t_s"] * 1e6 if dl else None,
                "cycle_ports": len(dl["ports"]) if dl else 0,
                "broken_at_ms": dl["broken_at_s"] * 1e3 if dl and dl["broken_at_s"] else None,
                "fct_ms": fl["fct_s"] * 1e3 if fl["fct_s"] else None,
                "ttl_expired": sum(v for k, v in st.drops.items() if k[2] == "ttl-expired"),
                "drops": st.total_drops(),
                "retransmissions": fl["retransmissions"],
            }
        )
    for label, _, st in r.runs:
        if not st.deadlocks:
            r.findings.append(f"{label}: no deadlock formed")
            continue
        dl = st.deadlocks[0]
        cycle = " -> ".join(f"{p} (paused by {p.split('->')[1]})" for p in dl["ports"]) + f" -> {dl['ports'][0]}"
        if dl["broken_at_s"] is not None:
            r.findings.append(
                f"{label}: PFC deadlock on priority {dl['priority']} found at {dl['t_s'] * 1e6:.1f} us (no packet left "
                f"since {dl['since_s'] * 1e6:.1f} us): {cycle}; leafA converged at {converge_ms:g} ms, yet the "
                f"deadlock held until the watchdog on {dl['broken_by']} broke it at {dl['broken_at_s'] * 1e3:.3f} ms; "
                f"the flow completes at {st.flows[0]['fct_s'] * 1e3:.3f} ms"
            )
        else:
            r.findings.append(
                f"{label}: the same cycle at {dl['t_s'] * 1e6:.1f} us; leafA's convergence does not "
                "undo it and nothing will ever move again: the run stops there"
            )
    return r


def run_scenario(name: str, cfg: PacketConfig | None = None, **kw) -> ScenarioRun:
    fn = {
        "incast": incast,
        "polarization": polarization,
        "pfc-cascade": pfc_cascade,
        "dcqcn": dcqcn,
        "spraying": spraying,
        "hol-blocking": hol_blocking,
        "ecmp-uplink": ecmp_uplink,
        "connect": connect,
        "pfc-storm": pfc_storm,
        "pfc-deadlock": pfc_deadlock,
        "pfc-deadlock-loop": pfc_deadlock_loop,
    }[name]
    return fn(cfg, **kw)


__all__ = ["SCENARIOS", "ScenarioRun", "colliding_qpns", "run_scenario"]
