"""The hybrid engine: the iteration on the flow engine, its busiest network windows packet by packet.

1. The whole task graph runs on the flow engine (engines/executor.py).
2. Each packet window is a span of that run: a user's (`0.80s:0.95s`), a parallel dimension's network traffic
   (`dp`, `pp`, `ep`, `cp`, `tp`: from its first transfer that crosses a NIC to its last), or `auto`, the
   period where traffic crosses NICs at its peak (the contiguous stretch around the busiest moment where the
   rate stays above half of it).
3. The window's tasks run on the packet engine (engines/packet.py): every transfer that crosses a NIC and is
   in flight during the window, packet by packet over the fabric, and between them whatever the flow run
   started in the same span (compute, transfers inside a server: NVLink and PCIe stay at flow level), each
   as a fixed delay of its flow-run duration. A task whose dependencies lie before the span is released at
   the time the flow run released it.
4. The outcome is folded back: the flow engine runs the iteration again with each packet-simulated transfer
   taking exactly the time it took packet by packet (a fixed delay in place of its fluid flow), so queues,
   ECN, DCQCN, PFC pauses and retransmissions in the window move the iteration time as they would.

A dependency on a transfer's bytes having left (TaskGraph.drain_deps: a ring channel's next step) is honoured
throughout, as every engine honours it: by the flow runs; in a window, on a packet transfer when its last packet has
left the sender (engines/packet.py), on one kept at flow level after its flow-run drain, from before the span at the
flow run's drain; in the folded run, after the packet-simulated transfer's time until its last packet left.

What it keeps and loses against a full packet run: outside the windows, rates are max-min fair (no queues,
no congestion control); inside, the traffic is exactly the packet engine's, but a flow that started before
the window brings its whole transfer in (the window is widened to its start) and transfers inside servers
keep their flow-level times. Windows are simulated one after the other on the first flow run's times.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..fabric.graph import TIER_HOST, TIER_SPINE, TIER_SUPERSPINE, Fabric
from .executor import Interrupted, Timeline, run
from .taskgraph import COMPUTE, TaskGraph

if TYPE_CHECKING:
    from ..packet.config import PacketConfig
    from ..packet.stats import PacketStats

NETWORK_TIERS = frozenset({TIER_HOST, TIER_SPINE, TIER_SUPERSPINE})
DIMENSIONS = ("dp", "pp", "tp", "cp", "ep", "zero")
_UNITS_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}
_TIME = r"((?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)(s|ms|us|µs)?"
AUTO_BINS = 400  # the auto window's time grid over the NIC-crossing traffic
PACKET_MAX_S = 1e-3  # of each window, at most this much simulated packet by packet (DCQCN settles well within)
LOOKS = 16  # looks at the flows in flight over the cap: the goodput an unfinished transfer continues at
AUTO_LEVEL = 0.5  # the auto window: around the peak, while the NIC-crossing rate stays above this share of it


@dataclass(frozen=True)
class WindowSpec:
    """A packet window as named: `kind` "time" (t0_s, t1_s), "dim" (a parallel dimension) or "auto"."""

    text: str
    kind: str
    dim: str = ""
    t0_s: float = 0.0
    t1_s: float = math.inf


def parse_window(text: str) -> WindowSpec:
    """`0.80s:0.95s`, `800ms:950ms`, `0.8:0.95` (seconds), `:0.5` / `0.5:` (open ends), `dp`, `pp`, `tp`, `cp`,
    `ep`, `zero`, or `auto`. ValueError saying what is accepted otherwise."""
    s = text.strip().lower()
    if s == "auto":
        return WindowSpec(text, "auto")
    if s == "moe":
        s = "ep"
    if s in DIMENSIONS:
        return WindowSpec(text, "dim", dim=s)
    m = re.fullmatch(rf"(?:{_TIME})?:(?:{_TIME})?", s)
    if m is None or s == ":":
        raise ValueError(
            f"packet window {text!r}: give a span START:END in s, ms or us (e.g. 0.80s:0.95s, "
            f"800ms:950ms; an end may be left open), a parallel dimension ({', '.join(DIMENSIONS)}, "
            "moe) or auto"
        )
    a = float(m.group(1)) * _UNITS_S[m.group(2) or "s"] if m.group(1) else 0.0
    b = float(m.group(3)) * _UNITS_S[m.group(4) or "s"] if m.group(3) else math.inf
    if b <= a:
        raise ValueError(f"packet window {text!r}: the end must come after the start")
    return WindowSpec(text, "time", t0_s=a, t1_s=b)


def parse_duration(text: str) -> float:
    """`1ms`, `500us`, `0.002s`, `0.002` (seconds) -> seconds, positive; ValueError otherwise."""
    m = re.fullmatch(_TIME, text.strip().lower())
    if m is None or float(m.group(1)) <= 0:
        raise ValueError(f"{text!r}: give a positive time in s, ms or us (e.g. 1ms, 500us)")
    return float(m.group(1)) * _UNITS_S[m.group(2) or "s"]


@dataclass
class PacketWindow:
    """One window as it ran: where it lies on the flow run, what ran packet by packet, and what changed."""

    spec: WindowSpec
    t0_s: float  # the span of the flow run simulated (widened to the start of every transfer in flight in it)
    t1_s: float
    transfers: int  # transfers simulated packet by packet
    tasks: int  # every task of the span (the others as fixed delays)
    bytes: float
    flow_end_s: float  # when the window's last packet-simulated transfer ended on the flow run
    packet_end_s: float  # ... packet by packet (same clock: the flow run's)
    stats: PacketStats | None = None
    packet_s: float = 0.0  # simulated time run packet by packet (the window's cap, or less)
    extrapolated: int = 0  # transfers in flight at the cap: finished at the goodput their packets reached
    note: str = ""
    task_ids: tuple[int, ...] = ()  # the transfers packet by packet (task indices of the iteration's graph)

    def to_dict(self) -> dict:
        tot = self.stats.to_dict(series=False)["totals"] if self.stats is not None else {}
        return {
            "window": self.spec.text,
            "t0_s": self.t0_s,
            "t1_s": self.t1_s,
            "transfers": self.transfers,
            "tasks": self.tasks,
            "bytes": self.bytes,
            "flow_end_s": self.flow_end_s,
            "packet_end_s": self.packet_end_s,
            "packet_s": self.packet_s,
            "extrapolated": self.extrapolated,
            "packet_events": self.stats.events if self.stats else 0,
            **tot,
            **({"note": self.note} if self.note else {}),
        }


@dataclass
class HybridRun:
    timeline: Timeline  # the iteration with the windows folded back in
    flow_timeline: Timeline  # the flow run the windows were cut from
    windows: list[PacketWindow] = field(default_factory=list)
    stats: PacketStats | None = None  # the windows' packet statistics together, on the iteration's clock


def network_transfers(graph: TaskGraph, fabric: Fabric) -> np.ndarray:
    """Mask of the transfers whose route crosses a NIC (a host, spine or super-spine link)."""
    tier = [link.tier in NETWORK_TIERS for link in fabric.links]
    return np.fromiter(
        (
            graph.kind[t] != COMPUTE and graph.size_bytes[t] > 0 and any(tier[li] for li in graph.route[t])
            for t in range(len(graph))
        ),
        dtype=bool,
        count=len(graph),
    )


def task_dims(graph: TaskGraph) -> list[str]:
    """Each task's parallel dimension: its own, else its collective's."""
    return [d or (graph.collectives[c].dim if c >= 0 else "") for d, c in zip(graph.dim, graph.collective)]


def resolve_window(spec: WindowSpec, graph: TaskGraph, tl: Timeline, net: np.ndarray) -> tuple[float, float, str]:
    """(t0_s, t1_s, note) of `spec` on the flow run `tl`; an empty span (t1 <= t0) when there is nothing there."""
    start, end = tl.start_s, tl.end_s
    if spec.kind == "time":
        return spec.t0_s, min(spec.t1_s, tl.makespan_s), ""
    if spec.kind == "dim":
        dims = task_dims(graph)
        mask = net & np.fromiter((d == spec.dim for d in dims), dtype=bool, count=len(dims))
        if not mask.any():
            return 0.0, 0.0, f"no {spec.dim} traffic crosses a NIC"
        return float(start[mask].min()), float(end[mask].max()), ""
    idx = np.flatnonzero(net)
    if not len(idx) or tl.makespan_s <= 0:
        return 0.0, 0.0, "no traffic crosses a NIC"
    # the grid spans the NIC-crossing traffic, not the iteration: what comes before it (the first iteration's
    # connection setup, compute) does not coarsen the grid the peak is found on
    lo_s, hi_s = float(start[idx].min()), float(end[idx].max())
    if hi_s <= lo_s:
        return lo_s, hi_s, "no traffic crosses a NIC"
    edges = np.linspace(lo_s, hi_s, AUTO_BINS + 1)
    rate = np.zeros(AUTO_BINS)
    size = np.asarray(graph.size_bytes, dtype=float)
    for t in idx:  # each transfer's bytes spread over its flow-run span, per bin
        a, b = start[t], end[t]
        lo, hi = np.searchsorted(edges, a, "right") - 1, np.searchsorted(edges, b, "left")
        lo, hi = max(lo, 0), min(max(hi, lo + 1), AUTO_BINS)
        overlap = np.minimum(edges[lo + 1 : hi + 1], b) - np.maximum(edges[lo:hi], a)
        rate[lo:hi] += size[t] * np.maximum(overlap, 0.0) / max(b - a, 1e-15)
    peak = int(np.argmax(rate))
    lo = hi = peak
    while lo > 0 and rate[lo - 1] >= AUTO_LEVEL * rate[peak]:
        lo -= 1
    while hi < AUTO_BINS - 1 and rate[hi + 1] >= AUTO_LEVEL * rate[peak]:
        hi += 1
    return float(edges[lo]), float(edges[hi + 1]), ""


def _window_tasks(graph: TaskGraph, tl: Timeline, net: np.ndarray, t0: float, t1: float):
    """(packet transfers, every task of the span, the span's start): the network transfers in flight in
    [t0, t1) and every task the flow run started from the first of them to the last one's start."""
    start, end = tl.start_s, tl.end_s
    wire = np.flatnonzero(net & (start < t1) & (end > t0))
    if not len(wire):
        return wire, wire, t0
    a, b = float(start[wire].min()), float(start[wire].max())
    span = np.flatnonzero((start >= a) & (start <= b))
    return wire, span, a


def _early(graph: TaskGraph) -> set[tuple[int, int]]:
    """(task, dependency) pairs released when the dependency's bytes have left (TaskGraph.drain_pairs)."""
    return set(graph.drain_pairs())


def _released_s(graph: TaskGraph, tl: Timeline, early: set[tuple[int, int]], t: int, d: int) -> float:
    """When the flow run `tl` released task t from its dependency d: d's end, or, where t waits only for d's bytes
    to have left (TaskGraph.drain_deps), d's end less its latency (the flow engine's drain)."""
    end = float(tl.end_s[d])
    return end - graph.latency_s[d] if (t, d) in early else end


def _subgraph(graph: TaskGraph, tl: Timeline, wire: np.ndarray, span: np.ndarray, a: float) -> tuple[TaskGraph, int]:
    """The span as a task graph of its own, clock starting at `a`: first a delay from 0 for each time the flow
    run released a span task from dependencies outside the span, then the span's tasks in order (span task i
    is task `offset + i`): the packet transfers as they are, the others as fixed delays of their flow-run
    durations. A dependency on a transfer's bytes having left (TaskGraph.drain_deps) stays one: on a packet
    transfer as it is (the packet engine releases it when the last packet has left); on one the window keeps at
    flow level, through a fixed delay of its drain on the flow run (start to end less its latency) added after
    the span's tasks. Returns (sub, offset)."""
    where = {int(t): i for i, t in enumerate(span)}
    packet = set(int(t) for t in wire)
    early = _early(graph)
    released: list[float | None] = []
    for t in span:
        outside = [_released_s(graph, tl, early, int(t), d) for d in graph.deps[int(t)] if d not in where]
        released.append(max(0.0, float(max(outside)) - a) if outside else None)
    times = sorted({r for r in released if r is not None})
    sub = TaskGraph()
    at = {r: sub.add(COMPUTE, -1, -1, f"released at {r + a:.9g} s", [], duration_s=r) for r in times}
    offset = len(times)
    drains: dict[int, int] = {}  # a flow-level transfer of the span -> the delay until its bytes have left
    drained_on: list[tuple[int, int]] = []  # (sub task, its dependency's drain delay)
    for i, t in enumerate(int(t) for t in span):
        deps = []
        waits = []  # its dependencies on a packet transfer's bytes having left
        for d in graph.deps[t]:
            if d not in where:
                continue
            if (t, d) not in early:
                deps.append(offset + where[d])
            elif d in packet:
                deps.append(offset + where[d])
                waits.append(offset + where[d])
            else:
                drains.setdefault(d, -1)
                drained_on.append((offset + i, d))
        if waits:
            sub.drain_deps[offset + i] = tuple(waits)
        r_s = released[i]
        if r_s is not None:
            deps.append(at[r_s])
        if t in packet:
            sub.add_transfer(
                graph.rank[t],
                graph.dst[t],
                f"{graph.name[t]} (task {t})",
                deps,
                graph.size_bytes[t],
                graph.route[t],
                graph.latency_s[t],
                graph.dim[t],
            )
        else:
            sub.add(COMPUTE, graph.rank[t], -1, graph.name[t], deps, duration_s=float(tl.end_s[t] - tl.start_s[t]))
    for d in drains:  # after the span's tasks: the flow run's drain of d as a delay from d's start
        left_s = max(0.0, float(tl.end_s[d] - graph.latency_s[d] - tl.start_s[d]))
        drains[d] = sub.add(COMPUTE, graph.rank[d], -1, f"{graph.name[d]}: bytes left", [], duration_s=left_s)
    for i, d in drained_on:
        sub.deps[i].append(drains[d])
    for d, k in drains.items():  # started as d is: its dependencies, and those it waits for to have left
        own = offset + where[d]
        sub.deps[k] = list(sub.deps[own])
        if own in sub.drain_deps:
            sub.drain_deps[k] = sub.drain_deps[own]
    return sub, offset


def run_hybrid(
    graph: TaskGraph,
    fabric: Fabric,
    windows: list[WindowSpec],
    cfg: PacketConfig | None = None,
    *,
    packet_routes: list | None = None,
    hash_seed: int = 0,
    per_switch_seed: bool = False,
    queue_pairs: dict | None = None,
    flow_engine: str = "flow",
    packet_max_s: float | None = PACKET_MAX_S,
    progress: Callable[[int, int], None] | None = None,
    phase: Callable[[str], None] | None = None,
) -> HybridRun:
    """The iteration of `graph` on the flow engine with `windows` packet by packet (module docstring).
    `packet_max_s`: at most this much of each window simulated packet by packet (None: all of it); a transfer
    still in flight then finishes its remaining bytes at the goodput its packets reached.
    `packet_routes`: each task's route for the packet engine when the flow engine's differ (sprayed transfers
    spread over every path on the flow engine; the packet engine balances packet by packet). `phase("packet
    windows")` is told when the flow run is done and the windows begin. A Ctrl-C (Interrupted) after the flow run
    raises Interrupted with the flow run's timeline."""
    flow_tl = run(graph, fabric, flow_engine, progress)
    if phase is not None:
        phase("packet windows")
    try:
        return _windows(
            graph,
            fabric,
            flow_tl,
            windows,
            cfg,
            packet_routes,
            hash_seed,
            per_switch_seed,
            queue_pairs,
            flow_engine,
            packet_max_s,
            progress,
        )
    except Interrupted:  # a Ctrl-C in a window or in the folded run: the flow run is the iteration there is
        raise Interrupted(flow_tl) from None


def _windows(
    graph: TaskGraph,
    fabric: Fabric,
    flow_tl: Timeline,
    windows: list[WindowSpec],
    cfg,
    packet_routes,
    hash_seed: int,
    per_switch_seed: bool,
    queue_pairs,
    flow_engine: str,
    packet_max_s: float | None,
    progress: Callable | None = None,
) -> HybridRun:
    """`run_hybrid` after its flow run: each window packet by packet (reported to `progress` with the window, when
    it takes one: engines/progress.py), then the folded run."""
    from .packet import run_packet
    from .progress import PacketWindowProgress, window_reporter

    for_window = window_reporter(progress)

    net = network_transfers(graph, fabric)
    pgraph = graph if packet_routes is None else replace(graph, route=packet_routes)
    fixed: dict[int, float] = {}  # packet-simulated transfer -> its duration packet by packet
    left: dict[int, float] = {}  # ... -> from its start until its last packet had left the sender
    out: list[PacketWindow] = []
    stats: list[tuple[float, PacketStats]] = []
    for index, spec in enumerate(windows, start=1):
        t0, t1, note = resolve_window(spec, graph, flow_tl, net)
        wire, span, a = _window_tasks(graph, flow_tl, net, t0, t1) if t1 > t0 else (np.zeros(0, int),) * 2 + (t0,)
        wire = np.array([t for t in wire if int(t) not in fixed], dtype=np.int64)
        if not len(wire):
            out.append(
                PacketWindow(
                    spec,
                    t0,
                    max(t0, t1),
                    0,
                    0,
                    0.0,
                    t0,
                    t0,
                    None,
                    note=note or "no transfer crosses a NIC in this span",
                )
            )
            continue
        sub, offset = _subgraph(pgraph, flow_tl, wire, span, a)
        seen: list[tuple[float, dict[str, int]]] = []  # (when, flow -> bytes acknowledged) through the cap
        marks = (
            []
            if packet_max_s is None
            else [
                (
                    packet_max_s * k / LOOKS,
                    lambda net, seen=seen: seen.append((net.sim.now, {f.name: _acked(f) for f in net.flows})),
                )
                for k in range(1, LOOKS)
            ]
        )
        window_progress = None
        if for_window is not None:
            span_s = max(t1, float(flow_tl.end_s[wire].max())) - a  # on the flow engine
            horizon_s = span_s if packet_max_s is None else min(packet_max_s, span_s)
            window_progress = for_window(PacketWindowProgress(index, len(windows), spec.text, a, horizon_s))
        pr = run_packet(
            sub,
            fabric,
            cfg,
            progress=window_progress,
            hash_seed=hash_seed,
            per_switch_seed=per_switch_seed,
            queue_pairs=queue_pairs,
            until_s=packet_max_s,
            marks=marks,
        )
        local = {int(t): offset + i for i, t in enumerate(span)}
        done = _packet_durations(pr, sub, [local[int(t)] for t in wire], packet_max_s, seen, fabric)
        ends = []
        extrapolated = 0
        for t in wire:
            d = done.get(local[int(t)])
            if d is None:  # not started packet by packet before the window's cap: the flow engine runs it
                continue
            fixed[int(t)], exact = d
            left[int(t)] = _left_s(pr, graph.latency_s[int(t)], local[int(t)], d, packet_max_s)
            extrapolated += not exact
            ends.append(a + float(pr.timeline.start_s[local[int(t)]]) + d[0])
        moved = [int(t) for t in wire if int(t) in fixed]
        simulated_s = float(pr.stats.end_s) if packet_max_s is None else min(float(pr.stats.end_s), packet_max_s)
        out.append(
            PacketWindow(
                spec,
                a,
                max(t1, float(flow_tl.end_s[wire].max())),
                len(moved),
                len(span),
                float(sum(graph.size_bytes[t] for t in moved)),
                float(flow_tl.end_s[moved].max()) if moved else a,
                max(ends, default=a),
                pr.stats,
                packet_s=simulated_s,
                extrapolated=extrapolated,
                note=note,
                task_ids=tuple(moved),
            )
        )
        stats.append((a, pr.stats))
    if not fixed:
        return HybridRun(flow_tl, flow_tl, out, None)
    folded = run(_folded(graph, fixed, left), fabric, flow_engine)
    n = len(graph)
    folded.start_s, folded.end_s = folded.start_s[:n], folded.end_s[:n]  # without the tasks _folded added
    _add_packet_bytes(folded, graph, fabric, fixed)
    return HybridRun(folded, flow_tl, out, merge_stats(stats))


def _left_s(pr, latency_s: float, i: int, took: tuple[float, bool], until_s: float | None) -> float:
    """How long after its start sub-graph transfer i's last packet left the sender: as the packet run saw it; for a
    transfer extrapolated past the cap whose last packet had not left by then, its estimated end less its latency
    (the flow engine's drain), not before the cap. At most its duration."""
    took_s, _ = took
    start = float(pr.timeline.start_s[i])
    drained = float(pr.drained_s[i])
    if not math.isnan(drained):
        return min(drained - start, took_s)
    return min(took_s, max(took_s - latency_s, (until_s or 0.0) - start, 0.0))


def _folded(graph: TaskGraph, fixed: dict[int, float], left: dict[int, float]) -> TaskGraph:
    """`graph` with each packet-simulated transfer a fixed delay of its packet-level duration (`fixed`). A task that
    waited for such a transfer's bytes to have left (TaskGraph.drain_deps) waits instead for a delay added after
    the graph's tasks, started as the transfer is, of its time until its last packet left (`left`)."""
    kind = list(graph.kind)
    duration = list(graph.duration_s)
    for t, took_s in fixed.items():
        kind[t], duration[t] = COMPUTE, took_s
    waiting = [(t, d) for t, d in graph.drain_pairs() if d in fixed]
    if not waiting:
        return replace(graph, kind=kind, duration_s=duration)
    g = replace(
        graph,
        kind=kind,
        duration_s=duration,
        rank=list(graph.rank),
        dst=list(graph.dst),
        name=list(graph.name),
        size_bytes=list(graph.size_bytes),
        route=list(graph.route),
        latency_s=list(graph.latency_s),
        deps=list(graph.deps),
        step=list(graph.step),
        collective=list(graph.collective),
        dim=list(graph.dim),
        drain_deps=dict(graph.drain_deps),
    )
    stand = {
        d: g.add(COMPUTE, graph.rank[d], -1, f"{graph.name[d]}: bytes left", [], duration_s=left[d])
        for d in sorted({d for _, d in waiting})
    }
    for t, d in waiting:
        g.deps[t] = [stand[d] if x == d else x for x in g.deps[t]]
        rest = tuple(x for x in g.drain_deps[t] if x != d)
        if rest:
            g.drain_deps[t] = rest
        else:
            del g.drain_deps[t]
    for d, k in stand.items():  # started as d is: its dependencies, and those it waits for to have left
        g.deps[k] = list(g.deps[d])
        if d in g.drain_deps:
            g.drain_deps[k] = g.drain_deps[d]
    return g


def _acked(f) -> int:
    """Bytes of a flow acknowledged so far (RDMA: whole packets up to the oldest unacknowledged PSN)."""
    return min(getattr(f, "snd_una", 0) * getattr(f, "mtu", 0), int(f.size))


def _packet_durations(
    pr,
    sub: TaskGraph,
    tasks: list[int],
    until_s: float | None,
    seen: list[tuple[float, dict[str, int]]],
    fabric: Fabric,
) -> dict[int, tuple[float, bool]]:
    """Sub-graph transfer -> (its duration, exact): from start to end where it finished packet by packet; where it
    was still in flight at `until_s`, the time so far plus its remaining bytes at the goodput its packets reached
    over the second half of its time so far (from the last look at the flows before that half began), plus what the
    packet engine adds after the last byte arrives (the software latency, the PCIe hop), not exact.
    Transfers that had not started, or had nothing acknowledged in that time, are left out."""
    from .packet import after_arrival_s

    start, end = pr.timeline.start_s, pr.timeline.end_s
    flows = {f.name: f for f in pr.network.flows}
    out: dict[int, tuple[float, bool]] = {}
    for i in tasks:
        if not np.isnan(end[i]):
            out[i] = (float(end[i] - start[i]), True)
            continue
        f = flows.get(sub.name[i])
        if f is None or np.isnan(start[i]) or until_s is None:
            continue
        middle = (f.start_t + until_s) / 2
        t_from, acked_from = f.start_t, 0
        for t_look, acked_then in seen:
            if t_look <= middle and f.name in acked_then:
                t_from, acked_from = t_look, acked_then[f.name]
        acked = _acked(f)
        if acked <= acked_from or until_s <= t_from:
            continue
        goodput = (acked - acked_from) / (until_s - t_from)
        out[i] = (float(until_s - start[i] + (f.size - acked) / goodput + after_arrival_s(sub, fabric, i)), False)
    return out


def _add_packet_bytes(tl: Timeline, graph: TaskGraph, fabric: Fabric, fixed: dict[int, float]) -> None:
    """The packet-simulated transfers' bytes on their links (the folded run saw them as delays), each spread
    over its span in the folded run; their average rate raises a link's peak where it is higher."""
    items = []
    for t in fixed:
        links = np.asarray(graph.route[t], dtype=np.int64)
        w = np.asarray(graph.route_weight.get(t, (1.0,) * len(links)))
        size = graph.size_bytes[t]
        np.add.at(tl.link_bytes, links, size * w)
        a, b = float(tl.start_s[t]), float(tl.end_s[t])
        if b > a:
            items.append((a, b, links, size * w))
            np.maximum.at(tl.link_peak_bytes_per_s, links, size * w / (b - a))
    cap = np.array([link.capacity_bytes_per_s for link in fabric.links])
    np.minimum(tl.link_peak_bytes_per_s, cap, out=tl.link_peak_bytes_per_s)
    tl.link_load.add_spread(items)


def merge_stats(parts: list[tuple[float, PacketStats]]) -> PacketStats | None:
    """The windows' packet statistics as one, every time on the iteration's clock (each window's run starts
    at its own zero: `a` is added)."""
    from ..packet.stats import PacketStats

    if not parts:
        return None
    out = PacketStats()
    by_port: dict[str, dict] = {}
    for a, s in parts:
        for name in ("drops", "ecn_marks", "pfc_pause_sent", "pfc_resume_sent", "watchdog", "pkey_violations"):
            mine, theirs = getattr(out, name), getattr(s, name)
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v
        out.pfc_frames.extend((t + a, *rest) for t, *rest in s.pfc_frames)
        out.flowlet_switches += s.flowlet_switches
        out.deadlocks.extend({**d, "t_s": d.get("t_s", 0.0) + a} for d in s.deadlocks)
        out.events += s.events
        out.packet_hops += s.packet_hops
        out.end_s = max(out.end_s, s.end_s + a)
        for f in s.flows:
            row = {**f, "start_s": _plus(f.get("start_s"), a), "done_s": _plus(f.get("done_s"), a)}
            if "rate_gbps" in f:
                row["rate_gbps"] = [[t + a, r] for t, r in f["rate_gbps"]]
            out.flows.append(row)
        for p in s.ports:
            queues = [{**q, "depth_series": [[t + a, d] for t, d in q["depth_series"]]} for q in p["queues"]]
            have = by_port.get(p["port"])
            if have is None:
                by_port[p["port"]] = {**p, "queues": queues}
                continue
            have["tx_bytes"] += p["tx_bytes"]
            have["tx_packets"] += p["tx_packets"]
            mine_q = {q["queue"]: q for q in have["queues"]}
            for q in queues:
                m = mine_q.get(q["queue"])
                if m is None:
                    have["queues"].append(q)
                    continue
                for k in ("ecn_marks", "pfc_pause_received", "paused_s", "pfc_pause_sent", "pfc_resume_sent"):
                    m[k] += q[k]
                m["max_depth_bytes"] = max(m["max_depth_bytes"], q["max_depth_bytes"])
                m["depth_series"] = m["depth_series"] + q["depth_series"]
    out.pfc_frames.sort(key=lambda x: x[0])
    out.ports = list(by_port.values())
    for i, f in enumerate(out.flows):
        f["flow"] = i
    return out


def _plus(t: Any, a: float) -> Any:
    return None if t is None else t + a
