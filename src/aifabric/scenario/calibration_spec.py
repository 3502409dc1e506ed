"""Scenario section `calibration`: the user's own measurements, in place of the catalog's characterization.

```yaml
calibration:
  gemm: gemm-h100.yaml          # `aifabric calibrate gemm` output: measured GEMM throughput by shape
  attention: attention-h100.yaml  # `aifabric calibrate attention` output: fused attention by length
  nvlink:                       # `aifabric calibrate nccl-tests` output, one block per tier it measured
    bandwidth_efficiency: 0.82  # achievable fraction of the tier's line rate for large messages
    extra_latency_us: 1.5       # added to every step of a collective on this tier (may be negative)
  network: {bandwidth_efficiency: 0.93, extra_latency_us: 4.0}
```

`calibration: calibration.yaml` (a file name) reads the block from that file, as `aifabric calibrate
nccl-tests --out` writes it. Relative paths are relative to the scenario file.
"""

from __future__ import annotations

from pydantic import Field

from .base import Strict


class TierCalibration(Strict):
    bandwidth_efficiency: float = Field(
        ...,
        gt=0,
        le=1,
        description="achievable fraction of the line rate for large messages (payload bytes per "
        "second over the nominal rate), replacing the catalog's figure for this tier",
    )
    extra_latency_us: float = Field(
        0.0, ge=-50, le=10_000, description="microseconds added to every step of a collective on this tier"
    )
    source: str = Field("", description="what it was fitted from (files, op, ranks, sizes)")


class CalibrationSpec(Strict):
    gemm: str | None = Field(None, description="a GEMM table from `aifabric calibrate gemm` (path)")
    attention: str | None = Field(
        None, description="a fused-attention table from `aifabric calibrate attention` (path): replaces the catalog's"
    )
    nvlink: TierCalibration | None = Field(None, description="the scale-up tier (NVLink / NVSwitch)")
    network: TierCalibration | None = Field(None, description="the scale-out tier (NIC, rail and spine switches)")
