"""The fabric as data: nodes (GPUs, NICs, NVSwitches, switches) and directed links.

A full-duplex cable is two directed links, one per direction, each with its own capacity, so
traffic in one direction never slows the other. A route is a list of link indices (htsim style).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# node kinds
GPU, NIC, NVSWITCH, RAIL, SPINE = "gpu", "nic", "nvswitch", "rail", "spine"
SWITCH_KINDS = frozenset({RAIL, SPINE})

# link tiers, from the GPU outwards
TIER_NVLINK, TIER_PCIE, TIER_HOST, TIER_SPINE = "nvlink", "pcie", "host", "spine"
TIERS = (TIER_NVLINK, TIER_PCIE, TIER_HOST, TIER_SPINE)
SCALE_UP_TIERS = frozenset({TIER_NVLINK})


@dataclass(frozen=True)
class Node:
    id: str
    kind: str
    server: int | None = None  # GPU servers' nodes
    index: int | None = None  # local GPU index, rail number, spine number
    ip: int | None = None  # NICs: IPv4 address as an integer


@dataclass(frozen=True)
class Link:
    index: int
    src: str
    dst: str
    capacity_bytes_per_s: float
    latency_s: float
    tier: str

    @property
    def id(self) -> str:
        return f"{self.src}->{self.dst}"


@dataclass
class Fabric:
    """Nodes and directed links, plus the rank -> GPU placement (torchrun order)."""

    name: str
    gpus_per_server: int
    switch_latency_s: float = 0.0
    nodes: dict[str, Node] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)
    out_links: dict[str, list[int]] = field(default_factory=dict)
    rank_gpu: list[str] = field(default_factory=list)

    def add_node(self, node: Node) -> Node:
        if node.id in self.nodes:
            raise ValueError(f"duplicate node {node.id}")
        self.nodes[node.id] = node
        self.out_links[node.id] = []
        return node

    def add_cable(self, a: str, b: str, capacity_bytes_per_s: float, latency_s: float, tier: str) -> None:
        """A full-duplex cable: one directed link each way."""
        for src, dst in ((a, b), (b, a)):
            link = Link(len(self.links), src, dst, capacity_bytes_per_s, latency_s, tier)
            self.links.append(link)
            self.out_links[src].append(link.index)

    @property
    def world_size(self) -> int:
        return len(self.rank_gpu)

    def server_of(self, rank: int) -> int:
        return rank // self.gpus_per_server

    def local_index(self, rank: int) -> int:
        return rank % self.gpus_per_server

    def nodes_of_kind(self, kind: str) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == kind]

    def is_switch(self, node_id: str) -> bool:
        return self.nodes[node_id].kind in SWITCH_KINDS
