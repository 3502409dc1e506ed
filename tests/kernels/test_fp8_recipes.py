"""Transformer Engine's FP8 scaling recipes, as the kernel model costs their casts (kernels/transformer.py): per
element of a cast tensor, in bytes of HBM traffic, from Transformer Engine's quantizer.cpp and normalization
extensions (what each recipe runs), the GPU deciding whether a transposed FP8 copy is written."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.catalog import gpu
from aifabric.kernels.model import KernelModel
from aifabric.kernels.transformer import TransformerKernels
from aifabric.models.transformer import Transformer

MODEL = Transformer("t", 2, 1024, 16, 4096, 8000, max_seq_len=4096, kv_heads=4, gated_mlp=True)


def tk(gpu_name: str, recipe: str, precision: str = "fp8", tp: int = 1, sp: bool = False, s: int = 1024):
    km = KernelModel(gpu(gpu_name), precision)
    return TransformerKernels(km, MODEL, tp=tp, cp=1, micro_batch=1, seq_len=s, sequence_parallel=sp, fp8_recipe=recipe)


def cast_bytes(k: TransformerKernels, op: str) -> dict[str, float]:
    return {x.name: x.bytes for x in k.op(op).kernels if "FP8" in x.name}


def norm_bytes(k: TransformerKernels, op: str) -> float:
    return sum(x.bytes for x in k.op(op).kernels if x.name in ("input norm", "post-attention norm"))


def test_current_scaling_adds_an_amax_pass_and_the_norm_writes_16_bit_on_hopper():
    delayed, current = tk("H100", "delayed"), tk("H100", "current")
    T, h, q = 1024, MODEL.hidden, MODEL.q_dim
    got = cast_bytes(current, "fwd/attn")
    # behind the input norm: the norm computed the amax (FUSED_NORM_AMAX_FP8), so a scale and a full cast
    assert got["QKV projection FP8 scale"] == 0.0
    assert got["QKV projection FP8 cast-transpose"] == pytest.approx(T * h * 4)
    assert "QKV projection FP8 amax" not in got
    # the attention output: amax (read 2), scale, cast-transpose (read 2, write 1 + 1)
    assert got["attention output projection FP8 amax"] == pytest.approx(T * q * 2)
    assert got["attention output projection FP8 cast-transpose"] == pytest.approx(T * q * 4)
    # delayed: the norm writes FP8, only the transpose is added
    assert cast_bytes(delayed, "fwd/attn")["QKV projection FP8 transpose"] == pytest.approx(T * h * 2)
    assert norm_bytes(current, "fwd/attn") - norm_bytes(delayed, "fwd/attn") == pytest.approx(T * h)
    # backward: every output gradient gets an amax pass more
    bwd_d, bwd_c = cast_bytes(delayed, "bwd/mlp"), cast_bytes(current, "bwd/mlp")
    for name, nbytes in bwd_d.items():
        layer = name.removesuffix(" FP8 cast-transpose")
        assert bwd_c[name] == nbytes
        assert bwd_c[f"{layer} FP8 amax"] == pytest.approx(nbytes / 2)


def test_blackwell_keeps_no_transposed_copy_of_per_tensor_fp8():
    # nvte_is_non_tn_fp8_gemm_supported (sm 10.x): a cast writes one FP8 byte per element; behind a norm under
    # the delayed recipe there is no cast kernel at all (the norm wrote FP8)
    T, q = 1024, MODEL.q_dim
    delayed = cast_bytes(tk("B200", "delayed"), "fwd/attn")
    assert delayed == {"attention output projection FP8 cast": pytest.approx(T * q * 3)}
    current = cast_bytes(tk("B200", "current"), "fwd/attn")
    assert current["QKV projection FP8 cast"] == pytest.approx(T * MODEL.hidden * 3)
    assert current["attention output projection FP8 amax"] == pytest.approx(T * q * 2)


def test_mxfp8_writes_both_layouts_with_a_scale_per_32_and_needs_blackwell():
    T, q = 1024, MODEL.q_dim
    got = cast_bytes(tk("B200", "mxfp8"), "fwd/attn")
    assert got["attention output projection MXFP8 cast"] == pytest.approx(T * q * (2 + 2 * (1 + 1 / 32)))
    assert "attention output projection FP8 amax" not in got
    with pytest.raises(ValueError, match="mxfp8"):
        tk("H100", "mxfp8")
    with pytest.raises(ValueError, match="fp8_recipe"):
        tk("H100", "hybrid")


def test_a_16_bit_run_ignores_the_recipe():
    a, b = tk("H100", "delayed", "bf16"), tk("H100", "current", "bf16")
    for op in ("fwd/attn", "fwd/mlp", "bwd/attn", "bwd/mlp"):
        assert a.op(op).kernels == b.op(op).kernels


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(["H100", "B200", "GB200"]),
    st.sampled_from([1, 2, 4]),
    st.booleans(),
    st.sampled_from([256, 1000, 4096]),
)
def test_current_scaling_never_costs_less_than_delayed(name, tp, sp, s):
    # the same GEMMs, one more pass over every tensor not behind a norm, and two more kernels per cast
    d, c = tk(name, "delayed", tp=tp, sp=sp, s=s), tk(name, "current", tp=tp, sp=sp, s=s)
    for op in ("fwd/attn", "fwd/mlp", "bwd/attn", "bwd/mlp"):
        gd = [x for x in d.op(op).kernels if x.kind == "gemm"]
        gc = [x for x in c.op(op).kernels if x.kind == "gemm"]
        assert gd == gc
        assert c.op(op).time_s >= d.op(op).time_s
        assert sum(x.bytes for x in c.op(op).kernels) > sum(x.bytes for x in d.op(op).kernels)
