"""`aifabric calibrate attention`: what it writes, how a scenario uses it (`calibration.attention`), and exit 2
naming the file and the key on a bad table or bad flags (nothing written)."""

from __future__ import annotations

import copy
import sys

import pytest
import yaml

from aifabric.catalog import gpu
from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.errors import InputError
from aifabric.kernels.attention_calibration import TABLE_KIND, load_attention_table
from aifabric.kernels.model import KernelModel
from aifabric.kernels.transformer import TransformerKernels
from aifabric.models.transformer import Transformer

SEQ = (512, 1024, 2048)
TABLE = {
    "kind": TABLE_KIND,
    "version": 1,
    "device": "NVIDIA H100 80GB HBM3",
    "gpu": "H100",
    "dtype": "bf16",
    "torch": "2.13.0",
    "kernel": "torch.nn.functional.scaled_dot_product_attention",
    "tokens": 16384,
    "seq_lens": list(SEQ),
    "head_dims": [64, 128],
    "forward_tflops": [[300.0, 350.0, 380.0], [400.0, 450.0, 500.0]],
    "forward_causal_tflops": [[200.0, 250.0, 300.0], [250.0, 330.0, 420.0]],
    "backward_tflops": [[250.0, 300.0, 320.0], [320.0, 380.0, 410.0]],
    "backward_causal_tflops": [[150.0, 200.0, 240.0], [190.0, 260.0, 330.0]],
}


def calibrate(*args) -> int:
    return run_app(app, ["calibrate", *map(str, args)])


