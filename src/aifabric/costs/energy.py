"""Energy and its price: power x time, times the facility's overhead (PUE), times the price of a kWh.

The book's Chapter 8 example: 50,000 GPUs at 350 W draw 17.5 MW; two months (60 days = 1,440 hours) of
training use 25,200 MWh; at $0.10 per kWh that is $2,520,000 (PUE 1: the book counts the GPUs only).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EnergyCost:
    power_w: float  # drawn from the grid: IT power x PUE
    hours: float
    energy_kwh: float
    cost_usd: float

    @property
    def power_mw(self) -> float:
        return self.power_w / 1e6

    @property
    def energy_mwh(self) -> float:
        return self.energy_kwh / 1e3


def energy(it_power_w: float, hours: float, price_per_kwh: float, pue: float = 1.0) -> EnergyCost:
    """`it_power_w`: what the equipment draws (e.g. GPUs x watts each); `pue`: facility power / IT power."""
    if it_power_w < 0 or hours < 0 or price_per_kwh < 0 or pue < 1:
        raise ValueError("power, hours and price must be >= 0 and PUE >= 1")
    power_w = it_power_w * pue
    kwh = power_w * hours / 1e3
    return EnergyCost(power_w, hours, kwh, kwh * price_per_kwh)
