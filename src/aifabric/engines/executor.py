"""The event loop shared by the flow and analytic engines: runs a task graph over a fabric.

Compute tasks occupy their GPU for their duration. A transfer is a fluid flow over its route: its
bytes drain at the rate the sharing policy gives it (max-min fair for the flow engine, the
bottleneck link's full capacity for the analytic engine), recomputed whenever a flow starts or
ends; it completes one route latency after its last byte left (the alpha term). A task starts as
soon as every task it depends on has completed.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..fabric.graph import Fabric
from .linkload import LinkLoad
from .maxmin import bottleneck_rates, max_min_rates
from .taskgraph import COMPUTE, TaskGraph

SHARING = {"flow": max_min_rates, "analytic": bottleneck_rates}


@dataclass
class Timeline:
    """When every task ran, and what the links carried."""

    start_s: np.ndarray
    end_s: np.ndarray
    link_bytes: np.ndarray
    link_peak_bytes_per_s: np.ndarray
    makespan_s: float
    rate_recomputations: int
    link_load: LinkLoad


class Interrupted(Exception):
    """Raised by `run` on Ctrl-C (KeyboardInterrupt); carries the timeline so far."""

    def __init__(self, timeline: Timeline):
        super().__init__("simulation interrupted")
        self.timeline = timeline


def run(graph: TaskGraph, fabric: Fabric, engine: str = "flow",
        progress: Callable[[int, int], None] | None = None) -> Timeline:
    share = SHARING[engine]
    n = len(graph)
    capacity = np.array([link.capacity_bytes_per_s for link in fabric.links], dtype=float)
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    link_bytes = np.zeros(len(fabric.links))
    link_peak = np.zeros(len(fabric.links))
    waiting = np.array([len(d) for d in graph.deps], dtype=np.int64)
    dependents: list[list[int]] = [[] for _ in range(n)]
    for t, deps in enumerate(graph.deps):
        for d in deps:
            dependents[d].append(t)

    events: list[tuple[float, int]] = []  # (time, task) completions
    active: list[int] = []  # transfers draining
    remaining: dict[int, float] = {}
    rates = np.zeros(0)
    dirty = False
    now = 0.0
    completed = 0
    recomputations = 0
    link_load = LinkLoad()

    def begin(t: int) -> None:
        nonlocal dirty
        start[t] = now
        if graph.kind[t] == COMPUTE:
            heapq.heappush(events, (now + graph.duration_s[t], t))
        elif graph.size_bytes[t] <= 0:
            heapq.heappush(events, (now + graph.latency_s[t], t))
        else:
            active.append(t)
            remaining[t] = graph.size_bytes[t]
            for li in graph.route[t]:
                link_bytes[li] += graph.size_bytes[t]
            dirty = True

    for t in range(n):
        if waiting[t] == 0:
            begin(t)

    try:
        while events or active:
            if dirty:
                rates = share([graph.route[t] for t in active], capacity)
                recomputations += 1
                load = np.zeros(len(capacity))
                for t, rate in zip(active, rates):
                    for li in graph.route[t]:
                        load[li] += rate
                np.maximum(link_peak, load, out=link_peak)
                link_load.set(now, load)
                dirty = False
            drain = np.array([remaining[t] for t in active]) / rates if active else np.zeros(0)
            t_drain = now + drain.min() if active else np.inf
            t_event = events[0][0] if events else np.inf
            t_next = min(t_drain, t_event)
            dt = t_next - now
            if active:
                finished = drain <= drain.min() * (1 + 1e-9) if t_drain <= t_event else np.zeros(len(active), bool)
                still = []
                for i, t in enumerate(active):
                    if finished[i]:
                        remaining.pop(t)
                        heapq.heappush(events, (t_next + graph.latency_s[t], t))
                        dirty = True
                    else:
                        remaining[t] -= rates[i] * dt
                        still.append(t)
                if dirty:
                    active = still
            now = t_next
            while events and events[0][0] <= now:
                _, t = heapq.heappop(events)
                end[t] = now
                completed += 1
                for d in dependents[t]:
                    waiting[d] -= 1
                    if waiting[d] == 0:
                        begin(d)
            if progress is not None:
                progress(completed, n)
    except KeyboardInterrupt:
        link_load.close(now)
        raise Interrupted(_timeline(start, end, link_bytes, link_peak, recomputations, link_load)) from None
    unfinished = int(np.isnan(end).sum())
    if unfinished:
        raise RuntimeError(f"{unfinished} tasks never ran: the task graph has a cycle")
    link_load.close(now)
    return _timeline(start, end, link_bytes, link_peak, recomputations, link_load)


def _timeline(start, end, link_bytes, link_peak, recomputations, link_load) -> Timeline:
    finished = end[~np.isnan(end)]
    return Timeline(start, end, link_bytes, link_peak, float(finished.max()) if len(finished) else 0.0,
                    recomputations, link_load)
