"""Scenario sections for the hardware: the GPU cluster (servers and their insides) and the backend fabric.

Every design of Deep Learning for Network Engineers (Ch. 10 and 13, blog "AI Cluster Networking") is a value
of these fields:

| design                                   | fields                                                         |
|------------------------------------------|----------------------------------------------------------------|
| shared NIC (Figure 13-1)                 | `cluster.nic_layout: shared`, `cluster.nics_per_server: 1`       |
| NIC per GPU (Figure 13-2)                | `cluster.nic_layout: per-gpu` (default)                         |
| dual-port NIC to two switches (13-5/13-7)| `cluster.nic_ports: 2` (active-active, LAG over the two links)  |
| single switch (Figure 13-4)              | `fabric.topology: single-switch`                                |
| rail-only, cross-rail over NVLink (§6.5) | `fabric.topology: rail-only` (PXN relay)                        |
| Pod: two-tier rail-optimized (13-8)      | `fabric.topology: rail-optimized`, `spines`, `servers_per_segment` |
| Multi-Pod: three-tier (13-9)             | `fabric.topology: multi-pod`, `pods`, `superspines`             |
| multi-/dual-/single-rail per switch      | `fabric.rails_per_switch: 8 / 2 / 1` (Figures 13-10/11/12)      |
| partial-mesh leaf-spine (§6.12)          | `fabric.spine_cabling: partial-mesh`, `spines_per_leaf`         |
| your own                                 | `fabric.topology: custom`, `fabric.custom.switches` / `links`   |
"""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ..catalog import GPUS
from .base import Strict
from .costs_spec import CostsSpec
from .qos_spec import QosSpec
from .reliability_spec import ReliabilitySpec


class ClusterSpec(Strict):
    """GPU servers: identical; GPUs joined by NVSwitch inside a server; NICs on PCIe."""

    gpu: str = Field("H100", description="GPU model from the catalog: " + ", ".join(GPUS))
    servers: int = Field(..., ge=1, le=131_072, description="number of GPU servers (NVL72: racks)")
    gpus_per_server: int = Field(..., ge=1, le=72, description="GPUs in one server (scale-up domain)")
    scale_up: Literal["nvswitch", "nvl72"] = Field(
        "nvswitch",
        description="scale-up domain: an 8-GPU NVSwitch baseboard server, or an NVL72-style rack "
        "(72 GPUs on one NVLink domain, 18 trays x 4 GPUs)",
    )
    nvls: bool | None = Field(
        None,
        description="NVLink SHARP: the NVSwitch reduces and multicasts, and NCCL uses it for AllReduce inside "
        "a server (default: on for H100, H200, B200 and GB200, as NCCL enables it; off for A100 and MI300X)",
    )
    nvlink_bandwidth_gBps: float | None = Field(
        None, gt=0, description="NVLink bandwidth per GPU, GB/s, both directions summed (default: catalog)"
    )
    nic_layout: Literal["per-gpu", "shared"] = Field(
        "per-gpu", description="a NIC per GPU (Figure 13-2), or GPUs sharing NICs behind a PCIe switch (13-1)"
    )
    nics_per_server: int | None = Field(
        None, ge=1, le=576, description="NICs per server (per-gpu: = gpus_per_server; shared: default 1)"
    )
    nic_ports: int = Field(
        1, ge=1, le=4, description="ports per NIC, each to its own rail-switch plane (2 = dual-port, Figure 13-5)"
    )
    nic_speed_gbps: float | None = Field(None, gt=0, description="NIC port speed, Gb/s (default: catalog)")
    pcie_switch: bool | None = Field(
        None, description="a PCIe switch between GPUs and NICs (default: yes for shared NICs)"
    )
    pcie_bandwidth_gBps: float | None = Field(
        None, gt=0, description="PCIe GPU<->NIC bandwidth per direction, GB/s (default: x16 of the GPU's gen)"
    )
    cpu_vendor: Literal["intel", "amd", "arm", "other"] | None = Field(
        None,
        description="the servers' CPU vendor: NCCL caps its LL protocol's bus bandwidth across servers by it "
        "(AMD: 22.5 GB/s on 2 servers, 19.0 on more; others: 39.0, 20.4). Default: the GPU's reference server "
        "(DGX A100: amd; DGX H100, H200, B200: intel; GB200: arm; other GPUs: other)",
    )
    nvlink_latency_ns: float = Field(500, ge=0, description="one-way GPU-to-GPU latency over NVLink, ns")
    pcie_latency_ns: float = Field(300, ge=0, description="one-way GPU-to-NIC latency over PCIe, ns")

    @field_validator("cpu_vendor", mode="before")
    @classmethod
    def _vendor_any_case(cls, value):
        return value.lower() if isinstance(value, str) else value

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, value: str) -> str:
        if value.upper() not in GPUS:
            raise ValueError(f"unknown GPU {value!r}; known: {', '.join(GPUS)}")
        return value.upper()

    @property
    def total_gpus(self) -> int:
        return self.servers * self.gpus_per_server

    @property
    def nics(self) -> int:
        """NICs in one server."""
        if self.nics_per_server is not None:
            return self.nics_per_server
        return self.gpus_per_server if self.nic_layout == "per-gpu" else 1

    @property
    def has_pcie_switch(self) -> bool:
        return self.pcie_switch if self.pcie_switch is not None else self.nic_layout == "shared"


