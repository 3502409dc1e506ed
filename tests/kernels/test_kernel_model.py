"""The kernel model (aifabric.kernels): GEMMs from their shapes, memory-bound kernels from their bytes, fused
attention, a kernel sequence's time, and the kernels of a decoder block against the model's FLOP counts."""

from __future__ import annotations

import functools

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from aifabric.catalog import GPUS
from aifabric.kernels.model import FLASH_BLOCK_ROWS, Kernel, KernelModel, KernelSeq
from aifabric.kernels.small import network_kernels
from aifabric.kernels.transformer import TransformerKernels, optimizer_kernels
from aifabric.models.feedforward import FeedForward
from aifabric.models.transformer import MoE, Transformer

PRECISIONS = ("bf16", "fp16", "fp8", "tf32", "fp32")
GPU_PRECISIONS = [(name, p) for name, spec in GPUS.items() for p in PRECISIONS if p in spec.peak_tflops]


@functools.cache
def km(name: str, precision: str = "bf16") -> KernelModel:
    return KernelModel(GPUS[name], precision)


def rate(model: KernelModel, m: int, n: int, k: int, batch: int = 1) -> float:
    return 2.0 * m * n * k * batch / model.gemm_time_s(m, n, k, batch)


# M, N, K from 1 to 65536: small values (thin matrices, split-K) as often as large ones
DIM = st.one_of(st.integers(1, 600), st.integers(1, 65536))
BATCH = st.one_of(st.just(1), st.integers(1, 64))
ANY_GPU = st.sampled_from(GPU_PRECISIONS)


# ---- GEMM: bounded by the hardware ----------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(ANY_GPU, DIM, DIM, DIM, BATCH)
def test_gemm_never_beats_the_dense_peak(gp, m, n, k, batch):
    # the datasheet's dense tensor peak is an upper bound on any matmul (NVIDIA/AMD datasheets)
    model = km(*gp)
    assert rate(model, m, n, k, batch) <= GPUS[gp[0]].peak_flops(gp[1]) * (1 + 1e-9)


@settings(max_examples=400, deadline=None)
@given(ANY_GPU, DIM, DIM, DIM, BATCH)
@example(("H100", "bf16"), 4096, 4224, 8192, 1)
def test_gemm_never_beats_the_measured_maximum(gp, m, n, k, batch):
    # MAMF (Bekman, ML Engineering: the maximum over a brute-force shape search) is, by its definition, the
    # fastest any shape ran; the module docstring of kernels/gemm.py promises the same of the model
    model = km(*gp)
    assert rate(model, m, n, k, batch) <= GPUS[gp[0]].matmul_flops(gp[1]) * (1 + 1e-9)


@pytest.mark.parametrize("name,precision", GPU_PRECISIONS)
def test_gemm_on_the_measured_shape_gives_the_measured_rate(name, precision):
    # the model is anchored to the measurement (sustained under full load where there is one, else the
    # achievable maximum): on its shape, exactly the measured throughput
    flops, (m, n, k) = GPUS[name].gemm_anchor(precision)
    assert rate(km(name, precision), m, n, k) == pytest.approx(flops, rel=1e-6)


@pytest.mark.parametrize("name", [n for n, g in GPUS.items() if g.matmul_sustained])
def test_a_sustained_rate_is_below_the_burst_maximum_and_anchors_the_model(name):
    # a matmul held at the power cap runs at a lower clock than a burst (ml-engineering's MSMF vs MAMF), so
    # where the catalog holds both, the sustained one is the lower, and it is what the model reaches
    gpu = GPUS[name]
    for precision, (tflops, _) in gpu.matmul_sustained.items():
        assert tflops < gpu.matmul_tflops[precision], (name, precision)
        assert gpu.gemm_anchor(precision)[0] == tflops * 1e12


# ---- GEMM: monotone in the problem size ------------------------------------------------------------


def _grow(dims, axis, delta):
    out = list(dims)
    out[axis] += delta
    return out


