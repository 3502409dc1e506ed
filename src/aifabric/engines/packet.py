"""The packet engine: the engines' TaskGraph executed on the packet-level simulator (aifabric.packet).

Compute tasks occupy their GPU for their duration, as in the flow engine (a straggler during the
run stretches them: the scenario's faults). A transfer task becomes a
RoCEv2 RDMA Write on its own QP (route leaves the server) or a chunked NVLink transfer (route stays in
the server), started when its dependencies are done. Everything the fabric does on the way (queues, ECN, CNPs,
DCQCN, PFC, drops, retransmissions) is in `PacketRun.stats`. The latency its packets do not simulate (the PCIe hops
at both ends, a fixed latency; what its latency holds beyond its route's own: the collective protocol's per-step
software overhead, NCCL's base latency, the steps a merged ring edge stands for) is added after its last byte
arrives, as the flow engine adds a transfer's whole latency after its bytes have drained: the first packet leaves
when the task starts. The task ends when the last byte has arrived and that latency has passed.

A dependent that waits only for a transfer's bytes to have left (TaskGraph.drain_deps: a ring channel's next step)
starts when the transfer's last packet has left the sender: the end of its serialization on the sender's port (the
NIC's port onto the fabric; the GPU's NVLink port inside a server), the first time it is sent (packet/nic.py
`sent_all`; a packet lost and resent later does not hold it back). That is the flow engine's drain
(engines/executor.py: the moment a transfer's last byte has left, its end less its latency) on packets;
`PacketRun.drained_s` holds it per transfer.

Returns the same `Timeline` as engines/executor.py, so results, reports and traces work unchanged;
`rate_recomputations` counts simulated events.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..fabric.graph import TIER_PCIE, Fabric
from ..packet.config import PacketConfig
from ..packet.network import Network
from ..packet.stats import PacketStats
from .executor import FaultLog, Interrupted, Timeline
from .linkload import LinkLoad
from .progress import reporter
from .taskgraph import COMPUTE, Readiness, TaskGraph

if TYPE_CHECKING:
    from .fabric_events import Rerouter

LINK_LOAD_SEGMENTS = 2000
SLICE_WALL_S = (
    0.25  # with a progress callback: wall seconds of simulation between its reports (and at every task's end)
)


@dataclass
class PacketRun:
    timeline: Timeline
    stats: PacketStats
    network: Network
    # per task: when a transfer's last packet left the sender (NaN: a compute task, a transfer of no bytes, one not
    # all sent yet)
    drained_s: np.ndarray | None = None


@dataclass
class PacketFaults:
    """The scenario's faults as the packet engine takes them (aifabric.faults; packet/faults.py): cable states from
    the start and their changes during the run, routing's convergence, how to reroute a transfer."""

    rerouter: Rerouter
    rng: np.random.Generator  # the loss draws: the run's seeded generator
    static: dict[int, tuple[float, float]] = field(default_factory=dict)  # link -> (rate factor, loss rate)
    link_changes: list[tuple[float, dict[int, tuple[float, float]], str]] = field(default_factory=list)
    routing: list[tuple[float, frozenset[int], str]] = field(default_factory=list)  # converged around these
    pace: list[tuple[float, dict[int, float], str]] = field(default_factory=list)  # stragglers: rank -> times slower


def _deadlock_error(net: Network):
    from ..errors import InputError, Problem
    from ..packet.deadlock import describe

    dl = net.stats.deadlocks[-1]
    ports = {p.name: p for p in net.ports}
    cycle = describe([ports[n] for n in dl["ports"]])
    return InputError(
        Problem(
            "fabric.qos.pfc.watchdog_ms",
            (
                f"PFC deadlock at {dl['t_s']:.6g} s on priority {dl['priority']}: {cycle}; no packet has left those ports "
                f"since {dl['since_s']:.6g} s and, with no PFC watchdog, none ever would: the run stops (set watchdog_ms to "
                "break it; Deep Learning for Network Engineers, Chapter 11)"
            ),
        )
    )


