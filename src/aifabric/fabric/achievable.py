"""What each link achieves: the fraction of its line rate that carries data, and calibrated latencies.

The flow and analytic engines and the collectives' cost model move payload bytes; a link's achievable
payload rate is its line rate x `Link.efficiency`, set here by tier from hardware characterization (the
packet engine puts real headers on the line rate and ignores it):

- NVLink: NCCL's ring bus bandwidth inside one server over the per-direction line rate, measured
  (catalog `nvlink_efficiency`: A100 232.8 / 300 GB/s, H100 370 / 450 GB/s);
- PCIe (GPU <-> NIC): 75 % of the x16 rate, as NCCL's topology model rates a PCIe link (`width * speed /
  80`: Gen4 x16 24 GB/s, Gen5 x16 48 GB/s; nccl src/graph/topo.cc) and as cloud node-acceptance tests
  expect of GPU <-> host copies (Azure HPC health checks: 24 GB/s Gen4, 48-52 GB/s Gen5). It is what
  holds a 200 Gb/s NIC to NCCL's 24 GB/s and a 400 Gb/s one to its 46-48 GB/s;
- NIC and switch links: the per-packet headers at the path MTU's payload (Linux include/rdma/ib_pack.h):
  RoCEv2 over IPv4 adds Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4 bytes and 20 bytes of
  preamble and inter-frame gap, 82 bytes a packet: at the default path MTU of 4,096 bytes 4096 / 4178 = 98.0 %,
  at the scenario's `fabric.qos.roce_mtu_bytes` otherwise (1024: 1024 / 1106 = 92.6 %; Deep Learning for
  Network Engineers, Chapter 9's example QP uses path MTU 1024); InfiniBand adds LRH 8 + BTH 12 + ICRC 4 +
  VCRC 2 at its 4,096-byte MTU: 4096 / 4122 = 99.4 %.

A scenario's `calibration` (the user's own nccl-tests output, `aifabric calibrate nccl-tests`) replaces the
NVLink figure and the network links' figure, and adds its `extra_latency_us` to one link of every hop of
that tier (the GPU's link into the NVSwitch; the NIC's link into its switch).
"""

from __future__ import annotations

from dataclasses import replace

from ..catalog import NCCL_LL_MAX_ACROSS_GBPS, server_cpu_vendor
from .graph import NIC, NVSWITCH, TIER_HOST, TIER_NVLINK, TIER_PCIE, TIER_SPINE, TIER_SUPERSPINE, Fabric

PCIE_EFFICIENCY = 0.75
MTU_PAYLOAD_BYTES = 4096
ROCE_OVERHEAD_BYTES = 14 + 20 + 8 + 12 + 4 + 4 + 20
IB_OVERHEAD_BYTES = 8 + 12 + 4 + 2
NETWORK_TIERS = frozenset({TIER_HOST, TIER_SPINE, TIER_SUPERSPINE})


def header_efficiency(transport: str, path_mtu_bytes: int = MTU_PAYLOAD_BYTES) -> float:
    """Payload bytes per line-rate byte of full packets: RoCEv2 at the path MTU (`fabric.qos.roce_mtu_bytes`),
    InfiniBand at its 4,096-byte MTU (the RoCE profile's path MTU does not apply to it)."""
    if transport == "infiniband":
        return MTU_PAYLOAD_BYTES / (MTU_PAYLOAD_BYTES + IB_OVERHEAD_BYTES)
    return path_mtu_bytes / (path_mtu_bytes + ROCE_OVERHEAD_BYTES)


def tier_efficiencies(
    gpu, transport: str = "roce", calibration=None, path_mtu_bytes: int = MTU_PAYLOAD_BYTES
) -> dict[str, float]:
    """Achievable fraction of the line rate per link tier."""
    nvlink = gpu.nvlink_efficiency
    network = header_efficiency(transport, path_mtu_bytes)
    if calibration is not None and calibration.nvlink is not None:
        nvlink = calibration.nvlink.bandwidth_efficiency
    if calibration is not None and calibration.network is not None:
        network = calibration.network.bandwidth_efficiency
    out = {TIER_NVLINK: nvlink, TIER_PCIE: PCIE_EFFICIENCY}
    out.update({t: network for t in NETWORK_TIERS})
    return out


def apply_achievable(
    fabric: Fabric,
    gpu,
    transport: str = "roce",
    calibration=None,
    path_mtu_bytes: int = MTU_PAYLOAD_BYTES,
    cpu_vendor: str = "",
) -> Fabric:
    """Set every link's efficiency (and calibrated extra latency) in place; returns the fabric. `path_mtu_bytes`:
    the RoCE path MTU whose per-packet headers the network links pay (a calibration's measured figure wins).
    `cpu_vendor` (the servers'; default: the GPU's reference server) picks NCCL's LL ceiling across servers."""
    eff = tier_efficiencies(gpu, transport, calibration, path_mtu_bytes)
    extra = {TIER_NVLINK: 0.0, TIER_HOST: 0.0}
    if calibration is not None and calibration.nvlink is not None:
        extra[TIER_NVLINK] = calibration.nvlink.extra_latency_us * 1e-6
    if calibration is not None and calibration.network is not None:
        extra[TIER_HOST] = calibration.network.extra_latency_us * 1e-6
    for i, link in enumerate(fabric.links):
        latency = link.latency_s
        src_kind = fabric.nodes[link.src].kind
        if link.tier == TIER_NVLINK and fabric.nodes[link.dst].kind == NVSWITCH:
            latency = max(0.0, latency + extra[TIER_NVLINK])
        elif link.tier == TIER_HOST and src_kind == NIC:
            latency = max(0.0, latency + extra[TIER_HOST])
        fabric.links[i] = replace(link, efficiency=eff.get(link.tier, 1.0), latency_s=latency)
    fabric.ll_max_bytes_per_s = getattr(gpu, "nccl_ll_max_gBps", 0.0) * 1e9  # NCCL's LL ceiling (catalog)
    if fabric.ll_max_bytes_per_s:  # NCCL (not RCCL): its ceiling across servers, by the servers' CPU vendor
        vendor = cpu_vendor or server_cpu_vendor(gpu.name)
        across = NCCL_LL_MAX_ACROSS_GBPS["amd" if vendor == "amd" else "other"]
        fabric.ll_max_across_bytes_per_s = (across[0] * 1e9, across[1] * 1e9)
    return fabric
