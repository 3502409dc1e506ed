"""Chapter 8: what training costs in power and energy. The book's example: 50,000 GPUs at 350 W for two
months at $0.10 per kWh, through the power model aifabric's cost reports use
(`aifabric.costs.energy.energy`)."""

from __future__ import annotations

from typing import Any

from .lesson import Lesson, Param, count

PARAMS = {
    "gpu_w": Param(350.0, "watts one GPU draws under full load", positive=True),
    "gpus": Param(50000, "GPUs", "int", positive=True),
    "days": Param(60.0, "days of training (two months)", positive=True),
    "price": Param(0.10, "price of a kWh (USD)", low=0),
    "pue": Param(1.0, "facility power / IT power (the book counts the GPUs alone: 1)", low=1),
}


def run(v: dict[str, Any]) -> Lesson:
    from ..costs.energy import energy

    hours = v["days"] * 24
    it_w = v["gpu_w"] * v["gpus"]
    e = energy(it_w, hours, v["price"], v["pue"])
    les = Lesson("power", "Chapter 8 · power, energy and its price", inputs=dict(v))
    s = les.section(
        "Power and energy (Chapter 8)",
        "Power is what the GPUs draw at once; energy is power × time; the bill is energy × price. A PUE "
        "above 1 adds the facility's cooling and power losses.",
    )
    s.add("power", f"{count(round(it_w))} W = {it_w / 1e6:g} MW", f"{v['gpu_w']:g} W × {count(v['gpus'])} GPUs")
    if v["pue"] != 1:
        s.add("with the facility", f"{e.power_mw:g} MW", f"× PUE {v['pue']:g}")
    s.add("time", f"{v['days']:g} days = {count(round(hours))} hours", "days × 24")
    s.add(
        "energy",
        f"{e.energy_mwh:,.0f} MWh = {count(round(e.energy_kwh))} kWh",
        f"{e.power_mw:g} MW × {count(round(hours))} h",
    )
    s.add(
        "cost",
        f"${count(round(e.cost_usd))} (${e.cost_usd / 1e6:.2f} M)",
        f"{count(round(e.energy_kwh))} kWh × ${v['price']:.2f}",
    )
    les.values.update(
        power_w=e.power_w,
        power_mw=e.power_mw,
        hours=hours,
        energy_mwh=e.energy_mwh,
        energy_kwh=e.energy_kwh,
        cost_usd=e.cost_usd,
    )
    return les