def run_packet(
    graph: TaskGraph,
    fabric: Fabric,
    cfg: PacketConfig | None = None,
    progress: Callable[[int, int], None] | None = None,
    hash_seed: int = 0,
    per_switch_seed: bool = False,
    queue_pairs: dict[tuple[int, int, tuple[int, ...]], tuple[int, int, int]] | None = None,
    faults: PacketFaults | None = None,
    until_s: float | None = None,
    marks: Sequence[tuple[float, Callable[[Network], None]]] = (),
) -> PacketRun:
    """Run `graph` packet by packet. `progress(done, total)` at every task's end, and every SLICE_WALL_S of wall time
    between (with the simulated time reached, `t_s`, when it takes it: engines/progress.py). Ctrl-C raises
    `Interrupted` with the timeline so far. `queue_pairs`
    (`Router.queue_pairs()`): each transfer's QP numbers and UDP source port, as the router hashed them. `faults`:
    cables that fail, slow down or lose packets, and routing's convergence (a QP that runs out of retransmissions
    raises `JobFailed`). A PFC deadlock with no watchdog to break it stops the run: InputError naming the cycle.
    `until_s`: stop there (the hybrid engine's packet windows); tasks not finished by then have no end. `marks`:
    (time, fn) to call fn(network) at those simulated times (a look at the flows in flight)."""
    net = Network(fabric, cfg, hash_seed=hash_seed, per_switch_seed=per_switch_seed)
    net.link_bin_s = 1e-6
    for p in net.ports:
        p.bins = {}
    sim = net.sim
    n = len(graph)
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    readiness = Readiness(graph, drains=True)
    drained = np.full(n, np.nan)
    pcie_bytes = np.zeros(len(fabric.links))
    pcie_spans: list[tuple[float, float, list[int], int]] = []  # (first packet out, last byte in, links, bytes)
    state = {"completed": 0}
    fstate: dict | None = None  # faults: the transfers' flows, routing's state, a failed QP
    log: FaultLog | None = None
    fault_route: Callable | None = None
    report = reporter(progress)

    def path_latency(links) -> float:
        return path_latency_s(fabric, links)

    def complete(t: int) -> None:
        end[t] = sim.now
        state["completed"] += 1
        for d in readiness.finished(t):
            begin(d)
        if report is not None:
            report(state["completed"], n, sim.now)

    def left(t: int) -> None:
        """Transfer t's bytes have all left the sender: the tasks waiting only for that start."""
        drained[t] = sim.now
        for d in readiness.drained(t):
            begin(d)

    def begin(t: int) -> None:
        now = sim.now
        start[t] = now
        if graph.kind[t] == COMPUTE:
            if fstate is not None and fstate["paced"]:  # stragglers during the run: at the rank's pace now
                sim.at(fstate["compute_began"](t, now), fstate["compute_due"], t)
                return
            sim.at(now + graph.duration_s[t], complete, t)
            return
        size = graph.size_bytes[t]
        route = graph.route[t]
        if size <= 0 or not route:
            if size > 0:  # no link to cross: its bytes have left at once (the flow engine's drain of no link)
                left(t)
            sim.at(now + graph.latency_s[t], complete, t)
            return
        pcie = [li for li in route if fabric.links[li].tier == TIER_PCIE]
        # what the packets do not simulate (the PCIe hops at both ends, the software latency) comes after the last
        # byte arrives, as the flow engine adds a transfer's latency after its bytes have drained: the first packet
        # leaves now, and the last one's departure means the same as the flow engine's drain
        after = after_arrival_s(graph, fabric, t)
        moved = route if fault_route is None else fault_route(t, route, size)  # routing converged around a fault
        if moved is not route and graph.step[t] == -1 and graph.collective[t] >= 0 and "/ring [" in graph.name[t]:
            # a merged ring edge (engines/lower_collective.py) holds its other steps' route latency in its software
            # latency: on the route routing moved it to, theirs (its packets take that route's own)
            steps = graph.collectives[graph.collective[t]].n_steps
            after += max(0, steps - 1) * (path_latency(moved) - path_latency(route))
        for li in pcie:
            pcie_bytes[li] += size

        qp = queue_pairs.get((graph.rank[t], graph.dst[t], tuple(route))) if queue_pairs else None
        qp_kw: dict = {"qpn": qp[0], "sport": qp[2]} if qp else {}
        qp_kw["on_sent"] = lambda _, t=t: left(t)

        def done(flow, t=t, after=after, pcie=pcie, size=size, t0=now) -> None:
            if pcie and sim.now > t0:
                pcie_spans.append((t0, sim.now, pcie, size))
            sim.at(sim.now + after, complete, t)

        if fstate is not None and fault_route is not None:
            route = moved
            fstate["tasks"][net.add_transfer(tuple(route), size, on_done=done, name=graph.name[t], **qp_kw)] = t
            return
        net.add_transfer(tuple(route), size, on_done=done, name=graph.name[t], **qp_kw)

    if faults is not None:
        fstate, log, fault_route = _faults_setup(net, graph, faults, lambda: state["completed"] >= n, complete)
    for t in readiness.initial():
        sim.at(0.0, lambda t: begin(t), t)
    for t_s, fn in marks:
        sim.at(t_s, lambda _, fn=fn: fn(net))
    try:
        if report is None:
            stats = net.run(until_s)
        else:
            stats = _run_in_slices(net, lambda: report(state["completed"], n, sim.now), until_s=until_s)
    except KeyboardInterrupt:
        stats = net.finish()
        raise Interrupted(_timeline(net, start, end, pcie_bytes, pcie_spans)) from None
    if log is not None:
        assert fstate is not None
        log.stall_intervals = [(a, b, fstate["tasks"].get(fl, -1)) for a, b, fl in net.stalls]
        log.stall_intervals += [
            (fl.stalled_at, net.sim.now, t)
            for fl, t in fstate["tasks"].items()
            if getattr(fl, "stalled_at", None) is not None
        ]
        if fstate["failed"] is not None:
            from .fabric_events import JobFailed

            t_fail, fl = fstate["failed"]
            t = fstate["tasks"].get(fl, -1)
            tl = _timeline(net, start, end, pcie_bytes, pcie_spans)
            tl.fault_log = log
            stalled = fl.stalled_at if fl.stalled_at is not None else t_fail
            raise JobFailed(t_fail, t, int(graph.rank[t]), int(graph.dst[t]), stalled, tl)
    if net.deadlocked:
        raise _deadlock_error(net)
    unfinished = int(np.isnan(end).sum())
    if unfinished and until_s is None:
        raise RuntimeError(f"{unfinished} tasks never finished on the packet engine (cycle or lost flow)")
    timeline = _timeline(net, start, end, pcie_bytes, pcie_spans)
    timeline.fault_log = log
    return PacketRun(timeline, stats, net, drained)


