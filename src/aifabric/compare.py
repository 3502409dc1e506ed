"""Comparing runs: the same questions asked of several scenarios, side by side.

`variants` builds scenarios from files, or from one base scenario with one field varied
(`fabric.spines=1,2,4`): every value gives a variant named `<field>=<value>` (its `short` name: the value).
Several fields vary together (one value of each per variant), or with `grid` in every combination
(`parse_specs`); `build_variants` keeps the variants that do not validate as `Invalid` with their problems
(`aifabric sweep` runs the others or refuses them all at once).
`inert_notes` says when a varied field cannot change anything: no traffic crossed the tier it acts on in
any of the runs (ECMP vs spraying on a fabric whose traffic stays under its leaf switches).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import InputError, Problem
from .report.metric_format import delta_pct, format_metric  # noqa: F401 - compare's and sweep's tables
from .scenario import load_scenario, parse_scenario
from .scenario.schema import Scenario
from .simulate import Run


@dataclass(frozen=True)
class Variant:
    label: str
    scenario: Scenario
    varied: tuple[tuple[str, Any], ...] = field(default=())  # (field path, value) set in this variant
    short: str = ""  # a column title: the varied values alone, or the file's stem

    @property
    def title(self) -> str:
        return self.short or self.label


# the fabric tiers each field acts on: varying it cannot change a run none of whose traffic crosses them
_SPINE_PATHS = ("spine", "superspine")
FIELD_TIERS: dict[str, tuple[str, ...]] = {
    **{
        f"fabric.{k}": _SPINE_PATHS
        for k in ("load_balancing", "flowlet_gap_us", "ecmp_hash_seed", "per_switch_hash_seed", "ecmp_hash_fields")
    },
    **{
        f"fabric.{k}": ("spine",)
        for k in (
            "spines",
            "leaf_oversubscription",
            "links_per_spine",
            "spine_radix",
            "spine_cabling",
            "spines_per_leaf",
            "link_speed_gbps",
        )
    },
    **{
        f"fabric.{k}": ("superspine",)
        for k in (
            "superspines",
            "superspine_planes",
            "superspine_link_speed_gbps",
            "links_per_superspine",
            "superspine_radix",
            "spine_oversubscription",
        )
    },
}
TIER_WHAT = {
    "spine": "the spine tier (traffic between leaf switches)",
    "superspine": "the super-spine tier (between pods)",
}


_RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*$")


MAX_RANGE = 10_000  # values of one lo..hi range (each a simulation)


def _yaml_value(text: str, spec: str):
    from .scenario.safe_yaml import YamlLimit, load_bounded

    try:
        return load_bounded(text)
    except (YamlLimit, yaml.YAMLError) as exc:
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(Problem("--vary", f"{text.strip()!r} is not a YAML value ({reason}) (in {spec!r})")) from None


def _bad_vary(spec: str):
    raise InputError(Problem("--vary", f"expected FIELD=V1,V2,... (got {spec!r})"))


def parse_vary(spec: str) -> tuple[tuple[str, ...], list]:
    """'fabric.spines=1,2,4' -> (('fabric', 'spines'), [1, 2, 4]); values parsed as YAML scalars; an integer
    range 'lo..hi' stands for every integer from lo to hi ('fabric.spines=1..4,8')."""
    if "=" not in spec:
        raise InputError(Problem("--vary", f"expected FIELD=V1,V2,... (got {spec!r})"))
    field, values = spec.split("=", 1)
    path = tuple(p for p in field.strip().split(".") if p)
    vals: list = []
    if values.strip().startswith("["):  # a YAML list: 'fabric.spines=[1, 2]' (commas inside are the list's)
        parsed = _yaml_value(values, spec)
        if not isinstance(parsed, list):
            raise InputError(Problem("--vary", f"{values.strip()!r} is not a YAML list (in {spec!r})"))
        pieces = [v for v in parsed]
        return (path, pieces) if path and pieces else _bad_vary(spec)
    for i, v in enumerate(values.split(",")):
        if not v.strip():
            raise InputError(Problem("--vary", f"value {i + 1} is empty (in {spec!r})"))
        m = _RANGE.match(v)
        if m and int(m.group(1)) <= int(m.group(2)):
            if int(m.group(2)) - int(m.group(1)) >= MAX_RANGE:
                raise InputError(Problem("--vary", f"{v.strip()}: at most {MAX_RANGE:,} values in a range"))
            vals += list(range(int(m.group(1)), int(m.group(2)) + 1))
        else:
            vals.append(_yaml_value(v, spec))
    if not path or len(vals) < 1:
        raise InputError(Problem("--vary", f"expected FIELD=V1,V2,... (got {spec!r})"))
    return path, vals


def parse_specs(specs: list[str], grid: bool = False) -> tuple[list[tuple[str, ...]], list[tuple]]:
    """--vary options -> (field paths, one tuple of values per variant): fields varied together (the same
    number of values each), or with `grid` every combination of their values (the first field slowest)."""
    parsed = [parse_vary(s) for s in specs]
    paths = [p for p, _ in parsed]
    dup = [".".join(p) for p in dict.fromkeys(paths) if paths.count(p) > 1]
    if dup:
        raise InputError(Problem("--vary", f"{', '.join(dup)} given more than once"))
    if grid:
        return paths, list(itertools.product(*(values for _, values in parsed)))
    if len({len(values) for _, values in parsed}) > 1:
        raise InputError(
            Problem(
                "--vary",
                "fields varied together need the same number of values "
                f"(got {', '.join(str(len(v)) for _, v in parsed)}; --grid for every combination)",
            )
        )
    return paths, list(zip(*(values for _, values in parsed)))


@dataclass(frozen=True)
class Invalid:
    """A variant whose scenario does not validate: its values and every problem."""

    label: str
    varied: tuple[tuple[str, Any], ...]
    problems: list[Problem]


def check_paths(base: Scenario, paths: list[tuple[str, ...]]) -> None:
    """Every varied field exists in the scenario (with its defaults filled in); all problems at once."""
    full = base.model_dump(mode="json")
    problems = []
    for p in paths:
        node = full
        for key in p:
            if not isinstance(node, dict) or key not in node:
                problems.append(Problem("--vary", f"{'.'.join(p)}: no such field in the scenario"))
                break
            node = node[key]
    if problems:
        raise InputError(problems)


def build_variants(
    base: Scenario, paths: list[tuple[str, ...]], rows: list[tuple], source: str
) -> list[Variant | Invalid]:
    """One variant per row of values (`Invalid` where the scenario does not validate, with its problems)."""
    check_paths(base, paths)
    out: list[Variant | Invalid] = []
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
        short = str(row[0]) if len(paths) == 1 else ", ".join(f"{p[-1]}={v}" for p, v in zip(paths, row))
        pairs = tuple((".".join(p), v) for p, v in zip(paths, row))
        try:
            out.append(Variant(label, parse_scenario(data, f"{source} with {label}"), pairs, short))
        except InputError as exc:
            out.append(Invalid(label, pairs, list(exc.problems)))
    return out


def invalid_problems(bad: list[Invalid]) -> list[Problem]:
    """Every problem of every invalid variant, each saying which variant."""
    return [Problem(p.path, f"{p.message} (with {b.label})") for b in bad for p in b.problems]


def varied(base: Scenario, path: tuple[str, ...] | list[tuple[str, ...]], values: list, source: str) -> list[Variant]:
    """One variant per value; with several paths, `values` holds one tuple per variant (fields varied together).
    Raises InputError with the problems of every variant that does not validate."""
    paths = [path] if isinstance(path, tuple) else path
    rows = [v if isinstance(path, list) else (v,) for v in values]
    out = build_variants(base, paths, rows, source)
    bad = [v for v in out if isinstance(v, Invalid)]
    if bad:
        raise InputError(invalid_problems(bad), source)
    return [v for v in out if isinstance(v, Variant)]


def variants(files: list[Path], vary: str | list[str] | None, grid: bool = False) -> list[Variant]:
    specs = [vary] if isinstance(vary, str) else list(vary or [])
    if specs:
        if len(files) != 1:
            raise InputError(Problem("--vary", "give exactly one base scenario with --vary"))
        paths, rows = parse_specs(specs, grid)
        return varied(load_scenario(files[0]), paths, rows, str(files[0]))
    if len(files) < 2:
        raise InputError(Problem("FILES", "give two or more scenarios, or one with --vary FIELD=V1,V2"))
    out = []
    for f in files:
        s = load_scenario(f)
        out.append(Variant(f"{f.stem} ({s.name})" if s.name != f.stem else f.stem, s, short=f.stem))
    return out


def tier_bytes(run: Run) -> dict[str, float]:
    """Bytes carried per fabric tier (every link of the tier, both directions)."""
    out: dict[str, float] = {}
    for link in run.results.links:
        out[link.tier] = out.get(link.tier, 0.0) + link.bytes
    return out


def inert_notes(vs: list[Variant], bytes_by_tier: list[dict[str, float]], engine: str | None = None) -> list[str]:
    """Why some varied fields cannot change the results: no traffic crossed the tiers they act on in any run;
    or the field acts only on an engine that did not run."""
    notes = []
    fields = list(dict.fromkeys(path for v in vs for path, _ in v.varied))
    for path in fields:
        tiers = FIELD_TIERS.get(path)
        if tiers and all(b.get(t, 0.0) == 0 for b in bytes_by_tier for t in tiers):
            where = " and ".join(TIER_WHAT[t] for t in tiers)
            notes.append(
                f"{path} acts on {where}; no traffic crossed {'them' if len(tiers) > 1 else 'it'} in any "
                "of these runs, so it cannot change anything in this scenario"
            )
        engines = {engine or v.scenario.engine for v in vs}
        if path in ("fabric.flowlet_gap_us", "fabric.qos.dlb.flowlet_aging_us") and engines == {"analytic"}:
            notes.append(
                f"{path} acts on the flow and packet engines (a connection idle for longer than the gap starts a new "
                "flowlet on the least-loaded path); the analytic engine has no contention and spreads every transfer "
                "over the equal-cost paths"
            )
        elif (
            path.startswith("fabric.qos.")
            and "packet" not in engines
            and not path.startswith(("fabric.qos.roce_mtu_bytes", "fabric.qos.dlb"))
        ):  # the path MTU's headers, DLB (flowlets, or its spread): the flow engine too
            notes.append(
                f"{path} is the switch QoS profile, which the packet engine runs (--engine packet); the flow "
                "and analytic engines do not model queues, ECN, PFC or DCQCN"
            )
    return notes


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
        out["min_busbw_gBps"] = min(c.busbw_bytes_per_s for c in r.collectives) / 1e9
    for tier, utils in sorted(tiers.items()):
        out[f"max_util_{tier}"] = max(utils)
    out.update(cost_metrics(run.costs))
    return out


def cost_metrics(costs: dict) -> dict[str, float]:
    """The figures of a run's `costs` (summary.json) that designs are compared on."""
    return {
        "tokens_per_s": costs["tokens_per_s"],
        "capex_usd": costs["capital"]["total_usd"],
        "network_capex_usd": costs["capital"]["network_usd"],
        "it_power_w": costs["power"]["it_w"],
        "network_power_w": costs["power"]["network_w"],
        "cost_per_iteration_usd": costs["per_iteration"]["total_usd"],
        "training_cost_usd": costs["training"]["total_usd"],
        "training_hours": costs["training"]["hours"],
        "tokens_per_s_per_musd": costs["tokens_per_s_per_musd"],
    }
