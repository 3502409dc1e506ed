"""Before a packet-engine run: how long it will take on this machine, the iteration's simulated time, what a faster
engine gives; during it, how far it is and the time left (the CLI's progress line).

The estimate is the flow engine's quick answer on the same task graph: its iteration time is what the packet run is
expected to simulate (the two agree where no queue builds: the demo's 1.061 s on both), and its timeline says when
each transfer runs, so the packets the run has to move are laid out over simulated time (`RunEstimate.profile_*`).
The wall time is the work counted in the graph, each RDMA transfer's packets times the switch-path hops they cross
(NVLink transfers in chunks, likewise), times the packet engine's measured cost per hop on this kind of machine
(PACKET_HOP_S, CHUNK_HOP_S; bench/bench_estimate.py measures them).

During the run, the fraction done is the profile's work before the simulated time reached (not the simulated time's
share: a compute phase goes by in no wall time, a gradient all-reduce is nearly all of it), and the time left is the
wall time so far scaled by what is left of that fraction: honest about the run's own pace, not the constant's.
Until MIN_WALL_S of wall time and MIN_FRACTION of the work have gone by it says "estimating".
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .engines.taskgraph import TaskGraph
    from .fabric.graph import Fabric
    from .scenario.schema import Scenario
    from .workload import Workload

# The packet engine's wall time per packet hop (an RDMA data packet crossing one link of a switch path: its
# serialization, queueing, the switch's forwarding, its share of ACKs and CNPs) and per NVLink chunk hop, on one idle
# core of the project's machine (2 cores, shared; CPython 3.11). bench/bench_estimate.py, 2026-11-26: ch14 on the
# packet engine, 229,488 RDMA packets x 2 hops + 43,344 NVLink chunks x 2 hops = 545,664 hops in 4.3 s CPU (7.9 us a
# hop; 8.8-10.4 us while the machine's other two cores' worth of work ran beside it); bench/bench_packet.py's
# permutation, 125 k hops a second (8.0 us). Against the demo's run: docs/performance.md, "Packet-engine estimates".
PACKET_HOP_S = 8.0e-6
CHUNK_HOP_S = 8.0e-6
BASE_S = 2.0  # building the fabric and the workload, lowering, the report: a small run's wall time
WARN_S = 180.0  # a run estimated past this is announced before it starts (AIFABRIC_WARN_S overrides)
MIN_WALL_S = 3.0  # the time left is "estimating" until this much wall time ...
MIN_FRACTION = 0.01  # ... and this fraction of the work have gone by


@dataclass(frozen=True)
class PacketWork:
    """What the packet engine will move: RDMA packets over switch paths, NVLink chunks inside servers."""

    tasks: int
    packets: int
    packet_hops: int
    chunks: int
    chunk_hops: int
    network_bytes: float

    @property
    def wall_s(self) -> float:
        return BASE_S + self.packet_hops * PACKET_HOP_S + self.chunk_hops * CHUNK_HOP_S


@dataclass(frozen=True)
class RunEstimate:
    engine: str
    wall_s: float  # the run's estimated wall time on this machine
    iteration_s: float  # the iteration's simulated time, by the flow engine
    flow_wall_s: float  # what the flow engine took for it just now (building, lowering, its event loop)
    work: PacketWork
    profile_t_s: np.ndarray  # simulated times ...
    profile_fraction: np.ndarray  # ... and the fraction of the packet work done by then (the flow engine's timeline)

    def fraction_at(self, t_s: float) -> float:
        """The share of the run's work done once the simulation has reached `t_s`."""
        if len(self.profile_t_s) < 2:
            return min(1.0, t_s / self.iteration_s) if self.iteration_s > 0 else 0.0
        return float(np.interp(t_s, self.profile_t_s, self.profile_fraction))


