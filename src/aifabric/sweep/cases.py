"""The cases of a sweep: one base scenario, its --vary fields together or in a grid (compare's variants).

Every case is validated before anything runs: a combination that does not validate, and two combinations
that give the same scenario, are all reported at once (or, with `skip_invalid`, the invalid ones are kept
as cases recorded `invalid` and the duplicates dropped). A case carries its scenario as JSON data (what the
file gave, with the varied values set): a worker on another machine re-validates it from that alone.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compare import Invalid, Variant, build_variants, invalid_problems, parse_specs
from ..errors import InputError, Problem
from ..scenario import load_scenario


@dataclass(frozen=True)
class Case:
    index: int  # 1-based, in the order of the combinations
    label: str  # "fabric.spines=2, fabric.load_balancing=spray"
    varied: tuple[tuple[str, Any], ...]
    scenario: dict | None  # the scenario as given (JSON data), None when invalid
    problems: tuple[str, ...] = ()  # why it does not validate
    key: str = ""  # a digest of the validated scenario: the same key is the same run
    extra: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.index:04d}"

    @property
    def slug(self) -> str:
        """Its folder under runs/: number and values, in characters every file system takes."""
        short = ",".join(f"{p.split('.')[-1]}={v}" for p, v in self.varied)
        return f"{self.id}-" + (re.sub(r"[^A-Za-z0-9._=,-]+", "_", short).strip("_")[:80] or "case")

    @property
    def valid(self) -> bool:
        return self.scenario is not None


def scenario_key(v: Variant) -> str:
    data = json.dumps(v.scenario.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(data.encode()).hexdigest()[:16]


def build_cases(
    file: Path, vary: list[str], grid: bool = False, skip_invalid: bool = False
) -> tuple[list[Case], list[str]]:
    """The sweep's cases and notes (duplicates dropped, invalid cases kept). Raises InputError listing every
    problem (invalid combinations, duplicates) unless `skip_invalid`."""
    if not vary:
        raise InputError(Problem("--vary", "give at least one FIELD=V1,V2,... to sweep"))
    paths, rows = parse_specs(vary, grid)
    base = load_scenario(file)
    built = build_variants(base, paths, rows, str(file))
    problems: list[Problem] = []
    notes: list[str] = []
    bad = [v for v in built if isinstance(v, Invalid)]
    seen: dict[str, str] = {}
    cases: list[Case] = []
    for i, v in enumerate(built):
        if isinstance(v, Invalid):
            cases.append(
                Case(
                    i + 1,
                    v.label,
                    v.varied,
                    None,
                    tuple(str(p) for p in v.problems),
                    key="invalid-" + hashlib.sha256(v.label.encode()).hexdigest()[:16],
                )
            )
            continue
        key = scenario_key(v)
        if key in seen:
            msg = f"{v.label} is the same scenario as {seen[key]}"
            if skip_invalid:
                notes.append(f"dropped: {msg}")
            else:
                problems.append(Problem("--vary", msg))
            continue
        seen[key] = v.label
        cases.append(Case(i + 1, v.label, v.varied, v.scenario.model_dump(mode="json", exclude_unset=True), key=key))
    if not skip_invalid:
        problems = invalid_problems(bad) + problems
        if problems:
            raise InputError(problems, str(file))
    elif bad:
        notes.append(f"{len(bad)} of {len(built)} combinations do not validate: recorded as invalid, not run")
    if not any(c.valid for c in cases):
        raise InputError(Problem("--vary", "no combination validates: nothing to run"), str(file))
    return cases, notes
