"""What failures cost a training job (aifabric.reliability): Llama 3's failure breakdown as the default rates,
the job's MTBF, Young's and Daly's checkpoint intervals, the lost fraction of the run."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric import load_scenario, simulate
from aifabric.errors import InputError
from aifabric.reliability import (
    DEFAULT_RATES_PER_HOUR,
    LLAMA3_CABLES,
    LLAMA3_GPUS,
    LLAMA3_HOURS,
    Component,
    Reliability,
    component_counts,
    reliability,
)
from aifabric.scenario import demo_scenario
from aifabric.simulate import build_fabric


def test_the_defaults_give_back_llama3s_419_interruptions():
    # Dubey et al. 2024, Table 5: 419 unexpected interruptions in 54 days on 16,384 H100 (2,048 servers, one NIC
    # per GPU; the network's 35 over the 2 1/7 cables per GPU of its three-layer, 1:7 fabric)
    counts = {
        "gpu": LLAMA3_GPUS,
        "server": LLAMA3_GPUS // 8,
        "nic": LLAMA3_GPUS,
        "network_cable": LLAMA3_CABLES,
        "software_per_gpu": LLAMA3_GPUS,
    }
    total = sum(DEFAULT_RATES_PER_HOUR[k] * counts[k] for k in DEFAULT_RATES_PER_HOUR) * LLAMA3_HOURS
    assert total == pytest.approx(419, rel=1e-12)
    # "an average of one failure every three hours"
    assert LLAMA3_HOURS / total == pytest.approx(3.09, abs=0.01)


def test_counts_come_from_the_fabric():
    s = demo_scenario()
    fabric, _ = build_fabric(s)
    c = component_counts(fabric)
    assert c["gpu"] == s.cluster.servers * s.cluster.gpus_per_server
    assert c["server"] == s.cluster.servers
    assert c["nic"] >= c["server"]
    network_links = [link for link in fabric.links if link.tier in ("host", "spine", "superspine")]
    assert c["network_cable"] * 2 == len(network_links) > 0


durations = st.floats(1.0, 1e5)


@settings(max_examples=200, deadline=None)
@given(durations, st.floats(3600.0, 1e7), st.floats(0.0, 3600.0))
def test_the_best_interval_loses_least(delta_s, mtbf_s, restart_s):
    r = Reliability(
        [Component("gpu", 1, 3600.0 / mtbf_s)],
        checkpoint_bytes=delta_s,
        write_bytes_per_s=1.0,
        restart_s=restart_s,
        interval_s=0.0,
    )
    assert r.mtbf_s == pytest.approx(mtbf_s)
    best = r.best_interval_s
    # Young's interval counts from one checkpoint's start to the next: best + delta = sqrt(2 delta M)
    if best > delta_s:
        assert best + delta_s == pytest.approx(math.sqrt(2 * delta_s * mtbf_s))
    lost = r.lost(best)["total"]
    for factor in (0.5, 0.8, 0.95, 1.05, 1.25, 2.0):
        assert lost <= r.lost(best * factor)["total"] + 1e-12
    # Daly's higher-order estimate stays within a few per cent of the first-order one when delta << M
    if delta_s < mtbf_s / 100:
        assert r.daly_interval_s == pytest.approx(best, rel=0.05)


def test_young_and_daly_against_their_closed_forms():
    """A 60 s checkpoint, a 100 h MTBF: Young's sqrt(2 delta M) = 6,572.7 s from one checkpoint's start to the next;
    Daly's higher-order estimate (Daly 2006, Future Generation Computer Systems 22: sqrt(2 delta M) (1 + sqrt(delta /
    2M) / 3 + delta / 18M) - delta, for delta < 2M; M beyond) = 6,532.7 s of work; the lost fraction is least there."""
    r = Reliability(
        [Component("gpu", 10, 1e-3)], checkpoint_bytes=60.0, write_bytes_per_s=1.0, restart_s=0.0, interval_s=0.0
    )
    assert r.mtbf_s == pytest.approx(360_000.0)
    assert r.young_interval_s == pytest.approx(6572.67, abs=0.01)
    assert r.best_interval_s == pytest.approx(6572.67 - 60, abs=0.01)
    assert r.daly_interval_s == pytest.approx(6532.73, abs=0.01)
    grid = [r.best_interval_s * (0.5 + k / 100) for k in range(101)]
    assert min(grid, key=lambda x: r.lost(x)["total"]) == pytest.approx(r.best_interval_s, rel=0.01)
    # a checkpoint as long as two MTBFs: Daly's interval is the MTBF
    long = Reliability(
        [Component("gpu", 1, 1.0)], checkpoint_bytes=7200.0, write_bytes_per_s=1.0, restart_s=0.0, interval_s=0.0
    )
    assert long.daly_interval_s == pytest.approx(long.mtbf_s)


def test_lost_fraction_parts():
    r = Reliability(
        [Component("gpu", 10, 1e-3)], checkpoint_bytes=60.0, write_bytes_per_s=1.0, restart_s=300.0, interval_s=3540.0
    )
    m = 3600.0 / (10 * 1e-3)  # 100 hours
    lost = r.lost()
    assert lost["checkpointing"] == pytest.approx(60 / 3600)
    assert lost["rework"] == pytest.approx(1800 / m)
    assert lost["restart"] == pytest.approx(300 / m)
    assert lost["total"] == pytest.approx(sum(v for k, v in lost.items() if k != "total"))


def test_scenario_overrides_and_the_run_summary():
    data = demo_scenario().model_dump(mode="json", exclude_unset=True)
    data["reliability"] = {
        "failures_per_hour": {"gpu": 1e-3},
        "checkpoint_write_gBps": 10,
        "checkpoint_interval_s": 1800,
        "restart_s": 120,
    }
    run = simulate(load_scenario(data))
    rel = run.reliability
    gpu = next(c for c in rel["components"] if c["kind"] == "gpu")
    assert gpu["failures_per_hour_each"] == 1e-3 and rel["sources"]["gpu"] == "scenario"
    assert rel["checkpoint_interval_s"] == 1800 and rel["checkpoint_interval_given"]
    assert rel["checkpoint_s"] == pytest.approx(rel["checkpoint_bytes"] / 10e9)
    assert rel["checkpoint_bytes"] == pytest.approx(14 * run.workload.params)
    assert 0 < rel["effective_training_fraction"] < 1
    default = reliability(run.fabric, run.workload.params)
    assert default.interval_s == pytest.approx(default.best_interval_s)


@pytest.mark.parametrize(
    "bad",
    [
        {"failures_per_hour": {"gpu": -1}},
        {"failures_per_hour": {"gpus": 1e-5}},
        {"restart_s": -5},
        {"checkpoint_write_gBps": 0},
    ],
)
def test_bad_reliability_sections_are_refused(bad):
    data = demo_scenario().model_dump(mode="json", exclude_unset=True)
    data["reliability"] = bad
    with pytest.raises(InputError) as e:
        load_scenario(data)
    assert "reliability" in str(e.value)


def test_fabric_plan_shows_and_writes_reliability(tmp_path, capsys):
    import json
    from pathlib import Path

    import yaml

    from aifabric.cli import run_app
    from aifabric.cli.app import app

    scenarios = Path(__file__).resolve().parents[1] / "src" / "aifabric" / "scenarios"
    # a scenario: its model's size gives the checkpoint, so the interval and the lost fraction
    out = tmp_path / "plan"
    assert run_app(app, ["fabric", "plan", str(scenarios / "demo.yaml"), "--out", str(out)]) == 0
    assert "Reliability" in capsys.readouterr().out
    rel = json.loads((out / "plan.json").read_text())["reliability"]
    s = demo_scenario()
    assert rel["components"][0]["count"] == s.cluster.servers * s.cluster.gpus_per_server
    assert rel["checkpoint_interval_s"] > 0 and 0 < rel["effective_training_fraction"] < 1
    # hardware only: failures and MTBF, no checkpoint figures
    hw = {
        k: v
        for k, v in yaml.safe_load((scenarios / "demo.yaml").read_text()).items()
        if k in ("name", "cluster", "fabric")
    }
    path = tmp_path / "hw.yaml"
    path.write_text(yaml.safe_dump(hw))
    out2 = tmp_path / "plan2"
    assert run_app(app, ["fabric", "plan", str(path), "--out", str(out2)]) == 0
    rel2 = json.loads((out2 / "plan.json").read_text())["reliability"]
    assert rel2["mtbf_s"] == pytest.approx(rel["mtbf_s"])
    assert "checkpoint_interval_s" not in rel2 and "lost_fraction" not in rel2
