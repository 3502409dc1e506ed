"""A scenario's `calibration`: a measured GEMM table slows the simulated compute where the measurement is
slower than the model; measured NVLink efficiency and latency reach the fabric's links and the collectives."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.catalog import gpu
from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.fabric.graph import NVSWITCH, TIER_NVLINK
from aifabric.kernels.calibration import GemmEntry, GemmTable, load_gemm_table
from aifabric.kernels.model import KernelModel
from aifabric.kernels.transformer import TransformerKernels
from aifabric.scenario.load import load_scenario
from aifabric.simulate import build_fabric, build_workload, kernel_model, simulate
from aifabric.workload.from_spec import resolve_plan
from aifabric.workload.ops import Collective, Compute, Workload

H100 = gpu("H100")
PLAIN = KernelModel(H100, "bf16")
SLOWDOWN = 2.0  # every measured shape runs at half the model's throughput

# one decoder block's worth of a small transformer on 2 data-parallel GPUs (tp = 1: each rank's compute is
# only its own ops, no collective folded into it)
HIDDEN, SEQ = 2048, 1024
SCENARIO = {
    "name": "calibrated",
    "seed": 1,
    "cluster": {"gpu": "H100", "servers": 1, "gpus_per_server": 2, "nic_speed_gbps": 400},
    "fabric": {"topology": "single-switch", "link_speed_gbps": 400, "switch_radix": 64},
    "workload": {
        "kind": "llm-training",
        "model": {"kind": "transformer", "layers": 2, "hidden": HIDDEN, "heads": 16, "vocab": 8192},
        "parallelism": {"tp": 1, "pp": 1, "dp": 2},
        "global_batch_size": 2,
        "seq_len": SEQ,
    },
}
# the QKV projection of one sequence (T x h -> 3h), the MLP's up projection (T x h -> 4h), and two others
SHAPES = [(SEQ, 3 * HIDDEN, HIDDEN, 1), (SEQ, 4 * HIDDEN, HIDDEN, 1), (4096, 4096, 4096, 1), (256, 512, 8192, 8)]


def table(gpu_name: str = "H100") -> GemmTable:
    entries = tuple(GemmEntry(m, n, k, b, SLOWDOWN * PLAIN.gemm_time_s(m, n, k, b)) for m, n, k, b in SHAPES)
    return GemmTable("NVIDIA H100 80GB HBM3" if gpu_name == "H100" else gpu_name, gpu_name, "bf16", entries, "2.7.0")


def write(folder: Path, name: str, data) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.fixture
def calibrated(tmp_path, monkeypatch):
    """A scenario in tmp_path/run naming its GEMM table by a path relative to its own folder, loaded from
    another working directory."""
    run = tmp_path / "run"
    write(run, "gemm-h100.yaml", table().to_yaml())
    data = copy.deepcopy(SCENARIO)
    data["calibration"] = {"gemm": "gemm-h100.yaml"}
    path = write(run, "scenario.yaml", data)
    monkeypatch.chdir(tmp_path)
    return load_scenario(path), run / "gemm-h100.yaml"


def test_relative_gemm_path_is_resolved_against_the_scenario_folder(calibrated):
    s, table_path = calibrated
    assert Path(s.calibration.gemm) == table_path.resolve()


def test_a_measured_shape_takes_its_measured_time(calibrated):
    s, table_path = calibrated
    km = kernel_model(s)
    measured = load_gemm_table(table_path)  # as written: times to 6 significant digits
    for e in measured.entries:
        assert km.gemm("x", e.m, e.n, e.k, e.batch).time_s == pytest.approx(e.time_s, rel=1e-12)
    # and the workload's own kernel at that shape: the QKV projection of one sequence
    model, plan, _ = resolve_plan(s)
    tk = TransformerKernels(km, model, tp=1, cp=1, micro_batch=1, seq_len=SEQ, sequence_parallel=False)
    qkv = next(k for k in tk.op("fwd/attn").kernels if k.name == "QKV projection")
    assert qkv.time_s == pytest.approx(measured.entries[0].time_s, rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 32768), st.integers(1, 32768), st.integers(1, 32768), st.integers(1, 16))
def test_every_shape_scales_from_its_nearest_measurement(m, n, k, batch):
    # kernels/calibration.py: the nearest measured shape's throughput, scaled by the tile model's ratio
    # between the two shapes; every entry at half the model's throughput puts every shape at half too
    calibrated = KernelModel(H100, "bf16", table().with_model(PLAIN.gemm_time_s))
    assert calibrated.gemm("x", m, n, k, batch).time_s == pytest.approx(
        SLOWDOWN * PLAIN.gemm("x", m, n, k, batch).time_s, rel=1e-9
    )


def gemm_s(op: Compute) -> float:
    return dict(op.kernels).get("gemm", 0.0)


def test_the_table_slows_the_simulated_compute(calibrated):
    s, _ = calibrated
    plain = s.model_copy(update={"calibration": type(s.calibration)()})
    slow, fast = build_workload(s), build_workload(plain)
    for a, b in zip(slow.ranks[0], fast.ranks[0], strict=True):
        if not isinstance(a, Compute):
            continue
        assert a.name == b.name and a.flops == b.flops
        kinds_a, kinds_b = dict(a.kernels), dict(b.kernels)
        for kind in ("attention", "memory", "optimizer"):  # only GEMMs are calibrated
            assert kinds_a.get(kind) == kinds_b.get(kind)
        if a.name.startswith("fwd/"):
            # forward GEMMs write their output once: exactly the measured factor
            assert gemm_s(a) == pytest.approx(SLOWDOWN * gemm_s(b), rel=1e-5)
        else:
            # weight gradients accumulate into fp32 (more bytes than the table's plain GEMM): between 1 and 2x
            assert gemm_s(b) <= gemm_s(a) <= SLOWDOWN * gemm_s(b) * (1 + 1e-5)
    assert sum(gemm_s(op) for op in slow.ranks[0] if isinstance(op, Compute)) > 1.5 * sum(
        gemm_s(op) for op in fast.ranks[0] if isinstance(op, Compute)
    )
    # the simulated compute time is the calibrated ops' durations (tp = 1: nothing folded into them)
    slow_run, fast_run = simulate(s), simulate(plain)
    for run in (slow_run, fast_run):
        ops = [op for op in run.workload.ranks[0] if isinstance(op, Compute)]
        assert run.results.compute_time_s == pytest.approx(sum(op.duration_s for op in ops), rel=1e-9)
    assert slow_run.results.compute_time_s > fast_run.results.compute_time_s
    assert slow_run.results.iteration_time_s > fast_run.results.iteration_time_s


def validate(path, capsys):
    code = run_app(app, ["validate", str(path)])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_a_table_from_another_gpu_is_refused(tmp_path, capsys):
    write(tmp_path, "gemm-a100.yaml", table("A100").to_yaml())
    data = copy.deepcopy(SCENARIO)
    data["calibration"] = {"gemm": "gemm-a100.yaml"}
    code, text = validate(write(tmp_path, "scenario.yaml", data), capsys)
    assert code == 2
    assert "calibration.gemm" in text and "A100" in text and "H100" in text


# ---- NVLink calibration ------------------------------------------------------------------------------

NVLINK_CAL = {"calibration": {"nvlink": {"bandwidth_efficiency": 0.5, "extra_latency_us": 3}}}
SERVER = copy.deepcopy(SCENARIO)
SERVER["cluster"].update(gpus_per_server=8, nvls=False)  # ring AllReduce: NVLS reduces in the switch
SERVER["workload"]["parallelism"].update(tp=8, dp=1)
SERVER["workload"]["global_batch_size"] = 1


@pytest.fixture
def nvlink_pair(tmp_path):
    """The 8-GPU server scenario without and with `calibration: calib.yaml` (an nccl-tests fit's file)."""
    write(tmp_path, "calib.yaml", NVLINK_CAL)
    plain = load_scenario(write(tmp_path, "plain.yaml", SERVER))
    data = copy.deepcopy(SERVER)
    data["calibration"] = "calib.yaml"
    return plain, load_scenario(write(tmp_path, "calibrated.yaml", data))


def test_calibration_file_sets_nvlink_rate_and_latency(nvlink_pair):
    plain, cal = nvlink_pair
    assert cal.calibration.nvlink.bandwidth_efficiency == 0.5
    fa, _ = build_fabric(plain)
    fb, _ = build_fabric(cal)
    nvlinks = 0
    for a, b in zip(fa.links, fb.links, strict=True):
        assert a.id == b.id
        if a.tier != TIER_NVLINK:
            assert (b.efficiency, b.latency_s) == (a.efficiency, a.latency_s)
            continue
        nvlinks += 1
        assert b.rate_bytes_per_s == pytest.approx(0.5 * b.capacity_bytes_per_s, rel=1e-12)
        assert a.rate_bytes_per_s == pytest.approx(H100.nvlink_efficiency * a.capacity_bytes_per_s, rel=1e-12)
        if fb.nodes[b.dst].kind == NVSWITCH:  # one link of every hop: the GPU's link into the NVSwitch
            assert b.latency_s == pytest.approx(a.latency_s + 3e-6, rel=1e-12)
        else:
            assert b.latency_s == a.latency_s
    assert nvlinks == 16  # 8 GPUs, each a link up and a link down


def one_all_reduce(s, size_bytes: int) -> float:
    ranks = tuple(range(8))
    op = Collective("tp-ar", "all-reduce", ranks, size_bytes // 2, 2, "activations", dim="tp")
    w = Workload("one", [[op] for _ in ranks], 0, 1, 0.0)
    (result,) = simulate(s, workload=w).results.collectives
    return result.time_s


def test_tp_all_reduce_in_a_server_follows_the_calibration(nvlink_pair):
    # a ring AllReduce on n GPUs: busbw = 2(n-1)/n x size / time reaches the per-direction link rate for
    # large buffers (nccl-tests' definition), and each of its 2(n-1) steps crosses one GPU -> NVSwitch link
    n, per_direction = 8, H100.nvlink_bandwidth_gBps / 2 * 1e9
    small, big1, big2 = 1024, 1 << 28, 1 << 30
    times = {}
    for label, s in zip(("plain", "cal"), nvlink_pair):
        times[label] = {size: one_all_reduce(s, size) for size in (small, big1, big2)}
    for label, eff in (("plain", H100.nvlink_efficiency), ("cal", 0.5)):
        t = times[label]
        busbw = 2 * (n - 1) / n * (big2 - big1) / (t[big2] - t[big1])
        assert busbw == pytest.approx(eff * per_direction, rel=1e-3)
    # a small buffer is latency bound: 2(n-1) steps, each 3 µs longer (its bandwidth part changes by ns)
    assert times["cal"][small] - times["plain"][small] == pytest.approx(2 * (n - 1) * 3e-6, rel=1e-3)


# ---- unreadable calibration files --------------------------------------------------------------------


@pytest.mark.parametrize("make", ["missing", "directory", "list"])
def test_unreadable_calibration_file_is_named(tmp_path, capsys, make):
    if make == "directory":
        (tmp_path / "calib.yaml").mkdir()
    elif make == "list":
        write(tmp_path, "calib.yaml", "- 0.5\n- 3\n")
    data = copy.deepcopy(SCENARIO)
    data["calibration"] = "calib.yaml"
    code, text = validate(write(tmp_path, "scenario.yaml", data), capsys)
    assert code == 2
    assert "calibration: " in text and "calib.yaml" in text
    assert "Traceback" not in text


def test_unreadable_gemm_table_is_named(tmp_path, capsys):
    write(tmp_path, "gemm.yaml", "kind: something-else\n")
    data = copy.deepcopy(SCENARIO)
    data["calibration"] = {"gemm": "gemm.yaml"}
    code, text = validate(write(tmp_path, "scenario.yaml", data), capsys)
    assert code == 2
    assert "calibration.gemm" in text and "not a GEMM table" in text
