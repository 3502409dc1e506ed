"""The packet engine: the engines' TaskGraph executed on the packet-level simulator (aifabric.packet).

Compute tasks occupy their GPU for their duration, as in the flow engine. A transfer task becomes a
RoCEv2 RDMA Write on its own QP (route leaves the server) or a chunked NVLink transfer (route stays in
the server), started when its dependencies are done; its PCIe hops are a fixed latency at each end.
The task ends when the last byte is in the destination GPU's memory. Everything the fabric does on the
way (queues, ECN, CNPs, DCQCN, PFC, drops, retransmissions) is in `PacketRun.stats`. What a transfer's
latency holds beyond its route's own (the collective protocol's per-step software overhead, NCCL's
base latency; the steps a merged ring edge stands for) delays its start: the packets simulate the route.

Returns the same `Timeline` as engines/executor.py, so results, reports and traces work unchanged;
`rate_recomputations` counts simulated events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..fabric.graph import TIER_PCIE, Fabric
from ..packet.config import PacketConfig
from ..packet.network import Network
from ..packet.stats import PacketStats
from .executor import Interrupted, Timeline
from .linkload import LinkLoad
from .taskgraph import COMPUTE, TaskGraph

LINK_LOAD_SEGMENTS = 2000


@dataclass
class PacketRun:
    timeline: Timeline
    stats: PacketStats
    network: Network


def run_packet(graph: TaskGraph, fabric: Fabric, cfg: PacketConfig | None = None,
               progress: Callable[[int, int], None] | None = None, hash_seed: int = 0,
               per_switch_seed: bool = False,
               queue_pairs: dict[tuple[int, int, tuple[int, ...]], tuple[int, int, int]] | None = None) -> PacketRun:
    """Run `graph` packet by packet. Ctrl-C raises `Interrupted` with the timeline so far. `queue_pairs`
    (`Router.queue_pairs()`): each transfer's QP numbers and UDP source port, as the router hashed them."""
    net = Network(fabric, cfg, hash_seed=hash_seed, per_switch_seed=per_switch_seed)
    net.link_bin_s = 1e-6
    for p in net.ports:
        p.bins = {}
    sim = net.sim
    n = len(graph)
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    waiting, dependents = graph.dependency_counts()
    pcie_bytes = np.zeros(len(fabric.links))
    pcie_spans: list[tuple[float, float, list[int], int]] = []  # (first packet out, last byte in, links, bytes)
    state = {"completed": 0}

    def complete(t: int) -> None:
        end[t] = sim.now
        state["completed"] += 1
        for d in dependents[t]:
            waiting[d] -= 1
            if waiting[d] == 0:
                begin(d)
        if progress is not None:
            progress(state["completed"], n)

    def begin(t: int) -> None:
        now = sim.now
        start[t] = now
        if graph.kind[t] == COMPUTE:
            sim.at(now + graph.duration_s[t], complete, t)
            return
        size = graph.size_bytes[t]
        route = graph.route[t]
        if size <= 0 or not route:
            sim.at(now + graph.latency_s[t], complete, t)
            return
        pcie = [li for li in route if fabric.links[li].tier == TIER_PCIE]
        physical = sum(fabric.links[li].latency_s for li in route) + fabric.switch_latency_s * sum(
            1 for li in route if fabric.is_switch(fabric.links[li].dst))
        software = max(0.0, graph.latency_s[t] - physical)  # protocol overheads the packets do not simulate
        head = software + sum(fabric.links[li].latency_s for li in route[:1] if li in pcie)
        tail = sum(fabric.links[li].latency_s for li in route[-1:] if li in pcie and len(route) > 1)
        for li in pcie:
            pcie_bytes[li] += size

        qp = queue_pairs.get((graph.rank[t], graph.dst[t], tuple(route))) if queue_pairs else None
        qp_kw = {"qpn": qp[0], "sport": qp[2]} if qp else {}

        def done(flow, t=t, tail=tail, pcie=pcie, size=size, t0=now + head) -> None:
            if pcie and sim.now > t0:
                pcie_spans.append((t0, sim.now, pcie, size))
            sim.at(sim.now + tail, complete, t)

        net.start_at(now + head, tuple(route), size, on_done=done, name=graph.name[t], **qp_kw) if head > 0 else \
            net.add_transfer(tuple(route), size, on_done=done, name=graph.name[t], **qp_kw)

    for t in range(n):
        if waiting[t] == 0:
            sim.at(0.0, lambda t: begin(t), t)
    try:
        stats = net.run()
    except KeyboardInterrupt:
        stats = net.finish()
        raise Interrupted(_timeline(net, start, end, pcie_bytes, pcie_spans)) from None
    unfinished = int(np.isnan(end).sum())
    if unfinished:
        raise RuntimeError(f"{unfinished} tasks never finished on the packet engine (cycle or lost flow)")
    return PacketRun(_timeline(net, start, end, pcie_bytes, pcie_spans), stats, net)


def _pcie_peaks(spans: list[tuple[float, float, list[int], int]], n_links: int) -> np.ndarray:
    """Per PCIe link, the largest sum of the rates of the transfers crossing it at one time, each transfer's
    bytes spread evenly from its first packet to its last byte (the PCIe hops are not simulated packet by
    packet: they move at the pace of the network path)."""
    peak = np.zeros(n_links)
    if not spans:
        return peak
    links = np.array([li for _, _, ls, _ in spans for li in ls], dtype=np.int64)
    a = np.array([x for x0, _, ls, _ in spans for x in [x0] * len(ls)])
    b = np.array([x for _, x1, ls, _ in spans for x in [x1] * len(ls)])
    rate = np.array([size / (x1 - x0) for x0, x1, ls, size in spans for _ in ls])
    lk = np.concatenate([links, links])
    tk = np.concatenate([a, b])
    rk = np.concatenate([rate, -rate])
    order = np.lexsort((rk, tk, lk))  # per link in time order, a transfer's end before another's start
    lk, rk = lk[order], rk[order]
    level = np.cumsum(rk)
    first = np.flatnonzero(np.r_[True, lk[1:] != lk[:-1]])
    level -= np.repeat(level[first] - rk[first], np.diff(np.r_[first, len(lk)]))
    np.maximum.at(peak, lk, level)
    return peak


