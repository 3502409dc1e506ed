"""`aifabric compare`: several scenarios (or one with a varied field), side by side, printed and plotted."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import typer

from .app import app
from .console import make_console
from .outdir import compare_out, out_path
from .run_cmds import OUT_HELP, _engine

console = make_console()


def _slug(i: int, text: str) -> str:
    """A run's folder: its position and its title, in characters every file system takes."""
    return f"{i + 1:02d}-" + (re.sub(r"[^A-Za-z0-9._=-]+", "_", text).strip("_")[:60] or "run")


@app.command()
def compare(
    files: list[Path] = typer.Argument(..., help="scenario files (two or more, or one with --vary)"),
    vary: list[str] = typer.Option(None, "--vary", help="vary a field of the one scenario: FIELD=V1,V2,...; "
                                   "repeat to vary several fields together (same number of values: "
                                   "--vary workload.parallelism.tp=8,4 --vary workload.parallelism.dp=2,4)"),
    grid: bool = typer.Option(False, "--grid", help="every combination of the --vary fields' values, instead of "
                              "varying them together"),
    engine: str = typer.Option(None, "--engine", "-e", help="flow | analytic | packet (default: each scenario's)"),
    out: Path = typer.Option(None, "--out", "-o", help=OUT_HELP, parser=out_path),
    force: bool = typer.Option(False, "--force", help="write into an --out folder that holds files aifabric did not "
                               "write there (files of the same names are replaced, others kept)"),
) -> int:
    """Compare runs: iteration time, exposed communication, MFU, bandwidths, link utilization per tier; each
    run's own report beside compare.html."""
    import yaml
    from rich.markup import escape
    from rich.table import Table

    from ..compare import delta_pct, format_metric, inert_notes, metrics, tier_bytes, variants
    from ..report.compare_html import RunRow, build_compare_html, ordered_keys
    from ..report.files import new_run_dir, write_atomic, write_json
    from ..simulate import simulate
    from .run_cmds import write_report

    vs = variants(files, vary, grid)
    if len({v.title for v in vs}) < len(vs):  # files of one name in different folders: number the columns
        vs = [replace(v, short=f"{i + 1}: {v.title}") for i, v in enumerate(vs)]
    eng = _engine(engine) if engine else None
    out_dir = compare_out(out, force) if out is not None else new_run_dir(prefix="aifabric-compare")
    rows: list[RunRow] = []
    by_tier = []
    for i, v in enumerate(vs):
        console.print(f"simulating [bold]{escape(v.label)}[/] ...", highlight=False)
        run = simulate(v.scenario, eng)
        run_dir = out_dir / _slug(i, v.title)
        run_dir.mkdir(parents=True, exist_ok=True)
        given = v.scenario.model_dump(mode="json", exclude_unset=True)
        write_report(run, run_dir, yaml.safe_dump(given, sort_keys=False))
        if not run.results.complete:  # Ctrl-C stopped its event loop: never compared as a finished run
            from .errors import Interrupted

            raise Interrupted(f"{v.label} was cut off; its partial results are in {run_dir}/; the comparison "
                              f"stopped there ({i} of {len(vs)} variants finished)")
        rows.append(RunRow(v.title, v.label, f"{run_dir.name}/report.html", metrics(run)))
        by_tier.append(tier_bytes(run))
        del run
    notes = inert_notes(vs, by_tier, eng)
    varied = list(dict.fromkeys(path for v in vs for path, _ in v.varied))
    title = (f"{files[0]}: {', '.join(varied)} varied" if varied else " vs ".join(str(f) for f in files))

    console.print(f"[bold]comparison of {escape(title)}[/] (Δ relative to the first)", highlight=False)
    table = Table()
    table.add_column("metric", no_wrap=True)
    for r in rows:
        table.add_column(escape(r.title), justify="right", overflow="fold")
    base = rows[0].metrics
    for k in ordered_keys(rows):
        cells = []
        for i, r in enumerate(rows):
            v = r.metrics.get(k)
            text = format_metric(k, v)
            d = delta_pct(v, base.get(k)) if i else None
            if d is not None:
                text += f" ({d:+.1f}%)"
            cells.append(text)
        table.add_row(k, *cells)
    console.print(table)
    for note in notes:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
    if len(rows) > 1 and all(r.metrics == rows[0].metrics for r in rows):
        console.print("[yellow]note:[/] every metric is the same in all runs", highlight=False)

    write_json(out_dir / "compare.json", {
        "schema_version": 1, "notes": notes,
        "variants": [{"label": r.label, "title": r.title, "report": r.report, **r.metrics} for r in rows]})
    write_atomic(out_dir / "compare.html", build_compare_html(title, rows, notes))
    folders = ", ".join(r.report.split("/")[0] for r in rows)
    console.print(f"wrote {out_dir}/: compare.json, each run's folder ({folders}) and "
                  f"[bold]{out_dir / 'compare.html'}[/]", highlight=False)
    return 0
