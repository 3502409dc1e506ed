"""A cluster's power and capital from its bill of materials, and what an iteration and a training run cost.

- Power: every component's figure (costs/power.py) x its count = IT power; x PUE = the facility's draw.
- Capital: every component's price (costs/prices.py) x its count; the network's share = NICs, switches,
  transceivers and cables.
- An iteration: its energy (facility power x iteration time) at the price per kWh, and its share of the
  capital (capital x iteration time / the amortization period).
- A training run: `costs.training_hours`, or `costs.tokens_to_train` / tokens per iteration iterations
  (tokens per iteration = global batch x sequence length; samples for a data-parallel workload), or by
  default 20 tokens per parameter (Chinchilla-optimal, Hoffmann et al. 2022). Its energy through
  `costs.energy.energy` (the book's Chapter 8 arithmetic: power x hours x PUE x price).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..scenario.costs_spec import CostsSpec
from .energy import EnergyCost, energy
from .power import DEFAULT_POWER, NETWORK_KINDS, Line, merged, power_lines
from .prices import DEFAULT_PRICES, capital_lines

HOURS_PER_YEAR = 8760.0
CHINCHILLA_TOKENS_PER_PARAM = 20


@dataclass(frozen=True)
class FabricCosts:
    """Power and capital of a cluster and its fabric; per hour of running it."""

    spec: CostsSpec
    power: list[Line]
    capital: list[Line]
    power_source: str = ""
    price_source: str = ""

    @property
    def it_power_w(self) -> float:
        return sum(x.total for x in self.power)

    @property
    def facility_power_w(self) -> float:
        return self.it_power_w * self.spec.pue

    @property
    def network_power_w(self) -> float:
        return sum(x.total for x in self.power if x.kind in NETWORK_KINDS)

    @property
    def gpu_power_w(self) -> float:
        return sum(x.total for x in self.power if x.kind == "gpu")

    @property
    def capex_usd(self) -> float:
        return sum(x.total for x in self.capital)

    @property
    def network_capex_usd(self) -> float:
        return sum(x.total for x in self.capital if x.kind in NETWORK_KINDS)

    def power_by_kind(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for x in self.power:
            out[x.kind] = out.get(x.kind, 0.0) + x.total
        return out

    def capital_by_kind(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for x in self.capital:
            out[x.kind] = out.get(x.kind, 0.0) + x.total
        return out

    def over(self, hours: float) -> tuple[EnergyCost, float]:
        """Energy (through `energy`, PUE applied) and the capital's share, of running `hours`."""
        e = energy(self.it_power_w, hours, self.spec.price_per_kwh, self.spec.pue)
        return e, self.capex_usd * hours / (self.spec.amortization_years * HOURS_PER_YEAR)

    def to_dict(self) -> dict:
        e, cap = self.over(1.0)
        return {
            "inputs": {
                "price_per_kwh": self.spec.price_per_kwh,
                "pue": self.spec.pue,
                "amortization_years": self.spec.amortization_years,
                "optics": self.spec.optics.model_dump(),
                "power_source": self.power_source,
                "price_source": self.price_source,
            },
            "power": {
                "it_w": self.it_power_w,
                "facility_w": self.facility_power_w,
                "network_w": self.network_power_w,
                "by_kind_w": self.power_by_kind(),
                "items": [x.to_dict("w") for x in self.power],
            },
            "capital": {
                "total_usd": self.capex_usd,
                "network_usd": self.network_capex_usd,
                "by_kind_usd": self.capital_by_kind(),
                "items": [x.to_dict("usd") for x in self.capital],
            },
            "per_hour": {
                "energy_kwh": e.energy_kwh,
                "energy_usd": e.cost_usd,
                "capital_usd": cap,
                "total_usd": e.cost_usd + cap,
            },
        }


