"""`aifabric calibrate nccl-tests` and `aifabric calibrate gemm`: what they write, and exit 2 (nothing
written) on bad input."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.scenario.calibration_spec import CalibrationSpec, TierCalibration

DATA = Path(__file__).parent / "data"
G8 = DATA / "a100_sxm4_80gb_8gpu_all_reduce_perf_g8.txt"
MPIRUN = DATA / "a100_sxm4_80gb_8gpu_all_reduce_perf_mpirun_np8.txt"
GB10 = DATA / "gb10_2node_all_gather_perf_roce200g.txt"
SENDRECV = DATA / "a100_8gpu_sendrecv_perf_partial.txt"


def calibrate(*args) -> int:
    return run_app(app, ["calibrate", *map(str, args)])


def test_writes_a_calibration_the_scenario_schema_accepts(tmp_path, capsys):
    out = tmp_path / "calibration.yaml"
    assert calibrate("nccl-tests", G8, MPIRUN, GB10, "--nic-gbps", 200, "--out", out) == 0
    text = capsys.readouterr().out
    data = yaml.safe_load(out.read_text())
    assert list(data) == ["calibration"]
    blocks = data["calibration"]
    assert set(blocks) == {"nvlink", "network"}
    for block in blocks.values():
        assert set(block) == set(TierCalibration.model_fields)
        TierCalibration.model_validate(block)
    CalibrationSpec.model_validate(blocks)
    assert G8.name in blocks["nvlink"]["source"] and GB10.name in blocks["network"]["source"]
    # GB10: 16 GiB all-gather over one 200 Gb/s link; the busbw it printed over 25 GB/s
    assert blocks["network"]["bandwidth_efficiency"] == pytest.approx(22.98 / 25, rel=0.01)
    for col in ("op", "ranks", "nodes", "GPU", "busbw", "rms"):
        assert col in text
    assert "all-gather" in text and "GB10" in text and f"wrote {out}" in " ".join(text.split())


def test_gpu_must_be_known_for_nvlink(tmp_path, capsys):
    out = tmp_path / "c.yaml"
    assert calibrate("nccl-tests", SENDRECV, "--out", out) == 2  # partial output: no device name
    assert "--gpu" in capsys.readouterr().err and not out.exists()
    assert calibrate("nccl-tests", SENDRECV, "--gpu", "A100", "--out", out) == 0
    assert set(yaml.safe_load(out.read_text())["calibration"]) == {"nvlink"}


def _broken_truncated(tmp_path: Path) -> tuple[Path, int]:
    lines = G8.read_text().splitlines()
    i = next(k for k, line in enumerate(lines) if line.strip().startswith("65536 "))
    bad = tmp_path / "truncated_all_reduce_perf.txt"
    bad.write_text("\n".join(lines[:i] + [lines[i][:40]]) + "\n")
    return bad, i + 1


def _broken_number(tmp_path: Path) -> tuple[Path, int]:
    lines = GB10.read_text().splitlines()
    i = next(k for k, line in enumerate(lines) if line.strip().startswith("17179869184"))
    lines[i] = lines[i].replace("374425", "37x425")
    bad = tmp_path / "garbled.txt"
    bad.write_text("\n".join(lines) + "\n")
    return bad, i + 1


@pytest.mark.parametrize("make", [_broken_truncated, _broken_number])
def test_broken_file_exits_2_naming_file_and_line_and_writes_nothing(make, tmp_path, capsys):
    bad, line = make(tmp_path)
    out = tmp_path / "calibration.yaml"
    assert calibrate("nccl-tests", G8, bad, "--nic-gbps", 200, "--out", out) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{bad}:{line}" in err and "Traceback" not in err
    assert not out.exists() and list(tmp_path.glob(".calibration*")) == []


def test_file_that_does_not_say_its_operation_needs_op(tmp_path, capsys):
    anonymous = tmp_path / "run1.txt"
    anonymous.write_text("\n".join(G8.read_text().splitlines()[1:]) + "\n")  # without the command line
    out = tmp_path / "c.yaml"
    assert calibrate("nccl-tests", anonymous, "--out", out) == 2
    assert "--op" in capsys.readouterr().err and not out.exists()
    assert calibrate("nccl-tests", anonymous, "--op", "allreduce", "--out", out) == 0


@pytest.mark.parametrize(
    "args,field",
    [
        (["--gpu", "Z900"], "--gpu"),
        (["--nic-gbps", "-1"], "--nic-gbps"),
        (["--op", "allsum"], "--op"),
        (["--cpu-vendor", "via"], "--cpu-vendor"),
    ],
)
def test_bad_flags(args, field, tmp_path, capsys):
    assert calibrate("nccl-tests", G8, *args, "--out", tmp_path / "c.yaml") == 2
    assert field in capsys.readouterr().err


def test_gemm_quick_on_cpu_writes_a_table_that_loads(tmp_path, capsys):
    pytest.importorskip("torch")
    from aifabric.calibration.gemm_bench import QUICK_DIMS
    from aifabric.kernels.calibration import load_gemm_table

    out = tmp_path / "gemm.yaml"
    assert calibrate("gemm", "--quick", "--device", "cpu", "--repeats", 3, "--out", out) == 0
    table = load_gemm_table(out)
    assert (table.gpu, table.dtype) == ("", "fp32") and table.device.startswith("cpu")
    shapes = {(e.m, e.n, e.k) for e in table.entries}
    assert shapes == {(m, n, k) for m in QUICK_DIMS for n in QUICK_DIMS for k in QUICK_DIMS}
    assert all(e.time_s > 0 and e.batch == 1 for e in table.entries)
    # the throughput the file states is its shape's FLOPs over its measured time (no wall-clock comparison:
    # a loaded CI machine may time a small product slower than a large one)
    assert table.best().flops_per_s == max(2 * e.m * e.n * e.k / e.time_s for e in table.entries)
    assert "TFLOP/s" in capsys.readouterr().out


def test_gemm_interrupted_writes_what_it_measured(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    from aifabric.calibration import gemm_bench
    from aifabric.kernels.calibration import load_gemm_table

    real = gemm_bench.time_matmul
    calls = []

    def stop_after_three(*args, **kw):
        if len(calls) == 3:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(gemm_bench, "time_matmul", stop_after_three)
    out = tmp_path / "gemm.yaml"
    assert calibrate("gemm", "--quick", "--device", "cpu", "--repeats", 1, "--out", out) == 130
    assert len(load_gemm_table(out).entries) == 3
    assert "3 of 64" in " ".join(capsys.readouterr().err.split())


def test_gemm_without_torch_says_how_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    assert calibrate("gemm", "--quick", "--out", tmp_path / "g.yaml") == 2
    assert "pip install" in capsys.readouterr().err and not (tmp_path / "g.yaml").exists()


@pytest.mark.parametrize(
    "args,field",
    [(["--dtype", "fp8"], "--dtype"), (["--device", "tpu"], "--device"), (["--repeats", "0"], "--repeats")],
)
def test_gemm_bad_flags(args, field, tmp_path, capsys):
    assert calibrate("gemm", *args, "--out", tmp_path / "g.yaml") == 2
    assert field in capsys.readouterr().err
