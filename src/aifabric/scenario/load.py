"""Scenario files in, validated `Scenario` out, or an `InputError` listing every problem by field path."""

from __future__ import annotations

import difflib
import os
import reprlib
import typing
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import InputError, Problem
from .checks import checked
from .schema import Scenario

# scenarios shipped with the package (aifabric/scenarios/), by the name `aifabric demo --scenario` takes
EMBEDDED = {
    "demo": "demo.yaml",  # the default: GPT-style 3D parallelism on 4 servers x 8 H100
    "fabric": "fabric.yaml",  # data-parallel replicas across a spine tier: load balancing, oversubscription matter
    "ch14": "ch14.yaml",  # the book's Ch. 14 shape: data-parallel feed-forward on 2 servers x 4 GPUs
}


def field_path(loc: tuple[Any, ...]) -> str:
    """('workload', 'model', 'layer_widths', 2) -> 'workload.model.layer_widths[2]'."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if path else "") + str(part)
    return path


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model class that owns the field at `loc` (to suggest field names)."""
    model: type[BaseModel] = Scenario
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        info = model.model_fields.get(str(part))
        if info is None:
            return None
        candidates = [info.annotation, *typing.get_args(info.annotation)]
        nested = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
        if not nested:
            return None
        model = nested[0]
    return model


class _Shown:
    """A value quoted in a message: its repr, cut to a line (an alias bomb's repr is gigabytes)."""

    def __init__(self, value: Any):
        self.value = value

    def __repr__(self) -> str:
        from .safe_yaml import shorten

        return shorten(reprlib.repr(self.value))


