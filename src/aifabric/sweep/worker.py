"""What a worker process does with one case: validate its scenario, simulate it, and hand back its row of
metrics and its files as text (the driver writes them: a worker on another machine of a Ray cluster needs
no shared file system)."""

from __future__ import annotations

import json
import time
import traceback
from typing import Any

SKIP_SUMMARY_KEYS = ("schema_version",)


def summary_metrics(summary: dict) -> dict[str, float]:
    """The scalar figures of a run's summary.json (iteration, compute, communication, idle and bubble times,
    MFU, HFU, TFLOP/s per GPU, world size)."""
    return {
        k: v
        for k, v in summary.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in SKIP_SUMMARY_KEYS
    }


def run_case(payload: dict) -> dict[str, Any]:
    """`payload`: {"scenario": data, "label", "engine", "reports", "plotly_src"} -> {"row", "files", "wall_s"}
    (the row: the run's metrics and `cpu_s`, the CPU time the case took in the worker)."""
    import yaml

    from ..compare import metrics
    from ..report.summary import build_summary
    from ..scenario.load import parse_scenario
    from ..simulate import simulate

    t0, cpu0 = time.perf_counter(), time.process_time()
    scenario = parse_scenario(payload["scenario"], payload.get("label", "<case>"))
    run = simulate(scenario, payload.get("engine"))
    summary = build_summary(run)
    row = {**summary_metrics(summary), **metrics(run)}
    files = {
        "scenario.yaml": yaml.safe_dump(payload["scenario"], sort_keys=False),
        "summary.json": json.dumps(summary, indent=2) + "\n",
    }
    if payload.get("reports", True):
        from ..report.html import build_html

        files["report.html"] = build_html(run, plotly_src=payload.get("plotly_src"))
    row["cpu_s"] = time.process_time() - cpu0  # the worker's CPU time on this case
    return {"row": row, "files": files, "wall_s": time.perf_counter() - t0}


def call(fn, payload) -> tuple[Any, ...]:
    """`fn(payload)` with its exception turned into data: ("ok", result) or ("error", message, traceback)."""
    try:
        return ("ok", fn(payload))
    except Exception as exc:  # noqa: BLE001 - a failing case is recorded, the sweep goes on
        from ..errors import InputError

        if isinstance(exc, InputError):
            message = "; ".join(str(p) for p in exc.problems)
        else:
            message = f"{type(exc).__name__}: {exc}"
        return ("error", message, traceback.format_exc())
