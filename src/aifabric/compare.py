"""Comparing runs: the same questions asked of several scenarios, side by side.

`variants` builds scenarios from files, or from one base scenario with one field varied
(`fabric.spines=1,2,4`): every value gives a variant named `<field>=<value>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from .errors import InputError, Problem
from .scenario import load_scenario, parse_scenario
from .scenario.schema import Scenario
from .simulate import Run


@dataclass(frozen=True)
class Variant:
    label: str
    scenario: Scenario


def parse_vary(spec: str) -> tuple[tuple[str, ...], list]:
    """'fabric.spines=1,2,4' -> (('fabric', 'spines'), [1, 2, 4]); values parsed as YAML scalars."""
    if "=" not in spec:
        raise InputError(Problem("--vary", f"expected FIELD=V1,V2,... (got {spec!r})"))
    field, values = spec.split("=", 1)
    path = tuple(p for p in field.strip().split(".") if p)
    vals = [yaml.safe_load(v) for v in values.split(",") if v.strip()]
    if not path or len(vals) < 1:
        raise InputError(Problem("--vary", f"expected FIELD=V1,V2,... (got {spec!r})"))
    return path, vals


def varied(base: Scenario, path: tuple[str, ...] | list[tuple[str, ...]], values: list, source: str) -> list[Variant]:
    """One variant per value; with several paths, `values` holds one tuple per variant (fields varied together)."""
    paths = [path] if isinstance(path, tuple) else path
    rows = [v if isinstance(path, list) else (v,) for v in values]
    full = base.model_dump(mode="json")
    for p in paths:
        node = full
        for key in p:
            if not isinstance(node, dict) or key not in node:
                raise InputError(Problem("--vary", f"{'.'.join(p)}: no such field in the scenario"))
            node = node[key]
    out = []
    for row in rows:
        # what the file gave, not what validation derived from it (derived fields, e.g. spines from an
        # oversubscription ratio, are derived again for the new value)
        data = base.model_dump(mode="json", exclude_unset=True)
        for p, v in zip(paths, row):
            node = data
            for key in p[:-1]:
                node = node.setdefault(key, {})
            node[p[-1]] = v
        label = ", ".join(f"{'.'.join(p)}={v}" for p, v in zip(paths, row))
        out.append(Variant(label, parse_scenario(data, f"{source} with {label}")))
    return out


def variants(files: list[Path], vary: str | list[str] | None) -> list[Variant]:
    specs = [vary] if isinstance(vary, str) else list(vary or [])
    if specs:
        if len(files) != 1:
            raise InputError(Problem("--vary", "give exactly one base scenario with --vary"))
        parsed = [parse_vary(s) for s in specs]
        if len({len(values) for _, values in parsed}) > 1:
            raise InputError(Problem("--vary", "fields varied together need the same number of values "
                                     f"(got {', '.join(str(len(v)) for _, v in parsed)})"))
        if len(parsed) == 1:
            return varied(load_scenario(files[0]), parsed[0][0], parsed[0][1], str(files[0]))
        rows = list(zip(*(values for _, values in parsed)))
        return varied(load_scenario(files[0]), [p for p, _ in parsed], rows, str(files[0]))
    if len(files) < 2:
        raise InputError(Problem("FILES", "give two or more scenarios, or one with --vary FIELD=V1,V2"))
    out = []
    for f in files:
        s = load_scenario(f)
        out.append(Variant(f"{f.stem} ({s.name})" if s.name != f.stem else f.stem, s))
    return out


def metrics(run: Run) -> dict[str, float]:
    r = run.results
    tiers: dict[str, list[float]] = {}
    for link in r.links:
        tiers.setdefault(link.tier, []).append(link.utilization)
    out = {
        "iteration_time_s": r.iteration_time_s,
        "compute_time_s": r.compute_time_s,
        "communication_time_s": r.communication_time_s,
        "exposed_communication_s": r.exposed_communication_s,
        "mfu": r.mfu,
        "network_bytes": r.scale_out_bytes,
        "nvlink_bytes": r.scale_up_bytes,
    }
    if r.collectives:
        out["min_busbw_GBps"] = min(c.busbw_bytes_per_s for c in r.collectives) / 1e9
    for tier, utils in sorted(tiers.items()):
        out[f"max_util_{tier}"] = max(utils)
    return out