@settings(max_examples=400, deadline=None)
@given(ANY_GPU, DIM, DIM, DIM, BATCH, st.sampled_from([0, 1, 2]), st.integers(1, 300))
@example(("A100", "bf16"), 251, 39, 8225, 1, 0, 17)
@example(("A100", "bf16"), 39, 251, 8225, 1, 1, 17)
@example(("A100", "bf16"), 64, 64, 767, 1, 2, 1)
def test_gemm_time_never_falls_as_a_dimension_grows(gp, m, n, k, batch, axis, delta):
    # more work in any dimension never takes less time: the library could always run the larger problem's
    # kernel on the smaller one padded (tile quantization makes it a staircase, flat steps allowed)
    model = km(*gp)
    small = model.gemm_time_s(m, n, k, batch)
    large = model.gemm_time_s(*_grow((m, n, k), axis, delta), batch)
    assert large >= small * (1 - 1e-12)


# ---- memory-bound kernels --------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(ANY_GPU, st.floats(0, 1e12), st.floats(0, 1e12), st.floats(0.001, 1000))
def test_memory_kernel_time_is_linear_in_bytes(gp, a, b, c):
    # a memory-bound kernel streams its bytes at the achievable HBM bandwidth: time = bytes / bandwidth
    model = km(*gp)
    spec = GPUS[gp[0]]
    bw = spec.hbm_bandwidth_gBps * 1e9 * spec.hbm_efficiency  # BabelStream Triad fraction of the datasheet
    assert model.memory("x", a).time_s == pytest.approx(a / bw, rel=1e-12, abs=1e-300)
    assert model.memory("x", a + b).time_s == pytest.approx(
        model.memory("x", a).time_s + model.memory("x", b).time_s, rel=1e-12, abs=1e-300
    )
    assert model.memory("x", c * a).time_s == pytest.approx(c * model.memory("x", a).time_s, rel=1e-12, abs=1e-300)
    assert model.memory("x", a).flops == 0 and model.memory("x", a).kind == "memory"


def test_elementwise_bytes_are_reads_plus_writes_of_16_bit_activations():
    # an element-wise kernel reads `reads` and writes `writes` tensors of 2-byte activations (fp8 runs keep
    # activations in 16-bit, as Transformer Engine)
    for precision in ("bf16", "fp8"):
        k = km("H100", precision).elementwise("x", 1000, 2, 1, extra_bytes=7)
        assert k.bytes == 1000 * 3 * 2 + 7
    assert km("H100", "fp32").elementwise("x", 1000, 2, 1).bytes == 1000 * 3 * 4


# ---- fused attention ---------------------------------------------------------------------------------

ATT_GPU = st.sampled_from([(n, p) for n, p in GPU_PRECISIONS if p in ("bf16", "fp16", "fp8")])


