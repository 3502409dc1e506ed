"""Every output file of a run, in one folder (what `aifabric simulate` and `demo` write)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..simulate import Run


def write_report(run: Run, out_dir: str | os.PathLike, scenario_text: str | None = None) -> Path:
    """Write the run's folder: scenario.yaml, links/collectives/ranks/flows.csv, trace.json, report.html, and
    summary.json last (its presence means the folder is complete); each file atomically. `scenario_text`: the
    scenario as the user wrote it; without it, the run's scenario with every applicable default filled in
    (`Scenario.applicable_dump`, re-runnable as it is). Returns the folder."""
    import yaml

    from .files import write_atomic, write_json
    from .html import build_html
    from .summary import build_summary
    from .tables import write_tables
    from .trace import build_trace

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if scenario_text is None:
        scenario_text = yaml.safe_dump(run.scenario.applicable_dump(), sort_keys=False)
    write_atomic(out / "scenario.yaml", scenario_text)
    write_tables(run, out)
    write_json(out / "trace.json", build_trace(run))
    write_atomic(out / "report.html", build_html(run))
    write_json(out / "summary.json", build_summary(run))
    return out
