"""`aifabric optimize`: a search that finds what enumerating would, with the runs it made as evidence."""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.errors import InputError
from aifabric.sweep.optimize import parse_constraint, parse_objective

TINY = {
    "name": "tiny-search",
    "seed": 1,
    "cluster": {"gpu": "H100", "servers": 4, "gpus_per_server": 2, "nic_speed_gbps": 400},
    "fabric": {"topology": "rail-optimized", "servers_per_segment": 2, "spines": 1, "link_speed_gbps": 400},
    "workload": {
        "kind": "data-parallel",
        "model": {"kind": "feed-forward", "layer_widths": [1024, 4096, 1024]},
        "global_batch_size": 256,
        "precision": "bf16",
    },
    "engine": "flow",
}
VARY = ["cluster.nic_speed_gbps=100,200,400", "fabric.spines=1,2"]


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY), encoding="utf-8")
    return path


def _search(tiny, out, *extra, vary=tuple(VARY)):
    args = [
        "optimize",
        str(tiny),
        *(a for v in vary for a in ("--vary", v)),
        "--objective",
        "cost",
        "--constraint",
        "iteration_time <= 1.05 * best",
        "--backend",
        "local",
        "--workers",
        "2",
        "--no-reports",
        "--out",
        str(out),
        *extra,
    ]
    assert run_app(app, args) == 0
    return json.loads((out / "optimize.json").read_text())


def _brute_force(rows):
    ok = [r for r in rows if r["status"] == "ok"]
    best = min(r["iteration_time_s"] for r in ok)
    feasible = [r for r in ok if r["iteration_time_s"] <= 1.05 * best]
    return min(feasible, key=lambda r: r["capex_usd"]), best


def test_the_search_answers_what_enumerating_every_case_would(tiny, tmp_path, capsys):
    """6 combinations, 6 runs a phase: every combination runs once (proposed again, answered from the runs)."""
    result = _search(tiny, tmp_path / "op", "--trials", "6")
    assert result["runs"] == 6 and result["space"] == 6
    rows = [json.loads(p.read_text()) for p in (tmp_path / "op" / "runs").glob("*/row.json")]
    answer, best = _brute_force(rows)
    assert result["answer"]["case"] == answer["case"]
    assert result["best"]["iteration_time_s"]["value"] == pytest.approx(best)
    assert result["bounds"]["iteration_time <= 1.05 * best"] == pytest.approx(1.05 * best)
    text = capsys.readouterr().out
    assert f"answer: case {answer['case']}" in text and "Optuna" in text
    page = (tmp_path / "op" / "optimize.html").read_text()
    assert "The answer" in page and "Every case" in page  # the evidence
    assert len((tmp_path / "op" / "results.csv").read_text().splitlines()) == 7


def test_a_search_smaller_than_the_space_runs_fewer_cases(tiny, tmp_path):
    vary = ["cluster.nic_speed_gbps=100,200,400,800", "fabric.spines=1,2", "fabric.load_balancing=ecmp,spray"]
    result = _search(tiny, tmp_path / "op", "--trials", "3", vary=vary)
    assert result["space"] == 16 and result["runs"] <= 6
    rows = [json.loads(p.read_text()) for p in (tmp_path / "op" / "runs").glob("*/row.json")]
    assert len(rows) == result["runs"] + result["invalid"] < 16
    best = min(r["iteration_time_s"] for r in rows if r["status"] == "ok")  # the best of every run made
    assert result["best"]["iteration_time_s"]["value"] == best
    a = result["answer"]
    assert a is not None and a["iteration_time_s"] <= 1.05 * best
    assert all(p["runs"] <= 3 for p in result["phases"]) and len(result["phases"]) == 2


def test_without_optuna_the_search_is_random_and_still_right(tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna -> ImportError
    result = _search(tiny, tmp_path / "op", "--trials", "6")
    assert result["method"].startswith("random")
    rows = [json.loads(p.read_text()) for p in (tmp_path / "op" / "runs").glob("*/row.json")]
    assert result["answer"]["case"] == _brute_force(rows)[0]["case"]


def test_the_plan_with_the_most_tokens_per_second_that_fits(tmp_path, capsys):
    """TP x DP on 32 GPUs: the combinations whose product is not the world size do not validate (recorded as
    invalid, never candidates); of the others the search returns the one with the most tokens per second."""
    from aifabric.scenario import demo_scenario_text

    path = tmp_path / "demo.yaml"
    path.write_text(demo_scenario_text())
    out = tmp_path / "op"
    assert (
        run_app(
            app,
            [
                "optimize",
                str(path),
                "--vary",
                "workload.parallelism.tp=4,8",
                "--vary",
                "workload.parallelism.dp=2,4",
                "--objective",
                "tokens_per_s",
                "--backend",
                "local",
                "--no-reports",
                "--trials",
                "4",
                "--out",
                str(out),
            ],
        )
        == 0
    )
    result = json.loads((out / "optimize.json").read_text())
    rows = {r["label"]: r for r in (json.loads(p.read_text()) for p in (out / "runs").glob("*/row.json"))}
    assert rows["workload.parallelism.tp=4, workload.parallelism.dp=2"]["status"] == "invalid"
    ok = [r for r in rows.values() if r["status"] == "ok"]
    assert len(ok) == 2 and result["objective"] == "maximize tokens_per_s"
    assert result["answer"]["case"] == max(ok, key=lambda r: r["tokens_per_s"])["case"]


def test_objectives_and_constraints_are_parsed_or_refused():
    assert parse_objective("cost").metric == "capex_usd" and not parse_objective("cost").maximize
    assert parse_objective("tokens_per_s").maximize and not parse_objective("min:mfu").maximize
    c = parse_constraint("iteration_time <= 1.02 * best")
    assert (c.metric, c.op, c.factor, c.relative) == ("iteration_time_s", "<=", 1.02, True)
    assert c.holds(1.02, {"iteration_time_s": 1.0}) and not c.holds(1.03, {"iteration_time_s": 1.0})
    c = parse_constraint("mfu >= 0.4")
    assert (c.factor, c.relative) == (0.4, False) and c.slack(0.5, {}) < 0
    assert parse_constraint("power < best * 0.9").factor == 0.9
    for bad in ("iteration_time <= fast", "speed <= 1", "mfu >= 2 * 0.3", "iteration_time 1.02"):
        with pytest.raises(InputError):
            parse_constraint(bad)
    with pytest.raises(InputError, match="unknown metric"):
        parse_objective("happiness")


def test_bad_search_options_are_refused_all_at_once(tiny, capsys):
    code = run_app(
        app,
        [
            "optimize",
            str(tiny),
            "--vary",
            VARY[0],
            "--objective",
            "happiness",
            "--constraint",
            "speed <= 1",
            "--trials",
            "0",
            "--backend",
            "local",
        ],
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "--objective" in err and "--constraint" in err and "--trials" in err
