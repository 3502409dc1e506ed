"""A cheap lower bound on a task graph's iteration time, for the progress line of a long flow run ("x s of ~y s
simulated"): the analytic engine's answer, computed as the graph's longest path instead of by the event loop.

Every task starts when its dependencies have ended (the event loop's rule; a dependency on a transfer's drain,
`TaskGraph.drain_deps`, when its last byte has left); a compute task lasts its duration; a
transfer moves its bytes at the rate of its route's bottleneck link alone (capacity over the share of the transfer on
the link) and ends one route latency after its last byte, as the analytic engine runs it. No transfer can go faster
on the flow engine (max-min fair rates never exceed that), so the flow engine's iteration is at least as long:
equal where no two transfers share a link at the same time, longer by the contention otherwise.

`longest_path_s` is the definition; with numba the same loop is compiled (aifabric.compiled), the same float
operations in the same order.
"""

from __future__ import annotations

import numpy as np

from ..compiled import compiled
from ..fabric.graph import Fabric
from .csr import csr, turned_round
from .taskgraph import COMPUTE, TaskGraph


def _longest(
    kind: np.ndarray,
    duration: np.ndarray,
    size: np.ndarray,
    latency: np.ndarray,
    route_ptr: np.ndarray,
    route_flat: np.ndarray,
    weight: np.ndarray,
    dep_ptr: np.ndarray,
    dep_flat: np.ndarray,
    at_drain: np.ndarray,
    capacity: np.ndarray,
    compute: int,
) -> float:
    """The latest end time over the graph: tasks taken in a topological order (Kahn's, from the tasks waiting for
    nothing), each ending at its dependencies' latest end plus its own time. dep_ptr/dep_flat: each task's
    dependents; at_drain: those released when the transfer's bytes have left (its end less its latency), not at its
    end (TaskGraph.drain_deps). Plain loops (compiled)."""
    n = len(kind)
    waiting = np.zeros(n, dtype=np.int64)
    for q in range(len(dep_flat)):
        waiting[dep_flat[q]] += 1
    start = np.zeros(n)
    ready = np.empty(n, dtype=np.int64)
    top = 0
    for t in range(n):
        if waiting[t] == 0:
            ready[top] = t
            top += 1
    best = 0.0
    while top > 0:
        top -= 1
        t = ready[top]
        if kind[t] == compute:
            end = start[t] + duration[t]
        else:
            rate = np.inf
            for q in range(route_ptr[t], route_ptr[t + 1]):
                r = capacity[route_flat[q]] / weight[q]
                if r < rate:
                    rate = r
            end = start[t] + latency[t]
            if size[t] > 0 and rate < np.inf:
                end += size[t] / rate
        if end > best:
            best = end
        for q in range(dep_ptr[t], dep_ptr[t + 1]):
            d = dep_flat[q]
            release = end - latency[t] if at_drain[q] else end
            if release > start[d]:
                start[d] = release
            waiting[d] -= 1
            if waiting[d] == 0:
                ready[top] = d
                top += 1
    return best


def longest_path_s(graph: TaskGraph, fabric: Fabric) -> float:
    """The analytic engine's iteration time of `graph` on `fabric` (no contention): a lower bound on the flow
    engine's."""
    n = len(graph)
    if n == 0:
        return 0.0
    route_ptr, route_flat = csr(graph.route, n)
    weight = np.ones(len(route_flat))
    for t, w in graph.route_weight.items():
        weight[route_ptr[t] : route_ptr[t + 1]] = w
    dep_ptr_in, dep_flat_in = csr(graph.deps, n)  # task -> what it waits for; turned into task -> its dependents
    dep_ptr, dependents, order = turned_round(dep_ptr_in, dep_flat_in, n)
    at_drain = np.zeros(len(dep_flat_in), dtype=np.bool_)
    for d, t in graph.drain_pairs():
        a, b = dep_ptr_in[d], dep_ptr_in[d + 1]
        at_drain[a:b] |= dep_flat_in[a:b] == t
    at_drain = at_drain[order]
    capacity = np.array([link.rate_bytes_per_s for link in fabric.links], dtype=np.float64)
    fn = compiled(_longest) or _longest
    return float(
        fn(
            np.asarray(graph.kind, dtype=np.int64),
            np.asarray(graph.duration_s, dtype=np.float64),
            np.asarray(graph.size_bytes, dtype=np.float64),
            np.asarray(graph.latency_s, dtype=np.float64),
            route_ptr,
            route_flat,
            weight,
            dep_ptr,
            dependents,
            at_drain,
            capacity,
            COMPUTE,
        )
    )