class CustomSwitch(Strict):
    id: str = Field(..., min_length=1, description="switch name, e.g. leaf1")
    kind: Literal["rail", "leaf", "spine", "superspine"] = Field("rail", description="tier (leaf = rail)")
    radix: int | None = Field(None, ge=1, le=65_536, description="ports (default: fabric.switch_radix)")


class CustomLink(Strict):
    a: str = Field(..., description="a switch id, or a NIC as s<server>/nic<index>")
    b: str = Field(..., description="a switch id, or a NIC as s<server>/nic<index>")
    speed_gbps: float | None = Field(
        None, gt=0, description="Gb/s (default: NIC speed for host links, fabric.link_speed_gbps between switches)"
    )
    count: int = Field(1, ge=1, le=1024, description="parallel cables")
    latency_ns: float | None = Field(None, ge=0, description="propagation delay (default: fabric.link_latency_ns)")

    @model_validator(mode="after")
    def _two_ends(self) -> CustomLink:
        if self.a == self.b:
            raise ValueError(f"a cable from {self.a} to itself (a and b must differ)")
        return self


class CustomTopology(Strict):
    """A user-defined fabric: switches and cables. Servers' insides come from the cluster section."""

    switches: list[CustomSwitch] = Field(..., min_length=1)
    links: list[CustomLink] = Field(..., min_length=1)