def _friendly(err: Mapping[str, Any]) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    got = _Shown(err.get("input"))
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        name = str(err["loc"][-1])
        owner = _model_at(err["loc"])
        if owner is None:
            return "unknown field"
        allowed = list(owner.model_fields)
        close = difflib.get_close_matches(name, allowed, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown field{hint} (allowed: {', '.join(allowed)})"
    bounds = {
        "greater_than_equal": (">=", "ge"),
        "greater_than": (">", "gt"),
        "less_than_equal": ("<=", "le"),
        "less_than": ("<", "lt"),
    }
    if kind in bounds:
        op, key = bounds[kind]
        return f"must be {op} {ctx.get(key)} (got {got!r})"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"must be an integer (got {got!r})"
    if kind == "finite_number":
        return f"must be a finite number (got {got!r})"
    if kind in ("float_parsing", "float_type"):
        return f"must be a number (got {got!r})"
    if kind in ("bool_parsing", "bool_type"):
        return f"must be true or false (got {got!r})"
    if kind == "string_type":
        return f"must be a string (got {got!r})"
    if kind == "list_type":
        return f"must be a list (got {got!r})"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"must be a mapping of fields (got {got!r})"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')} (got {got!r})"
    if kind == "too_short":
        return f"must have at least {ctx.get('min_length')} items (got {ctx.get('actual_length')})"
    if kind == "too_long":
        return f"must have at most {ctx.get('max_length')} items (got {ctx.get('actual_length')})"
    if kind == "value_error":
        from .safe_yaml import shorten

        return shorten(str(ctx.get("error", err["msg"])), 400)
    return str(err["msg"])


MAX_PROBLEMS = 50  # listed one by one; the rest counted (10^5 unknown keys would print 10^5 lines)


def problems_from_validation(exc: ValidationError) -> list[Problem]:
    errors = exc.errors(include_url=False)
    out = [Problem(field_path(e["loc"]), _friendly(e)) for e in errors[:MAX_PROBLEMS]]
    if len(errors) > MAX_PROBLEMS:
        out.append(Problem("", f"... and {len(errors) - MAX_PROBLEMS:,} more problems"))
    return out


def resolve_calibration(data: dict, base: Path | None, source: str) -> dict:
    """`calibration: FILE` read into the scenario (the file's `calibration:` block, or the file itself), and a
    relative `calibration.gemm` or `calibration.attention` path made absolute, both relative to the scenario
    file's folder (`base`), so that the scenario copied into a run folder still finds them."""
    cal = data.get("calibration")
    if cal is None:
        return data
    data = dict(data)
    if isinstance(cal, str):
        path = Path(cal).expanduser()
        if not path.is_absolute() and base is not None:
            path = base / path
        try:
            loaded = read_yaml(path.read_text(encoding="utf-8"), str(path))
        except OSError as exc:
            raise InputError([Problem("calibration", f"cannot read {path}: {exc.strerror or exc}")], source) from None
        if isinstance(loaded, dict) and "calibration" in loaded:
            loaded = loaded["calibration"]
        if not isinstance(loaded, dict):
            raise InputError([Problem("calibration", f"{path}: expected a mapping (a `calibration:` block)")], source)
        cal = loaded
        base = path.parent
    for key in ("gemm", "attention"):  # tables by path
        if isinstance(cal, dict) and isinstance(cal.get(key), str):
            table = Path(cal[key]).expanduser()
            if not table.is_absolute() and base is not None:
                cal = {**cal, key: str((base / table).resolve())}
    data["calibration"] = cal
    return data


def resolve_costs(data: dict, base: Path | None, source: str) -> dict:
    """`costs.prices: FILE` and `costs.power: FILE` read into the scenario (the file's `prices:` / `power:`
    block, or the file itself), relative to the scenario file's folder (`base`): the scenario copied into a run
    folder, or sent to a sweep's worker on another machine, carries its tables."""
    costs = data.get("costs")
    if not isinstance(costs, dict) or not any(isinstance(costs.get(k), str) for k in ("prices", "power")):
        return data
    from ..costs.prices import table_data

    costs = dict(costs)
    for key in ("prices", "power"):
        name = costs.get(key)
        if not isinstance(name, str):
            continue
        path = Path(name).expanduser()
        if not path.is_absolute() and base is not None:
            path = base / path
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(
                [Problem(f"costs.{key}", f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}")], source
            ) from None
        loaded = table_data(read_yaml(text, str(path)), str(path), key, f"costs.{key}")
        costs[key] = {"source": str(path), **loaded} if "source" not in loaded else loaded
    return {**data, "costs": costs}


def parse_scenario(data: Any, source: str = "<scenario>", base: Path | None = None) -> Scenario:
    """Validate already-parsed data (a mapping) into a Scenario; raise InputError with every problem.
    `base`: the folder relative file names in the scenario are taken from (its file's)."""
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        raise InputError(f"{source}: a scenario must be a YAML mapping of fields, not {kind}", source)
    data = resolve_calibration(data, base if base is not None else Path.cwd(), source)
    data = resolve_costs(data, base if base is not None else Path.cwd(), source)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise InputError(problems_from_validation(exc), source) from None
    return checked(scenario, source)


def read_yaml(text: str, source: str) -> Any:
    from .safe_yaml import YamlLimit, load_bounded

    try:
        return load_bounded(text)  # bounded size, nesting, alias expansion and integers; duplicate keys refused
    except YamlLimit as exc:
        raise InputError(f"{source}: refused: {exc}", source) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{source}: not valid YAML{where}: {reason}", source) from None


def load_scenario(scenario: str | os.PathLike | Mapping[str, Any] | Scenario, source: str | None = None) -> Scenario:
    """A fully checked Scenario (schema and every cross-field check), or InputError listing every problem, from:
    a YAML file's path; YAML text (a str holding a line break, or a one-line `{...}` mapping); a mapping (relative
    file names in it taken from the current folder); or a Scenario (checked as it is). `source` names the input
    in errors (default: the path, `<scenario text>`, `<scenario>`)."""
    if isinstance(scenario, Scenario):
        return checked(scenario, source)
    if isinstance(scenario, Mapping):
        return parse_scenario(dict(scenario), source or "<scenario>")
    if isinstance(scenario, str) and ("\n" in scenario or scenario.lstrip().startswith("{")):
        source = source or "<scenario text>"
        return parse_scenario(read_yaml(scenario, source), source)
    if not isinstance(scenario, (str, os.PathLike)):
        raise InputError(
            f"a scenario is a file's path, YAML text, a mapping or a Scenario (got {type(scenario).__name__})", source
        )
    path = Path(scenario)
    if not path.exists():
        raise InputError(f"{path}: no such file", str(path))
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a scenario YAML file", str(path))
    from .safe_yaml import YamlLimit, read_text_bounded

    try:
        text = read_text_bounded(path)  # /dev/zero or a multi-GB file: refused after the first 16 MiB
    except YamlLimit as exc:
        raise InputError(f"{path}: refused: {exc}", str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}", str(path)) from None
    return parse_scenario(read_yaml(text, str(path)), str(path), path.parent)


def embedded_scenario_text(name: str = "demo") -> str:
    if name not in EMBEDDED:
        raise InputError(f"--scenario: must be one of {', '.join(EMBEDDED)} (got {name!r})", "--scenario")
    return resources.files("aifabric.scenarios").joinpath(EMBEDDED[name]).read_text(encoding="utf-8")


def embedded_scenario(name: str = "demo") -> Scenario:
    return parse_scenario(read_yaml(embedded_scenario_text(name), f"<embedded {name}>"), f"<embedded {name}>")


def demo_scenario_text() -> str:
    """The default of `aifabric demo`."""
    return embedded_scenario_text("demo")


def demo_scenario() -> Scenario:
    return embedded_scenario("demo")


def ch14_scenario_text() -> str:
    """The book's Ch. 14 cluster: data-parallel feed-forward on 2 servers x 4 GPUs (a small data-parallel example)."""
    return embedded_scenario_text("ch14")


def ch14_scenario() -> Scenario:
    return embedded_scenario("ch14")
