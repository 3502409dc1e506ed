"""Path-choice policies (seeds Ch. 12), as data the engines apply: which equal-cost route a unit of traffic takes.

- ecmp: one route per QP, from the 5-tuple hash (`Router.route`); every packet of a flow follows it.
- flowlet: a flow is cut into flowlets by idle gaps longer than `flowlet_gap_s`; each flowlet may take
  another equal-cost route. Without link state the choice is a hash of (5-tuple, flowlet number), so
  consecutive flowlets spread like independent flows; with link state (`least_loaded`) it is the
  least-loaded route, as adaptive routing does (Figure 12-5).
- adaptive: every flowlet (or packet) takes the least-loaded equal-cost route given the link loads.
- spray: every packet picks a next hop at every switch; in the fluid limit the flow splits over the
  equal-cost paths with `Router.paths` shares (products of 1 / ECMP-group size).

Flowlet gap and adaptive-routing threshold are not in the seeds; the defaults are configurable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .ecmp import fmix32
from .routing import Route, Router

POLICIES = ("ecmp", "flowlet", "spray", "adaptive")


@dataclass(frozen=True)
class PathPolicy:
    mode: str = "ecmp"
    flowlet_gap_s: float = 50e-6

    def __post_init__(self) -> None:
        if self.mode not in POLICIES:
            raise ValueError(f"unknown load-balancing mode {self.mode!r}; known: {', '.join(POLICIES)}")

    @classmethod
    def of(cls, fabric_spec) -> PathPolicy:
        """From a scenario's fabric section (`load_balancing`, `flowlet_gap_us`)."""
        return cls(fabric_spec.load_balancing, fabric_spec.flowlet_gap_us * 1e-6)

    def split(self, router: Router, src_rank: int, dst_rank: int, channel: int = 0) -> list[tuple[Route, float]]:
        """Long-run share of the pair's bytes on each route: ECMP one route; flowlet and spray all of them."""
        if self.mode == "ecmp":
            return [(router.route(src_rank, dst_rank, channel), 1.0)]
        return router.paths(src_rank, dst_rank)

    def choose(
        self,
        router: Router,
        src_rank: int,
        dst_rank: int,
        unit: int,
        channel: int = 0,
        link_load: np.ndarray | None = None,
    ) -> Route:
        """The route of one unit: the flow (ecmp), its `unit`-th flowlet, or its `unit`-th packet (spray)."""
        base = router.route(src_rank, dst_rank, channel)
        if self.mode == "ecmp" or base.scale_up:
            return base
        paths = router.paths(src_rank, dst_rank)
        if self.mode in ("flowlet", "adaptive") and link_load is not None:
            return least_loaded([r for r, _ in paths], link_load)
        key = (hash_of(base) ^ fmix32(unit * 0x9E3779B1)) & 0xFFFFFFFF
        shares = np.array([s for _, s in paths])
        pick = int(np.searchsorted(np.cumsum(shares), fmix32(key) / 2**32 * shares.sum(), side="right"))
        return paths[min(pick, len(paths) - 1)][0]


def hash_of(route: Route) -> int:
    flow = route.flow
    return 0 if flow is None else fmix32(flow.src_ip ^ (flow.dst_ip << 1) ^ (flow.src_port << 7))


def least_loaded(routes: Sequence[Route], link_load: np.ndarray) -> Route:
    """The route whose busiest link, among the links where the routes differ, carries the least load (ties: the
    first): what adaptive routing compares at the switch."""
    shared = set.intersection(*(set(r.links) for r in routes)) if routes else set()

    def busiest(r: Route) -> float:
        own = [li for li in r.links if li not in shared]
        return float(np.max(link_load[own])) if own else 0.0

    return min(routes, key=busiest)
