"""Scenario section `faults`: what breaks during the run, and when (aifabric.faults; *Deep Learning for Network
Engineers*, Chapter 10).

```yaml
faults:
  - {kind: link_down, target: "seg0/rail0--spine2"}     # a cable: both directions (A->B names one of them)
  - {kind: link_down, target: "seg0/rail1--spine0", at_s: 0.05, up_at_s: 0.2}   # fails during the run, back later
  - {kind: link_down, target: "seg0/rail2--spine1", at_s: 0.01, up_at_s: 0.02, flaps: 3, flap_period_s: 0.05}
  - {kind: link_degraded, target: "seg0/rail1--spine1", factor: 0.5, at_s: 0.03}   # half its rate from 30 ms
  - {kind: switch_down, target: spine3, at_s: 0.1, detection_s: 0.05, convergence_s: 0.2}
  - {kind: nic_down, target: s1/nic2}                   # a NIC (a dual-port NIC's LAG: name one port's cable)
  - {kind: gpu_slow, target: 13, factor: 1.25}          # rank 13 computes 1.25 x slower (a straggler)
  - {kind: gpu_slow, target: 5, factor: 2, at_s: 0.1, up_at_s: 0.3}   # throttled for 0.2 s of the run
  - {kind: link_degraded, target: "seg0/rail3--spine1", loss_rate: 1.0e-4}   # FEC errors: 1 packet in 10^4 lost
  - {kind: gpu_lost, target: 9, at_s: 0.12}             # the GPU falls off the bus: the job fails
  - {kind: draw, window_s: 0.5, rates: {network_cable: 2.0}}   # faults drawn from failure rates, the scenario's seed
```

`at_s` (default 0: from the start, routing already converged around it) is when the fault happens, in seconds from
the start of the run; `up_at_s` when the element is whole again (default: never); `flaps` repeats the down-up cycle
every `flap_period_s`. A fault during the run is seen by routing `detection_s` after it happens and routing has
converged `convergence_s` later; the defaults are aifabric.faults's (BFD and eBGP figures, cited there).
`nccl_ib_timeout` and `nccl_ib_retry_cnt` are the QPs' retransmission settings (NCCL's environment variables, its
defaults 20 and 7): a flow stopped by a fault resumes at the first retransmission that finds a path, and the job
fails when none does.

`draw` draws faults from failure rates with the scenario's seed: per network cable and per NIC, failures arrive as a
Poisson process at `rates` per component-hour (default: aifabric.reliability's, Llama 3's Table 5) over `window_s`
seconds from the start of the run; each drawn fault lasts `down_s` (default: the rest of the run).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from .base import Strict

FaultKind = Literal["link_down", "link_degraded", "switch_down", "nic_down", "gpu_slow", "gpu_lost", "draw"]
DrawnKind = Literal["network_cable", "nic"]
Rate = Annotated[float, Field(ge=0, le=1e6)]


class FaultSpec(Strict):
    kind: FaultKind
    target: str | int | None = Field(None, description="a cable (A--B or A->B), a switch, a NIC, or a GPU's rank")
    factor: float | None = Field(
        None,
        gt=0,
        le=1e3,
        description="link_degraded: the fraction of its rate left "
        "(0 < f < 1); gpu_slow: how many times slower it computes (> 1)",
    )
    loss_rate: float | None = Field(
        None,
        ge=0,
        lt=1,
        description="link_degraded: the probability that a packet "
        "on the cable is lost (CRC/FEC errors); the packet engine drops with it, the "
        "flow engine runs the cable at go-back-N's goodput under it",
    )
    at_s: float = Field(
        0.0,
        ge=0,
        le=1e9,
        description="when, in seconds from the start of the run (0: from the start, routing converged around it)",
    )
    up_at_s: float | None = Field(None, gt=0, le=1e9, description="when it is whole again (default: never)")
    flaps: int = Field(1, ge=1, le=10_000, description="down-up cycles (a flapping link): at_s + k x flap_period_s")
    flap_period_s: float | None = Field(None, gt=0, le=1e9, description="seconds from one cycle's start to the next")
    detection_s: float | None = Field(
        None, ge=0, le=1e6, description="from the fault to routing seeing it (default: BFD, 3 x 100 ms)"
    )
    convergence_s: float | None = Field(
        None,
        ge=0,
        le=1e6,
        description="from detection to converged routing (default: RFC 7938's sub-second eBGP convergence, 1 s)",
    )
    nccl_ib_timeout: int | None = Field(
        None,
        ge=1,
        le=31,
        description="NCCL_IB_TIMEOUT: the QPs' ACK timeout is 4.096 us x 2^this (NCCL's default 20: 4.3 s)",
    )
    nccl_ib_retry_cnt: int | None = Field(
        None, ge=0, le=7, description="NCCL_IB_RETRY_CNT: retransmissions before a QP fails (NCCL's default 7)"
    )
    window_s: float | None = Field(None, gt=0, le=1e9, description="draw: the seconds over which faults are drawn")
    rates: dict[DrawnKind, Rate] = Field(
        default_factory=dict, description="draw: failures per component-hour (default: aifabric.reliability's)"
    )
    down_s: float | None = Field(
        None, gt=0, le=1e9, description="draw: how long each drawn fault lasts (default: the rest of the run)"
    )

    @model_validator(mode="after")
    def _fields(self):
        if self.kind == "draw":
            if self.window_s is None:
                raise ValueError("draw needs window_s: the seconds over which faults are drawn")
            if self.target is not None or self.factor is not None or self.at_s or self.up_at_s is not None:
                raise ValueError(
                    "draw takes window_s, rates, down_s (and the timing fields), no target, factor, at_s or up_at_s"
                )
            return self
        if self.window_s is not None or self.rates or self.down_s is not None:
            raise ValueError(f"{self.kind} takes no window_s, rates or down_s (those are draw's)")
        if self.target is None:
            raise ValueError(f"{self.kind} needs a target")
        if (
            self.kind == "link_degraded"
            and not (self.factor is not None and 0 < self.factor < 1)
            and not (self.factor is None and self.loss_rate)
        ):
            raise ValueError(
                "link_degraded needs factor (the fraction of the rate left, between 0 and 1) or "
                "loss_rate (the probability a packet is lost, between 0 and 1), or both"
            )
        if self.loss_rate is not None and self.kind != "link_degraded":
            raise ValueError(f"{self.kind} takes no loss_rate (link_degraded's)")
        if self.kind == "gpu_slow" and not (self.factor is not None and self.factor >= 1):
            raise ValueError("gpu_slow needs factor: how many times slower, at least 1")
        if self.kind == "gpu_lost" and (self.up_at_s is not None or self.flaps > 1):
            raise ValueError("gpu_lost takes no up_at_s or flaps: a lost GPU ends the job")
        if self.kind not in ("link_degraded", "gpu_slow") and self.factor is not None:
            raise ValueError(f"{self.kind} takes no factor")
        if self.up_at_s is not None and self.up_at_s <= self.at_s:
            raise ValueError(f"up_at_s ({self.up_at_s}) must come after at_s ({self.at_s})")
        if self.flaps > 1:
            if self.up_at_s is None or self.flap_period_s is None:
                raise ValueError("flaps > 1 needs up_at_s (each cycle's end) and flap_period_s")
            if self.flap_period_s <= self.up_at_s - self.at_s:
                raise ValueError("flap_period_s must be longer than each cycle's down time (up_at_s - at_s)")
        return self
