"""The scenario: model + parallelism plan + GPU cluster + backend fabric + engine, as validated data.

Field names carry their units (`_gbps` = Gb/s, `_gBps` = GB/s, `_ns` = nanoseconds). Every model
forbids unknown fields, so a typo is an error, not a silently ignored setting.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Strict
from .calibration_spec import CalibrationSpec, TierCalibration
from .fabric_spec import ClusterSpec, FabricSpec
from .workload_spec import FeedForwardSpec, WorkloadSpec

SCHEMA_VERSION = 1


class FidelitySpec(Strict):
    """How much of the run is simulated flow by flow (docs/validation.md, "Fidelity")."""

    scale_up_collectives: Literal["analytic", "flows"] | None = Field(
        None, description="collectives inside one server's NVLink domain: analytic = timed once on their own "
        "and folded into their GPUs' time (engines/fold.py); flows = every transfer simulated. "
        "Default: analytic for llm-training, flows for data-parallel")
    ring_steps: Literal["merged", "each"] | None = Field(
        None, description="ring collectives between servers: merged = one transfer per ring edge for the "
        "whole collective; each = one transfer per step. Default: merged for llm-training, each for data-parallel")


class Scenario(Strict):
    schema_version: int = Field(SCHEMA_VERSION, ge=1, le=SCHEMA_VERSION)
    name: str = "scenario"
    seed: int = Field(0, ge=0, description="seed of every random choice (QP numbers, ...)")
    cluster: ClusterSpec
    fabric: FabricSpec = FabricSpec()
    workload: WorkloadSpec
    engine: Literal["flow", "analytic", "packet"] = "flow"
    fidelity: FidelitySpec = FidelitySpec()
    calibration: CalibrationSpec = Field(
        CalibrationSpec(), description="the user's own measurements in place of the catalog's: a GEMM table "
        "(`aifabric calibrate gemm`), achievable NVLink and network rates and latencies (`aifabric calibrate "
        "nccl-tests`); or the name of a file holding this block")

    def lowering_options(self) -> dict[str, bool]:
        """`engines.lower` keyword arguments from `fidelity` and the workload kind's defaults."""
        llm = self.workload.kind == "llm-training"
        up = self.fidelity.scale_up_collectives or ("analytic" if llm else "flows")
        ring = self.fidelity.ring_steps or ("merged" if llm else "each")
        return {"fold_scale_up": up == "analytic", "merge_ring_steps": ring == "merged"}


__all__ = ["SCHEMA_VERSION", "CalibrationSpec", "ClusterSpec", "FabricSpec", "FeedForwardSpec", "FidelitySpec", "Scenario",
           "TierCalibration", "WorkloadSpec"]
