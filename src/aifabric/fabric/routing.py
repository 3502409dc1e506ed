"""Routes: the list of directed links a GPU-to-GPU transfer crosses.

Inside a server, GPUs talk over NVLink through the NVSwitch. Between servers a transfer leaves on
the source GPU's own NIC (PCIe, then the NIC's cable to its rail switch), crosses the switches by
shortest paths with ECMP choosing among equal-cost next hops, and enters the destination GPU
through the destination's NIC. Queue pairs are allocated per (source rank, destination rank,
channel), with QP numbers drawn from the scenario's seeded generator.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .ecmp import FiveTuple, ecmp_hash, roce_udp_source_port, switch_seed
from .graph import NIC, NVSWITCH, SCALE_UP_TIERS, Fabric


@dataclass(frozen=True)
class Route:
    links: tuple[int, ...]
    latency_s: float
    scale_up: bool  # True when the whole route is inside one server (NVLink)
    flow: FiveTuple | None = None


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
    def __init__(self, fabric: Fabric, hash_seed: int = 0, per_switch_seed: bool = False, seed: int = 0):
        self.fabric = fabric
        self.hash_seed = hash_seed
        self.per_switch_seed = per_switch_seed
        self.qps = QueuePairs(np.random.default_rng(seed))
        self._dist: dict[str, dict[str, int]] = {}
        self._routes: dict[tuple[int, int, int], Route] = {}
        self._nvswitch_link: dict[tuple[str, str], int] = {}

    # -- helpers ------------------------------------------------------------------------------
    def _link_to(self, src: str, dst: str) -> int:
        for li in self.fabric.out_links[src]:
            if self.fabric.links[li].dst == dst:
                return li
        raise KeyError(f"no link {src}->{dst}")

    def _neighbor_of_kind(self, node: str, kind: str) -> int:
        for li in self.fabric.out_links[node]:
            if self.fabric.nodes[self.fabric.links[li].dst].kind == kind:
                return li
        raise KeyError(f"{node} has no {kind} neighbor")

    def switch_distances(self, target: str) -> dict[str, int]:
        """Hop count from every switch to `target` over switch-to-switch links (BFS, cached)."""
        if target not in self._dist:
            f = self.fabric
            dist = {target: 0}
            queue = deque([target])
            while queue:
                u = queue.popleft()
                for li in f.out_links[u]:  # cables are symmetric: out-links give the neighbours
                    v = f.links[li].dst
                    if f.is_switch(v) and v not in dist:
                        dist[v] = dist[u] + 1
                        queue.append(v)
            self._dist[target] = dist
        return self._dist[target]

    def next_hops(self, switch: str, target: str) -> list[int]:
        """Out-links of `switch` on a shortest path to switch `target` (the ECMP group)."""
        dist = self.switch_distances(target)
        here = dist[switch]
        f = self.fabric
        return [li for li in f.out_links[switch] if dist.get(f.links[li].dst, -1) == here - 1]

    def switch_path(self, first: str, last: str, flow: FiveTuple) -> list[int]:
        links: list[int] = []
        node = first
        while node != last:
            group = self.next_hops(node, last)
            if not group:
                raise ValueError(f"no path from {first} to {last}")
            seed = switch_seed(self.hash_seed, node, self.per_switch_seed)
            li = group[ecmp_hash(flow, seed) % len(group)]
            links.append(li)
            node = self.fabric.links[li].dst
        return links

    # -- the API --------------------------------------------------------------------------------
    def route(self, src_rank: int, dst_rank: int, channel: int = 0) -> Route:
        key = (src_rank, dst_rank, channel)
        cached = self._routes.get(key)
        if cached is not None:
            return cached
        f = self.fabric
        src_gpu, dst_gpu = f.rank_gpu[src_rank], f.rank_gpu[dst_rank]
        if src_rank == dst_rank:
            raise ValueError(f"rank {src_rank} cannot send to itself")
        if f.nodes[src_gpu].server == f.nodes[dst_gpu].server:
            up = self._neighbor_of_kind(src_gpu, NVSWITCH)
            down = self._link_to(f.links[up].dst, dst_gpu)
            links = [up, down]
            flow = None
        else:
            pcie_out = self._neighbor_of_kind(src_gpu, NIC)
            src_nic = f.links[pcie_out].dst
            dst_nic_link = self._neighbor_of_kind(dst_gpu, NIC)  # dst_gpu -> its NIC
            dst_nic = f.links[dst_nic_link].dst
            pcie_in = self._link_to(dst_nic, dst_gpu)
            first_sw_link = next(li for li in f.out_links[src_nic] if f.is_switch(f.links[li].dst))
            last_sw_link = next(li for li in f.out_links[dst_nic] if f.is_switch(f.links[li].dst))
            first_sw = f.links[first_sw_link].dst
            last_sw = f.links[last_sw_link].dst
            down_link = self._link_to(last_sw, dst_nic)
            lqpn, rqpn = self.qps.pair(src_rank, dst_rank, channel, src_nic, dst_nic)
            flow = FiveTuple(f.nodes[src_nic].ip, f.nodes[dst_nic].ip, roce_udp_source_port(lqpn, rqpn))
            links = [pcie_out, first_sw_link, *self.switch_path(first_sw, last_sw, flow), down_link, pcie_in]
        switches = sum(1 for li in links if f.is_switch(f.links[li].dst))
        latency = sum(f.links[li].latency_s for li in links) + switches * f.switch_latency_s
        scale_up = all(f.links[li].tier in SCALE_UP_TIERS for li in links)
        route = Route(tuple(links), latency, scale_up, flow)
        self._routes[key] = route
        return route
