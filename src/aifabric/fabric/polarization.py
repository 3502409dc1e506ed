"""ECMP polarization: how evenly a traffic pattern's flows land on the uplinks, versus an ideal spread.

Each flow (one QP, an elephant at line rate: seeds Ch. 10) offers `rate_gbps` on every link of its
route. Under ECMP the route depends on the QP's UDP source port, so a Monte Carlo over source ports
(seeded) gives the distribution of uplink loads a job sees from one run to the next. The ideal spread
is per-hop uniform spraying in the fluid limit: each flow split over all equal-cost paths.

Offered load is what the senders push toward a link; above the link's capacity the excess queues,
is paused (PFC) or dropped — the engines show which. Figure 10-2: 4 x 200 Gb/s toward one 200 Gb/s
host link; Figure 10-5: two 200 Gb/s flows hashed onto one uplink = 400 Gb/s, the other idle.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..collectives.topology import snake_ring
from ..units import bytes_per_s_to_gbps
from .design import Design
from .graph import Fabric
from .routing import Route, Router

PATTERNS = ("permutation", "incast", "ring", "all-to-all")
MAX_ALL_TO_ALL_RANKS = 512


def pattern_pairs(
    pattern: str, world: int, fabric: Fabric, rng: np.random.Generator, target: int = 0
) -> list[tuple[int, int]]:
    """(src, dst) rank pairs of one traffic pattern.

    permutation: every rank sends to one other rank, every rank receives once (a random derangement);
    incast: every rank sends to `target`; ring: each rank to its successor in the rail-aligned ring
    (NCCL's ring AllReduce steps); all-to-all: every ordered pair.
    """
    if pattern == "permutation":
        perm = rng.permutation(world)
        return [(int(perm[i]), int(perm[(i + 1) % world])) for i in range(world)] if world > 1 else []
    if pattern == "incast":
        return [(r, target) for r in range(world) if r != target]
    if pattern == "ring":
        ring = snake_ring(range(world), fabric.server_of, fabric.local_index)
        return [(ring[i], ring[(i + 1) % world]) for i in range(world)] if world > 1 else []
    if pattern == "all-to-all":
        return [(a, b) for a in range(world) for b in range(world) if a != b]
    raise ValueError(f"unknown pattern {pattern!r}; known: {', '.join(PATTERNS)}")


def offered_load_gbps(
    fabric: Fabric, routes: Iterable[Route], rate_gbps: float, weights: Iterable[float] | None = None
) -> np.ndarray:
    """Offered load on every directed link (Gb/s) when each route carries `rate_gbps` x its weight."""
    load = np.zeros(len(fabric.links))
    weights = weights if weights is not None else iter(lambda: 1.0, None)
    for route, w in zip(routes, weights, strict=False):
        load[list(route.links)] += rate_gbps * w
    return load


def ideal_load_gbps(router: Router, pairs: list[tuple[int, int]], rate_gbps: float) -> np.ndarray:
    """Each flow split over all its equal-cost paths (per-hop uniform spray, fluid)."""
    load = np.zeros(len(router.fabric.links))
    for src, dst in pairs:
        for li, share in router.spray_split(src, dst).items():
            load[li] += rate_gbps * share
    return load


@dataclass(frozen=True)
class LoadStats:
    name: str
    max_gbps: float  # mean over trials of the busiest uplink
    max_p95_gbps: float
    worst_gbps: float  # busiest uplink over all trials
    mean_gbps: float
    idle_fraction: float  # uplinks with no flow, mean over trials
    overloaded_fraction: float  # uplinks offered more than their capacity, mean over trials

    @property
    def imbalance(self) -> float:
        """max / mean: 1 is a perfect spread."""
        return self.max_gbps / self.mean_gbps if self.mean_gbps else 0.0


@dataclass(frozen=True)
class PolarizationReport:
    pattern: str
    flows: int
    network_flows: int
    uplinks: int
    rate_gbps: float
    trials: int
    ecmp: LoadStats
    ideal: LoadStats
    histogram_gbps: tuple[tuple[float, int], ...]  # (uplink load, how many uplink-trials), ECMP


def _stats(name: str, loads: np.ndarray, capacity_gbps: np.ndarray) -> LoadStats:
    """loads: trials x uplinks."""
    maxima = loads.max(axis=1) if loads.size else np.zeros(1)
    return LoadStats(
        name=name,
        max_gbps=float(maxima.mean()),
        max_p95_gbps=float(np.percentile(maxima, 95)),
        worst_gbps=float(maxima.max()),
        mean_gbps=float(loads.mean()) if loads.size else 0.0,
        idle_fraction=float((loads <= 1e-9).mean()) if loads.size else 0.0,
        overloaded_fraction=float((loads > capacity_gbps * (1 + 1e-9)).mean()) if loads.size else 0.0,
    )


def uplinks(fabric: Fabric) -> np.ndarray:
    return np.array([li for li in range(len(fabric.links)) if fabric.is_uplink(li)], dtype=int)


def analyze(
    router: Router, pattern: str, trials: int, rng: np.random.Generator, rate_gbps: float | None = None, target: int = 0
) -> PolarizationReport:
    """Monte Carlo over QP source ports: uplink loads under ECMP (router's seeds) vs the ideal spread."""
    f = router.fabric
    d = f.design
    rate = rate_gbps if rate_gbps is not None else (d.host_speed_gbps if isinstance(d, Design) else 400.0)
    pairs = pattern_pairs(pattern, f.world_size, f, rng, target)
    net = [(a, b) for a, b in pairs if f.server_of(a) != f.server_of(b)]
    up = uplinks(f)
    cap = np.array([bytes_per_s_to_gbps(f.links[li].capacity_bytes_per_s) for li in up])
    samples = np.zeros((trials, len(up)))
    for t in range(trials):
        ports = rng.integers(0, 0x4000, size=len(net)) | 0xC000
        routes = [router.route_with_source_port(a, b, int(p)) for (a, b), p in zip(net, ports, strict=True)]
        samples[t] = offered_load_gbps(f, routes, rate)[up]
    ideal = ideal_load_gbps(router, net, rate)[up][None, :]
    values, counts = np.unique(np.round(samples, 6), return_counts=True)
    return PolarizationReport(
        pattern=pattern,
        flows=len(pairs),
        network_flows=len(net),
        uplinks=len(up),
        rate_gbps=rate,
        trials=trials,
        ecmp=_stats("ECMP", samples, cap),
        ideal=_stats("ideal spread", ideal, cap),
        histogram_gbps=tuple((float(v), int(c)) for v, c in zip(values, counts, strict=True)),
    )


def same_index_spines(router: Router, dst_leaf: str, index: int = 0) -> dict[str, str]:
    """Deep Learning for Network Engineers, Chapter 13 (hash polarization in a Clos): when every leaf's hash gives
    the same result `index` for flows to one endpoint (low entropy, one deterministic hash), which spine each leaf
    sends them to: group[index mod len(group)] of its ECMP group toward `dst_leaf`. A full mesh sends every leaf to
    the same spine; a partial mesh, whose leaves reach distinct subsets of spines, cannot."""
    from .graph import RAIL

    f = router.fabric
    out: dict[str, str] = {}
    for leaf, node in f.nodes.items():
        if node.kind != RAIL or leaf == dst_leaf or not np.isfinite(router.distance(leaf, dst_leaf)):
            continue
        group = router.next_hops(leaf, dst_leaf)
        if group:
            out[leaf] = f.links[group[index % len(group)]].dst
    return out
