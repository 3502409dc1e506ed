"""Memory per GPU: weights, gradients, optimizer states, activations.

Model states (Rajbhandari et al. 2020, ZeRO, section 3.1): mixed-precision training with Adam keeps
2 bytes of fp16/bf16 weights, 2 bytes of gradients and K = 12 bytes of optimizer states (fp32 master
weights, momentum, variance) per parameter: 16 bytes. In pure fp32: 4 + 4 + 8 (no master copy).
ZeRO-1 divides the optimizer states by the data-parallel size, ZeRO-2 also the gradients, ZeRO-3 (FSDP
full shard) also the weights.

Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
section 4, 16-bit activations), per decoder block, in bytes per token of the micro-batch
(h hidden, g = width of K and V, f = FFN width, a heads, s sequence length, t tensor-parallel size):
- kept whole on each tensor-parallel rank without sequence parallelism: the two norms' inputs 4h, the
  attention and MLP inputs 2h + 2h, their dropout masks h + h: 10h;
- split by t: Q and K 2h + 2g, V 2g, the output projection's input 2h, the MLP's intermediate tensors
  (GELU: 4f; SwiGLU: 6f; MoE: those of the top-k + shared experts): with g = h and f = 4h this is 24h;
- the attention scores (softmax output, its dropout mask and output): 5as, split by t.
So GPT: s b h (34 + 5as/h) without parallelism, s b h (10 + 24/t + 5as/(h t)) with tensor parallelism,
s b h (34/t + 5as/(h t)) with sequence parallelism. Selective recomputation drops the 5as term, full
recomputation keeps only the block's input (2h, split by t with sequence parallelism). Context
parallelism divides the tokens by cp.

A pipeline stage keeps the activations of the micro-batches in flight: all m with GPipe, p - s on stage
s with 1F1B (the first stage: p, i.e. L layers' worth), and with interleaving the first stage holds
(1 + (p - 1)/(p v)) times that (Korthikanti et al. 2022, section 4.2.3).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models.transformer import Transformer
from ..units import BYTES_PER_ELEMENT
from .plan import Plan

GB = 1e9


@dataclass(frozen=True)
class MemoryEstimate:
    stage: int
    params: float  # parameters held by the GPU (before ZeRO sharding)
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes + self.activations_bytes

    def as_gB(self) -> dict[str, float]:
        return {
            "weights": self.weights_bytes / GB,
            "gradients": self.gradients_bytes / GB,
            "optimizer": self.optimizer_bytes / GB,
            "activations": self.activations_bytes / GB,
            "total": self.total_bytes / GB,
        }


def state_bytes_per_param(precision: str) -> tuple[int, int, int]:
    """(weights, gradients, optimizer states) bytes per parameter with Adam."""
    if BYTES_PER_ELEMENT[precision] >= 4:
        return 4, 4, 8
    return 2, 2, 12


def model_state_bytes(params: float, precision: str, zero: int, dp: int) -> tuple[float, float, float]:
    w, g, o = state_bytes_per_param(precision)
    return (
        params * w / (dp if zero >= 3 else 1),
        params * g / (dp if zero >= 2 else 1),
        params * o / (dp if zero >= 1 else 1),
    )


def stage_layers(model: Transformer, plan: Plan, stage: int) -> list[int]:
    """Indices of the decoder blocks on a pipeline stage (all its chunks)."""
    bounds = plan.virtual_stage_layers(model.layers)
    out: list[int] = []
    for vs in range(stage, plan.virtual_stages, plan.pp):
        out += list(bounds[vs])
    return out


def is_moe_layer(model: Transformer, layer: int) -> bool:
    return model.moe is not None and layer >= model.moe.first_dense_layers


def block_params_per_gpu(model: Transformer, plan: Plan, layer: int) -> tuple[float, float]:
    """(dense, expert) parameters of one decoder block on one GPU, as Megatron splits it: the weight
    matrices and the column-parallel biases (Q, K, V; the MLP's up/gate projections) divided by tp, the
    row-parallel biases (the attention output projection's and each MLP's down projection's, added after
    the AllReduce) and the norms replicated (every tensor-parallel rank holds them whole, and their
    gradients are in every rank's buckets); routed experts divided by ep, the router replicated."""
    t = plan.tp
    row_bias = model.hidden if model.bias else 0
    attn_row_bias = 0 if model.mla else row_bias  # MLA's projections carry no biases

    def split(params: float, replicated: float) -> float:
        return (params - replicated) / t + replicated

    dense = split(model.attention_params, attn_row_bias) + 2 * model.norm_params
    if is_moe_layer(model, layer):
        m = model.moe
        assert m is not None, "an MoE layer's"
        one_expert = split(model.expert_params, row_bias)
        return dense + m.shared_experts * one_expert + model.hidden * m.experts, m.experts / plan.ep * one_expert
    return dense + split(model.dense_mlp_params, row_bias), 0.0


def block_param_tensors(model: Transformer, plan: Plan, layer: int) -> tuple[list[float], list[float], list[float]]:
    """One GPU's dense parameters of a block as tensors, in reverse registration order (the order DDP
    buckets them; registration as aifabric.train's block: ln1, ln2, Q, K, V, output projection, MLP up,
    MLP down, each weight then bias), in three groups by when backward has produced their gradients:
    (the MLP's, before the MLP input's tensor-parallel AllReduce; the attention's and the second norm's,
    before the attention input's AllReduce; the first norm's, after it). Sums to block_params_per_gpu's
    dense part (an MoE layer's shared experts and router count as one MLP tensor, an MLA attention as one)."""
    t, h, kv = plan.tp, model.hidden, model.kv_dim
    bias = model.bias
    norm = [h, h] if model.norm == "layernorm" else [h]
    if is_moe_layer(model, layer):
        dense, _ = block_params_per_gpu(model, plan, layer)
        mlp = [dense - _attention_params_per_gpu(model, plan) - 2 * model.norm_params]
    else:
        f = model.ffn_hidden
        up = (2 if model.gated_mlp else 1) * f
        mlp = [h if bias else 0, f * h / t, up / t if bias else 0, up * h / t]
    if model.mla:
        attn = [_attention_params_per_gpu(model, plan)]
    else:
        q = model.q_dim
        qk_norm = [model.head_dim] * 2 if model.qk_norm else []  # each rank's own copy, as the norms
        attn = (
            qk_norm
            + [h if bias else 0, q * h / t]
            + [kv / t if bias else 0, kv * h / t] * 2
            + [q / t if bias else 0, q * h / t]
        )
    keep = lambda xs: [x for x in xs if x]  # noqa: E731
    return keep(mlp), keep(attn + norm[::-1]), keep(norm[::-1])


def _attention_params_per_gpu(model: Transformer, plan: Plan) -> float:
    whole = (model.hidden if model.bias and not model.mla else 0) + (2 * model.head_dim if model.qk_norm else 0)
    return (model.attention_params - whole) / plan.tp + whole  # the row-parallel bias and Q/K norms: on every rank


def outer_param_tensors(model: Transformer, plan: Plan, stage: int) -> tuple[list[float], list[float], list[float]]:
    """outer_params_per_gpu as tensors in reverse registration order: (the output layer, whose gradient
    comes before the LM head input's AllReduce; the final norm, after it; the first stage's learned
    positions and token embedding)."""
    first, last = outer_params_per_gpu(model, plan, stage)
    norm = model.norm_params if stage == plan.pp - 1 else 0
    head = [last - norm] if last - norm else []
    final_norm: list[float] = (
        ([model.hidden, model.hidden] if model.norm == "layernorm" else [model.hidden]) if norm else []
    )
    embed: list[float] = [x for x in ((model.position_params, first - model.position_params) if first else ()) if x]
    return head, final_norm, embed


def outer_params_per_gpu(model: Transformer, plan: Plan, stage: int) -> tuple[float, float]:
    """Parameters outside the blocks on one GPU of the stage: (the first stage's token embedding, split by
    vocabulary across tp (Megatron's VocabParallelEmbedding), and learned positions, replicated; the last
    stage's final norm, replicated, and output projection, split by vocabulary). A tied embedding is held
    by both the first and the last stage when pp > 1, as Megatron does."""
    t = plan.tp
    first = last = 0.0
    if stage == 0:
        first = model.embedding_params / t + model.position_params
    if stage == plan.pp - 1:
        last = model.norm_params
        if not model.tied_embeddings or plan.pp > 1:
            last += model.embedding_params / t
    return first, last


def stage_params(model: Transformer, plan: Plan, stage: int) -> tuple[float, float]:
    """(dense, expert) parameters one GPU of the stage holds: its blocks (block_params_per_gpu) and the
    embedding / final norm / output projection (outer_params_per_gpu)."""
    dense = expert = 0.0
    for layer in stage_layers(model, plan, stage):
        d, e = block_params_per_gpu(model, plan, layer)
        dense += d
        expert += e
    first, last = outer_params_per_gpu(model, plan, stage)
    return dense + first + last, expert


def layer_activation_bytes_per_token(model: Transformer, plan: Plan, moe_layer: bool) -> float:
    h, q, g, t = model.hidden, model.q_dim, model.kv_dim, plan.tp
    scale = BYTES_PER_ELEMENT[plan.precision] / 2  # the formulas count 16-bit activations
    if plan.recompute == "full":
        return 2 * h * scale / (t if plan.sequence_parallel else 1)
    mats = 6 if model.gated_mlp else 4
    if moe_layer:
        moe = model.moe
        assert moe is not None, "an MoE layer's"
        mlp = mats * moe.expert_ffn_hidden * (moe.top_k + moe.shared_experts)
    else:
        mlp = mats * model.ffn_hidden
    whole = 10 * h
    split = 4 * q + 4 * g + mlp  # Q and the attention's output (2 bytes each), K and V, the MLP's
    scores = 0 if plan.recompute == "selective" else 5 * model.heads * plan.seq_len / plan.cp
    if plan.sequence_parallel:
        per = (whole + split + scores) / t
    else:
        per = whole + (split + scores) / t
    return per * scale


def in_flight_micro_batches(plan: Plan, stage: int) -> float:
    """Micro-batches whose activations a stage holds at its peak (interleaved: chunk passes, each of one
    chunk's layers: the warm-up of Megatron's schedule plus one, (p - s - 1) x 2 + (v - 1) x p + 1)."""
    m, p = plan.micro_batches, plan.pp
    if p == 1:
        return 1
    if plan.schedule == "gpipe":
        return m
    if plan.schedule == "interleaved":
        v = plan.chunks
        return min((p - stage - 1) * 2 + (v - 1) * p + 1, m * v)
    return min(p - stage, m)


def activation_bytes(model: Transformer, plan: Plan, stage: int) -> float:
    tokens = plan.micro_batch_size * plan.seq_len / plan.cp
    per_mb = (
        sum(
            layer_activation_bytes_per_token(model, plan, is_moe_layer(model, layer))
            for layer in stage_layers(model, plan, stage)
        )
        * tokens
    )
    chunks = plan.chunks if plan.schedule == "interleaved" else 1
    in_flight = in_flight_micro_batches(plan, stage)
    total = per_mb / chunks * in_flight  # interleaved: one chunk's layers per pass in flight
    t_sp = plan.tp if plan.sequence_parallel else 1
    if stage == 0:  # embedding dropout mask, one per micro-batch in flight
        total += tokens * model.hidden / t_sp * in_flight / chunks
    if stage == plan.pp - 1:  # final norm, output projection input and the fp32 logits for the loss
        total += 4 * tokens * model.hidden / plan.tp * (1 + model.vocab / model.hidden)
    return total


def memory_per_gpu(model: Transformer, plan: Plan, stage: int | None = None) -> MemoryEstimate:
    """The estimate for one stage, or (stage None) for the stage that needs the most."""
    if stage is None:
        return max((memory_per_gpu(model, plan, s) for s in range(plan.pp)), key=lambda e: e.total_bytes)
    dense, expert = stage_params(model, plan, stage)
    wd, gd, od = model_state_bytes(dense, plan.precision, plan.zero, plan.dp * plan.cp)
    we, ge, oe = model_state_bytes(expert, plan.precision, plan.zero, max(1, plan.dp // plan.ep) * plan.cp)
    return MemoryEstimate(stage, dense + expert, wd + we, gd + ge, od + oe, activation_bytes(model, plan, stage))


def min_gpus_for_weights(params: float, bytes_per_param: float, gpu_memory_gB: float) -> int:
    """Fewest GPUs whose memory holds the weights alone (network.md 6.2, Figure 13-3)."""
    need = params * bytes_per_param
    cap = gpu_memory_gB * GB
    return max(1, -(-round(need) // round(cap)))
