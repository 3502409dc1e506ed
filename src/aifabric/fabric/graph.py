"""The fabric as data: nodes (GPUs, NICs, NVSwitches, switches) and directed links.

A full-duplex cable is two directed links, one per direction, each with its own capacity, so
traffic in one direction never slows the other. A route is a list of link indices (htsim style).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# node kinds
GPU, NIC, NVSWITCH, PCIE_SWITCH = "gpu", "nic", "nvswitch", "pcie-switch"
RAIL, SPINE, SUPERSPINE = "rail", "spine", "superspine"
SWITCH_KINDS = frozenset({RAIL, SPINE, SUPERSPINE})
SWITCH_LEVEL = {RAIL: 1, SPINE: 2, SUPERSPINE: 3}  # 0 = inside a server

# link tiers, from the GPU outwards (a cable's tier is the upper end's: rail<->spine = "spine")
TIER_NVLINK, TIER_PCIE, TIER_HOST, TIER_SPINE, TIER_SUPERSPINE = "nvlink", "pcie", "host", "spine", "superspine"
TIERS = (TIER_NVLINK, TIER_PCIE, TIER_HOST, TIER_SPINE, TIER_SUPERSPINE)
SCALE_UP_TIERS = frozenset({TIER_NVLINK})


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    kind: str
    server: int | None = None  # GPU servers' nodes
    index: int | None = None  # local GPU index, NIC's rail (0-based), rail group, spine / super-spine number
    ip: int | None = None  # NICs: IPv4 address as an integer
    pod: int | None = None  # switches: pod (rail, spine)
    segment: int | None = None  # rail switches: host segment within the pod
    plane: int | None = None  # rail switches: NIC port plane (dual-port NICs: 0 and 1); super-spines: plane
    radix: int | None = None  # switches: ports


@dataclass(frozen=True, slots=True)
class Link:
    index: int
    src: str
    dst: str
    capacity_bytes_per_s: float  # line rate
    latency_s: float
    tier: str
    efficiency: float = 1.0  # payload bytes per line-rate byte the link achieves (fabric/achievable.py)

    @property
    def id(self) -> str:
        return f"{self.src}->{self.dst}"

    @property
    def rate_bytes_per_s(self) -> float:
        """Achievable payload rate: what the flow and analytic engines and the cost model use (the packet
        engine puts the real headers on the line rate itself)."""
        return self.capacity_bytes_per_s * self.efficiency


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
    # per rank: the links from the GPU to the NIC that serves it (PCIe, maybe via a PCIe switch) and back
    rank_nic_up: list[tuple[int, ...]] = field(default_factory=list)
    rank_nic_down: list[tuple[int, ...]] = field(default_factory=list)
    design: object | None = None  # the resolved design (fabric.design.Design) the builder used, if any
    nvls: bool = False  # the NVSwitch reduces and multicasts (NVLink SHARP: H100 and later)
    ll_max_bytes_per_s: float = 0.0  # NCCL's LL bus-bandwidth ceiling inside one server (0: none known)
    ll_max_across_bytes_per_s: tuple[float, float] = (0.0, 0.0)  # the same across 2 servers, across more

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

    def rank_nic(self, rank: int) -> str:
        """The NIC that carries rank's scale-out traffic."""
        return self.links[self.rank_nic_up[rank][-1]].dst

    def link_between(self, src: str, dst: str) -> int:
        for li in self.out_links[src]:
            if self.links[li].dst == dst:
                return li
        raise KeyError(f"no link {src}->{dst}")

    def level(self, node_id: str) -> int:
        """0 inside servers, 1 rail (leaf), 2 spine, 3 super-spine."""
        return SWITCH_LEVEL.get(self.nodes[node_id].kind, 0)

    def is_uplink(self, link_index: int) -> bool:
        """A directed link from a switch up to a higher tier (rail->spine, spine->super-spine)."""
        link = self.links[link_index]
        a, b = self.level(link.src), self.level(link.dst)
        return a >= 1 and b > a
