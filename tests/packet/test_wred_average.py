"""WRED's average queue depth (`random-detect ... weight n`): avg <- (1 - 2^-n) avg + 2^-n depth at each arrival.

weight 0 is the instantaneous depth, the book's (Deep Learning for Network Engineers, Chapter 11): the results are
those of the engine before averaging existed. A larger weight follows a burst more slowly, so marking starts later.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from aifabric.packet.config import PacketConfig
from aifabric.packet.profile import apply_qos
from aifabric.packet.scenarios import run_scenario
from aifabric.scenario.qos_spec import QosSpec


def _incast(weight: int):
    cfg = PacketConfig(explain=True)
    run = run_scenario("incast", cfg.with_(switch=replace(cfg.switch, wred_weight=weight)))
    marks = [(t, text) for t, cat, text in run.net.events_log if cat == "ecn" and "marked ECN 11" in text]
    return run, marks


def test_weight_0_is_the_instantaneous_depth_as_before():
    """The incast story's results as the engine gave them with instantaneous WRED only (before weights existed)."""
    run, marks = _incast(0)
    d = run.stats.to_dict(series=False)
    assert d["totals"]["ecn_marks"] == 2182 and d["totals"]["cnps"] == 41
    assert (d["totals"]["pfc_pause_frames"], d["totals"]["pfc_resume_frames"], d["totals"]["drops"]) == (7, 1, 0)
    assert [round(f["fct_s"] * 1e9) for f in d["flows"]] == [656798, 564385, 559134, 672877]
    assert marks[0][0] == pytest.approx(9.91e-6, abs=0.01e-6) and "at 623.7 KB" in marks[0][1]
    # the default configuration is weight 0
    default = run_scenario("incast", PacketConfig()).stats.to_dict(series=False)
    assert default["totals"] == d["totals"]


def test_a_larger_weight_marks_later_on_the_burst():
    first = {w: _incast(w)[1][0] for w in (0, 4, 8, 10)}
    times = [first[w][0] for w in (0, 4, 8, 10)]
    assert times == sorted(times) and times[0] < times[1] and times[2] < times[3]
    # a mark under averaging is decided on the average, above WRED min (150 KB), well below the queue at the time
    assert "average depth" in first[8][1]
    kb = float(first[8][1].split("average depth ")[1].split(" KB")[0])
    assert 150 < kb


def test_the_profiles_weight_reaches_the_switches():
    qos = QosSpec.model_validate({"wred": {"weight": 9}})
    assert apply_qos(None, qos).switch.wred_weight == 9
    assert apply_qos(None, QosSpec()).switch.wred_weight == 0
