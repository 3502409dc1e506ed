"""The event loop shared by the flow and analytic engines: runs a task graph over a fabric.

Compute tasks occupy their GPU for their duration. A transfer is a fluid flow over its route: its
bytes drain at the rate the sharing policy gives it (max-min fair for the flow engine, the
bottleneck link's full capacity for the analytic engine), recomputed whenever flows start or end;
it completes one route latency after its last byte left (the alpha term). A task starts as soon
as every task it depends on has completed.

The active flows live in numpy arrays; the rates are recomputed once per distinct event time, from
(flow, link) incidence pairs gathered out of the routes stored as one flat array (CSR).

`run_reference` below is the definition. With numba installed, `run` hands graphs of COMPILED_MIN_TASKS
tasks or more to engines/fastloop.py: the same loop compiled, with the same timeline bit for bit
(AIFABRIC_PURE_PYTHON=1 keeps everything here).
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..fabric.graph import Fabric
from .linkload import LinkLoad
from .maxmin import bottleneck_pairs, max_min_pairs
from .taskgraph import COMPUTE, TaskGraph

SHARING = {"flow": max_min_pairs, "analytic": bottleneck_pairs}
FINISH_RTOL = 1e-9
# below this many tasks the reference loop is quicker than loading the compiled one (~1 s: numba and its cache)
COMPILED_MIN_TASKS = 10_000


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


def _csr(lists: list, n: int) -> tuple[np.ndarray, np.ndarray]:
    """List of int sequences -> (pointer array of n+1, flat values)."""
    lengths = np.fromiter((len(x) for x in lists), dtype=np.int64, count=n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    flat = np.fromiter((v for x in lists for v in x), dtype=np.int64, count=int(ptr[-1]))
    return ptr, flat


def _gather(ptr: np.ndarray, flat: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concatenated values of `rows`, for each value the position of its row in `rows`, and its index in `flat`."""
    lengths = ptr[rows + 1] - ptr[rows]
    total = int(lengths.sum())
    row_of = np.repeat(np.arange(len(rows)), lengths)
    offsets = np.repeat(ptr[rows] - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    at = offsets + np.arange(total)
    return flat[at], row_of, at


def run(graph: TaskGraph, fabric: Fabric, engine: str = "flow",
        progress: Callable[[int, int], None] | None = None) -> Timeline:
    """Run the task graph. Graphs of COMPILED_MIN_TASKS tasks or more run on the compiled loop
    (engines/fastloop.py) when numba is installed, with identical results; AIFABRIC_PURE_PYTHON=1 keeps
    them on `run_reference`, the definition."""
    if uses_compiled_loop(len(graph)):
        from . import fastloop

        return fastloop.run(graph, fabric, engine, progress)
    return run_reference(graph, fabric, engine, progress)


def uses_compiled_loop(n_tasks: int) -> bool:
    """Whether `run` hands a graph of n_tasks to the compiled loop."""
    if n_tasks < COMPILED_MIN_TASKS or os.environ.get("AIFABRIC_PURE_PYTHON", "") not in ("", "0"):
        return False
    from . import fastloop

    return fastloop.AVAILABLE and fastloop.recorder_matches(LinkLoad())


def compiles_first(n_tasks: int) -> bool:
    """Whether running n_tasks will first compile the event loop (once per installation, about a minute)."""
    if not uses_compiled_loop(n_tasks):
        return False
    from . import fastloop

    return not fastloop.cached_on_disk()


def run_reference(graph: TaskGraph, fabric: Fabric, engine: str = "flow",
                  progress: Callable[[int, int], None] | None = None) -> Timeline:
    """The event loop in Python and numpy: the definition the compiled loop is held to."""
    share = SHARING[engine]
    n = len(graph)
    n_links = len(fabric.links)
    capacity = np.array([link.rate_bytes_per_s for link in fabric.links], dtype=float)  # achievable payload rate
    kind = graph.kind
    duration = graph.duration_s
    size = np.asarray(graph.size_bytes, dtype=float)
    latency = graph.latency_s
    route_ptr, route_flat = _csr(graph.route, n)
    # share of a transfer's rate on each of its links: 1 on a path; less where a sprayed transfer splits
    weight_flat = np.ones(len(route_flat))
    for t, w in graph.route_weight.items():
        weight_flat[route_ptr[t]:route_ptr[t + 1]] = w
    weighted = bool(graph.route_weight)
    waiting, dependents = graph.dependency_counts()

    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    link_bytes = np.zeros(n_links)
    link_peak = np.zeros(n_links)
    link_load = LinkLoad()
    events: list[tuple[float, int]] = []  # (time, task) completions
    act_task = np.zeros(0, dtype=np.int64)  # transfers draining
    act_rem = np.zeros(0)
    act_rate = np.zeros(0)
    started: list[int] = []  # transfers started since the last rate computation
    state: dict[str, Any] = {"now": 0.0, "completed": 0, "recomputations": 0}

    def begin(t: int, now: float) -> None:
        start[t] = now
        if kind[t] == COMPUTE:
            heapq.heappush(events, (now + duration[t], t))
        elif size[t] <= 0:
            heapq.heappush(events, (now + latency[t], t))
        else:
            started.append(t)

    for t in range(n):
        if waiting[t] == 0:
            begin(t, 0.0)

    now = 0.0
    dirty = bool(started)
    try:
        while events or len(act_task) or started:
            if started:
                new = np.array(started, dtype=np.int64)
                started.clear()
                links, row, at = _gather(route_ptr, route_flat, new)
                np.add.at(link_bytes, links, size[new][row] * weight_flat[at])
                act_task = np.concatenate((act_task, new))
                act_rem = np.concatenate((act_rem, size[new]))
                dirty = True
            if dirty:
                links, row, at = _gather(route_ptr, route_flat, act_task)
                used, inverse = np.unique(links, return_inverse=True)  # the links in use, compacted
                w_at = weight_flat[at] if weighted else None
                act_rate = share(row, inverse, len(act_task), capacity[used], w_at)
                load = np.bincount(inverse, weights=act_rate[row] if w_at is None else act_rate[row] * w_at,
                                   minlength=len(used))
                link_peak[used] = np.maximum(link_peak[used], load)
                link_load.set_sparse(now, used, load)
                state["recomputations"] += 1
                dirty = False
            t_event = events[0][0] if events else np.inf
            if len(act_task):
                drain = act_rem / act_rate
                first = drain.min()
                t_drain = now + first
            else:
                t_drain = np.inf
            t_next = min(t_drain, t_event)
            if len(act_task):
                dt = t_next - now
                if t_drain <= t_event:
                    finished = drain <= first * (1 + FINISH_RTOL)
                    for t in act_task[finished].tolist():
                        heapq.heappush(events, (t_next + latency[t], t))
                    keep = ~finished
                    act_task, act_rem, act_rate = act_task[keep], act_rem[keep] - act_rate[keep] * dt, act_rate[keep]
                    dirty = True
                else:
                    act_rem = act_rem - act_rate * dt
                # rounding must not leave a negative remainder: its drain time would lie in the past and
                # no flow would ever count as finished (an endless loop seen at 1,024 GPUs)
                np.maximum(act_rem, 0.0, out=act_rem)
            now = t_next
            state["now"] = now
            while events and events[0][0] <= now:
                _, t = heapq.heappop(events)
                end[t] = now
                state["completed"] += 1
                for d in dependents[t]:
                    waiting[d] -= 1
                    if waiting[d] == 0:
                        begin(d, now)
            if progress is not None:
                progress(state["completed"], n)
    except KeyboardInterrupt:
        link_load.close(now)
        raise Interrupted(_timeline(start, end, link_bytes, link_peak, state["recomputations"], link_load)) from None
    link_load.close(now)
    unfinished = int(np.isnan(end).sum())
    if unfinished:
        raise RuntimeError(f"{unfinished} tasks never ran: the task graph has a cycle")
    return _timeline(start, end, link_bytes, link_peak, state["recomputations"], link_load)


def _timeline(start, end, link_bytes, link_peak, recomputations, link_load) -> Timeline:
    finished = end[~np.isnan(end)]
    return Timeline(start, end, link_bytes, link_peak, float(finished.max()) if len(finished) else 0.0,
                    recomputations, link_load)
