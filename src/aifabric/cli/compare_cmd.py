"""`aifabric compare`: several scenarios (or one with a varied field), side by side, printed and plotted."""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
import typer
from plotly.offline import get_plotlyjs
from rich.table import Table

from ..compare import metrics, variants
from ..report import new_run_dir, write_atomic, write_json
from ..report.terminal import fmt_time
from ..simulate import simulate
from .app import app
from .console import make_console
from .run_cmds import OUT_HELP, _engine

console = make_console()

TIME_KEYS = ("iteration_time_s", "compute_time_s", "communication_time_s", "exposed_communication_s")


@app.command()
def compare(
    files: list[Path] = typer.Argument(..., help="scenario files (two or more, or one with --vary)"),
    vary: list[str] = typer.Option(None, "--vary", help="vary a field of the one scenario: FIELD=V1,V2,...; "
                                   "repeat to vary several fields together (same number of values: "
                                   "--vary workload.parallelism.tp=8,4 --vary workload.parallelism.dp=2,4)"),
    engine: str = typer.Option(None, "--engine", "-e", help="flow | analytic | packet (default: each scenario's)"),
    out: Path = typer.Option(None, "--out", "-o", help=OUT_HELP),
) -> int:
    """Compare runs: iteration time, exposed communication, MFU, bandwidths, link utilization per tier."""
    vs = variants(files, vary)
    eng = _engine(engine) if engine else None
    rows = []
    for v in vs:
        console.print(f"simulating [bold]{v.label}[/] ...")
        rows.append((v.label, metrics(simulate(v.scenario, eng))))
    keys = list(dict.fromkeys(k for _, m in rows for k in m))
    base = rows[0][1]
    table = Table(title="comparison (Δ relative to the first)", title_justify="left")
    table.add_column("metric")
    for label, _ in rows:
        table.add_column(label, justify="right")
    for k in keys:
        cells = []
        for i, (_, m) in enumerate(rows):
            v = m.get(k)
            if v is None:
                cells.append("–")
                continue
            text = fmt_time(v) if k in TIME_KEYS else (f"{100 * v:.1f}%" if k == "mfu" or k.startswith("max_util")
                                                       else f"{v:,.2f}" if abs(v) < 1e6 else f"{v:.3e}")
            b = base.get(k)
            if i and b:
                text += f" ({100 * (v - b) / b:+.1f}%)"
            cells.append(text)
        table.add_row(k, *cells)
    console.print(table)
    out_dir = out or new_run_dir(prefix="aifabric-compare")
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "compare.json", {"schema_version": 1, "variants": [{"label": lb, **m} for lb, m in rows]})
    fig = go.Figure()
    for k in TIME_KEYS:
        fig.add_trace(go.Bar(name=k.replace("_s", "").replace("_", " "), x=[lb for lb, _ in rows],
                             y=[m[k] * 1e3 for _, m in rows]))
    fig.update_layout(barmode="group", title="Times per iteration (ms)", yaxis_title="ms", template="plotly_white")
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>aifabric compare</title>"
            f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
            + fig.to_html(full_html=False, include_plotlyjs=False) + "</body></html>")
    write_atomic(out_dir / "compare.html", page)
    console.print(f"wrote {out_dir / 'compare.json'} and [bold]{out_dir / 'compare.html'}[/]")
    return 0
