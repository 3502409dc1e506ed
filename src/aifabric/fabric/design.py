"""A fabric design resolved to integers: how many of everything, before any graph is built.

Pure arithmetic from the scenario's cluster and fabric sections. The builders, the plan (bill of
materials, capacity), the checks and the drawing all read the same `Design`, so they cannot disagree.

Vocabulary (seeds Ch. 13): a *rail* is the set of NICs with the same local index across servers; a
*rail switch* (leaf) serves `rails_per_switch` rails of one *host segment*; a dual-port NIC's ports go
to two *planes* of rail switches; a *pod* is segments + spines (two-tier, three-stage Clos); a
*multi-pod* fabric adds super-spines (three-tier, five-stage).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..catalog import PCIE_X16_GBPS_PER_DIRECTION, gpu
from .ecmp import HASH_FIELDS

if TYPE_CHECKING:  # the scenario imports the fabric (checks); the fabric needs only its types
    from ..scenario.fabric_spec import ClusterSpec, FabricSpec

TOPOLOGIES_WITH_SPINES = frozenset({"rail-optimized", "multi-pod"})


@dataclass(frozen=True)
class Design:
    topology: str
    # servers
    gpu: str
    scale_up: str
    servers: int
    gpus_per_server: int
    nics_per_server: int  # = rails
    nic_ports: int
    nic_layout: str
    pcie_switch: bool
    host_speed_gbps: float
    nvlink_bandwidth_gBps: float  # per GPU, both directions summed
    pcie_bandwidth_gBps: float  # per direction
    # rail (leaf) tier
    pods: int
    servers_per_pod: int
    servers_per_segment: int
    segments_per_pod: int
    planes: int  # rail-switch planes (NIC ports to distinct switches)
    rails_per_switch: int
    groups_per_plane: int  # rail switches per plane in a segment
    leaf_radix: int
    # spine tier
    spines_per_pod: int
    spines_per_leaf: int
    links_per_spine: int
    spine_speed_gbps: float
    spine_radix: int
    partial_mesh: bool
    # super-spine tier
    superspines: int
    superspine_planes: int
    links_per_superspine: int
    superspine_speed_gbps: float
    superspine_radix: int
    # the header fields the switches' ECMP hash reads (fabric.ecmp_hash_fields; ecmp.HASH_FIELDS order)
    ecmp_hash_fields: tuple[str, ...] = ("src_ip", "dst_ip", "protocol", "src_port", "dst_port")

    # -- counts ------------------------------------------------------------------------------------
    @property
    def rails(self) -> int:
        return self.nics_per_server

    @property
    def gpus(self) -> int:
        return self.servers * self.gpus_per_server

    @property
    def segments(self) -> int:
        return self.pods * self.segments_per_pod

    @property
    def leafs_per_segment(self) -> int:
        return self.planes * self.groups_per_plane

    @property
    def leafs_per_pod(self) -> int:
        return self.segments_per_pod * self.leafs_per_segment

    @property
    def leafs(self) -> int:
        return self.pods * self.leafs_per_pod

    @property
    def spines(self) -> int:
        return self.pods * self.spines_per_pod

    @property
    def superspines_per_plane(self) -> int:
        return self.superspines // self.superspine_planes if self.superspine_planes else 0

    # -- ports per switch --------------------------------------------------------------------------
    @property
    def ports_per_nic_per_plane(self) -> int:
        """Cables from one NIC to one rail-switch plane (single-switch: all its ports go to the one switch)."""
        return self.nic_ports // self.planes

    @property
    def leaf_host_ports(self) -> int:
        return self.servers_per_segment * self.rails_per_switch * self.ports_per_nic_per_plane

    @property
    def leaf_up_ports(self) -> int:
        return self.spines_per_leaf * self.links_per_spine

    @property
    def spine_down_ports(self) -> int:
        """Ports of one spine toward rail switches (partial mesh: an average, rounded up)."""
        if not self.spines_per_pod:
            return 0
        return math.ceil(self.leafs_per_pod * self.spines_per_leaf / self.spines_per_pod) * self.links_per_spine

    @property
    def spine_up_ports(self) -> int:
        return self.superspines_per_plane * self.links_per_superspine if self.superspines else 0

    @property
    def superspine_down_ports(self) -> int:
        """Ports of one super-spine toward spines: one bundle per spine of its plane in every pod."""
        if not self.superspines:
            return 0
        spines_in_plane = math.ceil(self.spines_per_pod / self.superspine_planes)
        return self.pods * spines_in_plane * self.links_per_superspine

    def describe(self) -> str:
        """One line a network engineer reads: servers, GPUs, NICs, tiers."""
        tiers = {
            "single-switch": "one switch",
            "rail-only": "rail-only (no spine, PXN over NVLink)",
            "rail-optimized": f"two-tier, three-stage Clos ({self.leafs:,} rail switches, {self.spines:,} spines)",
            "multi-pod": f"three-tier, five-stage Clos ({self.pods} pods, {self.leafs:,} rail switches, "
            f"{self.spines:,} spines, {self.superspines:,} super-spines)",
            "custom": "custom",
        }[self.topology]
        nic = (
            f"{self.nics_per_server} shared NIC(s) behind a PCIe switch"
            if self.nic_layout == "shared"
            else "a NIC per GPU"
        ) + (f", {self.nic_ports} ports each" if self.nic_ports > 1 else "")
        return (
            f"{self.servers:,} servers × {self.gpus_per_server} {self.gpu} = {self.gpus:,} GPUs; {nic} at "
            f"{self.host_speed_gbps:g} Gb/s; {tiers}"
        )

    def rail_of_nic(self, nic: int) -> int:
        return nic

    def nic_of_gpu(self, local_gpu: int) -> int:
        return local_gpu * self.nics_per_server // self.gpus_per_server


def _derived_count(down_gbps: float, ratio: float, link_gbps: float, links: int) -> int:
    """Switches (each reached by `links` cables of `link_gbps`) so that down:up <= ratio."""
    up_ports = math.ceil(down_gbps / (ratio * link_gbps) - 1e-9)
    return max(1, math.ceil(up_ports / links))


def resolve(cluster: ClusterSpec, fabric: FabricSpec) -> Design:
    """The design's integers. Tolerant: odd inputs round up; `checks_fabric` reports them."""
    spec = gpu(cluster.gpu)
    topo = fabric.topology
    host_gbps = cluster.nic_speed_gbps or spec.typical_nic_gbps
    nics = cluster.nics
    pods = fabric.pods if topo == "multi-pod" else 1
    servers_per_pod = math.ceil(cluster.servers / pods)
    if topo in ("single-switch", "rail-only"):
        per_segment = cluster.servers
    else:
        per_segment = min(fabric.servers_per_segment or servers_per_pod, servers_per_pod)
    segments_per_pod = math.ceil(servers_per_pod / per_segment)
    if topo == "single-switch":
        planes, rails_per_switch = 1, nics
    else:
        planes, rails_per_switch = cluster.nic_ports, min(fabric.rails_per_switch, nics)
    groups = math.ceil(nics / rails_per_switch)
    leafs_per_pod = segments_per_pod * planes * groups
    ports_per_plane = cluster.nic_ports // planes
    leaf_down_gbps = per_segment * rails_per_switch * ports_per_plane * host_gbps

    spines = 0
    if topo in TOPOLOGIES_WITH_SPINES:
        spines = fabric.spines
        if fabric.leaf_oversubscription is not None:
            spines = _derived_count(
                leaf_down_gbps, fabric.leaf_oversubscription, fabric.link_speed_gbps, fabric.links_per_spine
            )
    partial = fabric.spine_cabling == "partial-mesh" and spines > 0
    spines_per_leaf = min(fabric.spines_per_leaf or spines, spines) if partial else spines

    superspines, ss_planes = 0, 1
    ss_gbps = fabric.superspine_link_speed_gbps or fabric.link_speed_gbps
    if topo == "multi-pod" and spines:
        ss_planes = min(fabric.superspine_planes, spines)
        superspines = fabric.superspines
        if fabric.spine_oversubscription is not None or superspines == 0:
            ratio = fabric.spine_oversubscription or 1.0
            spine_down_gbps = (
                math.ceil(leafs_per_pod * spines_per_leaf / spines) * fabric.links_per_spine * fabric.link_speed_gbps
            )
            superspines = ss_planes * _derived_count(spine_down_gbps, ratio, ss_gbps, fabric.links_per_superspine)
    return Design(
        topology=topo,
        gpu=spec.name,
        scale_up=cluster.scale_up,
        servers=cluster.servers,
        gpus_per_server=cluster.gpus_per_server,
        nics_per_server=nics,
        nic_ports=cluster.nic_ports,
        nic_layout=cluster.nic_layout,
        pcie_switch=cluster.has_pcie_switch,
        host_speed_gbps=host_gbps,
        nvlink_bandwidth_gBps=cluster.nvlink_bandwidth_gBps or spec.nvlink_bandwidth_gBps,
        pcie_bandwidth_gBps=cluster.pcie_bandwidth_gBps or PCIE_X16_GBPS_PER_DIRECTION[spec.pcie_gen],
        pods=pods,
        servers_per_pod=servers_per_pod,
        servers_per_segment=per_segment,
        segments_per_pod=segments_per_pod,
        planes=planes,
        rails_per_switch=rails_per_switch,
        groups_per_plane=groups,
        leaf_radix=fabric.switch_radix,
        spines_per_pod=spines,
        spines_per_leaf=spines_per_leaf,
        links_per_spine=fabric.links_per_spine,
        spine_speed_gbps=fabric.link_speed_gbps,
        spine_radix=fabric.spine_radix or fabric.switch_radix,
        partial_mesh=partial,
        superspines=superspines,
        superspine_planes=ss_planes,
        links_per_superspine=fabric.links_per_superspine,
        superspine_speed_gbps=ss_gbps,
        superspine_radix=fabric.superspine_radix or fabric.switch_radix,
        ecmp_hash_fields=tuple(f for f in HASH_FIELDS if f in getattr(fabric, "ecmp_hash_fields", HASH_FIELDS)),
    )
