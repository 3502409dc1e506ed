"""`aifabric sweep` and `aifabric optimize`: many cases of one scenario, on Ray or a local process pool."""

from __future__ import annotations

import math
import re
from pathlib import Path

import typer

from ..errors import InputError, Problem
from .app import app
from .console import make_console
from .outdir import SWEEP, check_folder, claim_out, out_path
from .run_cmds import FORCE_HELP, _engine

console = make_console()

VARY_HELP = (
    "a field and its values: FIELD=V1,V2,... (integer ranges as LO..HI); repeat for several fields, varied "
    "together, or in every combination with --grid"
)
BACKEND_HELP = (
    "auto (Ray when installed, else a local process pool) | ray | local (a pool of processes on this machine)"
)
ADDRESS_HELP = (
    "an existing Ray cluster: auto (the one `ray start --head` started on this machine), HOST:6379, or "
    "ray://HOST:10001 (Ray Client); default: a local Ray instance on this machine's cores"
)
WORKERS_HELP = "cases at a time (default: every core of this machine, or every CPU of the Ray cluster)"
TIMEOUT_HELP = "seconds a case may run before it is stopped and recorded as timed out (default: no limit)"
_ADDRESS = re.compile(r"^(auto|local|ray://[^\s:/]+(:\d+)?|[A-Za-z0-9_.\-]+:\d+|\[[0-9A-Fa-f:]+\]:\d+)$")


def check_run_options(
    *, workers: int | None, timeout: float | None, address: str | None, backend: str, resume: bool, out: Path | None
) -> list[Problem]:
    """The flags a sweep and a search share, checked before anything runs; every problem at once."""
    from ..sweep.run import BACKENDS

    problems = []
    if workers is not None and workers < 1:
        problems.append(Problem("--workers", f"must be >= 1 (got {workers})"))
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        problems.append(Problem("--timeout", f"must be a number of seconds > 0 (got {timeout})"))
    if address is not None and not _ADDRESS.match(address):
        problems.append(Problem("--address", f"expected auto, HOST:PORT or ray://HOST:PORT (got {address!r})"))
    if backend not in BACKENDS:
        problems.append(Problem("--backend", f"must be one of {', '.join(BACKENDS)} (got {backend!r})"))
    if resume and out is None:
        problems.append(Problem("--resume", "give the folder of the sweep to resume with --out DIR"))
    if out is not None and out.exists() and not out.is_dir():
        problems.append(Problem("--out", f"{out} exists and is not a directory"))
    return problems


def _engine_or_problem(engine: str | None, problems: list[Problem]) -> str | None:
    """The --engine value checked, its problem added to the others (None: the scenario's own)."""
    if engine is None:
        return None
    try:
        return _engine(engine)
    except InputError as exc:
        problems += exc.problems
        return None


def out_folder(out: Path | None, prefix: str, resume: bool, force: bool = False) -> Path:
    """A sweep's folder, checked before anything runs: a new one, the sweep to resume (`resume`), or a folder that
    holds nothing aifabric did not write there (or `force`). A sweep writes into it as it goes (each case's files
    atomically, its row.json last), so that `--resume` finishes an interrupted one."""
    from ..report.files import new_run_dir

    if out is None:
        try:
            return new_run_dir(prefix=prefix)
        except OSError as exc:
            raise InputError(
                Problem(
                    "--out",
                    f"cannot create a {prefix}-<time> folder in the current directory: "
                    f"{exc.strerror or exc}; give one with --out",
                )
            ) from None
    if not resume and out.is_dir() and (out / "sweep.json").exists():
        raise InputError(Problem("--out", f"{out} holds a sweep already: --resume to finish it, or another --out"))
    target = out if resume else check_folder(out, force, SWEEP)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(Problem("--out", f"cannot create {target}: {exc.strerror or exc}")) from None
    from .outdir import probe_out

    probe_out(target, "dir")
    return target