def packet_work(graph: TaskGraph, fabric: Fabric, mtu_bytes: int, chunk_bytes: int) -> tuple[PacketWork, np.ndarray]:
    """The packets and chunks of every transfer of `graph` and the hops they cross (as engines/packet.py hands them
    to the packet simulator: PCIe hops at either end are a latency, not packets); and each task's work in hops."""
    from .engines.taskgraph import COMPUTE
    from .fabric.graph import TIER_PCIE

    links = fabric.links
    pcie = np.array([link.tier == TIER_PCIE for link in links], dtype=bool)
    switch_dst = np.array([fabric.is_switch(link.dst) for link in links], dtype=bool)
    hops = np.zeros(len(graph))
    packets = packet_hops = chunks = chunk_hops = 0
    network_bytes = 0.0
    for t in range(len(graph)):
        if graph.kind[t] == COMPUTE:
            continue
        size = float(graph.size_bytes[t])
        route = graph.route[t]
        if size <= 0 or not route:
            continue
        lo, hi = 0, len(route)
        while lo < hi and pcie[route[lo]]:
            lo += 1
        while hi > lo and pcie[route[hi - 1]]:
            hi -= 1
        core = route[lo:hi]
        if not core:
            continue
        if any(switch_dst[li] for li in core):
            n = math.ceil(size / mtu_bytes)
            packets += n
            packet_hops += n * len(core)
            network_bytes += size
        else:
            n = math.ceil(size / chunk_bytes)
            chunks += n
            chunk_hops += n * len(core)
        hops[t] = n * len(core)
    return PacketWork(len(graph), packets, packet_hops, chunks, chunk_hops, network_bytes), hops