def write(tmp_path, data, name="attention.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def test_quick_on_cpu_writes_a_table_that_loads(tmp_path, capsys):
    pytest.importorskip("torch")
    from aifabric.calibration.attention_bench import QUICK_SEQ_LENS

    out = tmp_path / "attention.yaml"
    assert calibrate("attention", "--quick", "--device", "cpu", "--repeats", 2, "--out", out) == 0
    kernel, on, device = load_attention_table(out)
    assert on == "" and kernel.seq_lens == QUICK_SEQ_LENS and kernel.head_dims == (32,)
    data = yaml.safe_load(out.read_text())
    assert data["dtype"] == "fp32" and device == data["device"] and device.startswith("cpu") and data["tokens"] == 256
    # every direction measured (not derived): the causal backward is the file's own row
    assert kernel.tflops(128, True, True, 32) == data["backward_causal_tflops"][0][1]
    assert "TFLOP/s" in capsys.readouterr().out


def test_interrupted_keeps_the_head_dimensions_measured_at_every_length(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    from aifabric.calibration import attention_bench

    real = attention_bench._time_call
    calls = []

    def stop(*args, **kw):  # 3 lengths x 4 directions for the first head dimension, then Ctrl-C
        if len(calls) == 12:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(attention_bench, "_time_call", stop)
    out = tmp_path / "attention.yaml"
    args = ("--quick", "--device", "cpu", "--repeats", 1, "--head-dim", 16, "--head-dim", 32, "--out", out)
    assert calibrate("attention", *args) == 130
    assert load_attention_table(out)[0].head_dims == (16,)
    calls.clear()
    out2 = tmp_path / "none.yaml"
    monkeypatch.setattr(attention_bench, "_time_call", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    assert calibrate("attention", "--quick", "--device", "cpu", "--out", out2) == 130
    assert not out2.exists() and "nothing written" in " ".join(capsys.readouterr().err.split())


def test_without_torch_says_how_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert calibrate("attention", "--quick", "--out", tmp_path / "a.yaml") == 2
    assert "pip install" in capsys.readouterr().err and not (tmp_path / "a.yaml").exists()


@pytest.mark.parametrize(
    "args,field",
    [
        (["--dtype", "fp8"], "--dtype"),
        (["--device", "tpu"], "--device"),
        (["--repeats", "0"], "--repeats"),
        (["--head-dim", "4"], "--head-dim"),
    ],
)
def test_bad_flags(args, field, tmp_path, capsys):
    assert calibrate("attention", *args, "--out", tmp_path / "a.yaml") == 2
    assert field in capsys.readouterr().err and not (tmp_path / "a.yaml").exists()


def _broken(key, value):
    data = copy.deepcopy(TABLE)
    if value is None:
        del data[key]
    else:
        data[key] = value
    return data


@pytest.mark.parametrize(
    "data,says",
    [
        (_broken("kind", "aifabric-gemm-table"), "not an attention table"),
        (_broken("seq_lens", [1024, 512, 2048]), "seq_lens"),
        (_broken("head_dims", []), "head_dims"),
        (_broken("forward_tflops", [[300.0, 350.0, 380.0]]), "forward_tflops"),  # one row for two head dimensions
        (_broken("backward_causal_tflops", [[150.0, 200.0], [190.0, 260.0]]), "backward_causal_tflops"),
        (_broken("forward_causal_tflops", [[200.0, -1.0, 300.0], [250.0, 330.0, 420.0]]), "forward_causal_tflops"),
        (_broken("backward_tflops", [[250.0, "fast", 320.0], [320.0, 380.0, 410.0]]), "backward_tflops"),
        (_broken("backward_tflops", None), "backward_tflops"),
    ],
)
def test_a_bad_table_names_the_file_and_the_key(tmp_path, data, says):
    p = write(tmp_path, data)
    with pytest.raises(InputError) as e:
        load_attention_table(p)
    text = " ".join(str(x) for x in e.value.problems)
    assert says in text and p.name in text and "calibration.attention" in text


def test_a_truncated_or_unreadable_file_is_refused(tmp_path):
    good = write(tmp_path, TABLE)
    text = good.read_text()
    cut = tmp_path / "cut.yaml"
    cut.write_text(text[: text.index("backward_tflops")] + "backward_tflops: [[250.0, 300")
    for path, says in ((cut, "line"), (tmp_path / "missing.yaml", "cannot read")):
        with pytest.raises(InputError) as e:
            load_attention_table(path)
        assert says in str(e.value.problems[0]) and path.name in str(e.value.problems[0])


MODEL = Transformer("t", 2, 2048, 16, 8192, 32000, max_seq_len=4096, kv_heads=4, gated_mlp=True)


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_the_compute_model_times_attention_at_the_tables_rates(tmp_path, precision):
    kernel, _, _ = load_attention_table(write(tmp_path, TABLE))
    km = KernelModel(gpu("H100"), precision, attention_table=kernel)
    tk = TransformerKernels(km, MODEL, tp=1, cp=1, micro_batch=8, seq_len=1024, sequence_parallel=False)
    # 8 sequences x 16 heads x 8 blocks of 128 queries = 1,024 thread blocks on the H100's 132 SMs: 8 waves, the
    # last one partly idle, as for the catalog's rates (kernels/model.py)
    busy = 1024 / (132 * 8)
    for backward in (False, True):
        (core,) = tk._core(backward)
        rate = kernel.tflops(1024, True, backward, 128) * 1e12 * busy  # head dimension 2048 / 16
        assert core.time_s == pytest.approx(max(core.flops / rate, core.bytes / km.hbm_bytes_per_s), rel=1e-12)
    # without the table: the catalog's cuDNN rates, another time
    plain = TransformerKernels(
        KernelModel(gpu("H100"), precision), MODEL, tp=1, cp=1, micro_batch=8, seq_len=1024, sequence_parallel=False
    )
    assert plain._core(False)[0].time_s != tk._core(False)[0].time_s


def test_a_scenario_takes_the_table_and_refuses_one_of_another_gpu(tmp_path):
    from aifabric.scenario.load import load_scenario
    from aifabric.simulate import build_workload

    table = write(tmp_path, TABLE)
    scenario = {
        "name": "measured-attention",
        "seed": 1,
        "cluster": {"gpu": "H100", "servers": 1, "gpus_per_server": 8, "nic_speed_gbps": 400},
        "fabric": {"topology": "rail-optimized", "link_speed_gbps": 400, "switch_radix": 64},
        "workload": {
            "kind": "llm-training",
            "model": "llama3-8b",
            "parallelism": {"tp": 8},
            "global_batch_size": 8,
            "seq_len": 2048,
        },
        "calibration": {"attention": table.name},  # relative to the scenario file
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    w = build_workload(load_scenario(path))
    assert "attention=measured" in w.description
    scenario["cluster"]["gpu"] = "A100"
    path.write_text(yaml.safe_dump(scenario))
    with pytest.raises(InputError) as e:
        load_scenario(path)
    assert any(p.path == "calibration.attention" and "measured on a H100" in p.message for p in e.value.problems)


def test_a_chosen_backend_is_timed_and_named_or_refused_where_it_cannot_run(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "math.yaml"
    assert calibrate("attention", "--quick", "--device", "cpu", "--repeats", 1, "--backend", "math", "--out", out) == 0
    assert yaml.safe_load(out.read_text())["kernel"].endswith("math backend")
    # cuDNN's kernel (what Transformer Engine runs on Hopper and Blackwell) does not run on a CPU: exit 2, no file
    none = tmp_path / "cudnn.yaml"
    assert calibrate("attention", "--quick", "--device", "cpu", "--backend", "cudnn", "--out", none) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--backend" in err and "cudnn" in err and not none.exists()
