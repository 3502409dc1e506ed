"""The kernels of a decoder block, the embedding, the LM head and the optimizer step, as Megatron-LM runs
them on one tensor-parallel rank for one micro-batch.

Notation: b micro-batch size, s = sequence / cp the rank's tokens per sequence, T = b·s, h hidden,
a heads and g key/value heads (a/t and g/t on the rank), d = h/a, f the MLP width, t tensor-parallel size,
V vocabulary. With sequence parallelism the norms, dropouts and residual adds work on T/t tokens.

Forward, attention part: norm; QKV projection (GEMM T x h -> (a + 2g)d/t); rotary embedding of Q and K
(models without learned positions); the attention core (fused FlashAttention kernel, or with `unfused`
Megatron-LM's batched GEMMs Q·K^T and P·V around a fused scale-mask-softmax and an attention dropout);
output projection (T x h/t -> h); bias-dropout-add. MLP part: norm; up (and gate) projection; bias-GeLU
or SwiGLU; down projection; bias-dropout-add. An MoE layer, as Megatron-Core's all-to-all dispatcher and Transformer
Engine's GroupedLinear run it: the router GEMM, the fused token permutation (its row-id map, then the copy), with
expert parallelism the received tokens reordered by local expert and back (sort_chunks_by_idxs), the local experts'
GEMMs one per expert (the tokens spread evenly over the experts), one activation over them, unpermutation, shared
experts.

Backward: each GEMM twice (input gradient: T x N -> K; weight gradient: K x T -> N, accumulated into
the fp32 main gradient as Megatron's gradient-accumulation fusion does), each memory-bound kernel's
backward with its own reads and writes, FlashAttention's backward kernel.

Bytes per element of the memory-bound kernels (reads + writes of activation-sized tensors, 16-bit):
norm 1 + 1 forward, 2 + 1 backward; bias-dropout-add 2 + 1 and a 1-byte mask, backward 1 + 1 and the
mask; GeLU 1 + 1, backward 2 + 1; SwiGLU 2 + 1 of the f-wide tensors, backward 3 + 2; rotary 1 + 1 of Q
and K; softmax (unfused) 1 + 1 of the scores, backward 2 + 1; the vocabulary-parallel cross-entropy over
the T x V/t logits: read 16-bit, then 4 fp32 passes (max, exp, sum, normalize), backward 1 fp32 read and
a 16-bit write.

FP8 (`precision: fp8`), as Megatron-LM runs it through Transformer Engine: the decoder blocks' linear layers
multiply in FP8 and every other kernel stays 16-bit (the attention core, the LM head and the MoE router, which
Megatron-LM builds outside Transformer Engine, and the norms and activations). A linear layer's input is cast to
FP8 before its forward GEMMs, its output's gradient before its backward ones. What a cast costs depends on the
scaling recipe (`fp8_recipe`, Transformer Engine's transformer_engine/pytorch/csrc: quantizer.cpp and the
normalization extensions) and on the GPU: Hopper's FP8 GEMMs take both inputs K-major, so each per-tensor FP8
operand is written twice, as is and transposed (1 + 1 bytes per element); Blackwell's take either layout
(`nvte_is_non_tn_fp8_gemm_supported`), so once (1 byte).

- `delayed` (the scale from earlier iterations' amax): a cast reads the 16-bit tensor and writes its FP8
  copies; behind a norm (LayerNormLinear) the norm kernel writes FP8 itself (1 byte per element instead of
  2) and only Hopper's transpose is added (read 1, write 1).
- `current` (Float8CurrentScaling, Megatron Bridge's FP8-CS): the scale from the tensor itself, so a cast is
  three kernels: its amax (a read of the 16-bit tensor), the scale, the cast (read 2, write the FP8 copies);
  behind a norm the norm writes 16-bit and computes the amax on the way (FUSED_NORM_AMAX_FP8), then the cast.
  Under sequence parallelism the amax of a gathered input is all-reduced over the tensor-parallel group
  first (workload/llm.py).
- `mxfp8` (MXFP8BlockScaling, Blackwell only): a scale per 32 elements computed in the cast, rowwise and
  columnwise copies both written (1 + 1 bytes and a 1-byte scale per 32 each); the norm writes 16-bit (its
  fused MXFP8 output is cuDNN's, off by default: NVTE_NORM_FWD_USE_CUDNN).

Not counted: the weights' casts (once per iteration, kept across micro-batches) and the delayed recipe's
amax-history update (one small kernel per iteration).
"""

