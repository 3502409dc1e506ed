"""Issue 16, item 5: trace.json is strict JSON that Perfetto loads: no `inf` or `NaN` time, duration or value
(a run whose times are not all finite wrote `"dur":inf`), every event placed at a finite time with a duration that
is not negative; what was left out is counted in otherData."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from aifabric.engines.taskgraph import TRANSFER
from aifabric.report.files import write_json
from aifabric.report.trace import Trace, build_trace
from aifabric.scenario import embedded_scenario
from aifabric.simulate import simulate


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _check_perfetto_shape(doc: dict) -> None:
    assert isinstance(doc["traceEvents"], list) and doc["traceEvents"]
    for e in doc["traceEvents"]:
        assert e["ph"] in ("M", "X", "C", "i", "I", "B", "E"), e
        if e["ph"] != "M":
            assert isinstance(e["ts"], (int, float)) and math.isfinite(e["ts"]), e
        if "dur" in e:
            assert isinstance(e["dur"], (int, float)) and math.isfinite(e["dur"]) and e["dur"] >= 0, e


@pytest.fixture(scope="module")
def run():
    return simulate(embedded_scenario("ch14"))


def test_a_finished_run_writes_a_loadable_trace(run, tmp_path):
    doc = _strict(write_json(tmp_path / "trace.json", build_trace(run)).read_text())
    _check_perfetto_shape(doc)
    assert "left_out_not_finite" not in doc["otherData"]


def test_non_finite_times_are_left_out_not_written(tmp_path):
    run = simulate(embedded_scenario("ch14"))  # its own: the timeline is altered
    tl, g = run.timeline, run.graph
    n = len(g)
    kind = np.fromiter(g.kind, dtype=np.int8, count=n)
    transfers = np.flatnonzero(kind == TRANSFER)
    others = np.flatnonzero(kind != TRANSFER)
    tl.end_s[transfers[0]] = np.inf  # a transfer that never finished
    tl.start_s[transfers[1]] = -np.inf
    tl.end_s[others[0]] = np.inf  # a compute task
    text = write_json(tmp_path / "trace.json", build_trace(run)).read_text()
    assert "inf" not in text.replace("info", "").lower() and "nan" not in text.lower().split('"otherdata"')[0]
    doc = _strict(text)
    _check_perfetto_shape(doc)
    left = doc["otherData"]["left_out_not_finite"]
    assert left["transfers"] == 2 and left["rank_segments"] >= 1


def test_small_events_and_other_data_are_strict(tmp_path):
    trace = Trace(
        [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "x", "v": float("nan")}}],
        [],
        [{"ph": "C", "name": "q", "pid": 1, "ts": 1.0, "args": {"depth": float("inf")}}],
        {"scenario": "s", "x": float("inf")},
    )
    doc = _strict(write_json(tmp_path / "trace.json", trace).read_text())
    assert doc["otherData"]["x"] is None and doc["traceEvents"][1]["args"]["depth"] is None
