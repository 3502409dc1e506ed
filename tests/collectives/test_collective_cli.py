"""`aifabric collective ...`: explain tables for every operation and algorithm, the nccl-tests sweep,
and bad flags exiting 2 with the flag named."""

from __future__ import annotations

import re

import pytest

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.cli.collective_cmd import OP_NAMES, parse_size
from aifabric.collectives import ALGORITHMS

CASES = [(name, alg) for name, op in OP_NAMES.items() for alg in ALGORITHMS[op]]


@pytest.mark.parametrize("name,algorithm", CASES)
def test_explain_every_operation_and_algorithm(name, algorithm, capsys):
    assert run_app(app, ["collective", name, "--ranks", "6", "--gpus-per-server", "2", "--elements", "24",
                         "--algorithm", algorithm, "--explain"]) == 0
    out = capsys.readouterr().out
    assert "step 1" in out and "sender" in out


def test_seeds_ring_explain_keeps_its_story(capsys):
    assert run_app(app, ["collective", "allreduce", "--ranks", "4", "--elements", "1024", "--explain"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert "3 ReduceScatter + 3 AllGather = 6 steps" in out
    assert "ReduceScatter done: rank 0 holds B, rank 1 holds C, rank 2 holds D, rank 3 holds A" in out
    assert "divide by 4" in out


def test_broadcast_explain_shows_nvlink_inside_and_qps_across(capsys):
    assert run_app(app, ["collective", "broadcast", "--ranks", "8", "--gpus-per-server", "4", "--explain"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tree Broadcast")
    assert "rail 0 (RDMA QP)" in out and "NVLink (no QP)" in out
    assert "spine" not in out


def test_bench_prints_the_nccl_tests_columns(capsys):
    assert run_app(app, ["collective", "bench", "--op", "allreduce", "--ranks", "16", "-b", "8", "-e", "1M",
                         "-f", "32"]) == 0
    out = capsys.readouterr().out
    for col in ("size (B)", "count", "type", "redop", "time (us)", "algbw", "busbw"):
        assert col in out
    rows = [line for line in out.splitlines() if re.match(r"^│\s+\d+ ", line)]
    assert [int(r.split("│")[1]) for r in rows] == [8, 256, 8192, 262144]


@pytest.mark.parametrize("engine", ["analytic", "flow"])
@pytest.mark.parametrize("op", ["allgather", "sendrecv", "alltoall", "broadcast"])
def test_bench_on_the_engines(engine, op, capsys):
    assert run_app(app, ["collective", "bench", "--op", op, "--ranks", "8", "--gpus-per-server", "4",
                         "-b", "1M", "-e", "1M", "--engine", engine]) == 0
    assert "(GB/s)" in capsys.readouterr().out


@pytest.mark.parametrize("argv,field", [
    (["collective", "bench", "--op", "allsum"], "--op"),
    (["collective", "bench", "--max-bytes", "lots"], "--max-bytes"),
    (["collective", "bench", "--algorithm", "tree", "--op", "allgather"], "--algorithm"),
    (["collective", "bench", "--engine", "packet"], "--engine"),
    (["collective", "allreduce", "--ranks", "0"], "--ranks"),
    (["collective", "allreduce", "--ranks", "64", "--explain"], "--ranks"),
    (["collective", "allreduce", "--ranks", "6", "--gpus-per-server", "4", "--algorithm", "hierarchical"],
     "--algorithm"),
    (["collective", "broadcast", "--root", "9"], "--root"),
])
def test_bad_flags_exit_2_naming_the_flag(argv, field, capsys):
    assert run_app(app, argv) == 2
    assert field in capsys.readouterr().err


def test_sizes_are_nccl_tests_sizes():
    assert [parse_size(s, "x") for s in ("8", "64K", "1M", "8G")] == [8, 65536, 1 << 20, 8 << 30]


def test_bootstrap_command_prints_figure_14_2(capsys):
    assert run_app(app, ["collective", "bootstrap"]) == 0
    out = capsys.readouterr().out
    assert "expects 7 connections" in out and "127.0.0.1:12345" in out and "192.168.10.101:12345" in out
    assert run_app(app, ["collective", "bootstrap", "--master-addr", "node-a"]) == 2


def test_bench_on_a_scenarios_fabric(capsys, tmp_path):
    from aifabric.scenario import ch14_scenario_text

    path = tmp_path / "s.yaml"
    path.write_text(ch14_scenario_text())
    assert run_app(app, ["collective", "bench", "--ranks", "8", "-b", "64K", "-e", "64K", "--scenario", str(path),
                         "--engine", "analytic"]) == 0
    assert "fabric of" in capsys.readouterr().out
    assert run_app(app, ["collective", "bench", "--ranks", "64", "--scenario", str(path)]) == 2
    assert "--ranks" in capsys.readouterr().err


def test_summary_counts_traffic_by_network(capsys):
    assert run_app(app, ["collective", "allreduce", "--ranks", "16", "--gpus-per-server", "4", "--elements",
                         "4096"]) == 0
    out = capsys.readouterr().out
    # snake ring over 4 servers: 12 of 16 hops on NVLink, 4 on rails, none through a spine
    assert re.search(r"NVLink \(no QP\)\s*│\s*360 │\s*92,160", out)
    assert re.search(r"one rail \(RDMA QP\)\s*│\s*120 │\s*30,720", out)
    assert re.search(r"spine → rail \(RDMA QP\)\s*│\s*0 │\s*0 ", out)
