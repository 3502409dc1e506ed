"""Fused attention kernels by name: their measured rates by sequence length and mask (attention_rates.py), the
kernel Transformer Engine picks on each GPU, and a plan's choice of kernel carried into its iteration."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.attention_rates import AMPERE_ATTENTION, FA3_PAPER_SEQ_LENS, HOPPER_ATTENTION, AttentionKernel
from aifabric.catalog import GPUS, gpu
from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.models.transformer import Transformer
from aifabric.scenario import demo_scenario_text
from aifabric.workload.llm import build_llm_training
from aifabric.workload.ops import Compute
from aifabric.workload.plan import Plan

KERNELS = [(gpu_name, name) for gpu_name, g in GPUS.items() for name in g.attention_kernels]


@pytest.mark.parametrize("gpu_name,name", KERNELS)
def test_the_rate_is_the_measurement_at_each_measured_point(gpu_name, name):
    k = GPUS[gpu_name].attention_kernels[name]
    for h, d in enumerate(k.head_dims):
        for i, s in enumerate(k.seq_lens):
            assert k.tflops(s, False, False, d) == k.forward_tflops[h][i]
            assert k.tflops(s, True, False, d) == k.forward_causal_tflops[h][i]
            if k.backward_tflops[h] is not None:
                assert k.tflops(s, False, True, d) == k.backward_tflops[h][i]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(KERNELS), st.floats(1, 1 << 22), st.floats(16, 512), st.booleans(), st.booleans())
def test_between_measured_points_the_rate_lies_between_theirs(kernel, seq_len, head_dim, causal, backward):
    # interpolated on log2 of the length, then of the head dimension; outside the measurements, the nearest one
    k = GPUS[kernel[0]].attention_kernels[kernel[1]]
    rate = k.tflops(seq_len, causal, backward, head_dim)
    corners = [
        k.tflops(s, causal, backward, d)
        for s in _neighbours(k.seq_lens, seq_len)
        for d in _neighbours(k.head_dims, head_dim)
    ]
    assert min(corners) - 1e-9 <= rate <= max(corners) + 1e-9


def _neighbours(points, x):
    """The measured points either side of x (one when x is outside them or on one)."""
    below = [p for p in points if p <= x]
    above = [p for p in points if p >= x]
    return {below[-1] if below else points[0], above[0] if above else points[-1]}


def test_head_dimension_256s_backward_is_derived_from_128s_ratio():
    # the paper's backward chart has head dimensions 64 and 128 only: at 256 the backward is the forward there
    # times the backward-to-forward ratio at 128, the nearest measured
    for k in HOPPER_ATTENTION.values():
        assert k.head_dims == (64, 128, 256) and k.backward_tflops[2] is None
        for s in (512, 3000, 16384):
            ratio = k.tflops(s, False, True, 128) / k.tflops(s, False, False, 128)
            assert k.tflops(s, False, True, 256) == pytest.approx(k.tflops(s, False, False, 256) * ratio, rel=1e-12)


def test_the_causal_backward_is_derived_from_the_forwards_causal_ratio():
    # the FlashAttention-3 paper charts the backward pass without the mask only: with it, the backward rate
    # is taken down by the same ratio as the forward's, at the same length
    for k in HOPPER_ATTENTION.values():
        for s in (1000, 4096, 12000, 65536):
            ratio = k.tflops(s, True, False) / k.tflops(s, False, False)
            assert k.tflops(s, True, True) == pytest.approx(k.tflops(s, False, True) * ratio, rel=1e-12)
            assert ratio < 1  # a causal kernel never ran faster than the full square in the paper's charts


def test_hopper_kernels_rank_as_the_flashattention_3_paper_measured_them():
    # FlashAttention-3 paper, Fig. 5 (d), head dim 128, causal, 16K: FA2 335, cuDNN 9.1 539, FA3 616 TFLOPS/s;
    # Fig. 6 (b), backward: FA2 322, cuDNN 516, FA3 561
    fa2, cudnn, fa3 = (HOPPER_ATTENTION[n] for n in ("flash2", "cudnn", "flash3"))
    assert [k.tflops(16384, True, False) for k in (fa2, cudnn, fa3)] == [335.0, 539.0, 616.0]
    assert [k.tflops(16384, False, True) for k in (fa2, cudnn, fa3)] == [322.0, 516.0, 561.0]
    for s in (2048, 4096, 8192, 16384):  # from 2K on, FA3 > cuDNN > FA2 in every direction
        for causal in (False, True):
            for backward in (False, True):
                rates = [k.tflops(s, causal, backward) for k in (fa2, cudnn, fa3)]
                assert rates == sorted(rates), (s, causal, backward)
    # the catalog's old single Hopper rate (FA3, 661 forward, "450" scaled to 402 backward) put the backward
    # 28 % below this chart's FA3 backward: the measured 561 replaces it
    assert fa3.tflops(16384, False, True) / (450.0 * 661 / 740) > 1.39
    assert FA3_PAPER_SEQ_LENS == (512, 1024, 2048, 4096, 8192, 16384)


def test_each_gpu_names_the_kernel_transformer_engine_picks_and_has_it():
    assert {n: g.attention_default for n, g in GPUS.items()} == {
        "A100": "flash2",
        "A100-40GB": "flash2",
        "A100-PCIE": "flash2",
        "H100": "cudnn",
        "H100-PCIE": "cudnn",
        "H200": "cudnn",
        "B200": "cudnn",
        "GB200": "cudnn",
        "MI300X": "ck",
    }
    for g in GPUS.values():
        assert g.attention_kernel("flash") is g.attention_kernels[g.attention_default]
    assert GPUS["A100"].attention_kernels == AMPERE_ATTENTION
    assert "flash3" not in GPUS["B200"].attention_kernels  # FlashAttention-3 runs on Hopper only


def test_a_kernel_the_gpu_has_no_measurement_of_is_refused_naming_what_it_has():
    with pytest.raises(ValueError, match=r"flash3 has no measurement on B200.*flash \(= cudnn\), cudnn, flash2"):
        GPUS["B200"].attention_kernel("flash3")


def test_a_kernel_table_is_checked_when_built():
    with pytest.raises(ValueError, match="one rate per sequence length"):
        AttentionKernel("x", (512, 1024), ((1.0, 2.0),), ((1.0,),), ((1.0, 2.0),), "")
    with pytest.raises(ValueError, match="one row of rates per head dimension"):
        AttentionKernel("x", (512,), ((1.0,),), ((1.0,),), ((1.0,),), "", head_dims=(64, 128))
    with pytest.raises(ValueError, match="sequence lengths must ascend"):
        AttentionKernel("x", (1024, 512), ((1.0, 2.0),), ((1.0, 2.0),), ((1.0, 2.0),), "")
    with pytest.raises(ValueError, match="a backward row"):
        AttentionKernel("x", (512,), ((1.0,),), ((1.0,),), (None,), "")


# ---- a plan's choice of kernel ------------------------------------------------------------------------

LLAMA_LIKE = Transformer("att-test", 4, 4096, 32, 11008, 32000, max_seq_len=16384)


def _attention_s(attention: str, seq_len: int = 8192) -> float:
    plan = Plan(tp=1, pp=1, dp=1, micro_batch_size=1, global_batch_size=1, seq_len=seq_len, attention=attention)
    w = build_llm_training(LLAMA_LIKE, plan, gpu("H100"))
    # the run says which kernel it timed (terminal, summary.json, report: the workload's description)
    assert f"attention={'cudnn' if attention == 'flash' else attention}" in w.description
    return sum(s for op in w.ranks[0] if isinstance(op, Compute) for kind, s in op.kernels if kind == "attention")


def test_a_plan_times_attention_with_the_kernel_it_names():
    t = {a: _attention_s(a) for a in ("flash", "flash2", "cudnn", "flash3")}
    assert t["flash"] == t["cudnn"]  # Transformer Engine's pick on Hopper
    assert t["flash3"] < t["cudnn"] < t["flash2"]
    # compute bound at 8K: the time ratio is the rates' ratio, forward and backward weighted by their FLOPs
    fa2, fa3 = HOPPER_ATTENTION["flash2"], HOPPER_ATTENTION["flash3"]

    def per_flop(k):
        return 1 / k.tflops(8192, True, False) + 2.5 / k.tflops(8192, True, True)

    assert t["flash2"] / t["flash3"] == pytest.approx(per_flop(fa2) / per_flop(fa3), rel=1e-6)


def test_validate_refuses_a_kernel_the_gpu_lacks(write_scenario, capsys):
    data = yaml.safe_load(demo_scenario_text())
    data["cluster"]["gpu"] = "B200"
    data["workload"]["attention"] = "flash3"
    code = run_app(app, ["validate", str(write_scenario(data))])
    text = capsys.readouterr()
    assert code == 2
    assert "workload.attention" in text.out + text.err and "flash3 has no measurement on B200" in text.out + text.err
    data["workload"]["attention"] = "flash2"
    assert run_app(app, ["validate", str(write_scenario(data))]) == 0


@pytest.mark.parametrize("bad", ["bogus", 0, -1, float("inf"), float("nan"), 10**30, "", "FLASH3"])
def test_validate_names_workload_attention_on_any_bad_value(bad, write_scenario, capsys):
    data = yaml.safe_load(demo_scenario_text())
    data["workload"]["attention"] = bad
    code = run_app(app, ["validate", str(write_scenario(data))])
    text = capsys.readouterr()
    assert code == 2 and "workload.attention" in text.out + text.err


def test_b200_cudnn_is_the_measured_causal_table_and_gb200_scales_it():
    # cudnn-frontend's SDPA training benchmark on a B200 (cuDNN 9.13.0, PyTorch's cuDNN path, NGC 25.09): causal,
    # batch 1, 128 / 8 heads of 128, TFLOP/s as its CSV prints them, forward and backward, at 4K and 8K tokens
    from aifabric.attention_rates import B200_CUDNN_SEQ_LENS

    b200, gb200, h100 = (GPUS[n].attention_kernel("flash") for n in ("B200", "GB200", "H100"))
    assert b200.tflops(4096, True, False) == pytest.approx(855.678)
    assert b200.tflops(4096, True, True) == pytest.approx(701.265)  # measured, not derived from the forward
    assert b200.tflops(8192, True, False) == pytest.approx(1171.278)
    assert b200.tflops(8192, True, True) == pytest.approx(942.509)
    # between two measured lengths: on log2 of the length, so 3K lies between 2K and 4K
    assert 478.921 < b200.tflops(3072, True, False) < 855.678
    # without the mask (no run of that version found): at the H100 cuDNN's non-causal to causal ratio
    for s in B200_CUDNN_SEQ_LENS:
        ratio = h100.tflops(min(s, 16384), False, False) / h100.tflops(min(s, 16384), True, False)
        assert b200.tflops(s, False, False) == pytest.approx(b200.tflops(s, True, False) * ratio, rel=1e-9)
        assert b200.tflops(s, False, True) == pytest.approx(b200.tflops(s, True, True) * ratio, rel=1e-9)
        # GB200: the B200's at the bf16 peaks' ratio, 2,500 / 2,250
        for causal in (False, True):
            for backward in (False, True):
                assert gb200.tflops(s, causal, backward) == pytest.approx(
                    b200.tflops(s, causal, backward) * 2500 / 2250, rel=1e-12
                )
    assert "9.13" in b200.source and "derived" in b200.source and "scaled" in gb200.source
    # FlashAttention-2 on the same B200 (the CSV's flash_attention rows), measured too: at 8K a third of cuDNN's
    fa2 = GPUS["B200"].attention_kernel("flash2")
    assert fa2.tflops(8192, True, False) == pytest.approx(399.925)
    assert fa2.tflops(8192, True, True) == pytest.approx(318.004)
    assert "2.7.4" in fa2.source
