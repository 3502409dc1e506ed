"""Every output file of a run, in one folder (what `aifabric simulate` and `demo` write)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .. import collector

if TYPE_CHECKING:
    from ..simulate import Run


# each part's share of writing a large run's report (the 1T plan on 3,072 GPUs, measured on its first write, 20.5 s,
# 2026-11-26 after the rank timeline's compiled passes): what the progress line's fraction and time left go by
REPORT_PARTS = (
    ("scenario.yaml", 1),
    ("rank timeline", 30),
    ("flows", 7),
    ("connection setup", 9),
    ("tables", 21),
    ("trace.json", 19),
    ("report.html", 10),
    ("summary.json", 3),
)


@collector.paused()  # hundreds of collections walking the run's millions of objects, for no cycle to find
def write_report(
    run: Run,
    out_dir: str | os.PathLike,
    scenario_text: str | None = None,
    progress: Callable[..., None] | None = None,
) -> Path:
    """Write the run's folder: scenario.yaml, links/collectives/ranks/flows.csv, trace.json, report.html, and
    summary.json last (its presence means the folder is complete); each file atomically. `scenario_text`: the
    scenario as the user wrote it; without it, the run's scenario with every applicable default filled in
    (`Scenario.applicable_dump`, re-runnable as it is). `progress`: told `(done, total, stage="report")` as each
    part is written (REPORT_PARTS' shares of 100), when it takes `stage` (engines/progress.py); the run's derived
    views the files share (its rank timeline, flows, connection setup) are computed first, each a part. Returns
    the folder."""
    import yaml

    from ..engines.progress import stage_reporter
    from .files import write_atomic, write_json
    from .html import build_html
    from .summary import build_summary
    from .tables import write_tables
    from .trace import build_trace

    report = stage_reporter(progress, "report")
    total = sum(w for _, w in REPORT_PARTS)
    weight = dict(REPORT_PARTS)
    done = 0

    def part(name: str) -> None:
        nonlocal done
        done += weight[name]
        if report is not None:
            report(done, total)

    if report is not None:
        report(0, total)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if scenario_text is None:
        scenario_text = yaml.safe_dump(run.scenario.applicable_dump(), sort_keys=False)
    write_atomic(out / "scenario.yaml", scenario_text)
    part("scenario.yaml")
    if report is not None:  # what every file reads, computed once (cached on the run): each its own part
        run.rank_timeline  # noqa: B018
        part("rank timeline")
        run.flows  # noqa: B018
        part("flows")
        run.connection_setup  # noqa: B018
        part("connection setup")
    else:
        done += weight["rank timeline"] + weight["flows"] + weight["connection setup"]
    write_tables(run, out)
    part("tables")
    write_json(out / "trace.json", build_trace(run))
    part("trace.json")
    write_atomic(out / "report.html", build_html(run))
    part("report.html")
    write_json(out / "summary.json", build_summary(run))
    part("summary.json")
    return out
