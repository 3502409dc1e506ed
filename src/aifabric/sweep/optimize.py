"""A search of the space of a scenario's varied fields, instead of every combination of them.

The question: *minimize (or maximize) one metric subject to constraints on others*, e.g. the cheapest fabric
whose iteration time is within 2 % of the fastest (`--objective cost --constraint "iteration_time <= 1.02 *
best"`), or the parallelism plan with the most tokens per second (`--objective tokens_per_s`; a plan that
does not fit in memory does not validate, so it is never a candidate).

How: a constraint on `best` first needs the best of its metric: a phase of the search minimizes (or
maximizes) that metric alone; then a phase optimizes the objective under the constraints, seeded with every
run made so far. `best` is always the best of the runs made, whichever phase made them: a run of the
second phase that beats it tightens the bound. Each phase proposes combinations with Optuna's TPE sampler (categorical
choices, constraints through `constraints_func`), or at random when Optuna is not installed, and runs them a
batch at a time on the sweep's backend (Ray or the local pool). A combination is run once: proposed again,
it is answered from the runs made; combinations giving the same scenario share one run. The answer is the
best run that meets every constraint, among all the runs made, which are the evidence (the table and
optimize.html).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..compare import Invalid, build_variants, check_paths, parse_vary
from ..errors import InputError, Problem
from ..scenario import load_scenario
from .cases import Case, scenario_key

ALIASES = {
    "cost": "capex_usd",
    "capex": "capex_usd",
    "capital": "capex_usd",
    "network_cost": "network_capex_usd",
    "iteration_time": "iteration_time_s",
    "time": "iteration_time_s",
    "power": "it_power_w",
    "network_power": "network_power_w",
    "training_cost": "training_cost_usd",
    "cost_per_iteration": "cost_per_iteration_usd",
    "throughput": "tokens_per_s",
    "tokens_per_s_per_dollar": "tokens_per_s_per_musd",
    "exposed_communication": "exposed_communication_s",
}
MAXIMIZE = {
    "tokens_per_s",
    "tokens_per_s_per_musd",
    "mfu",
    "hfu",
    "model_tflops_per_gpu",
    "hardware_tflops_per_gpu",
    "min_busbw_gBps",
}
METRICS = {
    "iteration_time_s",
    "compute_time_s",
    "communication_time_s",
    "exposed_communication_s",
    "idle_time_s",
    "idle_time_mean_s",
    "bubble_time_s",
    "bubble_time_mean_s",
    "pipeline_bubble_fraction",
    "network_bytes",
    "nvlink_bytes",
    "capex_usd",
    "network_capex_usd",
    "it_power_w",
    "network_power_w",
    "cost_per_iteration_usd",
    "training_cost_usd",
    "training_hours",
    *MAXIMIZE,
}


def metric_name(name: str, flag: str) -> str:
    key = ALIASES.get(name.strip(), name.strip())
    if key not in METRICS and not key.startswith("max_util_"):
        known = ", ".join(sorted(ALIASES)) + "; or a metric of the results table: " + ", ".join(sorted(METRICS))
        raise InputError(Problem(flag, f"unknown metric {name!r} (known: {known})"))
    return key


@dataclass(frozen=True)
class Objective:
    metric: str
    maximize: bool

    @property
    def text(self) -> str:
        return f"{'maximize' if self.maximize else 'minimize'} {self.metric}"

    def better(self, a: float, b: float) -> bool:
        return a > b if self.maximize else a < b


def parse_objective(spec: str) -> Objective:
    """'cost', 'tokens_per_s' (its natural direction), or 'max:METRIC' / 'min:METRIC'."""
    direction, _, name = spec.partition(":") if ":" in spec else ("", "", spec)
    if direction not in ("", "max", "min"):
        raise InputError(Problem("--objective", f"expected METRIC, max:METRIC or min:METRIC (got {spec!r})"))
    metric = metric_name(name, "--objective")
    return Objective(metric, direction == "max" if direction else metric in MAXIMIZE)


_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_CONSTRAINT = re.compile(
    rf"^\s*([A-Za-z_]\w*)\s*(<=|>=|<|>)\s*(?:({_NUM})\s*\*\s*)?(best|{_NUM})"
    rf"(?:\s*\*\s*({_NUM}))?\s*$"
)


@dataclass(frozen=True)
class Constraint:
    metric: str
    op: str
    factor: float  # bound = factor x best, or the number itself
    relative: bool  # to the best of the metric
    text: str

    def bound(self, best: dict[str, float]) -> float:
        return self.factor * best[self.metric] if self.relative else self.factor

    def slack(self, value: float, best: dict[str, float]) -> float:
        """<= 0 when the constraint holds (Optuna's convention)."""
        b = self.bound(best)
        return value - b if self.op in ("<=", "<") else b - value

    def holds(self, value: float, best: dict[str, float]) -> bool:
        b = self.bound(best)
        return {"<=": value <= b, "<": value < b, ">=": value >= b, ">": value > b}[self.op]


def parse_constraint(spec: str) -> Constraint:
    """'iteration_time <= 1.02 * best', 'mfu >= 0.4', 'power < 2e6'."""
    m = _CONSTRAINT.match(spec)
    if not m:
        raise InputError(
            Problem(
                "--constraint",
                f"expected METRIC <=|>=|<|> [NUMBER *] best|NUMBER, e.g. "
                f"'iteration_time <= 1.02 * best' (got {spec!r})",
            )
        )
    name, op, pre, rhs, post = m.groups()
    metric = metric_name(name, "--constraint")
    relative = rhs == "best"
    if relative:
        if pre and post:
            raise InputError(Problem("--constraint", f"one factor of best, not two (got {spec!r})"))
        factor = float(pre or post or 1.0)
    else:
        if pre or post:
            raise InputError(Problem("--constraint", f"a factor multiplies best, not a number (got {spec!r})"))
        factor = float(rhs)
    if not math.isfinite(factor):
        raise InputError(Problem("--constraint", f"not a finite number in {spec!r}"))
    return Constraint(metric, op, factor, relative, spec.strip())


@dataclass
class Space:
    """The product of the varied fields' values; a combination = one index per field, built into a Case when
    first proposed (its number: its position in the grid, so the same combination keeps its folder)."""

    file: Path
    paths: list[tuple[str, ...]]
    values: list[list]
    base: Any = None  # the base Scenario
    cases: dict[tuple[int, ...], Case] = field(default_factory=dict)

    @classmethod
    def of(cls, file: Path, vary: list[str]) -> Space:
        if not vary:
            raise InputError(Problem("--vary", "give at least one FIELD=V1,V2,... to search over"))
        parsed = [parse_vary(s) for s in vary]
        paths = [p for p, _ in parsed]
        dup = [".".join(p) for p in dict.fromkeys(paths) if paths.count(p) > 1]
        if dup:
            raise InputError(Problem("--vary", f"{', '.join(dup)} given more than once"))
        values = [list(dict.fromkeys(v if not isinstance(v, list) else tuple(v) for v in vals)) for _, vals in parsed]
        space = cls(file, paths, values, load_scenario(file))
        check_paths(space.base, paths)
        return space

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.values)

    @property
    def fields(self) -> list[str]:
        return [".".join(p) for p in self.paths]

    def index(self, combo: tuple[int, ...]) -> int:
        i = 0
        for k, n in zip(combo, (len(v) for v in self.values)):
            i = i * n + k
        return i + 1

    def case(self, combo: tuple[int, ...]) -> Case:
        if combo not in self.cases:
            row = tuple(vals[k] for vals, k in zip(self.values, combo))
            (v,) = build_variants(self.base, self.paths, [row], str(self.file))
            if isinstance(v, Invalid):
                self.cases[combo] = Case(
                    self.index(combo),
                    v.label,
                    v.varied,
                    None,
                    tuple(str(p) for p in v.problems),
                    key=f"invalid-{self.index(combo)}",
                )
            else:
                self.cases[combo] = Case(
                    self.index(combo),
                    v.label,
                    v.varied,
                    v.scenario.model_dump(mode="json", exclude_unset=True),
                    key=scenario_key(v),
                )
        return self.cases[combo]