def check_cases_work(cases, engine: str | None, force: bool) -> None:
    """Before any case runs: each one's estimated memory within this machine's (cli/estimate.py), or --force; the
    cases past it are refused together (the first five named)."""
    if force:
        return
    from ..scenario.schema import Scenario
    from .estimate import check_work

    problems = []
    for c in cases:
        if c.scenario is None:
            continue
        try:
            check_work(Scenario.model_validate(c.scenario), engine)
        except InputError as exc:
            problems += [Problem(p.path, f"case {c.id} ({c.label}): {p.message}") for p in exc.problems]
        except ValueError:  # not valid alone: the run says why
            continue
    if problems:
        more = (
            [Problem("--vary", f"and {len(problems) - 5} more cases past this machine's memory")]
            if len(problems) > 5
            else []
        )
        raise InputError(problems[:5] + more)


def _quiet_workers(pool) -> None:
    """A local pool's forkserver started deaf to Ctrl-C (its workers ignore it themselves): a Ctrl-C while it
    imported the simulator printed a traceback."""
    ctx = getattr(pool, "ctx", None)
    if ctx is not None and ctx.get_start_method() == "forkserver":
        from .procs import start_forkserver_deaf_to_ctrl_c

        start_forkserver_deaf_to_ctrl_c()  # with the preload the pool set


def progress_bar():
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from .run_cmds import err_console

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[red]{task.fields[failed]} failed[/]"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=err_console,
        transient=False,
    )


def report_row_failure(progress, row: dict) -> None:
    from rich.markup import escape

    if row["status"] != "ok":
        progress.console.print(
            f"[red]{row['status']}[/] case {row['case']} ({escape(row['label'])}): {escape(str(row['error']))[:300]}",
            highlight=False,
            soft_wrap=True,
        )


@app.command()
def sweep(
    file: Path = typer.Argument(..., help="the base scenario (YAML)"),
    vary: list[str] = typer.Option(None, "--vary", help=VARY_HELP),
    grid: bool = typer.Option(False, "--grid", help="every combination of the --vary fields' values"),
    engine: str = typer.Option(None, "--engine", "-e", help="flow | analytic | packet (default: the scenario's)"),
    out: Path = typer.Option(
        None, "--out", "-o", help="the sweep's folder (default: a new aifabric-sweep-<time>)", parser=out_path
    ),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
    resume: bool = typer.Option(False, "--resume", help="finish the sweep in --out: skip the cases it has done"),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="with --resume: run the failed cases again"),
    skip_invalid: bool = typer.Option(
        False,
        "--skip-invalid",
        help="record the combinations that do not validate "
        "as invalid and run the others (default: refuse the sweep, listing them all)",
    ),
    backend: str = typer.Option("auto", "--backend", help=BACKEND_HELP),
    address: str = typer.Option(None, "--address", help=ADDRESS_HELP),
    workers: int = typer.Option(None, "--workers", "-j", help=WORKERS_HELP),
    timeout: float = typer.Option(None, "--timeout", help=TIMEOUT_HELP),
    reports: bool = typer.Option(
        True,
        "--reports/--no-reports",
        help="write each case's report.html (the sweep "
        "page links to them); --no-reports: summary.json and the table only, faster",
    ),
) -> int:
    """Run every combination of the varied fields, on Ray (a local instance, or a cluster with --address) or a
    local process pool: one table (Parquet and CSV) of every case's metrics, power and cost, and sweep.html with
    the Pareto fronts of cost against iteration time and against tokens per second per dollar."""
    from rich.markup import escape

    from ..report.files import write_json
    from ..sweep.cases import build_cases
    from ..sweep.run import make_backend, run_sweep
    from ..sweep.store import check_resume, definition

    problems = check_run_options(
        workers=workers, timeout=timeout, address=address, backend=backend, resume=resume, out=out
    )
    if retry_failed and not resume:
        problems.append(Problem("--retry-failed", "only with --resume"))
    eng = _engine_or_problem(engine, problems)
    if problems:
        raise InputError(problems)
    cases, notes = build_cases(file, list(vary or []), grid, skip_invalid)
    check_cases_work(cases, eng, force)
    pool, note = make_backend(backend, workers, timeout, address)
    _quiet_workers(pool)
    spec = definition("sweep", file, list(vary or []), grid, eng, cases)
    if resume:
        check_resume(out, spec)
    folder = out_folder(out, "aifabric-sweep", resume, force)
    write_json(folder / "sweep.json", {**spec, "complete": False})  # until every case is recorded
    for n in [note, *notes]:
        if n:
            console.print(f"[yellow]note:[/] {escape(n)}", highlight=False)
    bar = progress_bar()
    task = None

    def on_start(where: str, todo: int, skipped: int) -> None:
        nonlocal task
        done = f"; {skipped} done already (skipped)" if skipped else ""
        console.print(f"running {todo} of {len(cases)} cases on {where}{done}", highlight=False)
        bar.start()
        task = bar.add_task("sweep", total=todo, failed=0)

    failed = 0

    def on_row(row: dict) -> None:
        nonlocal failed
        failed += row["status"] != "ok"
        report_row_failure(bar, row)
        bar.update(task, advance=1, failed=failed)

    title = f"{file.name}: {', '.join(dict.fromkeys(p for c in cases for p, _ in c.varied))}"
    from .errors import Interrupted

    again = (
        f"finish with: aifabric sweep {file} {' '.join('--vary ' + v for v in vary)}{' --grid' if grid else ''} "
        f"--out {folder} --resume"
    )
    try:
        result = run_sweep(
            cases,
            folder,
            pool,
            engine=eng,
            reports=reports,
            resume=resume,
            title=title,
            on_start=on_start,
            on_row=on_row,
        )
    except KeyboardInterrupt:  # outside the cases' loop (which stops itself and writes the table): every file
        # written so far is complete (each atomically), sweep.json still says complete false
        raise Interrupted(f"stopped; the cases recorded so far are in {folder}/runs; {again}") from None
    finally:
        bar.stop()
    if not result.interrupted:
        write_json(folder / "sweep.json", {**spec, "complete": len(result.rows) == len(cases)})
    print_outcome(result.rows, len(cases), folder, result.files)
    if result.interrupted:
        raise Interrupted(f"{result.ran} cases recorded in {folder}; {again}")
    return 0