@settings(max_examples=200, deadline=None)
@given(
    ATT_GPU,
    st.integers(1, 8),
    st.sampled_from([1, 2, 4, 8, 16, 32, 64]),
    st.integers(1, 32768),
    st.sampled_from([64, 128, 256]),
    st.booleans(),
)
def test_flash_attention_flops_and_rate(gp, batch, heads, s, d, causal):
    model = km(*gp)
    fwd = model.flash_attention("f", batch, heads, heads, s, s, d, causal, False)
    bwd = model.flash_attention("b", batch, heads, heads, s, s, d, causal, True)
    # forward: Q·K^T and P·V, 2 x 2·b·a·s²·d over the blocks computed (Dao 2023)
    n = -(-s // FLASH_BLOCK_ROWS)
    visible = (n + 1) / (2 * n) if causal else 1.0
    assert fwd.flops == pytest.approx(4.0 * batch * heads * s * s * d * visible, rel=1e-12)
    # backward: 5 products, counted as 2.5 x the forward (Dao 2023)
    assert bwd.flops == pytest.approx(2.5 * fwd.flops, rel=1e-12)
    # never faster than the GPU's default kernel measured at that length, mask or not (attention_rates.py)
    spec = GPUS[gp[0]]
    assert fwd.flops / fwd.time_s <= spec.attention_flops(gp[1], False, "flash", s, causal, d) * (1 + 1e-9)
    assert bwd.flops / bwd.time_s <= spec.attention_flops(gp[1], True, "flash", s, causal, d) * (1 + 1e-9)


@settings(max_examples=100, deadline=None)
@given(
    ATT_GPU,
    st.integers(1, 4),
    st.sampled_from([8, 16, 32, 64]),
    st.integers(8192, 65536),
    st.sampled_from([64, 128]),
    st.booleans(),
)
def test_causal_attention_costs_about_half_for_long_sequences(gp, batch, heads, s, d, backward):
    # a causal mask skips the blocks above the diagonal: (n + 1) / 2n of the square for n blocks per side,
    # half in the limit, but the kernel runs those blocks at its measured causal rate, lower than without
    # the mask (FlashAttention-3 paper, Fig. 5 c/d); long sequences are compute bound, so the time follows
    # the FLOPs over the rate, and the mask never makes the kernel slower than the full square
    model = km(*gp)
    full = model.flash_attention("a", batch, heads, heads, s, s, d, False, backward).time_s
    causal = model.flash_attention("a", batch, heads, heads, s, s, d, True, backward).time_s
    n = -(-s // FLASH_BLOCK_ROWS)
    spec = GPUS[gp[0]]
    slower = spec.attention_flops(gp[1], backward, "flash", s, False, d) / spec.attention_flops(
        gp[1], backward, "flash", s, True, d
    )
    assert slower >= 1.0
    assert causal / full == pytest.approx((n + 1) / (2 * n) * slower, rel=1e-9)
    assert 0.5 <= causal / full < 1.0


# ---- kernel sequences and the optimizer ------------------------------------------------------------

KERNEL = st.builds(
    lambda kind, t: Kernel(kind, kind, 0.0, 0.0, t),
    st.sampled_from(["gemm", "attention", "memory", "optimizer"]),
    st.floats(0, 1e-3),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(KERNEL, max_size=20), st.floats(0, 1e-5), st.floats(0, 2e-5))
def test_kernel_seq_time_is_gpu_time_or_launches_whichever_is_longer(kernels, gap_s, launch_s):
    # the host runs ahead of the GPU: an op takes its kernels' GPU time plus a gap between kernels, or the
    # host's time to launch them all, whichever is longer
    seq = KernelSeq(tuple(kernels), gap_s, launch_s)
    gpu = sum(k.time_s for k in kernels) + gap_s * len(kernels)
    assert seq.time_s == pytest.approx(max(gpu, launch_s * len(kernels)), rel=1e-12, abs=1e-18)
    parts = dict(seq.by_kind())
    assert sum(parts.values()) == pytest.approx(seq.time_s, rel=1e-9, abs=1e-15)
    for kind in ("gemm", "attention", "memory", "optimizer"):
        assert parts.get(kind, 0.0) == pytest.approx(sum(k.time_s for k in kernels if k.kind == kind), abs=1e-18)
    # what gaps and launches add beyond the kernels is reported as "launch"
    assert parts.get("launch", 0.0) == pytest.approx(seq.time_s - sum(k.time_s for k in kernels), abs=1e-15)


@settings(max_examples=100, deadline=None)
@given(ANY_GPU, st.floats(1, 1e11), st.floats(1, 1e11))
def test_optimizer_step_bytes(gp, shard, local):
    # optimizer_kernels' docstring: mixed-precision Adam moves 38 B per parameter it updates (fp32 master,
    # gradient, momentum, variance read; weight, momentum, variance written; 16-bit copy; gradient norm)
    # and zeroes a 4-byte gradient per parameter it holds; ~12 FLOP per updated parameter
    model = km(*gp)
    seq = optimizer_kernels(model, shard, local)
    assert sum(k.bytes for k in seq.kernels) == pytest.approx(38 * shard + 4 * local, rel=1e-12)
    assert seq.flops == pytest.approx(12 * shard, rel=1e-12)
    assert all(k.kind == "optimizer" for k in seq.kernels)
    assert seq.gpu_s == pytest.approx((38 * shard + 4 * local) / model.hbm_bytes_per_s + 2 * model.gap_s, rel=1e-12)


@settings(max_examples=50, deadline=None)
@given(ANY_GPU, st.floats(1, 1e11), st.floats(1, 1e11))
def test_fp16_loss_scaling_adds_one_unscale_pass(gp, shard, local):
    # fp16 (not bf16) training unscales and inf-checks every main gradient before Adam (Megatron-LM's
    # _unscale_main_grads_and_check_for_nan: read and write 4 B each), one more kernel
    model = km(*gp)
    plain, scaled = optimizer_kernels(model, shard, local), optimizer_kernels(model, shard, local, loss_scaling=True)
    extra = [k for k in scaled.kernels if "unscale" in k.name]
    assert len(extra) == 1 and extra[0].bytes == pytest.approx(8 * shard, rel=1e-12)
    assert sum(k.bytes for k in scaled.kernels) == pytest.approx(46 * shard + 4 * local, rel=1e-12)
    assert len(scaled.kernels) == len(plain.kernels) + 1
    assert scaled.time_s > plain.time_s


# ---- the kernels of a decoder block ----------------------------------------------------------------


def gemm_flops(seq: KernelSeq) -> float:
    return sum(k.flops for k in seq.kernels if k.kind == "gemm")


@st.composite
def blocks(draw):
    """A decoder block and a plan whose widths divide evenly over the tensor-parallel ranks."""
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    d = draw(st.sampled_from([32, 64, 128]))
    heads = tp * draw(st.integers(1, 6))
    kv_heads = draw(st.sampled_from([heads, tp]))  # multi-head, or grouped-query with one kv head per rank
    # heads of d on a hidden of heads x d, or (Qwen3) on a narrower or wider hidden: Q is then heads x d wide
    hidden = heads * d * draw(st.sampled_from([1, 1, 2])) // draw(st.sampled_from([1, 1, 2]))
    kv_channels = None if hidden == heads * d else d
    ffn = tp * draw(st.integers(1, 512)) * 8
    gated = draw(st.booleans())
    model = Transformer(
        "t",
        2,
        hidden,
        heads,
        ffn,
        tp * draw(st.integers(1, 2000)),
        kv_heads=kv_heads,
        kv_channels=kv_channels,
        qk_norm=kv_channels is not None and gated,
        gated_mlp=gated,
        learned_positions=not gated,
        max_seq_len=8192,
    )
    return model, tp, draw(st.integers(1, 4)), draw(st.sampled_from([128, 512, 1000, 2048, 4096]))


def tk(model, tp, b, s, attention="flash", sp=False, name="H100"):
    return TransformerKernels(
        km(name), model, tp=tp, cp=1, micro_batch=b, seq_len=s, sequence_parallel=sp, attention=attention
    )


@settings(max_examples=60, deadline=None)
@given(blocks())
def test_block_gemm_flops_match_the_model(block):
    # the GEMMs of the attention and MLP parts are the model's per-token matmul FLOPs (models/transformer.py)
    # for the micro-batch's b·s tokens, split over tp (Megatron's column/row split); backward computes each
    # product twice (input and weight gradients, Narayanan et al. 2021)
    model, tp, b, s = block
    k = tk(model, tp, b, s)
    tokens = b * s
    attn = model.attention_matmul_flops_per_token() * tokens / tp
    mlp = model.mlp_flops_per_token() * tokens / tp
    assert gemm_flops(k.op("fwd/attn")) == pytest.approx(attn, rel=1e-12)
    assert gemm_flops(k.op("fwd/mlp")) == pytest.approx(mlp, rel=1e-12)
    for part in ("attn", "mlp", "logits"):
        assert gemm_flops(k.op(f"bwd/{part}")) == pytest.approx(2 * gemm_flops(k.op(f"fwd/{part}")), rel=1e-12)
    assert gemm_flops(k.op("fwd/logits")) == pytest.approx(model.logits_flops_per_token() * tokens / tp, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(blocks())
def test_unfused_attention_has_the_two_score_gemms(block):
    # Megatron-LM without FlashAttention: Q·K^T (b·a batched s x d by d x s) and P·V (s x s by s x d), each
    # 2·b·a·s²·d FLOPs, a/tp heads per rank; the core is then the model's 4·s·h per token
    model, tp, b, s = block
    k = tk(model, tp, b, s, attention="unfused")
    by_name = {kern.name: kern for kern in k.op("fwd/attn").kernels}
    core = 2.0 * b * (model.heads // tp) * s * s * model.head_dim
    assert by_name["Q·K^T"].flops == pytest.approx(core, rel=1e-12)
    assert by_name["P·V"].flops == pytest.approx(core, rel=1e-12)
    whole = (model.attention_matmul_flops_per_token() + model.attention_core_flops_per_token(s)) * b * s / tp
    assert gemm_flops(k.op("fwd/attn")) == pytest.approx(whole, rel=1e-12)
    assert gemm_flops(k.op("bwd/attn")) == pytest.approx(2 * whole, rel=1e-12)
    # selective recomputation redoes exactly the core's forward (Korthikanti et al. 2022)
    assert gemm_flops(k.op("recompute/attn-core")) == pytest.approx(2 * core, rel=1e-12)


def _moe_model() -> Transformer:
    return Transformer(
        "moe",
        2,
        1024,
        16,
        4096,
        32000,
        kv_heads=4,
        gated_mlp=True,
        learned_positions=False,
        moe=MoE(experts=8, top_k=2, expert_ffn_hidden=2048, shared_experts=1),
        max_seq_len=4096,
    )


def test_moe_gemm_flops_match_the_model():
    # routed experts: each token through top_k experts (and the shared one), plus the router (h x experts)
    model = _moe_model()
    k = tk(model, 1, 2, 2048)
    assert gemm_flops(k.op("fwd/moe")) == pytest.approx(model.mlp_flops_per_token(True) * 2 * 2048, rel=1e-12)
    assert gemm_flops(k.op("bwd/moe")) == pytest.approx(2 * gemm_flops(k.op("fwd/moe")), rel=1e-12)


def test_fp8_moe_casts_the_experts_not_the_router():
    # the experts are Transformer Engine layers (FP8, each operand cast and transposed); Megatron-LM's router is
    # not: its GEMMs are the 16-bit ones
    model = _moe_model()
    fp8, bf16 = _fp8_pair(model, 1, 2, 2048)
    for pass_ in ("fwd", "bwd"):
        got = fp8.op(f"{pass_}/moe").kernels
        assert [k for k in got if k.name.startswith("router")] == [
            k for k in bf16.op(f"{pass_}/moe").kernels if k.name.startswith("router")
        ]
        assert any("expert" in k.name and "FP8" in k.name for k in got)


def _token_wise(name: str) -> bool:
    """Kernels over the block's b·s x h activations (norms, bias-dropout-adds, residual adds); not the
    attention dropout over the s x s scores, nor Qwen3's norm of each head's Q and K: split by heads instead."""
    by_heads = "attention dropout" in name or "Q/K norm" in name
    return ("norm" in name or "dropout" in name or "residual" in name) and not by_heads


@settings(max_examples=40, deadline=None)
@given(blocks(), st.sampled_from(["flash", "unfused"]))
def test_sequence_parallelism_divides_norms_and_dropouts_by_tp(block, attention):
    # Korthikanti et al. 2022: with sequence parallelism the norms and dropouts run on s/t of the sequence;
    # the GEMMs and the attention core are unchanged (the activations are all-gathered before them)
    model, tp, b, s = block
    assume(tp > 1)
    moe = Transformer(
        "m",
        2,
        model.hidden,
        model.heads,
        model.ffn_hidden,
        model.vocab,
        kv_heads=model.kv_heads,
        gated_mlp=model.gated_mlp,
        learned_positions=model.learned_positions,
        max_seq_len=8192,
        moe=MoE(experts=4, top_k=2, expert_ffn_hidden=model.ffn_hidden),
    )
    for m in (model, moe):
        plain, sp = tk(m, tp, b, s, attention), tk(m, tp, b, s, attention, sp=True)
        for op in ("fwd/attn", "bwd/attn", "fwd/mlp", "bwd/mlp", "fwd/moe", "bwd/moe", "fwd/logits", "bwd/logits"):
            if op.endswith("moe") and m is model:
                continue
            pairs = list(zip(plain.op(op).kernels, sp.op(op).kernels, strict=True))
            for a, c in pairs:
                assert a.name == c.name
                if _token_wise(a.name):
                    assert c.bytes == pytest.approx(a.bytes / tp, rel=1e-12), (op, a.name)
                else:
                    assert c.bytes == a.bytes and c.flops == a.flops, (op, a.name)
            assert any(_token_wise(a.name) for a, _ in pairs) or op.endswith("mlp")


def test_sequence_parallel_embedding_dropout_is_divided_by_tp():
    # the dropout after the embedding runs on the rank's s/t tokens, its mask included (Korthikanti 2022)
    model = Transformer("t", 2, 1024, 16, 4096, 8000, max_seq_len=4096)
    plain, sp = tk(model, 4, 1, 2048), tk(model, 4, 1, 2048, sp=True)
    a = next(k for k in plain.op("fwd/embedding").kernels if "dropout" in k.name)
    c = next(k for k in sp.op("fwd/embedding").kernels if "dropout" in k.name)
    assert c.bytes == pytest.approx(a.bytes / 4, rel=1e-12)


def test_a_dense_block_has_two_norms_and_two_bias_dropout_adds():
    # Megatron's TransformerLayer: input norm, attention, bias-dropout-add, pre-MLP norm, MLP,
    # bias-dropout-add (the module docstring of kernels/transformer.py says the same)
    model = Transformer("t", 2, 1024, 16, 4096, 8000, max_seq_len=4096)
    k = tk(model, 1, 1, 1024)
    names = [kern.name for op in ("fwd/attn", "fwd/mlp") for kern in k.op(op).kernels]
    assert sum("norm" in n for n in names) == 2
    assert sum("bias-dropout-add" in n for n in names) == 2


def _fp8_pair(model, tp, b, s, sp=False):
    def build(precision):
        return TransformerKernels(
            km("H100", precision), model, tp=tp, cp=1, micro_batch=b, seq_len=s, sequence_parallel=sp
        )

    return build("fp8"), build("bf16")


@settings(max_examples=40, deadline=None)
@given(blocks(), st.booleans())
def test_fp8_blocks_add_transformer_engines_casts_and_keep_the_rest_16_bit(block, sp):
    # Transformer Engine on Hopper: each FP8 GEMM operand is written as is and transposed. Forward, a linear's
    # input is cast (read 2, write 1 + 1 bytes per element), except behind a norm (LayerNormLinear: the norm
    # writes FP8, only the transpose is added: 1 + 1); backward, the output gradient is cast the same way. The
    # attention core and the LM head stay 16-bit: the same kernels as a bf16 run
    model, tp, b, s = block
    fp8, bf16 = _fp8_pair(model, tp, b, s, sp)
    T, h = b * s, model.hidden
    qkv = (model.q_dim + 2 * model.kv_dim) / tp
    up = (2 if model.gated_mlp else 1) * model.ffn_hidden / tp
    casts_fwd = {
        "QKV projection FP8 transpose": T * h * 2,
        "attention output projection FP8 cast-transpose": T * model.q_dim / tp * 4,
        "MLP up projection FP8 transpose": T * h * 2,
        "MLP down projection FP8 cast-transpose": T * model.ffn_hidden / tp * 4,
    }
    casts_bwd = {
        "QKV projection gradient FP8 cast-transpose": T * qkv * 4,
        "attention output projection gradient FP8 cast-transpose": T * h * 4,
        "MLP up projection gradient FP8 cast-transpose": T * up * 4,
        "MLP down projection gradient FP8 cast-transpose": T * h * 4,
    }
    for pass_, casts in (("fwd", casts_fwd), ("bwd", casts_bwd)):
        got = {
            k.name: k.bytes for part in ("attn", "mlp") for k in fp8.op(f"{pass_}/{part}").kernels if "FP8" in k.name
        }
        assert got == pytest.approx(casts, rel=1e-12)
        for part in ("attn", "mlp"):  # everything else as in 16-bit, but the GEMMs' FP8 inputs and the norms
            # of the LayerNormLinears, which write FP8 (1 byte per element of their output instead of 2)
            rest = [k for k in fp8.op(f"{pass_}/{part}").kernels if "FP8" not in k.name and k.kind != "gemm"]
            same = [k for k in bf16.op(f"{pass_}/{part}").kernels if k.kind != "gemm"]
            assert [k.name for k in rest] == [k.name for k in same]
            for a, b16 in zip(rest, same):
                fp8_norm = pass_ == "fwd" and a.name in ("input norm", "post-attention norm")
                written = T / tp * h if (fp8_norm and sp and tp > 1) else T * h
                assert a.bytes == pytest.approx(b16.bytes - written if fp8_norm else b16.bytes, rel=1e-12)
        assert fp8.op(f"{pass_}/logits").kernels == bf16.op(f"{pass_}/logits").kernels  # the LM head in 16-bit
    for part in ("attn", "mlp"):
        assert gemm_flops(fp8.op(f"fwd/{part}")) == pytest.approx(gemm_flops(bf16.op(f"fwd/{part}")), rel=1e-12)
        fp8_gemm = sum(k.time_s for k in fp8.op(f"fwd/{part}").kernels if k.kind == "gemm")
        bf16_gemm = sum(k.time_s for k in bf16.op(f"fwd/{part}").kernels if k.kind == "gemm")
        assert fp8_gemm < bf16_gemm


def test_unfused_attention_gemms_stay_16_bit_in_an_fp8_run():
    model = Transformer("t", 2, 1024, 16, 4096, 8000, max_seq_len=4096)
    fp8 = TransformerKernels(
        km("H100", "fp8"), model, tp=1, cp=1, micro_batch=1, seq_len=2048, sequence_parallel=False, attention="unfused"
    )
    bf16 = TransformerKernels(
        km("H100", "bf16"), model, tp=1, cp=1, micro_batch=1, seq_len=2048, sequence_parallel=False, attention="unfused"
    )
    assert fp8._core(False) == bf16._core(False) and fp8._core(True) == bf16._core(True)


# ---- the book's small networks (kernels/small.py) --------------------------------------------------


def test_feed_forward_gemm_flops():
    # per layer a samples x inputs x outputs GEMM: 2·a·b·samples forward; backward the weight gradient of
    # every layer and the input gradient of all but the first (the data needs none)
    ff = FeedForward((784, 128, 64, 10))
    samples = 256
    fwd, bwd = network_kernels(km("A100"), ff, samples)
    per_layer = [2.0 * a * b * samples for a, b in zip(ff.layer_widths[:-1], ff.layer_widths[1:])]
    assert gemm_flops(fwd) == pytest.approx(sum(per_layer), rel=1e-12)
    assert gemm_flops(bwd) == pytest.approx(2 * sum(per_layer) - per_layer[0], rel=1e-12)
    assert gemm_flops(fwd) == pytest.approx(ff.forward_flops(samples) - 2.0 * ff.biases * samples, rel=1e-12)
