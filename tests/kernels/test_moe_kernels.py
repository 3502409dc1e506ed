"""An MoE layer's experts as Transformer Engine's GroupedLinear runs them (kernels/transformer.py `_moe`): a GEMM per
local expert, an FP8 cast per expert but under the delayed recipe (one fused multi-tensor cast), one activation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.catalog import gpu
from aifabric.kernels.model import KernelModel
from aifabric.kernels.transformer import TransformerKernels
from aifabric.models.zoo import MODELS

QWEN3 = MODELS["qwen3-30b-a3b"]  # 128 experts of width 768, top 8


def moe_op(ep: int, precision: str, recipe: str, backward: bool, name: str = "B200"):
    km = KernelModel(gpu(name), precision)
    tk = TransformerKernels(
        km, QWEN3, tp=1, cp=1, micro_batch=1, seq_len=4096, sequence_parallel=False, ep=ep, fp8_recipe=recipe
    )
    return tk.op(f"{'bwd' if backward else 'fwd'}/moe")


@settings(max_examples=20, deadline=None)
@given(st.sampled_from([1, 2, 8, 32]), st.booleans(), st.sampled_from(["bf16", "delayed", "current", "mxfp8"]))
def test_a_gemm_per_local_expert_and_the_same_work(ep, backward, recipe):
    precision = "bf16" if recipe == "bf16" else "fp8"
    op = moe_op(ep, precision, "delayed" if recipe == "bf16" else recipe, backward)
    local = 128 // ep
    gemms = [k for k in op.kernels if k.kind == "gemm" and k.name.startswith("expert")]
    # forward: the up (gate and up as one GEMM) and down projections; backward: dgrad and wgrad of each
    assert len(gemms) == (4 if backward else 2) * local
    tokens = 4096 * 8 / local  # each local expert's even share of the routed tokens
    up = [k for k in gemms if k.name.startswith("expert up projection") and "grad" not in k.name]
    if not backward:
        assert len(up) == local and all(k.flops == pytest.approx(2 * tokens * 2048 * 2 * 768) for k in up)
    casts = [k for k in op.kernels if "FP8" in k.name and k.name.startswith("expert")]
    if precision == "fp8":
        fused = recipe == "delayed"
        kernels_per_cast = {"delayed": 1, "current": 3, "mxfp8": 1}[recipe]  # current: amax, scale, cast
        assert len(casts) == 2 * kernels_per_cast * (1 if fused else local)
    else:
        assert casts == []
    acts = [k for k in op.kernels if "SwiGLU" in k.name]
    assert len(acts) == 1 and acts[0].name.endswith(f"x{local}")


def test_per_expert_kernels_add_only_their_gaps_and_launches():
    # the same GPU work split into more kernels: the kernels' own time is unchanged, the gaps grow with their count
    op = moe_op(8, "fp8", "mxfp8", False)
    kernel_s = sum(k.time_s for k in op.kernels)
    assert op.gpu_s == pytest.approx(kernel_s + op.gap_s * len(op.kernels))
    assert len(op.kernels) > 2 * 16  # 16 local experts, two GEMMs and two casts each


@pytest.mark.parametrize("ep", [1, 8, 128])
def test_the_dispatchers_sort_by_local_expert_and_back(ep):
    # Megatron-Core's all-to-all dispatcher reorders the received tokens by local expert (sort_chunks_by_idxs) and
    # back, with their routing probabilities in the forward: only with expert parallelism and several local experts
    routed = 4096 * 8  # one sequence of 4,096 tokens, top 8
    for backward in (False, True):
        op = moe_op(ep, "bf16", "delayed", backward)
        names = [k.name for k in op.kernels]
        sorts = [k for k in op.kernels if "sorted" in k.name]
        if ep == 8:
            tokens = [k for k in sorts if k.name.startswith("tokens")]
            assert [k.name for k in tokens] == (
                ["tokens unsorted", "tokens sorted by local expert"]
                if backward
                else [
                    "tokens sorted by local expert",
                    "tokens unsorted",
                ]
            )
            assert all(k.bytes == pytest.approx(routed * 2048 * 2 * 2) for k in tokens)  # read and write, 16-bit
            assert len(sorts) == (2 if backward else 4)  # the probabilities' in the forward only
        else:
            assert sorts == []
        # the fused permutation's row-id map: three kernels, forward only
        assert sum("row-id map" in n for n in names) == (0 if backward else 3)