def print_outcome(rows: list[dict], total: int, folder: Path, files: list[Path], top: int = 10) -> None:
    """Counts, the Pareto front of cost against iteration time, and the files."""
    from rich.markup import escape
    from rich.table import Table

    from ..report.sweep_html import pareto
    from ..report.terminal import fmt_time, fmt_usd

    ok = [r for r in rows if r.get("status") == "ok" and r.get("capex_usd") is not None]
    by_status: dict[str, int] = {}
    for r in rows:
        by_status[r["status"]] = by_status.get(r["status"], 0) + 1
    counts = ", ".join(f"{n} {s}" for s, n in sorted(by_status.items(), key=lambda kv: kv[0] != "ok"))
    console.print(f"[bold]{len(rows)} of {total} cases recorded[/]: {counts}", highlight=False)
    if ok:
        front = [ok[i] for i in pareto([(r["iteration_time_s"], r["capex_usd"]) for r in ok])]
        t = Table(
            title=f"Pareto front: cost against iteration time ({len(front)} of {len(ok)} cases; no other is "
            "both cheaper and faster)",
            title_justify="left",
        )
        for col in ("case", "values", "iteration time", "capital", "network", "tokens/s"):
            t.add_column(col, justify="left" if col in ("case", "values") else "right")
        for r in front[:top]:
            t.add_row(
                r["case"],
                escape(r["label"]),
                fmt_time(r["iteration_time_s"]),
                fmt_usd(r["capex_usd"]),
                fmt_usd(r["network_capex_usd"]),
                f"{r['tokens_per_s']:,.0f}",
            )
        if len(front) > top:
            t.caption = f"... {len(front) - top} more in sweep.html"
        console.print(t)
    names = ", ".join(p.name for p in files)
    console.print(f"wrote {folder}/: {names}, runs/ (a folder per case)", highlight=False)
    page = next((p for p in files if p.suffix == ".html"), None)
    if page is not None:
        console.print(f"report: [bold]{page}[/]", highlight=False)


