"""The caveats said beside a run's numbers (report/caveats.py) agree with what the validation suite stored, and
reach the terminal, summary.json and report.html of a run they apply to, and only such a run."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from aifabric.report import caveats as cv
from aifabric.report.html import build_html
from aifabric.report.summary import build_summary
from aifabric.report.terminal import print_summary
from aifabric.scenario import ch14_scenario
from aifabric.simulate import simulate

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "fidelity" / "results.json"


def _with(**workload):
    s = ch14_scenario()
    return s.model_copy(update={"workload": s.workload.model_copy(update=workload)})


def test_the_fp8_figures_are_the_suites_stored_results():
    stored = json.loads(RESULTS.read_text())
    errors = [100 * (v["predicted"] / v["published"] - 1) for k, v in stored.items() if k.startswith("F")]
    assert len(errors) == cv.FP8_CASES
    assert (round(min(errors), 1), round(max(errors), 1)) == cv.FP8_RANGE_PCT
    assert round(sum(abs(e) for e in errors) / len(errors), 1) == cv.FP8_MEAN_PCT


def test_only_an_fp8_run_on_the_kernel_model_gets_the_fp8_caveat():
    assert cv.caveats(ch14_scenario()) == []
    assert cv.caveats(_with(precision="fp8", compute_efficiency=0.4)) == []  # an override says its own time
    [text] = cv.caveats(_with(precision="fp8"))
    assert "FP8" in text and "optimistic" in text and "docs/validation.md" in text


@pytest.mark.parametrize("precision", ["fp8", "bf16"])
def test_the_caveat_reaches_terminal_summary_and_report(precision):
    run = simulate(_with(precision=precision))
    out = io.StringIO()
    print_summary(run, Console(file=out, width=200))
    summary = build_summary(run)
    page = build_html(run)
    expected = cv.caveats(run.scenario)
    assert summary["caveats"] == expected
    assert ("accuracy" in out.getvalue()) == bool(expected)
    assert ("optimistic" in page) == bool(expected)
    if precision == "fp8":
        assert expected and "lower bound" in out.getvalue()