def _timeline(net: Network, start: np.ndarray, end: np.ndarray, pcie_bytes: np.ndarray,
              pcie_spans: Sequence[tuple[float, float, list[int], int]] = ()) -> Timeline:
    n_links = len(net.fabric.links)
    link_bytes = pcie_bytes.copy()
    for p in net.ports:
        link_bytes[p.link] += p.tx_bytes
    finished = end[~np.isnan(end)]
    makespan = float(finished.max()) if len(finished) else 0.0
    # link load: each port's bins (1 us, doubled as a long run goes on) re-binned on one grid of at most
    # LINK_LOAD_SEGMENTS segments
    binned = [(p, p.bins) for p in net.ports if p.bins]
    seg_bytes: dict[int, np.ndarray] = {}
    width = max((p.bin_s for p, _ in binned), default=net.link_bin_s)
    if binned:
        t_last = max((max(bins) + 1) * p.bin_s for p, bins in binned)
        while t_last / width > LINK_LOAD_SEGMENTS:
            width *= 2
        for p, bins in binned:
            factor = max(1, round(width / p.bin_s))
            for b, v in bins.items():
                seg_bytes.setdefault(b // factor, np.zeros(n_links))[p.link] += v
    load = LinkLoad()
    peak = np.zeros(n_links)
    for k in sorted(seg_bytes):
        rates = seg_bytes[k] / width
        np.maximum(peak, rates, out=peak)
        load.set(k * width, rates)
        load.close((k + 1) * width)
    # PCIe: its bytes over time (each transfer's spread over its span) and the peak of the concurrent rates,
    # at most the link's capacity
    load.add_spread([(a, b, np.asarray(ls, dtype=np.int64), np.full(len(ls), float(size)))
                     for a, b, ls, size in pcie_spans])
    cap = np.array([link.capacity_bytes_per_s for link in net.fabric.links])
    # a port sends at most at its line rate (serialization_rate_bytes_per_s <= capacity) and its bins hold
    # frames by serialization time: what exceeds the capacity here is floating-point rounding
    peak = np.minimum(np.maximum(peak, _pcie_peaks(list(pcie_spans), n_links)), cap)
    return Timeline(start, end, link_bytes, peak, makespan, net.sim.events, load)


def packet_config(scenario, base: PacketConfig | None = None, seed: int | None = None) -> PacketConfig:
    """The scenario's switch QoS profile (`fabric.qos`: classification, scheduling, WRED/ECN, PFC, buffers, MTU,
    DCQCN), its load balancing and flowlet gap, and its seed (of the WRED marking draws; `seed` overrides the
    scenario's), over `base`'s run options (explain, tracing, transport, write-only)."""
    from ..packet.profile import apply_qos

    cfg = apply_qos(base, scenario.fabric.qos, scenario.fabric)
    return cfg.with_(seed=scenario.seed if seed is None else seed)


def simulate_packet(scenario, progress: Callable[[int, int], None] | None = None,
                    cfg: PacketConfig | None = None, workload=None, lb: str | None = None, seed: int | None = None,
                    keep_network: bool = False):
    """`aifabric.simulate.simulate` for the packet engine: returns (Run, PacketStats).

    `lb` overrides the scenario's `fabric.load_balancing` (also "adaptive"), `seed` its seed for the WRED draws.
    With `keep_network` the Run's `packet_network` is the simulated network (its captured packets, events log;
    None if interrupted): what `aifabric packet FILE --pcap` writes.
    The Run's results are those of `results.summarize` with engine "packet"; the packet statistics
    (queues, ECN, CNPs, DCQCN rates, PFC, drops, retransmissions, FCTs) serialize with
    `stats.to_dict()`.
    """
    from ..catalog import gpu
    from ..results import summarize
    from ..simulate import Run, build_fabric, build_workload
    from .tasks import lower

    fabric, router = build_fabric(scenario)
    workload = workload or build_workload(scenario)
    graph = lower(workload, fabric, router, **scenario.lowering_options())
    cfg = packet_config(scenario, cfg, seed)
    if lb is not None:
        cfg = cfg.with_(lb=replace(cfg.lb, mode=lb))
    try:
        pr = run_packet(graph, fabric, cfg, progress, hash_seed=scenario.fabric.ecmp_hash_seed,
                        per_switch_seed=scenario.fabric.per_switch_hash_seed, queue_pairs=router.queue_pairs())
        timeline, stats, complete, network = pr.timeline, pr.stats, True, pr.network if keep_network else None
    except Interrupted as exc:
        timeline, stats, complete, network = exc.timeline, None, False, None
    from ..simulate import add_folded_bytes

    add_folded_bytes(graph, timeline)
    peak = gpu(scenario.cluster.gpu).peak_flops(scenario.workload.precision)
    results = summarize("packet", workload, graph, fabric, timeline, complete, peak_flops_per_gpu=peak)
    return Run(scenario, fabric, workload, graph, timeline, results, packet_network=network), stats