@app.command()
def optimize(
    file: Path = typer.Argument(..., help="the base scenario (YAML)"),
    vary: list[str] = typer.Option(
        None,
        "--vary",
        help="a field and the values to search: FIELD=V1,V2,... "
        "(integer ranges as LO..HI); repeat for several fields (every combination is a "
        "candidate)",
    ),
    objective: str = typer.Option(
        "cost",
        "--objective",
        help="the metric to minimize (times, costs, power) or "
        "maximize (tokens_per_s, mfu, tokens_per_s_per_dollar): cost, network_cost, "
        "iteration_time, power, training_cost, tokens_per_s, mfu, ..., or any column of "
        "the results table; max:METRIC / min:METRIC to choose the direction",
    ),
    constraint: list[str] = typer.Option(
        None,
        "--constraint",
        help="METRIC <=|>=|<|> [FACTOR *] best|NUMBER, "
        "e.g. 'iteration_time <= 1.02 * best' (best: the best of that metric the "
        "search finds); repeatable",
    ),
    trials: int = typer.Option(
        24,
        "--trials",
        "-n",
        help="runs per phase of the search (a phase finds each "
        "'best' a constraint needs, then one optimizes the objective)",
    ),
    seed: int = typer.Option(0, "--seed", help="seed of the search"),
    engine: str = typer.Option(None, "--engine", "-e", help="flow | analytic | packet (default: the scenario's)"),
    out: Path = typer.Option(
        None, "--out", "-o", help="the search's folder (default: a new aifabric-optimize-<time>)", parser=out_path
    ),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
    backend: str = typer.Option("auto", "--backend", help=BACKEND_HELP),
    address: str = typer.Option(None, "--address", help=ADDRESS_HELP),
    workers: int = typer.Option(None, "--workers", "-j", help=WORKERS_HELP),
    timeout: float = typer.Option(None, "--timeout", help=TIMEOUT_HELP),
    reports: bool = typer.Option(True, "--reports/--no-reports", help="write each run's report.html"),
) -> int:
    """Search the varied fields' combinations for the best objective under constraints (Optuna's TPE sampler;
    at random without Optuna), e.g. the cheapest fabric whose iteration time is within 2 % of the fastest; the
    runs it made are the evidence (table, optimize.html)."""
    from ..sweep.optimize import Space, parse_constraint, parse_objective
    from ..sweep.run import make_backend

    problems = check_run_options(
        workers=workers, timeout=timeout, address=address, backend=backend, resume=False, out=out
    )
    if trials < 1:
        problems.append(Problem("--trials", f"must be >= 1 (got {trials})"))
    if seed < 0:
        problems.append(Problem("--seed", f"must be >= 0 (got {seed})"))
    parsed = []
    for spec in [objective, *(constraint or [])]:
        try:
            parsed.append(parse_objective(spec) if spec is objective else parse_constraint(spec))
        except InputError as exc:
            problems += exc.problems
    eng = _engine_or_problem(engine, problems)
    if problems:
        raise InputError(problems)
    goal, cons = parsed[0], parsed[1:]
    space = Space.of(file, list(vary or []))
    pool, note = make_backend(backend, workers, timeout, address)
    _quiet_workers(pool)
    # refused before anything runs when it would lose the user's files; the search is written into a staging
    # folder and moved into --out when it ends (finished, or stopped by Ctrl-C)
    claimed = claim_out(out, force, prefix="aifabric-optimize", layout=SWEEP)
    try:
        return _optimize_into(claimed, file, vary, eng, reports, goal, cons, trials, seed, space, pool, note)
    except KeyboardInterrupt:  # outside the search's own handling (which stops it and writes what it has)
        from ..report.files import write_json
        from .errors import Interrupted
        from .outdir import held_interrupts

        with held_interrupts():
            if not (claimed.staging / "sweep.json").exists():
                write_json(
                    claimed.staging / "sweep.json",
                    {"schema_version": 1, "kind": "optimize", "scenario": str(file), "cases": [], "complete": False},
                )
            claimed.publish()
        raise Interrupted(f"the search stopped; the runs made so far are in {claimed.target}/runs") from None
    finally:
        claimed.discard()