def path_latency_s(fabric: Fabric, links) -> float:
    """A route's cables and switches (fabric.routing's Route.latency_s)."""
    return sum(fabric.links[li].latency_s for li in links) + fabric.switch_latency_s * sum(
        1 for li in links if fabric.is_switch(fabric.links[li].dst)
    )


def software_latency_s(graph: TaskGraph, fabric: Fabric, t: int) -> float:
    """What transfer t's latency holds beyond its route's own: protocol overheads the packets do not simulate."""
    return max(0.0, graph.latency_s[t] - path_latency_s(fabric, graph.route[t]))


def after_arrival_s(graph: TaskGraph, fabric: Fabric, t: int) -> float:
    """What run_packet adds to transfer t after its last byte reached the destination (on its own route): the
    latency its packets do not simulate, the PCIe hops at both ends (a fixed latency) and the software latency."""
    route = graph.route[t]
    ends = route[:1] if len(route) == 1 else (route[0], route[-1])
    pcie = sum(fabric.links[li].latency_s for li in ends if fabric.links[li].tier == TIER_PCIE)
    return software_latency_s(graph, fabric, t) + pcie


def _run_in_slices(
    net: Network, tick: Callable[[], None], wall_s: float = SLICE_WALL_S, until_s: float | None = None
) -> PacketStats:
    """`net.run()` in slices of simulated time sized to take about `wall_s` of wall time each, `tick()` after each:
    the same heap popped in the same order (a slice ends before the first event past its end), so the same run,
    and a progress report even while one long transfer is all there is (no task ends for minutes)."""
    sim = net.sim
    until = net.cfg.until_s if until_s is None else until_s
    last = math.inf if until is None else until
    step_s = 1e-6  # simulated; grows (at most x4 a slice) until a slice takes about wall_s
    while sim.heap and sim.heap[0][0] <= last:
        w0 = time.perf_counter()
        sim.run(min(max(sim.now, sim.heap[0][0]) + step_s, last))
        took = time.perf_counter() - w0
        tick()
        step_s *= min(4.0, max(0.25, wall_s / max(took, 1e-4)))
    return net.finish()


