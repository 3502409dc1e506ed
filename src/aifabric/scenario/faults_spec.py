"""Scenario section `faults`: what is broken during the iteration (aifabric.faults; *Deep Learning for Network
Engineers*, Chapter 10).

```yaml
faults:
  - {kind: link_down, target: "seg0/leaf0-A--spine0"}   # a cable: both directions (A->B names one of them)
  - {kind: link_degraded, target: "seg0/leaf1-A--spine1", factor: 0.5}   # runs at half its rate
  - {kind: switch_down, target: spine3}                 # every cable of the switch
  - {kind: nic_down, target: s1/nic2}                   # a NIC (a dual-port NIC's LAG: name one port's cable)
  - {kind: gpu_slow, target: 13, factor: 1.25}          # rank 13 computes 1.25 x slower (a straggler)
```

`at_s` (default 0) is when the fault happens; today every fault holds from the start of the iteration (routing
already converged around it) and a later time is refused.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import Strict

FaultKind = Literal["link_down", "link_degraded", "switch_down", "nic_down", "gpu_slow"]


class FaultSpec(Strict):
    kind: FaultKind
    target: str | int = Field(..., description="a cable (A--B or A->B), a switch, a NIC, or a GPU's rank")
    factor: float | None = Field(None, gt=0, le=1e3, description="link_degraded: the fraction of its rate left "
                                 "(0 < f < 1); gpu_slow: how many times slower it computes (> 1)")
    at_s: float = Field(0.0, ge=0, le=1e9, description="when (seconds into the iteration); 0 only, for now")

    @model_validator(mode="after")
    def _factor(self):
        if self.kind == "link_degraded" and not (self.factor is not None and 0 < self.factor < 1):
            raise ValueError("link_degraded needs factor: the fraction of the rate left, between 0 and 1")
        if self.kind == "gpu_slow" and not (self.factor is not None and self.factor >= 1):
            raise ValueError("gpu_slow needs factor: how many times slower, at least 1")
        if self.kind not in ("link_degraded", "gpu_slow") and self.factor is not None:
            raise ValueError(f"{self.kind} takes no factor")
        if self.at_s > 0:
            raise ValueError("faults during the iteration (at_s > 0) are not simulated yet: every fault holds from "
                             "the start (at_s: 0)")
        return self