def _optimize_into(claimed, file, vary, eng, reports, goal, cons, trials, seed, space, pool, note) -> int:
    from rich.markup import escape

    from ..report.files import write_json
    from ..sweep.optimize import search
    from ..sweep.run import case_payload, execute, write_outputs
    from ..sweep.store import definition, write_plotly
    from .errors import Interrupted

    folder = claimed.staging
    if note:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
    plotly = write_plotly(folder)
    payload = case_payload(eng, reports, f"../../{plotly}")
    bar = progress_bar()
    state = {"task": None, "failed": 0}

    def on_row(row: dict) -> None:
        state["failed"] += row["status"] != "ok"
        report_row_failure(bar, row)
        bar.update(state["task"], advance=1, failed=state["failed"])

    def on_phase(phase) -> None:
        what = phase.goal.text + (
            f" with {' and '.join(c.text for c in phase.constraints)}"
            if phase.constraints
            else " (the best a constraint is relative to)"
        )
        if state["task"] is not None:
            bar.update(state["task"], visible=False)
        state["task"] = bar.add_task(f"phase {len(phases) + 1}", total=min(trials, space.size), failed=0)
        state["failed"] = 0
        phases.append(phase)
        bar.console.print(
            f"phase {len(phases)}: {escape(what)}, at most {min(trials, space.size)} runs",
            highlight=False,
            soft_wrap=True,
        )

    phases: list = []
    pool.start()
    console.print(
        f"searching {space.size:,} combinations of {', '.join(space.fields)} on {pool.where}", highlight=False
    )
    bar.start()
    try:
        result = search(
            space,
            goal,
            cons,
            trials,
            lambda cases: execute(pool, cases, folder, payload, on_row),
            seed=seed,
            batch=pool.workers,
            on_phase=on_phase,
        )
    finally:
        bar.stop()
        pool.close()
    evaluated = [space.cases[c] for c in space.cases]
    evaluated = [c for c in evaluated if any(r["case"] == c.id for r in result.rows)]
    write_json(
        folder / "sweep.json",
        definition(
            "optimize",
            file,
            list(vary or []),
            True,
            eng,
            evaluated,
            {"search": result.to_dict(), "complete": not result.interrupted},
        ),
    )
    write_json(folder / "optimize.json", result.to_dict())
    files = write_outputs(
        folder,
        evaluated,
        result.rows,
        f"{file.name}: {goal.text}",
        plotly,
        extra_html=answer_html(result),
        name="optimize",
    )
    target = claimed.publish()
    print_answer(result)
    print_outcome(result.rows, len(result.rows), target, [target / f.name for f in [*files, folder / "optimize.json"]])
    if result.interrupted:
        raise Interrupted(f"the search stopped after {len(result.rows)} runs, recorded in {target}")
    return 0


def _answer_lines(result) -> list[str]:
    """The answer in words: the best run under the constraints, its values and figures; what `best` was."""
    from ..compare import format_metric

    goal = result.objective
    lines = [f"search: {result.method}; {len(result.rows)} runs of {result.space_size:,} combinations"]
    for m, v in result.best.items():
        lines.append(f"best {m}: {format_metric(m, v)} (case {result.best_case[m]})")
    for c in result.constraints:
        if not c.relative or c.metric in result.best:
            lines.append(f"constraint {c.text}: {c.metric} {c.op} {format_metric(c.metric, c.bound(result.best))}")
    a = result.answer
    if a is None:
        lines.append("no run meets every constraint" if result.rows else "nothing ran")
        return lines
    lines.append(f"answer: case {a['case']}: {a['label']}")
    keys = list(
        dict.fromkeys(
            [
                goal.metric,
                *(c.metric for c in result.constraints),
                "iteration_time_s",
                "capex_usd",
                "network_capex_usd",
                "tokens_per_s",
            ]
        )
    )
    lines.append("  " + "; ".join(f"{k} {format_metric(k, a.get(k))}" for k in keys if a.get(k) is not None))
    return lines


def print_answer(result) -> None:
    from rich.markup import escape

    for line in _answer_lines(result):
        style = "bold green" if line.startswith("answer") else ""
        console.print(f"[{style}]{escape(line)}[/]" if style else escape(line), highlight=False)


def answer_html(result) -> str:
    import html

    items = "".join(f"<li>{html.escape(x)}</li>" for x in _answer_lines(result))
    link = ""
    if result.answer is not None and result.answer.get("report"):
        link = f"<p><a href='{html.escape(result.answer['report'], quote=True)}'>the answer's report</a></p>"
    return (
        f"<h2>The answer: {html.escape(result.objective.text)}"
        f"{' with ' + html.escape(' and '.join(c.text for c in result.constraints)) if result.constraints else ''}"
        f"</h2><ul>{items}</ul>{link}<p class='note'>Every run the search made is below: the evidence.</p>"
    )
