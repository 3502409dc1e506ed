"""Routes: the list of directed links a GPU-to-GPU transfer crosses.

Inside a server (one NVLink domain), GPUs talk over NVLink through the NVSwitch. Between servers a
transfer goes GPU -> PCIe -> its NIC -> a NIC port (dual-port NICs: LAG hash over the ports whose
switch is closest to the destination) -> switches by shortest paths, ECMP choosing among equal-cost
next hops -> the destination NIC -> PCIe -> the destination GPU.

Cross-rail traffic with no switch path (rail-only fabrics), or every cross-rail transfer when PXN is
on, is first copied over NVLink to the GPU of the source server whose NIC sits on the destination's
rail, then sent from that NIC (seeds §6.5; NCCL's PXN). The route then shows the NVLink hop + the
rail hop.

Shortest paths are hop counts over switch-to-switch links, one breadth-first search per destination
switch set (in C, scipy.sparse.csgraph), cached: never per pair, and never over server internals. The packet
engine routes with this router too: a flow's links between two NICs (`nic_route`, packet/topo.py) and every
switch's ECMP group with the links routing knows are down left out (`next_hops`, packet/network.py).

Queue pairs are allocated per (source rank, destination rank, channel), with QP numbers drawn from
the scenario's seeded generator; a QP's UDP source port is its ECMP entropy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

from .ecmp import HASH_FIELDS, FiveTuple, ecmp_hash, roce_udp_source_port, switch_seed
from .graph import NVSWITCH, SCALE_UP_TIERS, Fabric

MAX_PATHS = 4096


@dataclass(frozen=True)
class Route:
    links: tuple[int, ...]
    latency_s: float
    scale_up: bool  # True when the whole route is inside one server (NVLink)
    flow: FiveTuple | None = None
    relay_rank: int | None = None  # PXN: the GPU whose NIC sends (None: the source's own NIC)


@dataclass
class QueuePairs:
    """QP numbers per NIC: a random 24-bit base per NIC (seeded), then consecutive numbers."""

    rng: np.random.Generator
    _next: dict[str, int] = field(default_factory=dict)
    _qps: dict[tuple[int, int, int], tuple[int, int]] = field(default_factory=dict)

    def _allocate(self, nic: str) -> int:
        if nic not in self._next:
            self._next[nic] = int(self.rng.integers(0x100, 0xFF0000))
        qpn = self._next[nic]
        self._next[nic] = qpn + 1
        return qpn

    def pair(self, src_rank: int, dst_rank: int, channel: int, src_nic: str, dst_nic: str) -> tuple[int, int]:
        key = (src_rank, dst_rank, channel)
        if key not in self._qps:
            self._qps[key] = (self._allocate(src_nic), self._allocate(dst_nic))
        return self._qps[key]


class Router:
    def __init__(
        self,
        fabric: Fabric,
        hash_seed: int = 0,
        per_switch_seed: bool = False,
        seed: int = 0,
        pxn: bool | None = None,
        down: frozenset[int] = frozenset(),
    ):
        self.fabric = fabric
        self.hash_seed = hash_seed
        self.per_switch_seed = per_switch_seed
        design = fabric.design
        fields = getattr(design, "ecmp_hash_fields", None)
        self.hash_fields: tuple[str, ...] | None = None if fields in (None, HASH_FIELDS) else fields
        self.pxn = bool(pxn) if pxn is not None else getattr(design, "topology", None) == "rail-only"
        self.qps = QueuePairs(np.random.default_rng(seed))
        self._routes: dict[tuple[int, int, int], Route] = {}
        self._dist: dict[tuple[str, ...], np.ndarray] = {}
        self._sw_index: dict[str, int] | None = None
        self._csr: csr_matrix | None = None
        self._seeds: dict[str, int] = {}
        self._nic_ports: dict[str, list[int]] = {}
        self._groups: dict[tuple[str, tuple[str, ...]], list[int]] = {}
        self.cache: dict = {}  # what layers above compute once per fabric (measured paths, tuner choices)
        self._egress: dict[tuple[str, str], tuple[list[int], tuple[str, ...]] | None] = {}
        self.down: frozenset[int] = frozenset(
            down
        )  # failed links (aifabric.faults; the packet engine's converged view)
        self.healthy: Router | None = None  # the same fabric before the failures: what each flow hashed to then
        self.rerouted: set[tuple[int, int, int]] = set()  # QPs whose path the failures changed

    def fail(self, links) -> None:
        """Take `links` down, routing converged around them: shortest paths over what is left, and ECMP as with
        resilient hashing: a flow keeps the next hop it hashed to before the failure while that hop is still on a
        shortest path, and only the others re-hash over the surviving group."""
        if self.healthy is None:
            self.healthy = Router(self.fabric, self.hash_seed, self.per_switch_seed, pxn=self.pxn)
        self.down = self.down | frozenset(int(li) for li in links)
        self._routes, self._dist, self._groups, self._nic_ports, self._egress = {}, {}, {}, {}, {}
        self._sw_index = self._csr = None
        self.cache = {}

    def converged(self, links) -> Router:
        """A router for the same fabric once routing has converged around `links` as well as this one's failures:
        the same QP numbers (so the same 5-tuples), resilient hashing against the same healthy router. This one
        keeps its routes (the engine reroutes a fault during the iteration with it: aifabric.faults)."""
        out = Router(self.fabric, self.hash_seed, self.per_switch_seed, pxn=self.pxn)
        out.qps = self.qps
        out.healthy = self.healthy if self.healthy is not None else self
        out.down = self.down | frozenset(int(li) for li in links)
        return out

    # -- switch graph ---------------------------------------------------------------------------
    def _switch_graph(self) -> None:
        f = self.fabric
        ids = [n for n in f.nodes if f.is_switch(n)]
        index = {n: i for i, n in enumerate(ids)}
        cols: list[int] = []
        indptr = [0]
        self._nbr: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for n in ids:
            out = [li for li in f.out_links[n] if li not in self.down]
            nbr = [index.get(f.links[li].dst, -1) for li in out]
            self._nbr[n] = (np.array(out, dtype=np.int64), np.array(nbr, dtype=np.int64))
            cols.extend(j for j in nbr if j >= 0)
            indptr.append(len(cols))
        size = len(ids)
        self._csr = csr_matrix(
            (np.ones(len(cols)), np.array(cols, dtype=np.int32), np.array(indptr, dtype=np.int32)), shape=(size, size)
        )
        self._sw_index = index

    def _distances(self, targets: tuple[str, ...]) -> tuple[dict[str, int], np.ndarray]:
        """Hop count from every switch to the nearest of `targets` (inf: unreachable), cached.

        One array per destination switch set; the last entry is inf so that index -1 (not a switch) is
        never a next hop."""
        dist = self._dist.get(targets)
        if dist is None:
            if self._sw_index is None:
                self._switch_graph()
            sw_index = self._sw_index
            assert sw_index is not None
            idx = sorted({sw_index[t] for t in targets})
            d = dijkstra(self._csr, directed=True, indices=idx, unweighted=True, min_only=True)
            self._dist[targets] = dist = np.append(d, np.inf).astype(np.float32)
        assert self._sw_index is not None
        return self._sw_index, dist

    def distance(self, switch: str, targets: str | tuple[str, ...]) -> float:
        targets = (targets,) if isinstance(targets, str) else targets
        index, dist = self._distances(targets)
        return float(dist[index[switch]])

    def next_hops(self, switch: str, target: str | tuple[str, ...]) -> list[int]:
        """Out-links of `switch` on a shortest path to switch `target` (or the nearest of several): the ECMP
        group, in cabling order; empty when `switch` has no path to it (links down)."""
        targets = (target,) if isinstance(target, str) else target
        cached = self._groups.get((switch, targets))
        if cached is not None:
            return cached
        index, dist = self._distances(targets)
        out, nbr = self._nbr[switch]
        here = dist[index[switch]]
        group = out[dist[nbr] == here - 1].tolist() if np.isfinite(here) else []
        self._groups[switch, targets] = group
        return group

    def _seed(self, node: str) -> int:
        s = self._seeds.get(node)
        if s is None:
            s = self._seeds[node] = switch_seed(self.hash_seed, node, self.per_switch_seed)
        return s

    def _pick(self, node: str, group: list[int], flow: FiveTuple) -> int:
        if len(group) == 1:
            return group[0]
        if self.hash_fields is None:
            return group[ecmp_hash(flow, self._seed(node)) % len(group)]
        return group[ecmp_hash(flow, self._seed(node), self.hash_fields) % len(group)]

    # -- pieces of a route ----------------------------------------------------------------------
    def _switch_ports(self, nic: str) -> list[int]:
        ports = self._nic_ports.get(nic)
        if ports is None:
            f = self.fabric
            ports = self._nic_ports[nic] = [
                li for li in f.out_links[nic] if f.is_switch(f.links[li].dst) and li not in self.down
            ]
        return ports

    def _egress_choices(self, src_nic: str, dst_nic: str) -> tuple[list[int], tuple[str, ...]] | None:
        """The source NIC's ports on a shortest path, and the destination NIC's switches; None: no path."""
        key = (src_nic, dst_nic)
        if key in self._egress:
            return self._egress[key]
        self._egress[key] = out = self._egress_uncached(src_nic, dst_nic)
        return out

    def _egress_uncached(self, src_nic: str, dst_nic: str) -> tuple[list[int], tuple[str, ...]] | None:
        f = self.fabric
        dst_switches = tuple(dict.fromkeys(f.links[li].dst for li in self._switch_ports(dst_nic)))
        ports = self._switch_ports(src_nic)
        if not ports or not dst_switches:
            return None
        index, dist = self._distances(dst_switches)
        d = [dist[index[f.links[li].dst]] for li in ports]
        best = min(d)
        if not np.isfinite(best):
            return None
        return [li for li, x in zip(ports, d, strict=True) if x == best], dst_switches

    def _network_links(self, src_nic: str, dst_nic: str, flow: FiveTuple) -> list[int]:
        f = self.fabric
        choice = self._egress_choices(src_nic, dst_nic)
        if choice is None:
            raise ValueError(f"no switch path from {src_nic} to {dst_nic}")
        ports, dst_switches = choice
        healthy = self.healthy
        before = healthy._egress_choices(src_nic, dst_nic) if healthy is not None else None
        first = self._keep(src_nic, before[0], ports, flow) if before else self._pick(src_nic, ports, flow)
        links = [first]
        node = f.links[first].dst
        while node not in dst_switches:
            group = self.next_hops(node, dst_switches)
            if before:  # healthy is set: the group this flow hashed over before the failures
                li = self._keep(node, healthy.next_hops(node, before[1]), group, flow)  # type: ignore[union-attr]
            else:
                li = self._pick(node, group, flow)
            links.append(li)
            node = f.links[li].dst
        down = [li for li in f.out_links[node] if f.links[li].dst == dst_nic and li not in self.down]
        if not down:
            raise ValueError(f"no switch path from {src_nic} to {dst_nic}")
        links.append(self._pick(node, down, flow))
        return links

    def _keep(self, node: str, before: list[int], group: list[int], flow: FiveTuple) -> int:
        """Resilient hashing: the hop this flow took before the failures when it is still in `group`, else a
        re-hash over `group`."""
        if before:
            was = self._pick(node, before, flow)
            if was in group:
                return was
        return self._pick(node, group, flow)

    def _nvlink_links(self, src_gpu: str, dst_gpu: str) -> list[int]:
        f = self.fabric
        up = next(li for li in f.out_links[src_gpu] if f.nodes[f.links[li].dst].kind == NVSWITCH)
        return [up, f.link_between(f.links[up].dst, dst_gpu)]

    def relay_rank(self, src_rank: int, dst_rank: int) -> int | None:
        """PXN: the rank on the source's server whose NIC is on the destination's rail, when the route
        must (no switch path) or may (PXN on, rails differ) relay over NVLink; else None."""
        f = self.fabric
        src_nic, dst_nic = f.rank_nic(src_rank), f.rank_nic(dst_rank)
        dst_rail = f.nodes[dst_nic].index
        if f.nodes[src_nic].index == dst_rail:
            return None
        reachable = self._egress_choices(src_nic, dst_nic) is not None
        if reachable and not self.pxn:
            return None
        base = f.server_of(src_rank) * f.gpus_per_server
        local = f.local_index(dst_rank)
        candidates = [local] + [g for g in range(f.gpus_per_server) if g != local]
        for g in candidates:
            r = base + g
            if (
                r != src_rank
                and f.nodes[f.rank_nic(r)].index == dst_rail
                and self._egress_choices(f.rank_nic(r), dst_nic) is not None
            ):
                return r
        if not reachable:
            raise ValueError(
                f"rank {src_rank} cannot reach rank {dst_rank}: no switch path and no GPU on "
                f"rail {dst_rail} in its server to relay through"
            )
        return None

    def _flow(self, src_rank: int, dst_rank: int, channel: int, src_nic: str, dst_nic: str) -> FiveTuple:
        lqpn, rqpn = self.qps.pair(src_rank, dst_rank, channel, src_nic, dst_nic)
        f = self.fabric
        return FiveTuple(f.nodes[src_nic].ip or 0, f.nodes[dst_nic].ip or 0, roce_udp_source_port(lqpn, rqpn))

    def _finish(self, links: list[int], flow: FiveTuple | None, relay: int | None) -> Route:
        f = self.fabric
        switches = sum(1 for li in links if f.is_switch(f.links[li].dst))
        latency = sum(f.links[li].latency_s for li in links) + switches * f.switch_latency_s
        scale_up = all(f.links[li].tier in SCALE_UP_TIERS for li in links)
        return Route(tuple(links), latency, scale_up, flow, relay)

    def _build(self, src_rank: int, dst_rank: int, channel: int, udp_sport: int | None = None) -> Route:
        f = self.fabric
        if src_rank == dst_rank:
            raise ValueError(f"rank {src_rank} cannot send to itself")
        src_gpu, dst_gpu = f.rank_gpu[src_rank], f.rank_gpu[dst_rank]
        if f.server_of(src_rank) == f.server_of(dst_rank):
            return self._finish(self._nvlink_links(src_gpu, dst_gpu), None, None)
        relay = self.relay_rank(src_rank, dst_rank)
        sender = src_rank if relay is None else relay
        links = [] if relay is None else self._nvlink_links(src_gpu, f.rank_gpu[relay])
        src_nic, dst_nic = f.rank_nic(sender), f.rank_nic(dst_rank)
        flow = self._flow(src_rank, dst_rank, channel, src_nic, dst_nic)
        if udp_sport is not None:
            flow = FiveTuple(flow.src_ip, flow.dst_ip, udp_sport)
        network = self._network_links(src_nic, dst_nic, flow)
        if self.healthy is not None and udp_sport is None:
            try:
                if self.healthy._network_links(src_nic, dst_nic, flow) != network:
                    self.rerouted.add((src_rank, dst_rank, channel))
            except ValueError:
                pass
        links += [*f.rank_nic_up[sender], *network, *f.rank_nic_down[dst_rank]]
        return self._finish(links, flow, relay)

    # -- the API --------------------------------------------------------------------------------
    def route(self, src_rank: int, dst_rank: int, channel: int = 0) -> Route:
        """The route of the QP (src_rank, dst_rank, channel): ECMP-hashed, deterministic, cached."""
        key = (src_rank, dst_rank, channel)
        cached = self._routes.get(key)
        if cached is None:
            cached = self._routes[key] = self._build(src_rank, dst_rank, channel)
        return cached

    def nic_route(self, src_nic: str, dst_nic: str, flow: FiveTuple) -> tuple[int, ...]:
        """The links from NIC `src_nic` to NIC `dst_nic` that the 5-tuple `flow` hashes to (NIC port, switches by
        ECMP, the destination's switch port): the route of a flow between two NICs, whatever rank sends it."""
        return tuple(self._network_links(src_nic, dst_nic, flow))

    def route_with_source_port(self, src_rank: int, dst_rank: int, udp_sport: int) -> Route:
        """The route the ECMP hash gives this pair for another UDP source port (Monte Carlo over QPs)."""
        return self._build(src_rank, dst_rank, 0, udp_sport)

    def queue_pairs(self) -> dict[tuple[int, int, tuple[int, ...]], tuple[int, int, int]]:
        """The QPs behind the routes built so far: (source rank, destination rank, route links) -> (local QPN,
        remote QPN, UDP source port), so that the packet engine sends each transfer on the QP, and therefore
        the 5-tuple and the ECMP path, that this router hashed (the first channel when several share a route)."""
        out: dict[tuple[int, int, tuple[int, ...]], tuple[int, int, int]] = {}
        for (src, dst, channel), route in self._routes.items():
            qp = self.qps._qps.get((src, dst, channel))
            if route.flow is None or qp is None:
                continue
            out.setdefault((src, dst, route.links), (qp[0], qp[1], route.flow.src_port))
        return out

    def paths(self, src_rank: int, dst_rank: int, max_paths: int = MAX_PATHS) -> list[tuple[Route, float]]:
        """Every equal-cost route between two ranks, each with the share of traffic a per-hop uniform
        spray sends on it (products of 1/|ECMP group|; shares sum to 1). At most `max_paths` routes."""
        f = self.fabric
        if src_rank == dst_rank:
            raise ValueError(f"rank {src_rank} cannot send to itself")
        base = self.route(src_rank, dst_rank)
        if base.scale_up:
            return [(base, 1.0)]
        relay = base.relay_rank
        sender = src_rank if relay is None else relay
        head = [] if relay is None else self._nvlink_links(f.rank_gpu[src_rank], f.rank_gpu[relay])
        src_nic, dst_nic = f.rank_nic(sender), f.rank_nic(dst_rank)
        choice = self._egress_choices(src_nic, dst_nic)
        assert choice is not None
        ports, dst_switches = choice
        out: list[tuple[Route, float]] = []

        def walk(links: list[int], share: float) -> None:
            if len(out) >= max_paths:
                return
            node = f.links[links[-1]].dst
            if node in dst_switches:
                down = [li for li in f.out_links[node] if f.links[li].dst == dst_nic]
                for li in down:
                    full = [*head, *f.rank_nic_up[sender], *links, li, *f.rank_nic_down[dst_rank]]
                    out.append((self._finish(full, base.flow, relay), share / len(down)))
                return
            group = self.next_hops(node, dst_switches)
            for li in group:
                walk([*links, li], share / len(group))

        for li in ports:
            walk([li], 1.0 / len(ports))
        return out

    def spray_split(self, src_rank: int, dst_rank: int) -> dict[int, float]:
        """Share of the pair's traffic on every link under per-hop uniform spraying (fluid), without
        enumerating paths: mass flows down the shortest-path DAG, split evenly at each ECMP group."""
        f = self.fabric
        base = self.route(src_rank, dst_rank)
        if base.scale_up:
            return {li: 1.0 for li in base.links}
        relay = base.relay_rank
        sender = src_rank if relay is None else relay
        share: dict[int, float] = {}
        if relay is not None:
            for li in self._nvlink_links(f.rank_gpu[src_rank], f.rank_gpu[relay]):
                share[li] = 1.0
        for li in (*f.rank_nic_up[sender], *f.rank_nic_down[dst_rank]):
            share[li] = 1.0
        src_nic, dst_nic = f.rank_nic(sender), f.rank_nic(dst_rank)
        choice = self._egress_choices(src_nic, dst_nic)
        assert choice is not None
        ports, dst_switches = choice
        frontier: dict[str, float] = {}
        for li in ports:
            share[li] = share.get(li, 0.0) + 1.0 / len(ports)
            node = f.links[li].dst
            frontier[node] = frontier.get(node, 0.0) + 1.0 / len(ports)
        while frontier:
            nxt: dict[str, float] = {}
            for node, mass in frontier.items():
                if node in dst_switches:
                    down = [li for li in f.out_links[node] if f.links[li].dst == dst_nic]
                else:
                    down = self.next_hops(node, dst_switches)
                for li in down:
                    share[li] = share.get(li, 0.0) + mass / len(down)
                    v = f.links[li].dst
                    if v != dst_nic:
                        nxt[v] = nxt.get(v, 0.0) + mass / len(down)
            frontier = nxt
        return share