def _faults_setup(
    net: Network,
    graph: TaskGraph,
    faults: PacketFaults,
    finished: Callable[[], bool],
    complete: Callable[[int], None],
):
    """Schedule the faults' events on the packet network; returns the shared state, the fault log and the route a
    transfer starting now takes (its own, or the converged one while routing knows its route is broken). `complete`
    ends a task (a compute task at a straggler's pace ends when that pace says)."""
    from ..packet.faults import LinkFaults
    from ..packet.nic import QpFlow

    sim = net.sim
    lf = LinkFaults(net, faults.rng)
    log = FaultLog()
    state: dict = {
        "tasks": {},
        "down": frozenset(),
        "failed": None,
        "links": lf,
        "slow": {},
        "paced": bool(faults.pace),
    }
    computing: dict[int, tuple[float, float]] = {}  # compute task running at a straggler's pace -> (its end, pace)
    for li, (factor, loss) in faults.static.items():
        lf.set(li, factor, loss)

    def active():
        return [
            (fl, t)
            for fl, t in state["tasks"].items()
            if isinstance(fl, QpFlow) and fl.acked_t is None and fl.error is None
        ]

    def links_event(arg) -> None:
        changes, label = arg
        if finished():  # the iteration is over: what happens to the fabric after it is not part of it
            return
        for li, (factor, loss) in changes.items():
            lf.set(li, factor, loss)
        went = {li for li, (factor, _) in changes.items() if factor <= 0}
        stopped = 0
        for fl, _ in active():
            if went & set(fl.path.links) and fl.stalled_at is None:
                fl.stalled_at = sim.now
                stopped += 1
        log.transfers_stopped += stopped
        log.events.append({"t_s": sim.now, "what": label, "transfers_stopped": stopped})
        net.log(
            sim.now,
            f"{label}: {stopped} QP(s) lose their packets on it until routing moves them or the cable is back",
            "fault",
        )

    def routing_event(arg) -> None:
        down, label = arg
        if finished():
            return
        state["down"] = down
        net.converge(down)
        moved = 0
        for fl, t in active():
            want = want_route(t)
            if want is not None and net.core(want) != list(fl.path.links) and net.reroute(fl, want):
                moved += 1
                log.moves.append((sim.now, t))
                log.bytes_rerouted += max(0, fl.size - fl.snd_una * fl.mtu)
        log.transfers_rerouted += moved
        log.events.append({"t_s": sim.now, "what": label, "transfers_rerouted": moved})
        net.log(
            sim.now,
            f"{label}: {moved} QP(s) in flight take the converged route (resilient ECMP); their next "
            "packets, ACKs and CNPs follow it",
            "fault",
        )

    def want_route(t: int):
        original = graph.route[t]
        down = state["down"]
        if not down or not down.intersection(original):
            return original
        r = faults.rerouter.route(t, original, down)
        return None if r is None else r[0]

    def route_now(t: int, route, size: float):
        want = want_route(t)
        if want is None or tuple(want) == tuple(route):
            return route
        log.moves.append((sim.now, t))
        log.transfers_rerouted += 1
        log.bytes_rerouted += size
        return want

    def failed(flow, status) -> None:
        if state["failed"] is None:
            state["failed"] = (sim.now, flow)
            net.log(sim.now, f"{flow.name}: the QP failed ({status.value}); NCCL reports it and the job ends", "fault")
            sim.heap.clear()

    # stragglers during the run, as on the flow engine (engines/executor.py): a compute task's compute part (not the
    # collectives folded into it) goes at the pace of its slowest rank; a change of pace moves the running tasks' ends
    def pace_of(t: int) -> float:
        return max((state["slow"].get(r, 1.0) for r in graph.ranks_of(t)), default=1.0)

    def length(t: int, pace: float) -> float:
        comm = graph.comm_s.get(t, 0.0)
        return comm + (graph.duration_s[t] - comm) * pace

    def compute_began(t: int, now: float) -> float:
        """When compute task `t`, starting now, ends at its ranks' pace."""
        pace = pace_of(t)
        computing[t] = (now + length(t, pace), pace)
        return computing[t][0]

    def compute_due(t: int) -> None:
        due = computing.get(t)
        if due is not None and due[0] != sim.now:  # its pace changed since: a later end replaced this one
            return
        computing.pop(t, None)
        complete(t)

    def pace_event(arg) -> None:
        changes, label = arg
        if finished():
            return
        state["slow"].update(changes)
        repaced = 0
        for t, (t_end, pace) in list(computing.items()):
            if not changes.keys() & set(graph.ranks_of(t)):
                continue
            new = pace_of(t)
            if new == pace:
                continue
            old_len, new_len = length(t, pace), length(t, new)
            t_new = sim.now + (t_end - sim.now) * (new_len / old_len if old_len > 0 else 1.0)
            computing[t] = (t_new, new)
            sim.at(t_new, compute_due, t)
            repaced += 1
        log.events.append({"t_s": sim.now, "what": label, "compute_tasks_repaced": repaced})
        net.log(sim.now, f"{label}: {repaced} compute task(s) running there change pace", "fault")

    state["compute_began"], state["compute_due"] = compute_began, compute_due
    net.on_qp_failed = failed
    for t_s, changes, label in faults.link_changes:
        sim.at(t_s, links_event, (changes, label))
    for t_s, down, label in faults.routing:
        sim.at(t_s, routing_event, (down, label))
    for t_s, slow, label in faults.pace:
        sim.at(t_s, pace_event, (slow, label))
    return state, log, route_now


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


def _timeline(
    net: Network,
    start: np.ndarray,
    end: np.ndarray,
    pcie_bytes: np.ndarray,
    pcie_spans: Sequence[tuple[float, float, list[int], int]] = (),
) -> Timeline:
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
    load.add_spread(
        [(a, b, np.asarray(ls, dtype=np.int64), np.full(len(ls), float(size))) for a, b, ls, size in pcie_spans]
    )
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


def packet_faults(scenario, graph, fabric, router, fx) -> PacketFaults:
    """The resolved faults (aifabric.faults.FaultEffects) as the packet engine's events."""
    from .fabric_events import Rerouter

    rng = np.random.default_rng([int(scenario.seed), 19, 4791])  # the loss draws: their own stream of the seed
    labels: dict[float, str] = {}
    routing = []
    pace = []
    for t_s, _, down, label, slow in fx.events():
        labels[t_s] = label
        if down is not None:
            routing.append((t_s, down, label))
        if slow:
            pace.append((t_s, slow, label))
    changes = [(t_s, ch, labels.get(t_s, "")) for t_s, ch in fx.link_changes()]
    return PacketFaults(Rerouter(graph, fabric, router, spread=False), rng, dict(fx.loss), changes, routing, pace)
