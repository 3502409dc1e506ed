"""Builders: scenario's cluster + fabric sections -> a `Fabric` graph."""

from __future__ import annotations

from ..catalog import PCIE_X16_GBPS_PER_DIRECTION, gpu
from ..scenario.schema import ClusterSpec, FabricSpec
from ..units import gBps_to_bytes_per_s, gbps_to_bytes_per_s, ns_to_s
from .graph import GPU, NIC, NVSWITCH, RAIL, SPINE, TIER_HOST, TIER_NVLINK, TIER_PCIE, TIER_SPINE, Fabric, Node


def gpu_id(server: int, local: int) -> str:
    return f"s{server}/gpu{local}"


def nic_id(server: int, local: int) -> str:
    return f"s{server}/nic{local}"


def nic_ip(rail: int, server: int) -> int:
    """10.<rail>.<server // 256>.<server % 256>: one /16 per rail (a simple, collision-free plan)."""
    return (10 << 24) | (rail << 16) | ((server >> 8) << 8) | (server & 0xFF)


def build_rail_optimized(cluster: ClusterSpec, fabric: FabricSpec, name: str = "fabric") -> Fabric:
    """Rail-optimized two-tier leaf/spine (seeds Ch. 13, Figures 13-7/13-8).

    Every server has `gpus_per_server` GPUs on one NVSwitch, each GPU with its own NIC on PCIe.
    NIC i of every server connects to rail switch i; every rail switch connects to every spine with
    `links_per_spine` parallel links. Ranks follow torchrun: rank = server * gpus_per_server + local.
    """
    spec = gpu(cluster.gpu)
    nvlink_total = cluster.nvlink_bandwidth_gBps or spec.nvlink_bandwidth_gBps
    nvlink_bps = gBps_to_bytes_per_s(nvlink_total / 2)  # per direction
    nic_bps = gbps_to_bytes_per_s(cluster.nic_speed_gbps or spec.typical_nic_gbps)
    pcie_bps = gBps_to_bytes_per_s(cluster.pcie_bandwidth_gBps or PCIE_X16_GBPS_PER_DIRECTION[spec.pcie_gen])
    isl_bps = gbps_to_bytes_per_s(fabric.link_speed_gbps)
    cable_s = ns_to_s(fabric.link_latency_ns)
    # NVLink and PCIe latencies are end-to-end GPU<->GPU / GPU<->NIC: split over the two hops / one hop
    nvlink_hop_s = ns_to_s(cluster.nvlink_latency_ns) / 2
    pcie_s = ns_to_s(cluster.pcie_latency_ns)

    f = Fabric(name=name, gpus_per_server=cluster.gpus_per_server,
               switch_latency_s=ns_to_s(fabric.switch_latency_ns))
    for r in range(cluster.gpus_per_server):
        f.add_node(Node(f"rail{r}", RAIL, index=r))
    for p in range(fabric.spines):
        f.add_node(Node(f"spine{p}", SPINE, index=p))
    for s in range(cluster.servers):
        nvs = f.add_node(Node(f"s{s}/nvswitch", NVSWITCH, server=s))
        for g in range(cluster.gpus_per_server):
            gpu_node = f.add_node(Node(gpu_id(s, g), GPU, server=s, index=g))
            nic = f.add_node(Node(nic_id(s, g), NIC, server=s, index=g, ip=nic_ip(g, s)))
            f.rank_gpu.append(gpu_node.id)
            f.add_cable(gpu_node.id, nvs.id, nvlink_bps, nvlink_hop_s, TIER_NVLINK)
            f.add_cable(gpu_node.id, nic.id, pcie_bps, pcie_s, TIER_PCIE)
            f.add_cable(nic.id, f"rail{g}", nic_bps, cable_s, TIER_HOST)
    for r in range(cluster.gpus_per_server):
        for p in range(fabric.spines):
            for _ in range(fabric.links_per_spine):
                f.add_cable(f"rail{r}", f"spine{p}", isl_bps, cable_s, TIER_SPINE)
    return f