from __future__ import annotations

from ..models.transformer import Transformer
from .model import Kernel, KernelModel, KernelSeq

ATTENTION_IMPLS = ("flash", "flash2", "cudnn", "flash3", "ck", "unfused")
"""`workload.attention`: a fused kernel by name (flash: the one Transformer Engine picks on the GPU; the others
as the catalog measured them, attention_rates.py), or unfused (Megatron-LM before FlashAttention)."""
FP8_RECIPES = ("delayed", "current", "mxfp8")
"""`workload.fp8_recipe`: Transformer Engine's FP8 scaling recipe (the module docstring says what each costs)."""


COLUMN_LAYERS = {"attn": "QKV projection", "mlp": "MLP up projection"}
"""A dense block part's column-parallel layer: its backward's exchanges run beside its GEMMs (workload/llm.py)."""
PIECES = {
    "fwd/attn": ("pre", "core", "post"),
    "bwd/attn": ("pre", "dgrad", "wgrad", "post", "head", "core", "tail", "rest"),
    "bwd/mlp": ("pre", "dgrad", "wgrad", "post"),
}
"""The pieces an op can be cut into (`TransformerKernels.op("bwd/attn:core")`): pre / dgrad / wgrad / post around
the column-parallel layer's backward GEMMs; the attention core, with head (before it), tail (after it, up to the
column layer's input gradient) and rest (everything after it)."""


def column_width(model: Transformer, part: str) -> float:
    """Output width of a block part's column-parallel layer, all tensor-parallel ranks together: the QKV
    projection (MLA: the whole latent chain as one GEMM of its FLOPs), or the MLP's up (and gate) projection."""
    m = model
    if part == "mlp":
        return (2 if m.gated_mlp else 1) * m.ffn_hidden
    if m.mla:
        return m.mla.params(m.hidden, m.heads) / m.hidden
    return m.q_dim + 2 * m.kv_dim


