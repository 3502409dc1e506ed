"""Sliding-window attention (Mistral 7B; every other block of GPT-OSS and Gemma 2): the FLOPs of the s x w band,
the fused kernel timed on the band's blocks, and a scenario's plan checked against what is not modelled."""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.catalog import GPUS
from aifabric.errors import InputError
from aifabric.kernels.model import FLASH_BLOCK_ROWS, KernelModel, _band_fraction, _causal_fraction
from aifabric.models.zoo import MODELS
from aifabric.scenario.load import parse_scenario
from aifabric.simulate import build_workload


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 1 << 17), st.integers(1, 1 << 17), st.sampled_from([64, 128]))
def test_the_band_is_the_blocks_a_windowed_query_block_computes(s, w, block):
    """Counted block by block: query block i computes its diagonal block and the key blocks its window reaches
    back into, ceil(w / block) of them, or all before it near the start; a window as long as the sequence is the
    causal triangle."""
    n, reach = math.ceil(s / block), math.ceil(w / block)
    if n <= 4096:  # the loop is the reference; the function's closed form must agree with it
        counted = sum(min(i, reach) + 1 for i in range(n))
        assert _band_fraction(s, w, block) == pytest.approx(counted / n**2, rel=1e-12)
    if w >= s:
        assert _band_fraction(s, w, block) == pytest.approx(_causal_fraction(s, s, block), rel=1e-12)
    assert _band_fraction(s, w, block) <= _band_fraction(s, w + block, block)


def test_a_windowed_kernel_computes_the_band_at_the_windows_rate():
    km = KernelModel(GPUS["H100"], "bf16")
    args = ("flash attention", 1, 32, 8, 32768, 32768, 128, True)
    full = km.flash_attention(*args, False)
    same = km.flash_attention(*args, False, "flash", 32768)  # a window the length of the sequence: no band
    band = km.flash_attention(*args, False, "flash", 4096)
    assert same == full
    n = 32768 // FLASH_BLOCK_ROWS
    assert band.flops == pytest.approx(4.0 * 32 * 32768**2 * 128 * _band_fraction(32768, 4096, FLASH_BLOCK_ROWS))
    assert band.flops / full.flops == pytest.approx((32 * 33 / 2 + (n - 32) * 33) / (n * (n + 1) / 2))
    # the band's blocks run at the rate of a 4,096-token sequence, below a 32K one's
    assert band.time_s / band.flops > full.time_s / full.flops
    assert band.time_s < full.time_s
    bwd = km.flash_attention(*args, True, "flash", 4096)
    assert bwd.flops == pytest.approx(2.5 * band.flops)


def test_the_model_counts_each_windowed_blocks_band():
    m = MODELS["mistral-7b"]
    assert m.sliding_window == 4096 and m.windowed_layers == 32
    # 8,192 tokens: every block's queries see 4,096 keys, not 8,192
    assert m.attention_core_flops_all_layers(8192) == 32 * 4 * 4096 * 4096
    assert m.attention_core_flops_all_layers(2048) == 32 * 4 * 2048 * 4096  # shorter than the window: the square
    alternating = replace(m, global_every=2)
    assert [alternating.is_windowed(i) for i in range(4)] == [True, False, True, False]
    assert alternating.attention_core_flops_all_layers(8192) == 16 * 4 * 4096 * 4096 + 16 * 4 * 8192 * 4096


LLM = {
    "name": "window",
    "seed": 1,
    "cluster": {"gpu": "H100", "servers": 1, "gpus_per_server": 8, "nic_speed_gbps": 400},
    "fabric": {"topology": "single-switch", "link_speed_gbps": 400},
    "workload": {
        "kind": "llm-training",
        "model": "mistral-7b",
        "parallelism": {"tp": 8, "pp": 1, "dp": 1, "sequence_parallel": True},
        "global_batch_size": 4,
        "seq_len": 8192,
        "memory_check": False,
    },
}
MISTRAL_SHAPE = {
    "kind": "transformer",
    "layers": 32,
    "hidden": 4096,
    "heads": 32,
    "kv_heads": 8,
    "ffn_hidden": 14336,
    "vocab": 32000,
    "gated_mlp": True,
    "bias": False,
    "norm": "rmsnorm",
    "positions": "rotary",
    "tied_embeddings": False,
}


def _workload(model, seq_len=8192, **workload):
    d = copy.deepcopy(LLM)
    d["workload"].update(model=model, seq_len=seq_len, **workload)
    return build_workload(parse_scenario(d))


