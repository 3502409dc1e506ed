"""The scenario: model + parallelism plan + GPU cluster + backend fabric + engine, as validated data.

Field names carry their units (`_gbps` = Gb/s, `_gBps` = GB/s, `_ns` = nanoseconds). Every model
forbids unknown fields, so a typo is an error, not a silently ignored setting.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..catalog import GPUS

SCHEMA_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClusterSpec(_Strict):
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


class FabricSpec(_Strict):
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


class FeedForwardSpec(_Strict):
    kind: Literal["feed-forward"] = "feed-forward"
    layer_widths: list[int] = Field(
        ..., min_length=2, description="neurons per layer, input first, e.g. [784, 128, 10]"
    )
    bias: bool = True

    @field_validator("layer_widths")
    @classmethod
    def _positive(cls, widths: list[int]) -> list[int]:
        bad = [i for i, w in enumerate(widths) if w < 1]
        if bad:
            raise ValueError(f"every width must be >= 1 (index {bad[0]} is {widths[bad[0]]})")
        return widths


class WorkloadSpec(_Strict):
    kind: Literal["data-parallel"] = "data-parallel"
    model: FeedForwardSpec
    global_batch_size: int = Field(..., ge=1, description="samples per iteration across all GPUs")
    data_parallel: int | None = Field(None, ge=1, description="data-parallel ranks (default: every GPU)")
    precision: Literal["fp32", "tf32", "bf16", "fp16"] = "bf16"
    compute_efficiency: float = Field(
        0.5, gt=0, le=1, description="achieved fraction of the GPU's dense peak FLOP/s"
    )
    iterations: int = Field(1, ge=1, le=1000)


class Scenario(_Strict):
    schema_version: int = Field(SCHEMA_VERSION, ge=1, le=SCHEMA_VERSION)
    name: str = "scenario"
    seed: int = Field(0, ge=0, description="seed of every random choice (QP numbers, ...)")
    cluster: ClusterSpec
    fabric: FabricSpec = FabricSpec()
    workload: WorkloadSpec
    engine: Literal["flow", "analytic"] = "flow"
