"""Scenario section `costs`: what the cluster costs to buy and to run (aifabric.costs; *Deep Learning for Network Engineers*, Chapter 8).

```yaml
costs:
  price_per_kwh: 0.10           # USD per kWh (the book's Chapter 8 example)
  pue: 1.2                      # facility power / IT power
  tokens_to_train: 3.0e11       # the training run: tokens (samples for a data-parallel workload) ...
  training_hours: 1440          # ... or its length in hours (not both; neither: 20 tokens per parameter)
  amortization_years: 4         # capital spread over this life to price an iteration
  optics: {host: sr, spine: dr, superspine: fr}   # transceivers by tier: dac (copper) | sr | dr | fr
  prices: my-prices.yaml        # a price table of your own (a file, read in; or the mapping itself)
  power: {switch_base_w: 300}   # the same for the power figures
```

A price or power table holds only what it changes: every entry it leaves out keeps the documented default
(costs/prices.py, costs/power.py). Tables by speed are keyed by the port speed in Gb/s; a speed between two
entries takes the next one up.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeFloat, PositiveFloat, model_validator

from .base import Strict

Reach = Literal["dac", "sr", "dr", "fr"]
"""How a cable is built: dac = passive copper (no transceiver, a few metres); sr = multimode optics (~100 m);
dr = single-mode, 500 m; fr = single-mode, 2 km."""

BySpeed = dict[PositiveFloat, NonNegativeFloat]  # Gb/s -> a figure


class OpticsSpec(Strict):
    host: Reach = Field("sr", description="NIC to rail switch: the rows of a rail-optimized pod span racks")
    spine: Reach = Field("dr", description="rail (leaf) to spine")
    superspine: Reach = Field("fr", description="spine to super-spine (between pods, across the hall)")


class PriceTable(Strict):
    """Prices in USD; each field overrides the same field of the default table, entry by entry."""

    gpu_usd: dict[str, NonNegativeFloat] = Field(default_factory=dict, description="per GPU, by catalog name")
    server_usd_per_gpu: dict[str, NonNegativeFloat] = Field(
        default_factory=dict,
        description="the server without its GPUs and backend NICs (CPUs, memory, NVSwitch "
        "baseboard, chassis, storage, front-end NIC), per GPU slot, by GPU name",
    )
    nic_usd: BySpeed = Field(default_factory=dict, description="per NIC, by its bandwidth (port speed x ports)")
    switch_port_usd: BySpeed = Field(default_factory=dict, description="a switch per port (all its ports), by speed")
    transceiver_usd: dict[Reach, BySpeed] = Field(
        default_factory=dict, description="per transceiver, by reach and speed"
    )
    dac_cable_usd: BySpeed = Field(default_factory=dict, description="a passive copper cable, by speed")
    fiber_cable_usd: NonNegativeFloat | None = Field(None, description="a fiber cable (patch cord / trunk share)")
    source: str = Field("", description="where these prices come from (shown with them)")


class PowerTable(Strict):
    """Power in W; each field overrides the same field of the default table, entry by entry."""

    gpu_w: dict[str, NonNegativeFloat] = Field(default_factory=dict, description="per GPU (default: its TDP)")
    server_overhead_w_per_gpu: dict[str, NonNegativeFloat] = Field(
        default_factory=dict, description="the server without its GPUs and backend NICs, per GPU slot, by GPU name"
    )
    nic_w: BySpeed = Field(default_factory=dict, description="per NIC, by its bandwidth")
    switch_base_w: NonNegativeFloat | None = Field(None, description="a switch's CPU, fans and power supplies")
    switch_port_w: BySpeed = Field(default_factory=dict, description="a switch's ASIC and SerDes per port, by speed")
    transceiver_w: dict[Reach, BySpeed] = Field(default_factory=dict, description="per transceiver, by reach and speed")
    source: str = Field("", description="where these figures come from (shown with them)")


class CostsSpec(Strict):
    price_per_kwh: NonNegativeFloat = Field(
        0.10, description="USD per kWh (Deep Learning for Network Engineers, Chapter 8: $0.10)"
    )
    pue: float = Field(1.2, ge=1, le=5, description="power usage effectiveness: facility power / IT power")
    tokens_to_train: PositiveFloat | None = Field(
        None,
        description="the training run's length in tokens (samples for a data-parallel workload); default: "
        "20 tokens per parameter (Chinchilla-optimal, Hoffmann et al. 2022)",
    )
    training_hours: PositiveFloat | None = Field(
        None,
        description="the training run's length in hours, instead of tokens_to_train (the book: 60 days = 1,440 hours)",
    )
    amortization_years: PositiveFloat = Field(
        4, le=30, description="the capital's life: an iteration costs its time's share of it"
    )
    optics: OpticsSpec = OpticsSpec()
    prices: PriceTable = Field(PriceTable(), description="your prices over the defaults (or a file holding them)")
    power: PowerTable = Field(PowerTable(), description="your power figures over the defaults")

    @model_validator(mode="after")
    def _one_length(self) -> CostsSpec:
        if self.tokens_to_train is not None and self.training_hours is not None:
            raise ValueError("give tokens_to_train or training_hours, not both")
        return self
