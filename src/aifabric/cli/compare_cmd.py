"""`aifabric compare`: several scenarios (or one with a varied field), side by side, printed and plotted."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import typer

from .app import app
from .console import make_console
from .outdir import COMPARE, claim_out, out_path
from .run_cmds import FORCE_HELP, OUT_HELP, _engine

console = make_console()


def _slug(i: int, text: str) -> str:
    """A run's folder: its position and its title, in characters every file system takes."""
    return f"{i + 1:02d}-" + (re.sub(r"[^A-Za-z0-9._=-]+", "_", text).strip("_")[:60] or "run")


@app.command()
def compare(
    files: list[Path] = typer.Argument(..., help="scenario files (two or more, or one with --vary)"),
    vary: list[str] = typer.Option(
        None,
        "--vary",
        help="vary a field of the one scenario: FIELD=V1,V2,...; "
        "repeat to vary several fields together (same number of values: "
        "--vary workload.parallelism.tp=8,4 --vary workload.parallelism.dp=2,4)",
    ),
    grid: bool = typer.Option(
        False, "--grid", help="every combination of the --vary fields' values, instead of varying them together"
    ),
    engine: str = typer.Option(None, "--engine", "-e", help="flow | analytic | packet (default: each scenario's)"),
    out: Path = typer.Option(None, "--out", "-o", help=OUT_HELP, parser=out_path),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
) -> int:
    """Compare runs: iteration time, exposed communication, MFU, bandwidths, link utilization per tier; each
    run's own report beside compare.html."""
    from ..compare import variants

    vs = variants(files, vary, grid)
    if len({v.title for v in vs}) < len(vs):  # files of one name in different folders: number the columns
        vs = [replace(v, short=f"{i + 1}: {v.title}") for i, v in enumerate(vs)]
    eng = _engine(engine) if engine else None
    _check_work(vs, eng, force)
    # refused before any variant runs when it would lose the user's files; written into a staging folder
    folder = claim_out(out, force, prefix="aifabric-compare", layout=COMPARE)
    try:
        rows, by_tier = _run_variants(vs, eng, folder)
        return _finish(files, vs, rows, by_tier, eng, folder)
    finally:
        folder.discard()


def _check_work(vs, eng, force: bool) -> None:
    """Before any variant runs: each one's estimated memory within this machine's (cli/estimate.py), or --force."""
    from ..errors import InputError, Problem
    from .estimate import check_work

    problems = []
    for v in vs:
        try:
            check_work(v.scenario, eng, force)
        except InputError as exc:
            problems += [Problem(p.path, f"{v.label}: {p.message}") for p in exc.problems]
    if problems:
        raise InputError(problems)


def _run_variants(vs, eng, folder) -> tuple[list, list]:
    """Each variant simulated and its report written into the staging folder; a Ctrl-C (in its event loop or
    anywhere else) moves the variants finished so far into --out, with the cut-off one's folder saying
    `complete: false`, and ends the comparison (exit 130, no compare.json)."""
    import yaml
    from rich.markup import escape

    from ..compare import metrics, tier_bytes
    from ..report.compare_html import RunRow
    from ..simulate import simulate
    from .errors import Interrupted
    from .outdir import held_interrupts
    from .run_cmds import _write_stopped, write_report

    rows: list[RunRow] = []
    by_tier = []
    for i, v in enumerate(vs):
        run_dir = folder.staging / _slug(i, v.title)
        given = yaml.safe_dump(v.scenario.model_dump(mode="json", exclude_unset=True), sort_keys=False)
        stage = "simulating"
        try:
            console.print(f"simulating [bold]{escape(v.label)}[/] ...", highlight=False)
            run = simulate(v.scenario, eng)
            stage = "report"
            run_dir.mkdir(parents=True, exist_ok=True)
            write_report(run, run_dir, given)
        except KeyboardInterrupt:
            with held_interrupts():
                run_dir.mkdir(parents=True, exist_ok=True)
                _write_stopped(run_dir, v.scenario, given, stage)
                folder.publish()
            raise Interrupted(
                f"{v.label} was cut off; the comparison stopped there ({i} of {len(vs)} variants "
                f"finished, in {folder.target}/; {run_dir.name}/summary.json: complete false)"
            ) from None
        if not run.results.complete:  # Ctrl-C stopped its event loop: never compared as a finished run
            folder.publish()
            raise Interrupted(
                f"{v.label} was cut off; its partial results are in {folder.target / run_dir.name}/; "
                f"the comparison stopped there ({i} of {len(vs)} variants finished)"
            )
        rows.append(RunRow(v.title, v.label, f"{run_dir.name}/report.html", metrics(run)))
        by_tier.append(tier_bytes(run))
        del run
    return rows, by_tier


def _finish(files, vs, rows, by_tier, eng, folder) -> int:
    from rich.markup import escape
    from rich.table import Table

    from ..compare import delta_pct, format_metric, inert_notes
    from ..report.compare_html import build_compare_html, ordered_keys
    from ..report.files import write_atomic, write_json
    from .errors import Interrupted
    from .outdir import held_interrupts

    out_dir = folder.target
    notes = inert_notes(vs, by_tier, eng)
    varied = list(dict.fromkeys(path for v in vs for path, _ in v.varied))
    title = f"{files[0]}: {', '.join(varied)} varied" if varied else " vs ".join(str(f) for f in files)

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

    try:
        write_atomic(folder.staging / "compare.html", build_compare_html(title, rows, notes))
        write_json(
            folder.staging / "compare.json",
            {
                "schema_version": 1,
                "notes": notes,
                "variants": [{"label": r.label, "title": r.title, "report": r.report, **r.metrics} for r in rows],
            },
        )
    except KeyboardInterrupt:  # every variant finished: they are kept, without a comparison claiming to be one
        with held_interrupts():
            (folder.staging / "compare.json").unlink(missing_ok=True)
            (folder.staging / "compare.html").unlink(missing_ok=True)
            folder.publish()
        raise Interrupted(
            f"stopped while writing the comparison; each variant's folder is in {out_dir}/ (no compare.json)"
        ) from None
    folder.publish()
    folders = ", ".join(r.report.split("/")[0] for r in rows)
    console.print(
        f"wrote {out_dir}/: compare.json, each run's folder ({folders}) and [bold]{out_dir / 'compare.html'}[/]",
        highlight=False,
    )
    return 0
