"""Scenario section for the workload: the model, the parallelism plan, the batch."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from .base import Strict


class FeedForwardSpec(Strict):
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


class WorkloadSpec(Strict):
    kind: Literal["data-parallel"] = "data-parallel"
    model: FeedForwardSpec
    global_batch_size: int = Field(..., ge=1, description="samples per iteration across all GPUs")
    data_parallel: int | None = Field(None, ge=1, description="data-parallel ranks (default: every GPU)")
    precision: Literal["fp32", "tf32", "bf16", "fp16"] = "bf16"
    compute_efficiency: float = Field(
        0.5, gt=0, le=1, description="achieved fraction of the GPU's dense peak FLOP/s"
    )
    iterations: int = Field(1, ge=1, le=1000)