class FabricSpec(Strict):
    """The scale-out backend network."""

    topology: Literal["single-switch", "rail-only", "rail-optimized", "multi-pod", "custom"] = "rail-optimized"
    # leaf (rail) tier
    servers_per_segment: int | None = Field(
        None,
        ge=1,
        le=131_072,
        description="servers under one set of rail switches (Host-Segment; default: all of a pod)",
    )
    rails_per_switch: int = Field(
        1,
        ge=1,
        le=576,
        description="rails served by one rail switch: 1 single-rail, 2 dual-rail, more = multi-rail per switch",
    )
    switch_radix: int = Field(64, ge=2, le=65_536, description="ports per rail (leaf) switch")
    # spine tier
    spines: int = Field(2, ge=0, le=65_536, description="spine switches per pod")
    link_speed_gbps: float = Field(400, gt=0, description="rail-to-spine link speed, Gb/s")
    links_per_spine: int = Field(1, ge=1, le=1024, description="parallel links from each rail switch to each spine")
    spine_radix: int | None = Field(None, ge=2, le=65_536, description="ports per spine (default: switch_radix)")
    spine_cabling: Literal["full-mesh", "partial-mesh"] = Field(
        "full-mesh", description="every leaf to every spine, or each leaf to a distinct subset (breaks polarization)"
    )
    spines_per_leaf: int | None = Field(None, ge=1, le=65_536, description="partial mesh: spines each leaf connects to")
    leaf_oversubscription: float | None = Field(
        None,
        ge=0.01,
        le=1000,
        description="derive the spine count from this down:up ratio of rail switches (1 = non-blocking)",
    )
    # super-spine tier (multi-pod)
    pods: int = Field(1, ge=1, le=4096, description="pods (multi-pod)")
    superspines: int = Field(0, ge=0, le=65_536, description="super-spine switches (multi-pod)")
    superspine_planes: int = Field(
        1,
        ge=1,
        le=4096,
        description="super-spine planes: spine j of every pod connects to "
        "every super-spine of plane j mod planes (1 = full mesh)",
    )
    superspine_link_speed_gbps: float | None = Field(
        None, gt=0, description="spine-to-super-spine Gb/s (default: link_speed_gbps)"
    )
    links_per_superspine: int = Field(
        1, ge=1, le=1024, description="parallel links from each spine to each super-spine"
    )
    superspine_radix: int | None = Field(
        None, ge=2, le=65_536, description="ports per super-spine (default: switch_radix)"
    )
    spine_oversubscription: float | None = Field(
        None, ge=0.01, le=1000, description="derive the super-spine count from this down:up ratio of spines"
    )
    custom: CustomTopology | None = Field(None, description="topology: custom: switches and links")
    transport: Literal["roce", "infiniband"] = Field(
        "roce",
        description="the scale-out fabric's transport: RoCEv2 over Ethernet or InfiniBand (its per-packet "
        "headers set how much of a link's line rate carries data; fabric/achievable.py)",
    )
    # timing
    link_latency_ns: float = Field(100, ge=0, description="propagation delay of one cable, ns")
    switch_latency_ns: float = Field(600, ge=0, description="forwarding latency of one switch, ns")
    # routing and load balancing
    pxn: bool = Field(
        False,
        description="relay cross-rail traffic over NVLink to the GPU on the destination rail "
        "(NCCL PXN), even when spines exist (always on for rail-only)",
    )
    load_balancing: Literal["ecmp", "flowlet", "spray", "adaptive"] = Field(
        "ecmp",
        description="path choice (Ch. 12): per-flow ECMP hash, flowlets, per-packet spraying, or adaptive "
        "(least-loaded port); the packet engine applies all four; the flow and analytic "
        "engines route each QP by its ECMP hash under ecmp and spread each transfer evenly over "
        "the equal-cost paths under the other three",
    )
    flowlet_gap_us: float = Field(
        50, gt=0, description="idle gap that starts a new flowlet, µs (not in the book; a configurable default)"
    )
    ecmp_hash_seed: int = Field(0, ge=0, le=0xFFFFFFFF, description="seed of the CRC32 5-tuple ECMP hash")
    ecmp_hash_fields: list[Literal["src_ip", "dst_ip", "protocol", "src_port", "dst_port"]] = Field(
        ["src_ip", "dst_ip", "protocol", "src_port", "dst_port"],
        min_length=1,
        max_length=5,
        description="header fields the switches' ECMP hash reads (default the 5-tuple; without src_port every QP "
        "between two NICs takes one path)",
    )
    per_switch_hash_seed: bool = Field(
        False, description="mix each switch's id into its ECMP seed (breaks hash polarization)"
    )
    # addressing and cabling plan
    address_block: str = Field("10.0.0.0/8", description="IPv4 block the rail subnets are carved from")
    subnet_per: Literal["rail", "switch"] = Field(
        "rail", description="one subnet + VLAN per rail on each switch, or one per rail switch (rail group)"
    )
    subnet_prefix_length: int | None = Field(
        None,
        ge=8,
        le=30,
        description="prefix length of every rail subnet (default: the smallest that holds its "
        "hosts); the book's /28, /25 and /24 of Figures 13-10..13-12",
    )
    vlan_base: int = Field(101, ge=1, le=4094, description="VLAN of rail 1 (the book: 101, 102, ...)")
    port_layout: Literal["rail-major", "host-major", "interleaved"] = Field(
        "rail-major",
        description="host ports on a rail switch: by rail (13-11/12), by host (13-4), or the "
        "Figure 13-6 interleave with uplinks between",
    )

    underlay_block: str = Field(
        "172.16.0.0/12",
        description="IPv4 block of the switches' loopbacks (its first "
        "/16) and inter-switch /31s (from its second /16), for `aifabric fabric config`",
    )
    qos: QosSpec = Field(
        QosSpec(),
        description="switch QoS profile: DSCP -> QoS group -> queue, scheduling, WRED/ECN, PFC, buffers, "
        "MTU, DCQCN (default: Deep Learning for Network Engineers, Chapter 11); the packet engine runs it and "
        "`aifabric fabric config` writes it as NX-OS or SONiC configuration",
    )

    @field_validator("ecmp_hash_fields")
    @classmethod
    def _distinct_fields(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"a field named twice: {', '.join(value)}")
        return value

    @field_validator("address_block", "underlay_block")
    @classmethod
    def _ipv4_block(cls, value: str) -> str:
        try:
            net = ipaddress.IPv4Network(value, strict=True)
        except ValueError as exc:
            raise ValueError(f"not an IPv4 network: {exc}") from None
        return str(net)


class HardwareSpec(Strict):
    """A file with only the hardware (for `aifabric fabric ...`): a scenario without its workload."""

    schema_version: int = Field(1, ge=1, le=1)
    name: str = "fabric"
    seed: int = Field(0, ge=0, description="seed of every random choice (QP numbers, ...)")
    cluster: ClusterSpec
    fabric: FabricSpec = FabricSpec()
    costs: CostsSpec = Field(CostsSpec(), description="prices, power figures, energy price and PUE (aifabric.costs)")
    reliability: ReliabilitySpec = Field(
        ReliabilitySpec(), description="failure rates, checkpoints, restarts (aifabric.reliability)"
    )