class TransformerKernels:
    """Kernel sequences of one rank's ops, for one plan (cached per op name)."""

    def __init__(
        self,
        km: KernelModel,
        model: Transformer,
        *,
        tp: int,
        cp: int,
        micro_batch: int,
        seq_len: int,
        sequence_parallel: bool,
        attention: str = "flash",
        ep: int = 1,
        fp8_recipe: str = "delayed",
        window: int | None = None,
    ):
        if attention not in ATTENTION_IMPLS:
            raise ValueError(f"attention must be one of {ATTENTION_IMPLS}")
        if window is not None and (attention == "unfused" or cp > 1):
            raise ValueError("a sliding window is timed on a fused attention kernel without context parallelism")
        self.window = window  # the blocks of these kernels attend through a sliding window of this many keys
        if fp8_recipe not in FP8_RECIPES:
            raise ValueError(f"fp8_recipe must be one of {FP8_RECIPES}")
        self.km, self.m = km, model
        self.t, self.cp, self.ep = tp, cp, ep
        self.b = micro_batch
        self.s_kv = seq_len
        self.s = seq_len // cp
        self.T = micro_batch * self.s
        self.T_norm = self.T / tp if sequence_parallel else self.T  # tokens of norms, dropouts, residuals
        self.attention = attention
        if attention != "unfused" and km.attention_table is None:
            km.gpu.attention_kernel(attention)  # a kernel the catalog has no measurement of: say so now
        self._cache: dict[str, KernelSeq] = {}
        # FP8: the kernels that stay 16-bit (the attention core's GEMMs, the LM head) time on a 16-bit model
        self.fp8 = km.precision == "fp8"
        self.km16 = (
            KernelModel(km.gpu, "bf16", software=km.software, attention_table=km.attention_table) if self.fp8 else km
        )
        self.fp8_recipe = fp8_recipe
        if self.fp8 and fp8_recipe == "mxfp8" and not km.gpu.mxfp8:
            raise ValueError(
                f"fp8_recipe: mxfp8 needs a GPU with MXFP8 tensor cores (Blackwell); {km.gpu.name} has none"
            )
        # FP8 bytes a cast writes per element: both layouts (Hopper's K-major GEMMs, or MXFP8's rowwise and
        # columnwise copies with a 1-byte scale per 32 each), or one (per-tensor FP8 on Blackwell)
        if fp8_recipe == "mxfp8":
            self.fp8_written = 2.0 * (1.0 + 1.0 / 32.0)
        else:
            self.fp8_written = 1.0 if km.gpu.fp8_any_layout else 2.0

    def op(self, name: str) -> KernelSeq:
        """fwd/attn, fwd/mlp, fwd/moe, bwd/..., recompute/attn-core, fwd/logits, bwd/logits,
        fwd/embedding, bwd/embedding; a piece of one (`PIECES`), e.g. bwd/attn:dgrad."""
        seq = self._cache.get(name)
        if seq is None and ":" in name:
            whole, piece = name.split(":")
            seq = self._cache[name] = self.km.seq(*self._pieces(whole)[piece])
        if seq is None:
            pass_, part = name.split("/", 1)
            builder = {
                "attn": self._attn,
                "mlp": self._dense_mlp,
                "moe": self._moe,
                "attn-core": self._core_only,
                "logits": self._logits,
                "embedding": self._embedding,
            }[part]
            seq = self._cache[name] = self.km.seq(*builder(pass_ == "bwd"))
        return seq

    def _pieces(self, whole: str) -> dict[str, tuple[Kernel, ...]]:
        """The kernels of fwd/attn, bwd/attn or bwd/mlp cut where exchanges run beside them (`PIECES`): the
        attention core (context parallelism's K and V), a column-parallel layer's input-gradient and
        weight-gradient GEMMs (the backward's tensor-parallel exchanges)."""
        kernels = self.op(whole).kernels
        names = [k.name for k in kernels]
        pass_, part = whole.split("/", 1)
        out: dict[str, tuple[Kernel, ...]] = {}
        if part == "attn":
            core = {k.name for k in self._core(pass_ == "bwd")}
            at = [i for i, n in enumerate(names) if n in core]
            c0, c1 = at[0], at[-1] + 1
            if pass_ == "fwd":
                return {"pre": kernels[:c0], "core": kernels[c0:c1], "post": kernels[c1:]}
            out.update(head=kernels[:c0], core=kernels[c0:c1], rest=kernels[c1:])
        layer = COLUMN_LAYERS[part]
        d, w = names.index(f"{layer} dgrad"), names.index(f"{layer} wgrad")
        if part == "attn":
            out["tail"] = kernels[c1:d]
        return {
            **out,
            "pre": kernels[:d],
            "dgrad": kernels[d : d + 1],
            "wgrad": kernels[w : w + 1],
            "post": kernels[w + 1 :],
        }

    # ---- pieces --------------------------------------------------------------------------------
    def _linear(
        self, name: str, rows: float, k: float, n: float, backward: bool, after_norm: bool = False, fp8: bool = True
    ) -> list[Kernel]:
        """A linear layer's GEMMs (rows x k -> n), with Transformer Engine's FP8 casts when the run is FP8
        (`after_norm`: its input comes out of a LayerNormLinear's norm); `fp8=False`: a 16-bit layer in an FP8
        run."""
        km = self.km if fp8 else self.km16
        casts = self.fp8 and fp8
        if not backward:
            out = [km.gemm(name, rows, n, k)]
            return (self._cast(name, rows * k, after_norm) + out) if casts else out
        out = [km.gemm(f"{name} dgrad", rows, k, n), km.gemm(f"{name} wgrad", k, n, rows, accumulate_fp32=True)]
        return (self._cast(f"{name} gradient", rows * n) + out) if casts else out

    def _cast(self, name: str, elements: float, after_norm: bool = False) -> list[Kernel]:
        """The kernels that cast a 16-bit tensor of `elements` to FP8 under the run's recipe (module docstring)."""
        km, recipe, two = self.km, self.fp8_recipe, self.km.act_bytes
        if recipe == "delayed" and after_norm:  # the norm wrote FP8 itself
            return [km.memory(f"{name} FP8 transpose", elements * 2.0)] if self.fp8_written == 2.0 else []
        out = []
        if recipe == "current":
            if not after_norm:  # behind a norm, the norm computed the amax
                out.append(km.memory(f"{name} FP8 amax", elements * two))
            out.append(km.memory(f"{name} FP8 scale", 0.0))
        if recipe == "mxfp8":
            label = f"{name} MXFP8 cast"
        else:
            label = f"{name} FP8 {'cast' if self.fp8_written == 1.0 else 'cast-transpose'}"
        out.append(km.memory(label, elements * (two + self.fp8_written)))
        return out

    def _norm(self, name: str, backward: bool, feeds_fp8: bool = False) -> Kernel:
        """`feeds_fp8`: the norm of a LayerNormLinear in an FP8 run, which writes FP8 under the delayed recipe."""
        e = self.T_norm * self.m.hidden
        fp8_out = feeds_fp8 and not backward and self.fp8 and self.fp8_recipe == "delayed"
        return self.km.norm(f"{name} backward" if backward else name, e, backward, 1.0 if fp8_out else None)

    def _dropout_add(self, name: str, backward: bool) -> Kernel:
        e = self.T_norm * self.m.hidden
        if backward:
            return self.km.elementwise(f"{name} backward", e, 1, 1, extra_bytes=e)
        return self.km.elementwise(name, e, 2, 1, extra_bytes=e)

    def _core(self, backward: bool) -> list[Kernel]:
        m, km = self.m, self.km16  # 16-bit in an FP8 run too
        heads, kv_heads = m.heads // self.t, max(1, (m.kv_heads or m.heads) // self.t)
        d = self._head_dim()
        if self.attention != "unfused":
            name = "flash attention backward" if backward else "flash attention"
            return [
                km.flash_attention(
                    name, self.b, heads, kv_heads, self.s, self.s_kv, d, True, backward, self.attention, self.window
                )
            ]
        batch = self.b * heads
        scores = float(batch) * self.s * self.s_kv
        if not backward:
            return [
                km.gemm("Q·K^T", self.s, self.s_kv, d, batch),
                km.elementwise("scale-mask-softmax", scores, 1, 1),
                km.elementwise("attention dropout", scores, 1, 1, extra_bytes=scores),
                km.gemm("P·V", self.s, d, self.s_kv, batch),
            ]
        return [
            km.gemm("P·V dgrad (dP)", self.s, self.s_kv, d, batch),
            km.gemm("P·V wgrad (dV)", self.s_kv, d, self.s, batch),
            km.elementwise("attention dropout backward", scores, 1, 1, extra_bytes=scores),
            km.elementwise("softmax backward", scores, 2, 1),
            km.gemm("Q·K^T dgrad (dQ)", self.s, d, self.s_kv, batch),
            km.gemm("Q·K^T wgrad (dK)", self.s_kv, d, self.s, batch),
        ]

    def _head_dim(self) -> int:
        m = self.m
        if m.mla:
            return m.mla.core_width(m.heads) // m.heads
        return m.head_dim

    def _qkv_width(self) -> float:
        """Output width of the rank's QKV projection (MLA: the whole latent chain as one GEMM of its FLOPs)."""
        return column_width(self.m, "attn") / self.t

    # ---- ops -----------------------------------------------------------------------------------
    def _attn(self, backward: bool) -> list[Kernel]:
        m, km, T, t = self.m, self.km, self.T, self.t
        h = m.hidden
        out_k = (m.mla.v_head_dim * m.heads if m.mla else m.q_dim) / t
        qk = T * (m.q_dim + m.kv_dim) / t  # the rank's Q and K elements
        fwd = [self._norm("input norm", False, feeds_fp8=True)]
        fwd += self._linear("QKV projection", T, h, self._qkv_width(), False, after_norm=True)
        if m.qk_norm:
            fwd.append(km.norm("Q/K norm", qk, False))
        if not m.learned_positions:
            fwd.append(km.elementwise("rotary embedding", qk, 1, 1))
        fwd += self._core(False)
        fwd += self._linear("attention output projection", T, out_k, h, False)
        fwd.append(self._dropout_add("bias-dropout-add", False))
        if not backward:
            return fwd
        bwd = [self._dropout_add("bias-dropout-add", True)]
        bwd += self._linear("attention output projection", T, out_k, h, True)
        bwd += self._core(True)
        if not m.learned_positions:
            bwd.append(km.elementwise("rotary embedding backward", qk, 1, 1))
        if m.qk_norm:
            bwd.append(km.norm("Q/K norm backward", qk, True))
        bwd += self._linear("QKV projection", T, h, self._qkv_width(), True)
        bwd.append(self._norm("input norm", True))
        bwd.append(km.elementwise("residual gradient add", self.T_norm * h, 2, 1))
        return bwd

    def _core_only(self, backward: bool) -> list[Kernel]:
        """Selective recomputation: the attention core's forward again, before its backward."""
        return self._core(False)

    def _activation(self, width: float, backward: bool) -> Kernel:
        e = self.T * width / self.t
        if self.m.gated_mlp:
            return self.km.elementwise(
                "SwiGLU backward" if backward else "SwiGLU", e, 3 if backward else 2, 2 if backward else 1
            )
        return self.km.elementwise("bias-GeLU backward" if backward else "bias-GeLU", e, 2 if backward else 1, 1)

    def _mlp(
        self, backward: bool, f: float | None = None, rows: float | None = None, label: str = "MLP"
    ) -> list[Kernel]:
        m, T = self.m, self.T
        f = m.ffn_hidden if f is None else f
        rows = T if rows is None else rows
        up = (2 if m.gated_mlp else 1) * f / self.t
        if not backward:
            return (
                self._linear(f"{label} up projection", rows, m.hidden, up, False, after_norm=label == "MLP")
                + [self._activation(f, False)]
                + self._linear(f"{label} down projection", rows, f / self.t, m.hidden, False)
            )
        return (
            self._linear(f"{label} down projection", rows, f / self.t, m.hidden, True)
            + [self._activation(f, True)]
            + self._linear(f"{label} up projection", rows, m.hidden, up, True)
        )

    def _dense_mlp(self, backward: bool) -> list[Kernel]:
        """The MLP part of a dense block: its norm, the MLP, the bias-dropout-add (mirrored backward)."""
        if backward:
            return (
                [self._dropout_add("bias-dropout-add", True)]
                + self._mlp(True)
                + [
                    self._norm("post-attention norm", True),
                    self.km.elementwise("residual gradient add", self.T_norm * self.m.hidden, 2, 1),
                ]
            )
        return (
            [self._norm("post-attention norm", False, feeds_fp8=True)]
            + self._mlp(False)
            + [self._dropout_add("bias-dropout-add", False)]
        )

    def _moe(self, backward: bool) -> list[Kernel]:
        m, km, T = self.m, self.km, self.T
        moe = m.moe
        local = max(1, moe.experts // self.ep)
        rows = T * moe.top_k / local  # per local expert: the tokens routed to the local experts, spread evenly
        per_expert: list[Kernel] = []
        one = self._mlp(backward, moe.expert_ffn_hidden, rows, "expert")
        # Transformer Engine's GroupedLinear (Megatron-Core's TEGroupedMLP) launches one GEMM per local expert
        # (general_grouped_gemm: a cuBLAS GEMM each, round-robin over its compute streams) and, but for the delayed
        # recipe's fused multi-tensor cast, one FP8 cast per expert (split_quantize); the activation runs once over
        # every expert's rows. Each kernel: an expert's even share of the tokens
        for k in one:
            cast = "FP8" in k.name
            if local > 1 and (k.kind == "gemm" or (cast and self.fp8_recipe != "delayed")):
                per_expert += [
                    Kernel(k.kind, f"{k.name} (expert {i + 1} of {local})", k.flops, k.bytes, k.time_s)
                    for i in range(local)
                ]
            else:
                per_expert.append(
                    Kernel(k.kind, f"{k.name} x{local}", k.flops * local, k.bytes * local, k.time_s * local)
                )
        routed = T * moe.top_k  # token copies sent to experts
        permute = [km.elementwise("token permutation", routed * m.hidden, 1, 1)]
        unpermute = [km.elementwise("token unpermutation", routed * m.hidden, 1, 1)]
        if not backward:  # the fused permutation's forward first builds its row-id map (3 Triton kernels)
            row_map = [km.memory(f"permutation row-id map ({i} of 3)", T * moe.experts * 4 * 2) for i in (1, 2, 3)]
            permute = row_map + permute
        sort: list[Kernel] = []
        unsort: list[Kernel] = []
        if self.ep > 1 and local > 1:
            # Megatron-Core's all-to-all dispatcher: the tokens received from every rank reordered by local expert
            # (sort_chunks_by_idxs) before the experts and back after them, with their routing probabilities in the
            # forward (token_dispatcher.py)
            sort = [km.elementwise("tokens sorted by local expert", routed * m.hidden, 1, 1)]
            unsort = [km.elementwise("tokens unsorted", routed * m.hidden, 1, 1)]
            if not backward:
                sort.append(km.memory("routing probabilities sorted by local expert", routed * 4 * 2))
                unsort.append(km.memory("routing probabilities unsorted", routed * 4 * 2))
        router = self._linear("router", T, m.hidden, moe.experts, backward, fp8=False)  # not a TE layer
        shared = (
            self._mlp(backward, moe.expert_ffn_hidden * moe.shared_experts, T, "shared expert")
            if moe.shared_experts
            else []
        )
        body = router + permute + sort + per_expert + unsort + unpermute + shared
        if backward:
            return (
                [self._dropout_add("bias-dropout-add", True)] + body[::-1] + [self._norm("post-attention norm", True)]
            )
        return [self._norm("post-attention norm", False)] + body + [self._dropout_add("bias-dropout-add", False)]

    def _logits(self, backward: bool) -> list[Kernel]:
        m, km, T = self.m, self.km, self.T
        v = m.vocab / self.t
        logits = T * v
        if not backward:
            return (
                [self._norm("final norm", False)]
                + self._linear("LM head", T, m.hidden, v, False, fp8=False)
                + [km.memory("vocab-parallel cross-entropy", logits * (km.act_bytes + 4 * 4 * 2))]
            )
        return (
            [km.memory("cross-entropy backward", logits * (4 + km.act_bytes))]
            + self._linear("LM head", T, m.hidden, v, True, fp8=False)
            + [self._norm("final norm", True)]
        )

    def _embedding(self, backward: bool) -> list[Kernel]:
        km, e = self.km, self.T * self.m.hidden
        if not backward:
            positions = [km.elementwise("position embedding add", e, 2, 1)] if self.m.learned_positions else []
            dropped = e / self.t if self.T_norm < self.T else e  # sequence parallelism: the rank's tokens
            return (
                [km.elementwise("embedding lookup", e, 1, 1)]
                + positions
                + [km.elementwise("embedding dropout", dropped, 1, 1, extra_bytes=dropped)]
            )
        # the gradient of the looked-up rows added into the fp32 main gradient of the table
        return [km.elementwise("embedding backward", e, 1, 0, extra_bytes=e * 8)]


def optimizer_kernels(
    km: KernelModel,
    shard_params: float,
    local_params: float,
    adam_state_bytes: float = 38.0,
    zero_grad_bytes: float = 4.0,
    loss_scaling: bool = False,
) -> KernelSeq:
    """The optimizer step on the `shard_params` this rank updates (all it holds, or its ZeRO shard), and the
    reset of the gradient buffer of the `local_params` it holds.

    Mixed-precision Adam (Megatron-LM's, multi-tensor FusedAdam): per parameter read the fp32 master
    weight, main gradient, momentum and variance (16 B), write weight, momentum, variance (12 B), write
    the 16-bit copy of the weight (2 B) after reading the master (4 B), and read the gradient once more
    for the global gradient norm (4 B): 38 B; the fp32 gradient buffer zeroed for the next iteration
    (4 B per local parameter). ~12 FLOP per parameter (ZeRO paper's convention), memory-bound.

    With `loss_scaling` (fp16 training: Megatron-LM's optimizer holds a dynamic loss scaler, bf16 needs
    none) the main gradients are first unscaled and checked for inf/NaN in one pass,
    `torch._amp_foreach_non_finite_check_and_unscale_`: each fp32 gradient read and written, 8 B more per
    updated parameter."""
    kernels = []
    if loss_scaling:
        kernels.append(km.optimizer("unscale gradients + inf/NaN check (fp16 loss scaling)", shard_params * 8.0))
    kernels += [
        km.optimizer("gradient norm + Adam + 16-bit weight copy", shard_params * adam_state_bytes, 12.0 * shard_params),
        km.optimizer("zero gradient buffer", local_params * zero_grad_bytes),
    ]
    return km.seq(*kernels)
