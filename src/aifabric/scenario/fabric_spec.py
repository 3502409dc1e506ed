"""Scenario sections for the hardware: the GPU cluster and the backend fabric."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ..catalog import GPUS
from .base import Strict


class ClusterSpec(Strict):
    """GPU servers: identical, one NIC per GPU, GPUs joined by an NVSwitch inside each server."""

    gpu: str = Field("H100", description="GPU model from the catalog: " + ", ".join(GPUS))
    servers: int = Field(..., ge=1, description="number of GPU servers")
    gpus_per_server: int = Field(..., ge=1, le=72, description="GPUs in one server (scale-up domain)")
    nvlink_bandwidth_gBps: float | None = Field(
        None, gt=0, description="NVLink bandwidth per GPU, GB/s, both directions summed (default: catalog)"
    )
    nic_speed_gbps: float | None = Field(None, gt=0, description="NIC port speed, Gb/s (default: catalog)")
    pcie_bandwidth_gBps: float | None = Field(
        None, gt=0, description="PCIe GPU<->NIC bandwidth per direction, GB/s (default: x16 of the GPU's gen)"
    )
    nvlink_latency_ns: float = Field(500, ge=0, description="one-way GPU-to-GPU latency over NVLink, ns")
    pcie_latency_ns: float = Field(300, ge=0, description="one-way GPU-to-NIC latency over PCIe, ns")

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, value: str) -> str:
        if value.upper() not in GPUS:
            raise ValueError(f"unknown GPU {value!r}; known: {', '.join(GPUS)}")
        return value.upper()

    @property
    def total_gpus(self) -> int:
        return self.servers * self.gpus_per_server


class FabricSpec(Strict):
    """The scale-out backend: rail-optimized two-tier leaf/spine (one rail switch per local GPU index)."""

    topology: Literal["rail-optimized"] = "rail-optimized"
    spines: int = Field(2, ge=0, description="spine switches; every rail switch connects to every spine")
    link_speed_gbps: float = Field(400, gt=0, description="rail-to-spine link speed, Gb/s")
    links_per_spine: int = Field(1, ge=1, description="parallel links from each rail switch to each spine")
    switch_radix: int = Field(64, ge=2, description="ports per switch")
    link_latency_ns: float = Field(100, ge=0, description="propagation delay of one cable, ns")
    switch_latency_ns: float = Field(600, ge=0, description="forwarding latency of one switch, ns")
    load_balancing: Literal["ecmp"] = "ecmp"
    ecmp_hash_seed: int = Field(0, ge=0, le=0xFFFFFFFF, description="seed of the CRC32 5-tuple ECMP hash")
    per_switch_hash_seed: bool = Field(
        False, description="mix each switch's id into its ECMP seed (breaks hash polarization)"
    )
