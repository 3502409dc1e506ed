"""What a topic of `aifabric learn` returns: sections of rows (a quantity, its value, how it is computed and,
where the book prints something else, what it prints), the numbers themselves for tests and scripts, and
the user's own values parsed from `--values NAME=VALUE`.

No PyTorch here: the command checks `--values` before importing it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError, Problem


@dataclass(frozen=True)
class Param:
    """A value a topic takes: its default (the book's), what it is, and its kind."""

    default: Any
    help: str
    kind: str = "float"  # float | int | floats | text
    low: float | None = None  # smallest allowed (inclusive)
    high: float | None = None  # largest allowed (inclusive): keeps the printout readable
    positive: bool = False  # > 0
    length: int = 0  # a list value of exactly this many numbers (0: any)


@dataclass
class Row:
    name: str
    value: str
    how: str = ""  # the formula or the book's explanation (shown with --explain)
    book: str = ""  # where the book prints another value: what it prints and why this one is right


@dataclass
class Section:
    title: str
    rows: list[Row] = field(default_factory=list)
    text: str = ""  # a paragraph shown with --explain

    def add(self, name: str, value: str, how: str = "", book: str = "") -> Row:
        row = Row(name, value, how, book)
        self.rows.append(row)
        return row


@dataclass
class Lesson:
    topic: str
    title: str
    sections: list[Section] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)  # the computed numbers, by name
    inputs: dict[str, Any] = field(default_factory=dict)  # the values used (the book's or the user's)
    notes: list[str] = field(default_factory=list)  # where inputs come from

    def section(self, title: str, text: str = "") -> Section:
        s = Section(title, text=text)
        self.sections.append(s)
        return s

    @property
    def corrections(self) -> list[Row]:
        return [r for s in self.sections for r in s.rows if r.book]


# --- the user's values ---------------------------------------------------------------------------------

_PAIR = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.+?)\s*$")


def _split_pairs(text: str) -> list[str]:
    """'x1=2 x2=3' or 'x1=2; x2=3' -> ['x1=2', 'x2=3'] (a list value keeps its commas: 'logits=1,2,3')."""
    parts = [p for p in re.split(r"[;\s]+(?=[A-Za-z_][A-Za-z0-9_]*\s*=)", text.strip()) if p.strip()]
    return parts or [text]


def _number(name: str, raw: str, kind: str) -> float:
    try:
        v = float(raw)
    except ValueError:
        raise InputError(Problem("--values", f"{name}: expected a number (got {raw!r})")) from None
    if not math.isfinite(v):
        raise InputError(Problem("--values", f"{name}: expected a finite number (got {raw!r})"))
    if kind == "int":
        if v != int(v):
            raise InputError(Problem("--values", f"{name}: expected a whole number (got {raw!r})"))
        return int(v)
    return v


def parse_values(topic: str, params: dict[str, Param], given: list[str] | None) -> dict[str, Any]:
    """The topic's defaults overridden by `--values NAME=VALUE` (repeatable; several pairs in one string
    separated by spaces or ';'; a list value comma-separated). Unknown names and bad numbers: InputError
    naming --values."""
    values = {k: p.default for k, p in params.items()}
    names = ", ".join(params) or "none"
    for text in given or []:
        for pair in _split_pairs(text):
            m = _PAIR.match(pair)
            if not m:
                raise InputError(Problem("--values", f"expected NAME=VALUE (got {pair!r}); {topic} takes {names}"))
            name, raw = m.group(1), m.group(2)
            if name not in params:
                raise InputError(Problem("--values", f"{topic} has no value {name!r}; it takes {names}"))
            p = params[name]
            if p.kind == "text":
                v: Any = raw
            elif p.kind == "floats":
                items = [x for x in re.split(r"[,\s]+", raw) if x]
                if not items:
                    raise InputError(Problem("--values", f"{name}: expected numbers separated by commas"))
                v = [_number(name, x, "float") for x in items]
                if p.length and len(v) != p.length:
                    raise InputError(Problem("--values", f"{name}: expected {p.length} numbers (got {len(v)})"))
            else:
                v = _number(name, raw, p.kind)
                if p.positive and v <= 0:
                    raise InputError(Problem("--values", f"{name}: must be > 0 (got {raw})"))
                if p.low is not None and v < p.low:
                    raise InputError(Problem("--values", f"{name}: must be >= {p.low:g} (got {raw})"))
                if p.high is not None and v > p.high:
                    raise InputError(Problem("--values", f"{name}: at most {p.high:g} here (got {raw})"))
            values[name] = v
    return values


# --- formatting ----------------------------------------------------------------------------------------


def num(x: float, digits: int = 3) -> str:
    """A number as the book writes it: `digits` decimals, a sign only when negative, no '-0.000'."""
    x = float(x.detach()) if hasattr(x, "detach") else float(x)
    s = f"{x:.{digits}f}"
    return s[1:] if s.startswith("-") and float(s) == 0 else s


def vec(values, digits: int = 3) -> str:
    return "[" + ", ".join(num(v, digits) for v in _flat(values)) + "]"


def _flat(values) -> list[float]:
    if hasattr(values, "detach"):
        return [float(v) for v in values.detach().reshape(-1).tolist()]
    return [float(v) for v in values]


def count(n: int) -> str:
    return f"{int(n):,}"


def shape(t) -> str:
    return " × ".join(str(d) for d in t.shape)