def _profile(start_s: np.ndarray, end_s: np.ndarray, work: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cumulative share of `work` done over time, each task's spread evenly from its start to its end."""
    keep = (work > 0) & np.isfinite(start_s) & np.isfinite(end_s)
    if not keep.any():
        return np.zeros(0), np.zeros(0)
    a, b, w = start_s[keep], end_s[keep], work[keep]
    span = np.maximum(b - a, 1e-12)
    times = np.concatenate([a, a + span])
    rates = np.concatenate([w / span, -w / span])
    order = np.argsort(times, kind="stable")
    times, rates = times[order], rates[order]
    level = np.cumsum(rates)[:-1]
    done = np.concatenate([[0.0], np.cumsum(level * np.diff(times))])
    done /= max(done[-1], 1e-300)
    return np.concatenate([[0.0], times]), np.concatenate([[0.0], np.clip(done, 0.0, 1.0)])


def estimate_packet_run(scenario: Scenario, workload: Workload | None = None) -> RunEstimate:
    """The packet engine's run of `scenario`, estimated from the flow engine's run of the same task graph (a second
    or two on the demo: the engines/packet.py lowering, the scenario's fault-free fabric)."""
    from .engines import lower, run
    from .engines.packet import packet_config
    from .simulate import build_fabric, build_workload

    w0 = time.perf_counter()
    fabric, router = build_fabric(scenario)
    workload = workload or build_workload(scenario)
    graph = lower(workload, fabric, router, **scenario.lowering_options())
    timeline = run(graph, fabric, "flow")
    flow_wall_s = time.perf_counter() - w0
    cfg = packet_config(scenario)
    work, hops = packet_work(graph, fabric, cfg.nic.mtu_bytes, cfg.nvlink_chunk_bytes)
    t_s, fraction = _profile(timeline.start_s, timeline.end_s, hops)
    return RunEstimate("packet", work.wall_s, float(timeline.makespan_s), flow_wall_s, work, t_s, fraction)


def warn_threshold_s() -> float:
    """WARN_S, or the AIFABRIC_WARN_S environment variable's seconds."""
    text = os.environ.get("AIFABRIC_WARN_S", "")
    try:
        value = float(text) if text else WARN_S
    except ValueError:
        return WARN_S
    return value if math.isfinite(value) and value >= 0 else WARN_S


def duration(s: float) -> str:
    """A wall time as people say it: 40 s, 8 min, 3 h, 12 days."""
    if s < 90:
        return f"{s:.0f} s"
    if s < 2 * 3600:
        return f"{s / 60:.0f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:,.0f} days"


def _count(n: float) -> str:
    return f"{n / 1e6:,.1f} M" if n >= 1e6 else f"{n / 1e3:,.0f} k" if n >= 1e4 else f"{n:,.0f}"


def packet_warning(est: RunEstimate, threshold_s: float | None = None) -> str | None:
    """What to say before a packet run estimated past `threshold_s` (default: warn_threshold_s()); None below it."""
    limit = warn_threshold_s() if threshold_s is None else threshold_s
    if est.wall_s <= limit:
        return None
    w = est.work
    what = f"{_count(w.packets)} RDMA packets ({w.network_bytes / 1e9:,.1f} GB across NICs)"
    if w.chunks:
        what += f" and {_count(w.chunks)} NVLink chunks"
    hops = w.packet_hops + w.chunk_hops
    flow = max(1.0, est.flow_wall_s + BASE_S)
    return (
        f"the packet engine would take about {duration(est.wall_s)} on an idle core: {what}, "
        f"{_count(hops)} packet hops at ~{1 / PACKET_HOP_S / 1e3:,.0f} k a second, for an iteration of "
        f"~{est.iteration_s:.3g} s simulated. Faster: --engine flow: ~{duration(flow)}, the same iteration time "
        "where no queue builds (max-min fair rates per link; no packets, so no queues, ECN marks, CNPs, DCQCN "
        "or PFC pauses in the report); --engine analytic: about as quick, without contention between transfers. "
        "Ctrl-C during the run stops it and writes the results so far"
    )


@dataclass
class ProgressView:
    """One progress report as the CLI shows it."""

    t_s: float  # simulated so far
    iteration_s: float | None  # the iteration's estimate (None: not estimated)
    fraction: float  # of the run's work, 0..1
    left_s: float | None  # wall time left; None while estimating (or past the estimate)
    past_estimate: bool = False
    lower_bound: bool = False  # iteration_s is a lower bound (the flow engine's iteration is at least as long)

    def words(self) -> str:
        if self.iteration_s is None:
            return f"{self.t_s:.3g} s simulated"
        if self.lower_bound and self.t_s > self.iteration_s:
            return f"{self.t_s:.3g} s simulated (past the ~{self.iteration_s:.3g} s of no contention)"
        return f"{self.t_s:.3g} s of ~{self.iteration_s:.3g} s simulated"

    def left(self) -> str:
        if self.past_estimate:
            return "left: unknown (past the estimate)"
        if self.left_s is None:
            return "left: estimating…"
        return f"left ~{duration(self.left_s)}"


class RunProgress:
    """A run's progress from the engine's reports: the fraction of the work done (by the estimate's profile, or
    the simulated time's share of the iteration's estimate, or the tasks' share) and the wall time left at the
    run's own pace so far."""

    def __init__(
        self,
        est: RunEstimate | None = None,
        iteration_s: float | None = None,
        clock=time.perf_counter,
        *,
        lower_bound: bool = False,
    ) -> None:
        self.est = est
        self.iteration_s = est.iteration_s if est is not None else iteration_s
        self.clock = clock
        self.started: float | None = None
        # iteration_s is a lower bound (a flow run's: engines/bound.py); past it, the tasks' share says how far
        self.lower_bound = lower_bound and est is None

    def update(self, done: int, total: int, t_s: float | None = None) -> ProgressView:
        now = self.clock()
        if self.started is None:
            self.started = now
        elapsed = now - self.started
        t = 0.0 if t_s is None else max(0.0, float(t_s))
        past = False
        if self.est is not None and t_s is not None:
            fraction = self.est.fraction_at(t)
        elif self.iteration_s and t_s is not None:
            fraction = t / self.iteration_s
            if self.lower_bound and fraction >= 1.0:  # contention made it longer than the bound
                fraction = done / total if total else 0.0
        else:
            fraction = done / total if total else 0.0
        if done >= total > 0:
            fraction = 1.0
        elif fraction >= 1.0:  # the run has gone past where the estimate ends: it cannot say how far is left
            past, fraction = True, 1.0
        fraction = min(max(fraction, 0.0), 1.0)
        left = None
        if fraction >= 1.0 and not past:
            left = 0.0
        elif not past and elapsed >= MIN_WALL_S and fraction >= MIN_FRACTION:
            left = max(0.0, elapsed * (1.0 - fraction) / fraction)
        return ProgressView(t, self.iteration_s if t_s is not None else None, fraction, left, past, self.lower_bound)
