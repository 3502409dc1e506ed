"""Running a sweep: the cases on a backend, each outcome recorded as it comes, the table and the page last.

`run_sweep` is what `aifabric sweep` does; `execute` (cases on a started backend, outcomes recorded) is what
it shares with `aifabric optimize`. Ctrl-C stops the backend and leaves every finished case recorded, the
table and sweep.html written for them; `resume` skips the cases already recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError, Problem
from .backends import LocalPool, RayPool, check_reachable, ray_available
from .cases import Case
from .store import DONE, read_rows, record, write_plotly, write_table
from .worker import run_case

BACKENDS = ("auto", "ray", "local")
INSTALL_HINT = 'pip install -e ".[sweep]"'


def make_backend(
    kind: str,
    workers: int | None = None,
    timeout_s: float | None = None,
    address: str | None = None,
    fn: Callable = run_case,
):
    """(backend, note): Ray when installed (a local instance, or the cluster at `address`), else a local pool,
    saying so."""
    problems = []
    if kind not in BACKENDS:
        problems.append(Problem("--backend", f"must be one of {', '.join(BACKENDS)} (got {kind!r})"))
    if address is not None and kind == "local":
        problems.append(Problem("--address", "is a Ray cluster's address: not with --backend local"))
    if problems:
        raise InputError(problems)
    has_ray = ray_available()
    if (kind == "ray" or address is not None) and not has_ray:
        flag = "--address" if address is not None else "--backend"
        raise InputError(Problem(flag, f"needs Ray, which is not installed here: {INSTALL_HINT}"))
    if kind == "local" or (kind == "auto" and not has_ray):
        note = (
            ""
            if kind == "local"
            else (f"Ray is not installed: running the cases in a local process pool ({INSTALL_HINT} for Ray)")
        )
        return LocalPool(fn, workers, timeout_s), note
    if address is not None:
        check_reachable(address)  # before anything is written: Ray itself retries for minutes
    return RayPool(fn, workers, timeout_s, address), ""


def invalid_row(out: Path, case: Case) -> dict:
    return record(out, case, "invalid", error="; ".join(case.problems))


def execute(
    backend,
    cases: list[Case],
    out: Path,
    payload: Callable[[Case], dict],
    on_row: Callable[[dict], None] = lambda row: None,
) -> list[dict]:
    """Run `cases` on a started backend; record each outcome as it comes (invalid cases at once, not run).
    KeyboardInterrupt propagates after what finished is recorded."""
    rows = []
    by_id = {c.id: c for c in cases}
    for c in cases:
        if not c.valid:
            rows.append(invalid_row(out, c))
            on_row(rows[-1])
        else:
            backend.submit(c.id, payload(c))
    while backend.pending:
        for o in backend.wait(0.5):
            rows.append(record(out, by_id[o.case_id], o.status, o.result, o.error, o.attempts, o.wall_s, o.detail))
            on_row(rows[-1])
    return rows


@dataclass
class SweepResult:
    rows: list[dict]  # every case's row, those of earlier runs (resume) included
    ran: int = 0
    skipped: int = 0
    interrupted: bool = False
    where: str = ""
    files: list[Path] = field(default_factory=list)


def todo_cases(out: Path, cases: list[Case], resume: bool, retry_failed: bool) -> tuple[list[Case], int]:
    """The cases still to run, and how many are skipped as done."""
    if not resume:
        return cases, 0
    done = read_rows(out, cases)
    skip = {cid for cid, r in done.items() if r.get("status") == "ok" or (r.get("status") in DONE and not retry_failed)}
    return [c for c in cases if c.id not in skip], len(skip)


def case_payload(engine: str | None, reports: bool, plotly_src: str | None) -> Callable[[Case], dict]:
    def payload(c: Case) -> dict:
        return {
            "scenario": c.scenario,
            "label": c.label,
            "engine": engine,
            "reports": reports,
            "plotly_src": plotly_src,
        }

    return payload


def run_sweep(
    cases: list[Case],
    out: Path,
    backend,
    *,
    engine: str | None = None,
    reports: bool = True,
    resume: bool = False,
    retry_failed: bool = False,
    title: str = "",
    on_start: Callable[[str, int, int], None] = lambda where, todo, skipped: None,
    on_row: Callable[[dict], None] = lambda row: None,
) -> SweepResult:
    """Every case not yet done, on `backend`; then results.parquet/.csv and sweep.html for all of them."""
    todo, skipped = todo_cases(out, cases, resume, retry_failed)
    plotly = write_plotly(out)
    result = SweepResult([], skipped=skipped)
    if todo:

        def counted(row: dict) -> None:
            result.ran += 1
            on_row(row)

        backend.start()
        result.where = backend.where
        on_start(backend.where, len(todo), skipped)
        try:
            execute(backend, todo, out, case_payload(engine, reports, f"../../{plotly}" if plotly else None), counted)
        except KeyboardInterrupt:
            result.interrupted = True
        finally:
            backend.close()
    result.rows = list(read_rows(out, cases).values())
    result.files = write_outputs(out, cases, result.rows, title, plotly)
    return result


def write_outputs(
    out: Path,
    cases: list[Case],
    rows: list[dict],
    title: str,
    plotly: str | None,
    extra_html: str = "",
    name: str = "sweep",
) -> list[Path]:
    """The table (Parquet and CSV) and the page of every recorded case."""
    from ..report.sweep_html import build_sweep_html

    varied = list(dict.fromkeys(p for c in cases for p, _ in c.varied))
    files = write_table(out, rows, varied)
    page = out / f"{name}.html"
    from ..report.files import write_atomic

    write_atomic(page, build_sweep_html(title, rows, varied, len(cases), plotly_src=plotly, extra_html=extra_html))
    return [*files, page]
