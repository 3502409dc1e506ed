"""Scenario section `reliability`: failure rates, checkpoints and restarts (aifabric.reliability).

```yaml
reliability:
  failures_per_hour: {gpu: 1.5e-5}   # per component-hour, for gpu, server, nic, network_cable, software_per_gpu
  checkpoint_write_gBps: 400         # the job's aggregate checkpoint write bandwidth, GB/s
  checkpoint_bytes_per_param: 14     # weights + optimizer state written per parameter
  checkpoint_interval_s: 1800        # work between checkpoints (default: the interval that loses least)
  restart_s: 600                     # from a failure to training again, less the lost work
```

Every field left out keeps the default of aifabric/reliability.py (Llama 3 405B's failure breakdown, Dubey et
al. 2024, Table 5; its storage's 2 TB/s scaled to the job's GPUs; a 10-minute restart).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveFloat

from .base import Strict

FailureKind = Literal["gpu", "server", "nic", "network_cable", "software_per_gpu"]
Rate = Annotated[float, Field(ge=0, le=1)]


class ReliabilitySpec(Strict):
    failures_per_hour: dict[FailureKind, Rate] = Field(
        default_factory=dict, description="failures per component-hour, overriding the Llama 3 defaults by kind"
    )
    checkpoint_write_gBps: PositiveFloat | None = Field(
        None, le=1e9, description="aggregate checkpoint write bandwidth, GB/s (default: 2 TB/s per 16,384 GPUs)"
    )
    checkpoint_bytes_per_param: PositiveFloat | None = Field(
        None, le=1e3, description="bytes written per parameter (default 14: bf16 weights, fp32 master, Adam moments)"
    )
    checkpoint_interval_s: PositiveFloat | None = Field(
        None, le=1e9, description="seconds of work between checkpoints (default: the interval that loses least)"
    )
    restart_s: float | None = Field(None, ge=0, le=1e9, description="seconds from a failure to training again")
