"""Issue 16, bounded work: before simulating, the work is estimated from the plan (tasks, memory, time) and a
scenario past what this machine's memory holds is refused with exit 2, naming the field that drives it, saying
what it would take and how to reduce it; --force runs it anyway. The project's own large benchmarks (Llama 3 405B
on 16,384 and 32,768 GPUs, the 1T model on 3,072) stay well within a 24 GiB machine."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import yaml

import aifabric.simulate  # noqa: F401 - patched through sys.modules below
from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.cli.estimate import check_work, estimate
from aifabric.errors import InputError
from aifabric.scenario.load import load_scenario

GIB24 = 24 * 2**30
BENCH = Path(__file__).parents[2] / "bench"


def _llm(servers: int, tp: int, pp: int, micro_batches: int, iterations: int = 1) -> dict:
    dp = servers * 8 // (tp * pp)
    return {
        "name": "big",
        "cluster": {"gpu": "H100", "servers": servers, "gpus_per_server": 8, "nic_speed_gbps": 400},
        "fabric": {
            "topology": "rail-optimized",
            "servers_per_segment": min(32, servers),
            "spines": 8,
            "link_speed_gbps": 400,
            "switch_radix": 64,
            "spine_radix": max(64, 8 * servers // 32),
        },
        "workload": {
            "kind": "llm-training",
            "model": {"kind": "transformer", "layers": 64, "hidden": 4096, "heads": 32, "vocab": 32000},
            "parallelism": {"tp": tp, "pp": pp, "dp": dp, "micro_batch_size": 1},
            "global_batch_size": micro_batches * dp,
            "seq_len": 2048,
            "iterations": iterations,
            "memory_check": False,
        },
        "engine": "flow",
    }


def _bench(gpus: int, plan: str):
    sys.path.insert(0, str(BENCH))
    try:
        from bench_iteration import scenario
    finally:
        sys.path.remove(str(BENCH))
    return scenario(gpus, "flow", plan)


@pytest.mark.parametrize(
    "gpus,plan,measured_gb",
    [(16_384, "llama3", 3.3), (32_768, "llama3", 5.6), (3_072, "1t", 7.6), (1_024, "gpt3", 1.1)],
)
def test_the_large_benchmarks_still_run_on_a_24_gib_machine(gpus, plan, measured_gb):
    est = check_work(_bench(gpus, plan), None, limit_bytes=GIB24)  # not refused
    assert 0.5 * measured_gb < est.memory_bytes / 1e9 < 2 * measured_gb


def test_an_absurd_plan_is_refused_naming_the_field_that_drives_it(tmp_path, capsys):
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(_llm(512, 8, 16, 65_536)))  # 65,536 micro-batches on 32 replicas
    t0 = time.perf_counter()
    assert run_app(app, ["simulate", str(path), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert time.perf_counter() - t0 < 30
    assert "workload.global_batch_size" in err and "memory" in err and "--force" in err and "tasks" in err
    assert "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_a_million_gpus_of_data_parallel_is_refused(tmp_path, capsys):
    path = tmp_path / "wide.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "wide",
                "cluster": {"gpu": "H100", "servers": 131_072, "gpus_per_server": 8},
                "fabric": {
                    "topology": "multi-pod",
                    "pods": 512,
                    "servers_per_segment": 32,
                    "switch_radix": 64,
                    "spine_radix": 128,
                    "superspine_radix": 32_768,
                },
                "workload": {
                    "kind": "data-parallel",
                    "model": {"kind": "feed-forward", "layer_widths": [4096, 4096]},
                    "global_batch_size": 1 << 20,
                },
            }
        )
    )
    s = load_scenario(path)
    with pytest.raises(InputError) as exc:
        check_work(s, None, limit_bytes=GIB24)
    assert exc.value.problems[0].path == "cluster.servers"
    assert check_work(s, None, force=True, limit_bytes=GIB24).tasks > 100_000_000


def test_many_iterations_name_iterations():
    s = load_scenario(yaml.safe_dump(_llm(64, 8, 8, 256, iterations=1000)))
    with pytest.raises(InputError) as exc:
        check_work(s, None, limit_bytes=GIB24)
    assert exc.value.problems[0].path == "workload.iterations"


def test_force_runs_it_anyway(tmp_path, monkeypatch):
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(_llm(512, 8, 16, 65_536)))
    ran = []

    def fake(*args, **kwargs):
        ran.append(1)
        raise KeyboardInterrupt  # stands for the long run: stopped at once

    monkeypatch.setattr(sys.modules["aifabric.simulate"], "simulate", fake)
    assert run_app(app, ["simulate", str(path), "--out", str(tmp_path / "run"), "--force"]) == 130
    assert ran == [1]


def test_compare_refuses_before_any_variant_runs(tmp_path, capsys, monkeypatch):
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(_llm(64, 8, 8, 256)))
    monkeypatch.setattr(sys.modules["aifabric.simulate"], "simulate", lambda *a, **k: pytest.fail("ran"))
    assert (
        run_app(app, ["compare", str(path), "--vary", "workload.iterations=1,1000", "--out", str(tmp_path / "c")]) == 2
    )
    assert "workload.iterations" in capsys.readouterr().err and not (tmp_path / "c").exists()


def test_ordinary_scenarios_are_estimated_small():
    from aifabric.scenario import embedded_scenario

    for name in ("demo", "fabric", "ch14"):
        est = estimate(embedded_scenario(name))
        assert est is not None and est.memory_bytes < 2e9


def test_sweep_refuses_cases_past_memory_before_any_runs(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_llm(64, 8, 8, 256)))
    out = tmp_path / "sw"
    args = [
        "sweep",
        str(path),
        "--vary",
        "workload.iterations=1,1000",
        "--backend",
        "local",
        "--workers",
        "1",
        "--no-reports",
        "--out",
        str(out),
    ]
    assert run_app(app, args) == 2
    err = capsys.readouterr().err
    assert "case 0002" in err and "workload.iterations" in err and "--force" in err
    assert not out.exists()


def test_the_packet_engine_is_estimated_by_its_packets(tmp_path, capsys):
    # the packet engine's cost is the bytes crossing NICs in 4 KB packets (34 µs each, bench/bench_packet.py): the
    # demo's iteration is minutes; past a week (here a limit of a minute) it is refused naming the engine
    from aifabric.cli.estimate import PACKET_BYTES, SECONDS_PER_PACKET
    from aifabric.scenario import embedded_scenario
    from aifabric.simulate import build_workload
    from aifabric.workload import traffic_summary

    s = embedded_scenario("demo")
    est = check_work(s, "packet")
    summary = traffic_summary(build_workload(s), gpus_per_server=s.cluster.gpus_per_server)
    network = sum(v.scale_out_bytes for k, v in summary.items() if k != "all")
    assert est.tasks == int(network / PACKET_BYTES)
    assert est.seconds == pytest.approx(est.tasks * SECONDS_PER_PACKET)
    assert 60 < est.seconds < 7 * 86400
    with pytest.raises(InputError) as e:
        check_work(s, "packet", limit_s=60)
    assert "engine" in str(e.value) and "packet engine would take" in str(e.value)
    assert check_work(s, "packet", force=True, limit_s=60) is not None
