"""workload.software: the kernels a run was made with (kernels/model.py SOFTWARE). Figures: the A100's
CUDA 11.7 matmul measurement (catalog `matmul_by_software`: 230 TFLOP/s fp16 on 8,192^3, M. Li,
mli/transformers-benchmarks, 2022) and Apex's 2021 fused LayerNorm on GA100 (NVIDIA/apex pull request 1037:
895.8 GB/s forward, 572.2 GB/s backward, of the A100 40 GB's STREAM Triad 1,377.5 GB/s)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.catalog import GPUS
from aifabric.kernels.model import KernelModel
from aifabric.kernels.transformer import TransformerKernels
from aifabric.models.zoo import MODELS

DIM = st.integers(64, 32768)


@pytest.mark.parametrize("name", ["A100", "A100-40GB"])
@pytest.mark.parametrize("software", ["megatron-2022", "megatron-2021"])
def test_older_software_is_anchored_to_its_own_measurement(name, software):
    km = KernelModel(GPUS[name], "fp16", software=software)
    t = km.gemm_time_s(8192, 8192, 8192)
    assert 2.0 * 8192**3 / t == pytest.approx(230e12, rel=1e-6)


@settings(max_examples=200, deadline=None)
@given(DIM, DIM, DIM)
def test_older_software_is_never_faster_than_current(m, n, k):
    now = KernelModel(GPUS["A100"], "bf16")
    then = KernelModel(GPUS["A100"], "bf16", software="megatron-2022")
    assert then.gemm_time_s(m, n, k) >= now.gemm_time_s(m, n, k) * (1 - 1e-12)
    assert 2.0 * m * n * k / then.gemm_time_s(m, n, k) <= 230e12 * (1 + 1e-9)


def test_2021_layer_norm_runs_at_apex_measured_bandwidth():
    km = KernelModel(GPUS["A100-40GB"], "fp16", software="megatron-2021")
    e = 32 * 512 * 1024  # the pull request's B = 32, S = 512 at BERT-large's hidden size
    fwd, bwd = km.norm("n", e, False), km.norm("n", e, True)
    assert fwd.bytes / fwd.time_s == pytest.approx(895.8e9, rel=1e-9)
    assert bwd.bytes / bwd.time_s == pytest.approx(572.2e9, rel=1e-9)
    now = KernelModel(GPUS["A100-40GB"], "fp16")
    assert now.norm("n", e, False).time_s == now.elementwise("n", e, 1, 1).time_s  # current: unchanged


def test_2021_block_is_slower_only_by_its_gemms_and_norms():
    model = MODELS["gpt3-175b"]

    def block(software):
        km = KernelModel(GPUS["A100"], "fp16", software=software)
        tk = TransformerKernels(
            km, model, tp=8, cp=1, micro_batch=1, seq_len=2048, sequence_parallel=False, attention="unfused"
        )
        return tk.op("fwd/attn").kernels + tk.op("fwd/mlp").kernels

    now, old = block("current"), block("megatron-2021")
    for a, b in zip(now, old):
        if a.kind == "gemm":
            assert b.time_s >= a.time_s
        elif "norm" in a.name:
            assert b.time_s == pytest.approx(a.time_s * 1377.5 / 895.8, rel=1e-9)
        else:
            assert b.time_s == a.time_s


def test_software_without_a_measurement_is_refused():
    with pytest.raises(ValueError, match="A100"):
        KernelModel(GPUS["H100"], "bf16", software="megatron-2022")


@pytest.mark.parametrize("gpu,software", [("H100", "megatron-2022"), ("A100", "bogus"), ("A100", ""), ("A100", 0)])
def test_scenario_software_errors_name_the_field(gpu, software):
    from aifabric import load_scenario
    from aifabric.errors import InputError

    scenario = {
        "name": "t",
        "cluster": {"gpu": gpu, "servers": 1, "gpus_per_server": 8},
        "fabric": {"topology": "rail-optimized"},
        "workload": {
            "kind": "llm-training",
            "model": "gpt3-1.3b",
            "parallelism": {"tp": 8},
            "global_batch_size": 8,
            "seq_len": 1024,
            "software": software,
        },
    }
    with pytest.raises(InputError, match="workload.software"):
        load_scenario(scenario)