@dataclass
class Phase:
    goal: Objective
    constraints: list[Constraint]
    runs: int = 0  # cases run in this phase (not answered from earlier runs)
    proposals: int = 0
    best: dict | None = None  # the best row meeting the constraints

    def to_dict(self) -> dict:
        return {
            "goal": self.goal.text,
            "constraints": [c.text for c in self.constraints],
            "runs": self.runs,
            "proposals": self.proposals,
            "best_case": self.best["case"] if self.best else None,
            "best_value": self.best.get(self.goal.metric) if self.best else None,
        }


@dataclass
class SearchResult:
    objective: Objective
    constraints: list[Constraint]
    best: dict[str, float]  # the best of each metric a constraint is relative to
    best_case: dict[str, str]
    phases: list[Phase]
    rows: list[dict]  # every run made: the evidence
    answer: dict | None
    method: str
    space_size: int
    interrupted: bool = False

    def to_dict(self) -> dict:
        return {
            "objective": self.objective.text,
            "constraints": [c.text for c in self.constraints],
            "best": {m: {"value": v, "case": self.best_case.get(m)} for m, v in self.best.items()},
            "bounds": {c.text: c.bound(self.best) for c in self.constraints if not c.relative or c.metric in self.best},
            "method": self.method,
            "space": self.space_size,
            "runs": sum(r.get("status") != "invalid" for r in self.rows),
            "invalid": sum(r.get("status") == "invalid" for r in self.rows),
            "phases": [p.to_dict() for p in self.phases],
            "interrupted": self.interrupted,
            "answer": self.answer,
        }