@dataclass(frozen=True)
class RunCosts:
    """A fabric's costs with a workload's iteration time: per iteration and per training run."""

    fabric: FabricCosts
    iteration_time_s: float
    tokens_per_iteration: float
    params: float
    unit: str = "tokens"  # or "samples" (data-parallel workloads)
    notes: list[str] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_iteration / self.iteration_time_s if self.iteration_time_s > 0 else 0.0

    def per_iteration(self) -> tuple[EnergyCost, float]:
        return self.fabric.over(self.iteration_time_s / 3600)

    def training(self) -> dict:
        spec = self.fabric.spec
        if spec.training_hours is not None:
            hours = spec.training_hours
            iterations = hours * 3600 / self.iteration_time_s if self.iteration_time_s > 0 else 0.0
            tokens = iterations * self.tokens_per_iteration
            basis = f"costs.training_hours: {hours:g} h"
        else:
            if spec.tokens_to_train is not None:
                tokens, basis = spec.tokens_to_train, f"costs.tokens_to_train: {spec.tokens_to_train:.4g} {self.unit}"
            else:
                tokens = CHINCHILLA_TOKENS_PER_PARAM * self.params
                basis = (
                    f"{CHINCHILLA_TOKENS_PER_PARAM} {self.unit} per parameter, Chinchilla-optimal: the default; "
                    "set costs.tokens_to_train or training_hours"
                )
            iterations = math.ceil(tokens / self.tokens_per_iteration) if self.tokens_per_iteration else 0
            hours = iterations * self.iteration_time_s / 3600
        e, cap = self.fabric.over(hours)
        return {
            "basis": basis,
            "tokens": tokens,
            "iterations": iterations,
            "hours": hours,
            "days": hours / 24,
            "energy_mwh": e.energy_mwh,
            "energy_usd": e.cost_usd,
            "capital_usd": cap,
            "total_usd": e.cost_usd + cap,
        }

    def to_dict(self) -> dict:
        e, cap = self.per_iteration()
        capex = self.fabric.capex_usd
        return {
            **self.fabric.to_dict(),
            "unit": self.unit,
            "tokens_per_iteration": self.tokens_per_iteration,
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_musd": self.tokens_per_s / (capex / 1e6) if capex > 0 else 0.0,
            "per_iteration": {
                "energy_kwh": e.energy_kwh,
                "energy_usd": e.cost_usd,
                "capital_usd": cap,
                "total_usd": e.cost_usd + cap,
            },
            "training": self.training(),
            "notes": list(self.notes),
        }


def fabric_costs(bom, gpu_name: str, spec: CostsSpec | None = None) -> FabricCosts:
    """Power and capital of a bill of materials (fabric.plan.bill_of_materials) under a scenario's `costs`."""
    spec = spec or CostsSpec()
    power = merged(DEFAULT_POWER, spec.power) if spec.power.model_fields_set else DEFAULT_POWER
    prices = merged(DEFAULT_PRICES, spec.prices) if spec.prices.model_fields_set else DEFAULT_PRICES
    return FabricCosts(
        spec,
        power_lines(bom, gpu_name, spec.optics, power),
        capital_lines(bom, gpu_name, spec.optics, prices),
        power.source,
        prices.source,
    )


def tokens_per_iteration(scenario) -> tuple[float, str]:
    """(tokens per iteration, "tokens"), or samples for a data-parallel workload."""
    w = scenario.workload
    if w.kind == "llm-training":
        from ..workload.from_spec import resolve_plan

        _, plan, _ = resolve_plan(scenario)
        return float(w.global_batch_size * plan.seq_len), "tokens"
    return float(w.global_batch_size), "samples"


def run_costs(run) -> RunCosts:
    """The costs of a simulated run (simulate.Run): its fabric's bill, its iteration time and batch."""
    from ..fabric.plan import bill_of_materials

    s = run.scenario
    bom = bill_of_materials(run.fabric)
    fc = fabric_costs(bom, s.cluster.gpu, s.costs)
    tokens, unit = tokens_per_iteration(s)
    notes = [] if run.results.complete else ["interrupted run: the iteration time covers what ran"]
    if s.iteration == "first":
        notes.append("the first iteration (connection setup included): the training run's figures count it every time")
    return RunCosts(fc, run.results.iteration_time_s, tokens, float(run.workload.params), unit, notes)
