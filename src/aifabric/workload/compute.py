"""Compute: FLOPs per layer and pass, and their duration on a GPU.

FLOPs (2 per multiply-accumulate) come from the model (models/transformer.py). A backward pass costs
twice its forward (gradients with respect to inputs and to weights, Narayanan et al. 2021). Recomputation
adds, before each backward: nothing (none), the attention core Q·K^T, softmax, ·V (selective, Korthikanti
et al. 2022), or the whole forward of the layer (full).

Time: kernel by kernel (aifabric.kernels: GEMMs from their shapes, memory-bound kernels from their bytes,
fused attention), or, when a plan sets `compute_efficiency`, FLOPs / (dense peak FLOP/s of the GPU at the
precision x that efficiency), the same fraction for every op (docs/validation.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..catalog import GpuSpec
from ..models.transformer import Transformer


@dataclass(frozen=True)
class LayerFlops:
    """Forward FLOPs of one decoder block for one micro-batch on one GPU (already divided by tp and cp)."""

    attention: float  # projections + core
    attention_core: float  # the part selective recomputation redoes
    mlp: float

    @property
    def forward(self) -> float:
        return self.attention + self.mlp

    @property
    def backward(self) -> float:
        return 2.0 * self.forward

    def recompute(self, mode: str) -> float:
        if mode == "full":
            return self.forward
        if mode == "selective":
            return self.attention_core
        return 0.0


def layer_flops(
    model: Transformer,
    tokens: int,
    seq_len: int,
    moe_layer: bool,
    tp: int = 1,
    cp: int = 1,
    windowed: bool = False,
) -> LayerFlops:
    """`tokens` = sequences x seq_len of the micro-batch; context parallelism splits the tokens; `windowed`: a
    block attending through the model's sliding window."""
    t = tokens / (tp * cp)
    core = model.attention_core_flops_per_token(seq_len, windowed) * t
    attn = model.attention_matmul_flops_per_token() * t + core
    return LayerFlops(attn, core, model.mlp_flops_per_token(moe_layer) * t)


def logits_flops(model: Transformer, tokens: int, tp: int = 1, cp: int = 1) -> float:
    return model.logits_flops_per_token() * tokens / (tp * cp)


def duration_s(flops: float, gpu: GpuSpec, precision: str, efficiency: float) -> float:
    """The `compute_efficiency` override: FLOPs at that fraction of the GPU's dense peak."""
    return flops / (gpu.peak_flops(precision) * efficiency)


def compute_summary(ops) -> tuple[float, tuple[tuple[str, float], ...]]:
    """Hardware FLOPs (every compute op's but the optimizer step's, as HFU counts them) and seconds by kernel
    kind of the Compute ops in a list of ops."""
    from .ops import Compute

    flops, kinds = 0.0, dict[str, float]()
    for op in ops:
        if isinstance(op, Compute):
            if not op.name.endswith("optimizer"):
                flops += op.flops
            for kind, s in op.kernels or (("all", op.duration_s),):
                kinds[kind] = kinds.get(kind, 0.0) + s
    return flops, tuple(kinds.items())


def iteration_flops(model: Transformer, global_batch: int, seq_len: int, recompute: str = "none") -> float:
    """Model FLOPs of one iteration, all GPUs: 3 x forward (+ the recomputed part)."""
    tokens = global_batch * seq_len
    fwd = model.forward_flops_per_token(seq_len) * tokens
    extra = 0.0
    if recompute == "full":
        extra = fwd - model.logits_flops_per_token() * tokens
    elif recompute == "selective":
        extra = model.attention_core_flops_all_layers(seq_len) * tokens
    return 3.0 * fwd + extra