def _feasible(row: dict, constraints: list[Constraint], best: dict[str, float]) -> bool:
    if row.get("status") != "ok":
        return False
    return all(isinstance(row.get(c.metric), (int, float)) and c.holds(row[c.metric], best) for c in constraints)


def best_row(rows: list[dict], goal: Objective, constraints: list[Constraint], best: dict[str, float]) -> dict | None:
    top = None
    for r in rows:
        if _feasible(r, constraints, best) and isinstance(r.get(goal.metric), (int, float)):
            if top is None or goal.better(r[goal.metric], top[goal.metric]):
                top = r
    return top


class _Proposer:
    """Combinations to try: Optuna's TPE sampler (when installed) or uniform at random, told every result."""

    def __init__(
        self,
        space: Space,
        goal: Objective,
        constraints: list[Constraint],
        best: dict[str, float],
        seed: int,
        known: list[tuple[tuple[int, ...], dict]],
    ):
        self.space, self.goal, self.constraints, self.best = space, goal, constraints, best
        self.rng = np.random.default_rng(seed)
        self.pending: dict[int, Any] = {}
        try:
            import optuna
        except ImportError:
            self.optuna = None
            return
        self.optuna = optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        # Optuna >= 5: a trial's constraints are set on it (set_constraint); before: the sampler's constraints_func
        self.new_api = hasattr(optuna.trial.Trial, "set_constraint")
        self.dists = {
            f: optuna.distributions.CategoricalDistribution(list(range(len(v))))
            for f, v in zip(space.fields, space.values)
        }
        kwargs: dict[str, Any] = {}
        if constraints and not self.new_api:
            kwargs["constraints_func"] = lambda t: t.user_attrs.get("constraint", [1.0] * len(constraints))
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=max(4, min(10, space.size // 4)), **kwargs)
        self.study = optuna.create_study(direction="maximize" if goal.maximize else "minimize", sampler=sampler)
        for combo, row in known:
            self.study.add_trial(self._frozen(combo, row))

    @property
    def method(self) -> str:
        return "Optuna TPE" if self.optuna else "random (Optuna is not installed)"

    def _value(self, row: dict) -> tuple[float | None, list[float]]:
        """The objective's value (None: the run failed) and each constraint's slack (<= 0: it holds)."""
        v = row.get(self.goal.metric) if row.get("status") == "ok" else None
        if not isinstance(v, (int, float)) or not math.isfinite(v):
            return None, []
        return float(v), [c.slack(float(row.get(c.metric, math.inf)), self.best) for c in self.constraints]

    def _frozen(self, combo, row):
        value, slack = self._value(row)
        state = self.optuna.trial.TrialState.COMPLETE if value is not None else self.optuna.trial.TrialState.FAIL
        extra: dict[str, Any] = {}
        if slack and self.new_api:
            extra["constraints"] = {f"c{i}": x for i, x in enumerate(slack)}
        elif slack:
            extra["user_attrs"] = {"constraint": slack}
        return self.optuna.trial.create_trial(
            params=dict(zip(self.space.fields, combo)), distributions=self.dists, value=value, state=state, **extra
        )

    def propose(self, evaluated: set) -> tuple[int, tuple[int, ...]]:
        """(a token for `tell`, a combination)."""
        if self.optuna is None:
            n = self.space.size
            for _ in range(64):
                flat = int(self.rng.integers(n))
                combo = tuple(int(x) for x in np.unravel_index(flat, [len(v) for v in self.space.values]))
                if combo not in evaluated:
                    break
            return -1, combo
        trial = self.study.ask(self.dists)
        self.pending[trial.number] = trial
        return trial.number, tuple(int(trial.params[f]) for f in self.space.fields)

    def tell(self, token: int, row: dict) -> None:
        if self.optuna is None or token not in self.pending:
            return
        trial = self.pending.pop(token)
        value, slack = self._value(row)
        for i, x in enumerate(slack):
            if self.new_api:
                trial.set_constraint(f"c{i}", x)
            else:
                trial.set_user_attr("constraint", slack)
        if value is None:
            self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, value)


def search(
    space: Space,
    objective: Objective,
    constraints: list[Constraint],
    trials: int,
    run_batch: Callable[[list[Case]], list[dict]],
    seed: int = 0,
    batch: int = 1,
    on_phase: Callable[[Phase], None] = lambda p: None,
) -> SearchResult:
    """Phases of at most `trials` runs each (a phase for the best of each metric a constraint is relative to,
    then the objective under the constraints); `run_batch` runs cases and returns their rows."""
    results: dict[tuple[int, ...], dict] = {}  # combination -> its row
    by_key: dict[str, dict] = {}  # scenario -> its row (combinations giving the same scenario share a run)
    best: dict[str, float] = {}
    best_case: dict[str, str] = {}
    phases: list[Phase] = []
    interrupted = False
    goals: list[tuple[Objective, list[Constraint]]] = [
        (Objective(m, m in MAXIMIZE), []) for m in dict.fromkeys(c.metric for c in constraints if c.relative)
    ]
    relative = [g for g, _ in goals]
    goals.append((objective, constraints))

    def update_best(row: dict) -> None:
        """`best` is the best of the runs made so far, whichever phase made them."""
        for g in relative:
            v = row.get(g.metric) if row.get("status") == "ok" else None
            if isinstance(v, (int, float)) and (g.metric not in best or g.better(v, best[g.metric])):
                best[g.metric], best_case[g.metric] = float(v), row["case"]

    method = ""
    for goal, cons in goals:
        phase = Phase(goal, cons)
        phases.append(phase)
        on_phase(phase)
        proposer = _Proposer(space, goal, cons, best, seed + len(phases), list(results.items()))
        method = proposer.method
        stale, limit = 0, 20 * max(1, batch)
        while phase.runs < trials and len(results) < space.size and stale < limit and not interrupted:
            todo: list[tuple[int, tuple[int, ...]]] = []
            later: list[tuple[int, tuple[int, ...]]] = []  # proposed again within the batch
            while (
                len(todo) < batch
                and len(todo) + phase.runs < trials
                and stale < limit
                and len(results) + len(todo) < space.size
            ):
                token, combo = proposer.propose(set(results) | {c for _, c in todo})
                phase.proposals += 1
                case = space.case(combo)
                if combo in results or case.key in by_key:  # answered from the runs made
                    row = results[combo] if combo in results else by_key[case.key]
                    results[combo] = row
                    proposer.tell(token, row)
                    stale += 1
                elif any(c == combo for _, c in todo):
                    later.append((token, combo))
                    stale += 1
                else:
                    todo.append((token, combo))
            if not todo:
                continue
            stale = 0
            cases = [space.case(c) for _, c in todo]
            try:
                ran = {r["case"]: r for r in run_batch(cases)}
            except KeyboardInterrupt:
                interrupted = True
                ran = {}
            for (token, combo), case in zip(todo, cases):
                got = ran.get(case.id)
                if got is None:
                    continue
                results[combo] = got
                if case.key:
                    by_key[case.key] = got
                update_best(got)
                phase.runs += got.get("status") != "invalid"  # an invalid combination costs no run
                proposer.tell(token, got)
            for token, combo in later:
                proposer.tell(token, results.get(combo, {"status": "interrupted"}))
        phase.best = best_row(list(results.values()), goal, cons, best)
        if interrupted:
            break
        if not cons and goal.metric not in best:  # nothing ran: no bound for the constraints relative to it
            break
    rows = sorted({r["case"]: r for r in results.values()}.values(), key=lambda r: r["case"])
    complete = len(phases) == len(goals)
    answer = best_row(rows, objective, constraints, best) if complete else None
    return SearchResult(objective, constraints, best, best_case, phases, rows, answer, method, space.size, interrupted)
