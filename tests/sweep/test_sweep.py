"""`aifabric sweep`: every combination run in worker processes (a local pool, or Ray when installed), one row
per case, failures recorded while the others complete, a dead worker retried once, resume, validation first.

The local pool is always tested; the Ray tests run when Ray is installed (`pip install -e ".[sweep]"`) and
are skipped, saying so, when it is not.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

import pytest
import yaml

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.sweep.cases import build_cases
from aifabric.sweep.run import execute, make_backend, run_sweep
from aifabric.sweep.worker import run_case

TINY = {
    "name": "tiny-sweep",
    "seed": 1,
    "cluster": {"gpu": "H100", "servers": 2, "gpus_per_server": 2, "nic_speed_gbps": 400},
    "fabric": {"topology": "rail-optimized", "spines": 1, "link_speed_gbps": 400},
    "workload": {
        "kind": "data-parallel",
        "model": {"kind": "feed-forward", "layer_widths": [256, 512, 256]},
        "global_batch_size": 64,
        "precision": "bf16",
    },
    "engine": "flow",
}
VARY = ["cluster.nic_speed_gbps=200,400", "fabric.spines=1,2"]


# what the workers run in place of a plain case (module level: a worker process imports or unpickles them)


def raising(payload):
    if "fabric.spines=2" in payload["label"]:
        raise RuntimeError("boom: this case's bug")
    return run_case(payload)


def killing(payload):
    if "nic_speed_gbps=200, fabric.spines=1" in payload["label"]:
        os.kill(os.getpid(), signal.SIGKILL)
    return run_case(payload)


def killed_once(payload):
    marker = Path(payload["marker"])
    if not marker.exists():
        marker.write_text("died once\n")
        os.kill(os.getpid(), signal.SIGKILL)
    return run_case(payload)


def sleeping(payload):
    if "fabric.spines=2" in payload["label"]:
        time.sleep(60)
    return run_case(payload)


@pytest.fixture
def tiny(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY), encoding="utf-8")
    return path


def _payload(c):
    return {"scenario": c.scenario, "label": c.label, "reports": False}


def _by_label(rows):
    return {r["label"]: r for r in rows}


def test_the_table_has_one_row_per_case_with_every_field(tiny, tmp_path, capsys):
    out = tmp_path / "sw"
    assert (
        run_app(
            app,
            [
                "sweep",
                str(tiny),
                "--vary",
                VARY[0],
                "--vary",
                VARY[1],
                "--grid",
                "--backend",
                "local",
                "--workers",
                "2",
                "--out",
                str(out),
            ],
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "running 4 of 4 cases on a local pool of 2 worker processes" in text
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [r["case"] for r in rows] == ["0001", "0002", "0003", "0004"]
    assert [(r["cluster.nic_speed_gbps"], r["fabric.spines"]) for r in rows] == [
        ("200", "1"),
        ("200", "2"),
        ("400", "1"),
        ("400", "2"),
    ]
    for col in (
        "status",
        "error",
        "iteration_time_s",
        "exposed_communication_s",
        "mfu",
        "capex_usd",
        "network_capex_usd",
        "it_power_w",
        "training_cost_usd",
        "tokens_per_s",
        "tokens_per_s_per_musd",
        "max_util_host",
        "report",
    ):
        assert col in rows[0], col
    assert all(r["status"] == "ok" for r in rows)
    slow, fast = float(rows[0]["iteration_time_s"]), float(rows[2]["iteration_time_s"])
    assert slow > fast  # a 200 Gb/s NIC is slower than a 400 Gb/s one
    assert float(rows[1]["capex_usd"]) > float(rows[0]["capex_usd"])  # a second spine costs money
    for r in rows:  # each point links to its run's report, written with its summary
        assert (out / r["report"]).exists() and (out / r["report"]).with_name("summary.json").exists()
    page = (out / "sweep.html").read_text()
    assert "Pareto front" in page and "plotly.min.js" in page and rows[0]["report"] in page
    if _has("pyarrow"):
        import pyarrow.parquet as pq

        table = pq.read_table(out / "results.parquet")
        assert table.num_rows == 4 and table.column_names == list(rows[0])


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def test_a_case_that_raises_is_recorded_and_the_others_complete(tiny, tmp_path):
    cases, _ = build_cases(tiny, VARY, grid=True)
    pool, _ = make_backend("local", workers=2, fn=raising)
    out = tmp_path / "sw"
    out.mkdir()
    result = run_sweep(cases, out, pool, reports=False)
    rows = _by_label(result.rows)
    assert len(rows) == 4 and result.ran == 4
    bad = rows["cluster.nic_speed_gbps=200, fabric.spines=2"]
    assert bad["status"] == "failed" and "boom: this case's bug" in bad["error"]
    assert "Traceback" in (out / "runs" / "0002-nic_speed_gbps=200,spines=2" / "error.txt").read_text()
    assert sum(r["status"] == "ok" for r in rows.values()) == 2
    table = list(csv.DictReader((out / "results.csv").open()))
    assert len(table) == 4 and {r["status"] for r in table} == {"ok", "failed"}


def test_a_killed_worker_is_retried_once_then_recorded_as_crashed(tiny, tmp_path):
    cases, _ = build_cases(tiny, VARY, grid=True)
    pool, _ = make_backend("local", workers=2, fn=killing)
    pool.start()
    try:
        rows = _by_label(execute(pool, cases, tmp_path, _payload))
    finally:
        pool.close()
    dead = rows["cluster.nic_speed_gbps=200, fabric.spines=1"]
    assert dead["status"] == "crashed" and dead["attempts"] == 2 and "signal 9" in dead["error"]
    assert [r["status"] for r in rows.values()].count("ok") == 3


def test_a_worker_killed_once_is_retried_and_the_case_completes(tiny, tmp_path):
    cases, _ = build_cases(tiny, ["cluster.nic_speed_gbps=400"])
    pool, _ = make_backend("local", workers=1, fn=killed_once)
    pool.start()
    try:
        (row,) = execute(pool, cases, tmp_path, lambda c: {**_payload(c), "marker": str(tmp_path / "marker")})
    finally:
        pool.close()
    assert row["status"] == "ok" and row["attempts"] == 2


def test_a_case_past_its_time_limit_is_stopped(tiny, tmp_path):
    cases, _ = build_cases(tiny, ["fabric.spines=1,2"])
    pool, _ = make_backend("local", workers=2, timeout_s=2, fn=sleeping)
    pool.start()
    try:
        rows = _by_label(execute(pool, cases, tmp_path, _payload))
    finally:
        pool.close()
    assert rows["fabric.spines=2"]["status"] == "timeout" and rows["fabric.spines=1"]["status"] == "ok", rows


def test_an_interrupted_sweep_resumes_where_it_stopped(tiny, tmp_path, capsys):
    """Ctrl-C after the first case: what finished is recorded and tabled; --resume runs only the rest."""
    cases, _ = build_cases(tiny, VARY, grid=True)
    out = tmp_path / "sw"
    out.mkdir()
    seen = []

    def stop_after_one(row):
        seen.append(row)
        raise KeyboardInterrupt

    pool, _ = make_backend("local", workers=1)
    first = run_sweep(cases, out, pool, reports=False, on_row=stop_after_one)
    assert first.interrupted and 1 <= len(first.rows) < 4
    assert len(list(csv.DictReader((out / "results.csv").open()))) == len(first.rows)
    done = {r["case"]: (out / "runs").glob(f"{r['case']}-*/summary.json") for r in first.rows}
    stamps = {cid: next(paths).stat().st_mtime_ns for cid, paths in done.items()}
    todo = []
    pool, _ = make_backend("local", workers=2)
    second = run_sweep(
        cases, out, pool, reports=False, resume=True, on_start=lambda where, n, skipped: todo.append((n, skipped))
    )
    assert todo == [(4 - len(first.rows), len(first.rows))] and second.ran == 4 - len(first.rows)
    assert sorted(r["case"] for r in second.rows) == ["0001", "0002", "0003", "0004"]
    for cid, stamp in stamps.items():  # the finished cases were not run again
        assert next((out / "runs").glob(f"{cid}-*/summary.json")).stat().st_mtime_ns == stamp


def test_resume_on_the_command_line(tiny, tmp_path, capsys):
    out = tmp_path / "sw"
    args = ["sweep", str(tiny), "--vary", "fabric.spines=1,2", "--backend", "local", "--no-reports", "--out", str(out)]
    assert run_app(app, args) == 0
    capsys.readouterr()
    (next((out / "runs").glob("0002-*")) / "row.json").unlink()
    assert run_app(app, [*args, "--resume"]) == 0
    assert "running 1 of 2 cases" in capsys.readouterr().out
    assert run_app(app, args) == 2  # the folder holds a sweep: --resume or another --out
    assert "--resume" in capsys.readouterr().err
    other = ["sweep", str(tiny), "--vary", "fabric.spines=1,3", "--backend", "local", "--out", str(out), "--resume"]
    assert run_app(app, other) == 2
    assert "different sweep" in capsys.readouterr().err


def test_duplicated_and_invalid_combinations_are_refused_before_anything_runs(tiny, tmp_path, capsys):
    out = tmp_path / "sw"
    code = run_app(
        app,
        [
            "sweep",
            str(tiny),
            "--vary",
            "fabric.spines=1,1,2",
            "--vary",
            "cluster.servers=0,2,-1",
            "--backend",
            "local",
            "--out",
            str(out),
        ],
    )
    assert code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert "cluster.servers: must be >= 1 (got 0) (with fabric.spines=1, cluster.servers=0)" in err
    assert "(with fabric.spines=2, cluster.servers=-1)" in err  # every problem, not the first
    code = run_app(app, ["sweep", str(tiny), "--vary", "fabric.spines=1,1,2", "--backend", "local", "--out", str(out)])
    assert code == 2 and "fabric.spines=1 is the same scenario as fabric.spines=1" in capsys.readouterr().err
    assert run_app(app, ["sweep", str(tiny), "--vary", "fabric.spines=1,2", "--vary", "cluster.servers=2,3,4"]) == 2
    assert "same number of values" in capsys.readouterr().err


def test_skip_invalid_records_them_and_runs_the_rest(tiny, tmp_path):
    cases, notes = build_cases(tiny, ["cluster.servers=0,2"], skip_invalid=True)
    assert [c.valid for c in cases] == [False, True] and "do not validate" in notes[0]
    pool, _ = make_backend("local", workers=1)
    out = tmp_path / "sw"
    out.mkdir()
    rows = _by_label(run_sweep(cases, out, pool, reports=False).rows)
    assert rows["cluster.servers=0"]["status"] == "invalid" and "must be >= 1" in rows["cluster.servers=0"]["error"]
    assert rows["cluster.servers=2"]["status"] == "ok"


def test_without_ray_the_sweep_runs_in_a_local_pool_and_says_so(monkeypatch):
    from aifabric.errors import InputError
    from aifabric.sweep import run as sweep_run
    from aifabric.sweep.backends import LocalPool

    monkeypatch.setattr(sweep_run, "ray_available", lambda: False)
    pool, note = make_backend("auto")
    assert isinstance(pool, LocalPool) and "Ray is not installed" in note and '".[sweep]"' in note
    with pytest.raises(InputError, match="needs Ray"):
        make_backend("auto", address="auto")
    with pytest.raises(InputError, match="needs Ray"):
        make_backend("ray")


# ---------------------------------------------------------------------------------------------------- Ray


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[sweep]")')
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the fault functions above, by value
    yield ray
    ray.shutdown()


def test_ray_runs_every_case_and_records_failures(ray_local, tiny, tmp_path):
    cases, _ = build_cases(tiny, VARY, grid=True)
    pool, _ = make_backend("ray", fn=raising)
    out = tmp_path / "sw"
    out.mkdir()
    result = run_sweep(cases, out, pool, reports=False)
    assert "local Ray instance" in result.where and "2 CPUs" in result.where
    rows = _by_label(result.rows)
    assert len(rows) == 4 and rows["cluster.nic_speed_gbps=400, fabric.spines=1"]["status"] == "ok"
    assert rows["cluster.nic_speed_gbps=200, fabric.spines=2"]["status"] == "failed"
    assert ray_local.is_initialized()  # a Ray this process started is left running


def test_ray_sweep_on_the_command_line(ray_local, tiny, tmp_path, capsys):
    out = tmp_path / "sw"
    assert run_app(app, ["sweep", str(tiny), "--vary", "fabric.spines=1,2", "--no-reports", "--out", str(out)]) == 0
    assert "local Ray instance" in capsys.readouterr().out
    summary = json.loads(next((out / "runs").glob("0001-*/summary.json")).read_text())
    assert summary["costs"]["capital"]["total_usd"] > 0


def test_ray_stops_a_case_past_its_time_limit(ray_local, tiny, tmp_path):
    cases, _ = build_cases(tiny, ["fabric.spines=1,2"])
    pool, _ = make_backend("ray", timeout_s=2, fn=sleeping)
    pool.start()
    try:
        rows = _by_label(execute(pool, cases, tmp_path, _payload))
    finally:
        pool.close()
    assert rows["fabric.spines=2"]["status"] == "timeout" and rows["fabric.spines=1"]["status"] == "ok", rows


def test_ray_retries_a_killed_worker_once_then_records_it(ray_local, tiny, tmp_path):
    cases, _ = build_cases(tiny, VARY, grid=True)
    pool, _ = make_backend("ray", fn=killing)
    pool.start()
    try:
        rows = _by_label(execute(pool, cases, tmp_path, _payload))
    finally:
        pool.close()
    dead = rows["cluster.nic_speed_gbps=200, fabric.spines=1"]
    assert dead["status"] == "crashed" and dead["attempts"] == 2, dead
    assert [r["status"] for r in rows.values()].count("ok") == 3, [
        (r["label"], r["status"], r["error"]) for r in rows.values()
    ]


def test_a_cluster_address_that_nothing_answers_is_refused_at_once(tiny, tmp_path, capsys):
    out = tmp_path / "sw"
    assert (
        run_app(app, ["sweep", str(tiny), "--vary", "fabric.spines=1,2", "--address", "127.0.0.1:1", "--out", str(out)])
        == 2
    )
    err = capsys.readouterr().err
    assert "--address" in err and ("nothing answers" in err or "needs Ray" in err) and not out.exists()


def test_address_auto_is_the_cluster_ray_start_left_on_this_machine(tiny, tmp_path, monkeypatch, capsys):
    """`--address auto` reads Ray's ray_current_cluster file: none, or a cluster that has stopped, is refused at
    once (Ray itself would wait for it for minutes)."""
    pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[sweep]")')
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "ray"))
    args = ["sweep", str(tiny), "--vary", "fabric.spines=1,2", "--address", "auto", "--out", str(tmp_path / "sw")]
    assert run_app(app, args) == 2
    assert "no Ray cluster started on this machine" in capsys.readouterr().err
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text("127.0.0.1:1\n")
    assert run_app(app, args) == 2
    err = capsys.readouterr().err
    assert "nothing answers at auto (127.0.0.1:1" in err and not (tmp_path / "sw").exists()
