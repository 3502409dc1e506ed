"""The scenario: model + parallelism plan + GPU cluster + backend fabric + engine, as validated data.

Field names carry their units (`_gbps` = Gb/s, `_gBps` = GB/s, `_ns` = nanoseconds). Every model
forbids unknown fields, so a typo is an error, not a silently ignored setting.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Strict
from .fabric_spec import ClusterSpec, FabricSpec
from .workload_spec import FeedForwardSpec, WorkloadSpec

SCHEMA_VERSION = 1


class Scenario(Strict):
    schema_version: int = Field(SCHEMA_VERSION, ge=1, le=SCHEMA_VERSION)
    name: str = "scenario"
    seed: int = Field(0, ge=0, description="seed of every random choice (QP numbers, ...)")
    cluster: ClusterSpec
    fabric: FabricSpec = FabricSpec()
    workload: WorkloadSpec
    engine: Literal["flow", "analytic", "packet"] = "flow"


__all__ = ["SCHEMA_VERSION", "ClusterSpec", "FabricSpec", "FeedForwardSpec", "Scenario", "WorkloadSpec"]
