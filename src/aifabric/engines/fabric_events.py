"""Changes of the fabric during a run, as the event loop (engines/executor.py) takes them: links whose rate changes
(0: down) and routing that converges around the links it knows are down (aifabric.faults builds the list from the
scenario's `faults:`; *Deep Learning for Network Engineers*, Chapter 10).

What the loop does with them (`run_reference`):

- a link's rate changes at its event's time; the flows crossing a link that went down stop there (their bytes in
  flight are lost; what is left of each transfer waits);
- the RDMA transport of a stopped flow retransmits every `retransmit_timeout_s` (an RC QP's local ACK timeout); the
  first retransmission that finds the flow's path up again (routing converged around the fault, or the link back)
  resumes it with its remaining bytes; after `retry_count` retransmissions without a path the QP fails and the job
  with it (`JobFailed`);
- when routing converges, the transfers whose route crosses a link routing knows is down take the converged route
  (ECMP re-hashed over what is left: `Router.converged`); the others keep theirs; a transfer that had been moved
  goes back to its first route once that route is whole again (resilient hashing gives the returning next hop its
  flows back).

NCCL's defaults: NCCL_IB_TIMEOUT 20 (the local ACK timeout is 4.096 us x 2^20 = 4.29 s) and NCCL_IB_RETRY_CNT 7
(NCCL, src/transport/net_ib.cc: `NCCL_PARAM(IbTimeout, "IB_TIMEOUT", 20)`, `NCCL_PARAM(IbRetryCnt, "IB_RETRY_CNT",
7)`): a QP with no path fails after 8 x 4.29 s = 34.4 s with IBV_WC_RETRY_EXC_ERR, NCCL reports it and
torch.distributed ends the job (its own watchdog would after 10 minutes, its default timeout for NCCL).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..fabric.graph import TIER_SPINE, TIER_SUPERSPINE

if TYPE_CHECKING:
    from ..fabric.graph import Fabric
    from ..fabric.routing import Router
    from .taskgraph import TaskGraph

NCCL_IB_TIMEOUT = 20  # NCCL's default (src/transport/net_ib.cc)
NCCL_IB_RETRY_CNT = 7  # NCCL's default
RETRANSMIT_TIMEOUT_S = 4.096e-6 * 2**NCCL_IB_TIMEOUT  # InfiniBand's local ACK timeout: 4.096 us x 2^timeout
SPREAD_TIERS = (TIER_SPINE, TIER_SUPERSPINE)  # the tiers engines.tasks.spread_over_paths spreads over
TORCH_NCCL_TIMEOUT_S = 600.0  # torch.distributed's default timeout for NCCL process groups (PyTorch PR #110947)


@dataclass(frozen=True)
class FabricEvent:
    """At `t_s`: links whose rate becomes `rate_fraction[link]` of their own (0: down, 1: whole again); when
    `routing_down` is not None, routing converges around those links (every link routing then knows is down); ranks
    that compute `gpu_slowdown[rank]` times slower from then (a straggler; the tasks running on them stretch)."""

    t_s: float
    rate_fraction: dict[int, float] = field(default_factory=dict)
    routing_down: frozenset[int] | None = None
    label: str = ""
    gpu_slowdown: dict[int, float] = field(default_factory=dict)  # rank -> times slower from now (1: its own pace)


@dataclass
class FabricTimeline:
    """What the event loop is given: the events in time order, how to reroute a transfer, the transport's
    retransmission timer."""

    events: list[FabricEvent]
    rerouter: Rerouter
    retransmit_timeout_s: float = RETRANSMIT_TIMEOUT_S
    retry_count: int = NCCL_IB_RETRY_CNT


class JobFailed(Exception):
    """A transfer found no path before its QP's retransmissions ran out: the job ends at `t_s`."""

    def __init__(self, t_s: float, task: int, src: int, dst: int, stalled_at_s: float, timeline):
        self.t_s, self.task, self.src, self.dst, self.stalled_at_s = t_s, task, src, dst, stalled_at_s
        self.timeline = timeline
        super().__init__(
            f"rank {src} cannot reach rank {dst}: its transfer stopped at {stalled_at_s:.6g} s and "
            f"found no path before its QP's retransmissions ran out at {t_s:.6g} s"
        )


class Rerouter:
    """The route a transfer of the graph takes once routing has converged around a set of failed links.

    A transfer is found by its route: the lowering stored the router's own `Route.links` tuple, one per QP (source
    rank, destination rank, channel), so the QP, and with it the 5-tuple ECMP hashes, is known. Sprayed transfers
    (load balancing other than ECMP) spread again over the surviving paths."""

    def __init__(self, graph: TaskGraph, fabric: Fabric, router: Router, spread: bool = False):
        self.graph, self.fabric, self.router, self.spread = graph, fabric, router, spread
        self._qp_by_id = {id(r.links): key for key, r in router._routes.items()}
        self._qp_by_links: dict[tuple[int, ...], tuple[int, int, int]] = {}
        for key, r in router._routes.items():
            self._qp_by_links.setdefault(r.links, key)
        self._routers: dict[frozenset[int], Router] = {}

    def converged(self, down: frozenset[int]) -> Router:
        r = self._routers.get(down)
        if r is None:
            r = self._routers[down] = self.router.converged(down)
        return r

    def route(
        self, t: int, original: tuple[int, ...], down: frozenset[int]
    ) -> tuple[tuple[int, ...], tuple[float, ...] | None] | None:
        """(links, weights or None) of transfer `t` (its route as lowered: `original`) with routing converged
        around `down`; None when there is no path."""
        g = self.graph
        src, dst = int(g.rank[t]), int(g.dst[t])
        router = self.converged(down)
        original = tuple(original)
        try:
            key = self._qp_by_id.get(id(original)) or self._qp_by_links.get(original)
            if key is not None:
                return router.route(*key).links, None
            if self.spread and src != dst and any(self.fabric.links[li].tier in SPREAD_TIERS for li in original):
                shares = router.spray_split(src, dst)  # engines.tasks.spread_over_paths, on what is left
                links = tuple(sorted(shares))
                weights = tuple(shares[li] for li in links)
                return links, (None if all(w == 1.0 for w in weights) else weights)
        except ValueError:  # no path
            return None
        # a piece of an in-switch collective (up to its rail switch, or down from it): that switch is its only way
        return None
