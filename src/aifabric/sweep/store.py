"""A sweep's folder: what it is, what each case gave, and the table of them all.

```
sweep.json               the sweep: base scenario, --vary, grid, engine, every case (id, values, key)
runs/0001-spines=2/      one case: scenario.yaml, summary.json, report.html, row.json (written last:
                         its presence means the case is done; a failed case has row.json alone)
results.parquet, .csv    one row per case: case, status, error, every varied field, every metric, report
plotly.min.js            plotly.js once, for sweep.html and every case's report.html (offline)
sweep.html               Pareto fronts and every case, each point linking to its run's report
```

Every file is written atomically (report/files.py); `--resume` reads row.json files to skip what is done.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from ..errors import InputError, Problem
from ..report.files import write_atomic, write_json
from .cases import Case

SWEEP_SCHEMA_VERSION = 1
FRONT = ("case", "label", "status", "error", "attempts", "wall_s")
DONE = ("ok", "failed", "crashed", "timeout", "invalid")


def definition(
    kind: str, file: Path, vary: list[str], grid: bool, engine: str | None, cases: list[Case], extra: dict | None = None
) -> dict:
    return {
        "schema_version": SWEEP_SCHEMA_VERSION,
        "kind": kind,
        "scenario": str(file),
        "vary": list(vary),
        "grid": grid,
        "engine": engine,
        "cases": [
            {"id": c.id, "slug": c.slug, "label": c.label, "key": c.key, "varied": {p: v for p, v in c.varied}}
            for c in cases
        ],
        **(extra or {}),
    }


def check_resume(out: Path, new: dict) -> None:
    """`--resume`: the folder holds a sweep, and the same one (cases, engine)."""
    path = out / "sweep.json"
    if not path.exists():
        raise InputError(Problem("--resume", f"{out} holds no sweep to resume (no sweep.json)"))
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(Problem("--resume", f"{path}: cannot read: {exc}")) from None
    if old.get("kind") != new["kind"]:
        raise InputError(Problem("--resume", f"{out} holds an `{old.get('kind')}` run, not a {new['kind']}"))
    if [c["key"] for c in old.get("cases", [])] != [c["key"] for c in new["cases"]] or old.get("engine") != new[
        "engine"
    ]:
        raise InputError(
            Problem(
                "--resume",
                f"{out} holds a different sweep ({len(old.get('cases', []))} cases "
                f"of {old.get('scenario')} with {' '.join(old.get('vary', []))}): give the same "
                "scenario, --vary, --grid and --engine, or another --out",
            )
        )


def case_dir(out: Path, case: Case) -> Path:
    return out / "runs" / case.slug


def read_rows(out: Path, cases: list[Case]) -> dict[str, dict]:
    """The rows of the cases already done (row.json present), by case id."""
    rows = {}
    for c in cases:
        p = case_dir(out, c) / "row.json"
        if p.exists():
            try:
                rows[c.id] = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # written atomically: unreadable means foreign; run the case again
    return rows


def record(
    out: Path,
    case: Case,
    status: str,
    result: dict | None = None,
    error: str = "",
    attempts: int = 1,
    wall_s: float = 0.0,
    detail: str = "",
) -> dict:
    """A case's files and its row (row.json last)."""
    d = case_dir(out, case)
    d.mkdir(parents=True, exist_ok=True)
    row: dict[str, Any] = {
        "case": case.id,
        "label": case.label,
        "status": status,
        "error": error,
        "attempts": attempts,
        "wall_s": round(wall_s, 4),
        **{p: v for p, v in case.varied},
    }
    if result is not None:
        for name, text in result["files"].items():
            write_atomic(d / name, text)
        row.update(result["row"])
        if "report.html" in result["files"]:
            row["report"] = f"runs/{case.slug}/report.html"
    if detail:
        write_atomic(d / "error.txt", detail)
    write_json(d / "row.json", row)
    return row


def columns(rows: list[dict], varied: list[str]) -> list[str]:
    """The table's columns: case, label, status, error, attempts, wall time, each varied field, every metric
    (in the order they first appear), the report."""
    seen = dict.fromkeys([*FRONT, *varied])
    for r in rows:
        seen.update(dict.fromkeys(k for k in r if k != "report"))
    return [*seen, "report"]


def _column_values(rows: list[dict], col: str) -> list:
    values = [r.get(col) for r in rows]
    present = [v for v in values if v is not None]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present)
    if present and not numeric and not all(isinstance(v, bool) for v in present):
        values = [None if v is None else str(v) for v in values]  # one type per column (Parquet)
    return values


def write_table(out: Path, rows: list[dict], varied: list[str], name: str = "results") -> list[Path]:
    """results.csv, and results.parquet when pyarrow is installed: one row per case, in case order."""
    rows = sorted(rows, key=lambda r: r["case"])
    cols = columns(rows, varied)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow(["" if r.get(c) is None else r.get(c) for c in cols])
    written = [write_atomic(out / f"{name}.csv", buf.getvalue())]
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return written
    table = pa.table({c: _column_values(rows, c) for c in cols})
    tmp = out / f".{name}.parquet.tmp"
    pq.write_table(table, tmp)
    tmp.replace(out / f"{name}.parquet")
    written.append(out / f"{name}.parquet")
    return written


def write_plotly(out: Path) -> str:
    """plotly.js beside the sweep's pages (once): the name the pages' <script src> use."""
    path = out / "plotly.min.js"
    if not path.exists():
        from plotly.offline import get_plotlyjs

        write_atomic(path, get_plotlyjs())
    return path.name