def test_a_windowed_model_trains_its_attention_on_the_band_and_only_there():
    full = _workload(MISTRAL_SHAPE)
    windowed = _workload({**MISTRAL_SHAPE, "sliding_window": 4096})
    assert _workload("mistral-7b").flops_per_iteration == windowed.flops_per_iteration
    # model FLOPs: 3 x forward, the band in place of the square in every block
    saved = 3 * 32 * 4 * (8192 - 4096) * 4096 * 4 * 8192
    assert full.flops_per_iteration - windowed.flops_per_iteration == pytest.approx(saved, rel=1e-12)
    by_kind = {k: dict(w.compute_by_kind_s) for k, w in (("full", full), ("windowed", windowed))}
    # the kernel computes the band's blocks (0.387 of the square at 8,192 tokens and 4,096 keys) against the
    # causal triangle's (0.508), at the rate of a 4,096-token sequence, no faster than an 8,192-token one's
    ratio = _band_fraction(8192, 4096, FLASH_BLOCK_ROWS) / _causal_fraction(8192, 8192, FLASH_BLOCK_ROWS)
    assert ratio * by_kind["full"]["attention"] < by_kind["windowed"]["attention"] < by_kind["full"]["attention"]
    assert by_kind["windowed"]["gemm"] == pytest.approx(by_kind["full"]["gemm"])
    # a window as long as the sequence changes nothing
    same = _workload({**MISTRAL_SHAPE, "sliding_window": 8192})
    assert same.compute_by_kind_s == full.compute_by_kind_s and same.flops_per_iteration == full.flops_per_iteration
    # every other block global: between the two
    half = _workload({**MISTRAL_SHAPE, "sliding_window": 4096, "global_every": 2})
    assert by_kind["windowed"]["attention"] < dict(half.compute_by_kind_s)["attention"] < by_kind["full"]["attention"]


def test_what_a_window_is_not_modelled_with_is_refused_by_field():
    with pytest.raises(InputError) as e:
        d = copy.deepcopy(LLM)
        d["workload"]["parallelism"].update(tp=4, cp=2)
        parse_scenario(d)
    assert "sliding-window" in {p.path: p.message for p in e.value.problems}["workload.parallelism.cp"]
    d = copy.deepcopy(LLM)
    d["workload"]["attention"] = "unfused"
    with pytest.raises(InputError) as e:
        parse_scenario(d)
    assert "fused kernel" in {p.path: p.message for p in e.value.problems}["workload.attention"]
    d = copy.deepcopy(LLM)
    d["workload"].update(seq_len=4096, attention="unfused")  # the window covers the sequence: nothing to refuse
    parse_scenario(d)
    d["workload"]["model"] = {**MISTRAL_SHAPE, "global_every": 2}
    with pytest.raises(InputError) as e:
        parse_scenario(d)
    assert "sliding_window" in str(e.value)
    # every block global (global_every 1): no window to refuse context parallelism for, and none timed
    d = copy.deepcopy(LLM)
    d["workload"]["model"] = {**MISTRAL_SHAPE, "sliding_window": 4096, "global_every": 1}
    d["workload"]["parallelism"].update(tp=4, cp=2)
    unwindowed = copy.deepcopy(d)
    unwindowed["workload"]["model"] = MISTRAL_SHAPE
    built = build_workload(parse_scenario(d))
    assert built.compute_by_kind_s == build_workload(parse_scenario(unwindowed)).compute_by_kind_s


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("sliding_window", 0),
        ("sliding_window", -128),
        ("sliding_window", 1 << 40),
        ("sliding_window", float("nan")),
        ("global_every", -1),
        ("global_every", float("inf")),
        ("max_seq_len", 0),
        ("max_seq_len", 1 << 40),
        ("norm", "batchnorm"),
        ("positions", "alibi"),
        ("tied_embeddings", "sometimes"),
    ],
)
def test_a_bad_value_of_a_new_model_field_exits_2_naming_it(field, value):
    d = copy.deepcopy(LLM)
    d["workload"]["model"] = {**MISTRAL_SHAPE, "sliding_window": 4096, field: value}
    with pytest.raises(InputError) as e:
        parse_scenario(d)
    assert any(p.path == f"workload.model.{field}" for p in e.value.problems), e.value.problems


@pytest.mark.parametrize("value", ["sometimes", 0, float("nan")])
def test_a_bad_backward_prefetch_exits_2_naming_it(value):
    d = copy.deepcopy(LLM)
    d["workload"]["parallelism"].update(zero=3, backward_prefetch=value)
    with pytest.raises(InputError) as e:
        parse_scenario(d)
    assert any(p.path == "workload.parallelism.backward_prefetch" for p in e.value.problems), e.value.problems
