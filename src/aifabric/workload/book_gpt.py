"""A decoder transformer trained in the book's tensor parallelism (Deep Learning for Network Engineers, Chapter 8)
-> every rank's ordered operations: what `aifabric train --model gpt --tp-style book` runs (train/book_tp.py),
predicted op for op, as workload/llm.py predicts Megatron's style.

Units (as the trainer's GPT): the embedding, the decoder blocks, the head (final norm and output layer);
pipeline stage s holds units `stage_bounds(n, pp, s)`. Every tensor-parallel rank holds whole layers and
computes its share of each layer's neurons (tp divides the width, the heads, the FFN width and the vocabulary).
Per micro-batch (B sequences of T tokens, width D, FFN width 4D, vocabulary V):

- forward: the embedding (on the group's first rank) Broadcast to the group (B·T·D); per block the AllGather
  of Q and of K (B·T·D each; V stays local), of the context vectors' parts (each rank's heads, B·T·D), of the
  output projection's, the FFN's first (B·T·F) and second layer's weighted sums (B·T·D); on the head the
  AllGather of the logits (B·T·V), the cross-entropy then computed on every rank (no collective).
- backward, last unit first: the AllReduce of the output layer's weight gradients (V·D + biases); per block
  the AllReduce of the FFN's second, first layer's and the projection's weight gradients (with biases), the
  AllGather of Q and of K again, the AllReduce of the Q, K and V weight gradients (3·(D·D + D)) and of the
  attention input's gradient (B·T·D: each rank's heads give a share of the error sent back). The embedding's
  backward needs no collective.
- pipeline: the whole activation (B·T·D) to the next stage, its gradient back, as Megatron's without
  sequence parallelism.
- data parallelism: the stage's parameters (whole layers; the embedding on the group's first rank only) in
  DDP's buckets, reverse registration order (embedding: tokens, positions; block: ln1, ln2, Q, K, V,
  projection, FFN first, FFN second, each weight then bias; head: final norm, output layer), a bucket launched
  during the last backward once every gradient it holds is ready: the output layer's after its AllReduce, the
  final norm's right after; in a block the FFN's and the projection's after their AllReduces, Q, K, V's after
  the attention input's AllReduce (the second norm's, ready earlier, comes after them in DDP's order), the
  first norm's at the block's end.

Compute ops: FLOPs per rank (its share of the neurons; the attention scores of every head, as the book's
ranks compute them) at the plan's `compute_efficiency` (default SMALL_MODEL_EFFICIENCY): these workloads
exist to be compared with traced training op by op and replayed, not for their compute time.
"""

from __future__ import annotations

from ..catalog import GpuSpec
from ..models.transformer import Transformer
from .ops import Workload
from .pipeline import stage_bounds
from .plan import Plan
from .small_models import DdpBuckets, StageRank


def check_book_gpt(model: Transformer, plan: Plan) -> list[str]:
    """What makes the plan impossible for the book's tensor parallelism on `model` (empty: none)."""
    out = []
    if plan.cp > 1 or plan.ep > 1 or plan.zero or plan.sequence_parallel or plan.recompute != "none":
        out.append("the book's tensor parallelism is modelled with data, tensor and pipeline parallelism only")
    if plan.schedule not in ("gpipe", "1f1b") or plan.chunks != 1:
        out.append("schedule: gpipe or 1f1b (no interleaving)")
    if (
        model.moe
        or model.mla
        or model.gated_mlp
        or model.kv_heads not in (None, model.heads)
        or model.q_dim != model.hidden
        or model.qk_norm
        or model.tied_embeddings
        or not model.learned_positions
        or model.norm != "layernorm"
    ):
        out.append(
            "the book's tensor parallelism is modelled for a GPT-2-like decoder (multi-head attention, "
            "learned positions, LayerNorm, untied output layer)"
        )
    units = model.layers + 2
    if plan.pp > units:
        out.append(f"pp={plan.pp} exceeds the model's {units} units (embedding, {model.layers} blocks, head)")
    for what, n in (("heads", model.heads), ("FFN width", model.ffn_hidden), ("vocabulary", model.vocab)):
        if n % plan.tp:
            out.append(f"tp={plan.tp} must divide the {what} ({n})")
    return out


class _Rank(StageRank):
    def __init__(self, model: Transformer, plan: Plan, gpu: GpuSpec, rank: int):
        super().__init__(plan, gpu, rank)
        self.m = model
        self.root = self.c["tp"] == 0
        self.tokens = plan.micro_batch_size * plan.seq_len
        self.n_units = model.layers + 2
        self.start, self.stop = stage_bounds(self.n_units, plan.pp, self.stage)
        self.params = [self.unit_params(u) for u in range(self.start, self.stop)]

    def boundary_bytes(self) -> tuple[int, int]:  # the whole activation, both ways
        size = self.tokens * self.m.hidden * self.bpe
        return size, size

    def buckets(self, it: int) -> _Buckets:
        return _Buckets(self, it)

    # ---- the stage's parameters (elements per tensor, registration order) ------------------------
    def unit_params(self, u: int) -> list[int]:
        m = self.m
        d, f, bias = m.hidden, m.ffn_hidden, m.bias
        lin = lambda a, b: [a * b] + ([b] if bias else [])  # noqa: E731  (weight out x in, then bias)
        if u == 0:  # token and position embedding, on the group's first rank
            return [m.vocab * d, m.max_seq_len * d] if self.root else []
        if u == self.n_units - 1:  # final norm, output layer (no bias)
            return [d, d, m.vocab * d]
        return [d, d, d, d, *lin(d, d), *lin(d, d), *lin(d, d), *lin(d, d), *lin(d, f), *lin(f, d)]

    # ---- passes -----------------------------------------------------------------------------------
    def forward(self, pre: str) -> None:
        m, t, tp = self.m, self.tokens, self.p.tp
        d, f = m.hidden, m.ffn_hidden
        act = t * d
        for u in range(self.start, self.stop):
            k = f"{pre}/u{u}"
            if u == 0:
                self.tp(f"{k}/embed/fwd/broadcast", "broadcast", act, "word vectors")
                continue
            if u == self.n_units - 1:
                self.compute("fwd/logits", 2.0 * t * d * m.vocab / tp)
                self.tp(f"{k}/head/fwd/all-gather", "all-gather", t * m.vocab, "logits")
                continue
            self.compute("fwd/qkv", 3 * 2.0 * t * d * d / tp)
            self.tp(f"{k}/attn-q/fwd/all-gather", "all-gather", act, "Q")
            self.tp(f"{k}/attn-k/fwd/all-gather", "all-gather", act, "K")
            self.compute("fwd/attn-core", 2.0 * t * self.p.seq_len * d * (1 + 1 / tp))
            self.tp(f"{k}/attn-ctx/fwd/all-gather", "all-gather", act, "context vectors")
            self.compute("fwd/proj", 2.0 * t * d * d / tp)
            self.tp(f"{k}/proj/fwd/all-gather", "all-gather", act, "weighted sums")
            self.compute("fwd/mlp-in", 2.0 * t * d * f / tp)
            self.tp(f"{k}/fc/fwd/all-gather", "all-gather", t * f, "weighted sums")
            self.compute("fwd/mlp-out", 2.0 * t * f * d / tp)
            self.tp(f"{k}/out/fwd/all-gather", "all-gather", act, "weighted sums")

    def backward(self, pre: str, buckets: _Buckets | None) -> None:
        m, t, tp = self.m, self.tokens, self.p.tp
        d, f, bias = m.hidden, m.ffn_hidden, int(m.bias)
        act = t * d
        ready = (lambda j, n: buckets.ready(j, n)) if buckets else (lambda j, n: None)
        for u in reversed(range(self.start, self.stop)):
            k, j = f"{pre}/u{u}", u - self.start  # j: the unit's index in the stage
            if u == 0:
                if self.root:
                    self.compute("bwd/embedding", 0.0)
                ready(j, len(self.params[j]))
                continue
            if u == self.n_units - 1:
                self.compute("bwd/logits", 2 * 2.0 * t * d * m.vocab / tp)
                self.tp(f"{k}/head/bwd/weight-grad", "all-reduce", m.vocab * d, "weight gradients")
                ready(j, 1)  # the output layer
                ready(j, 3)  # the final norm
                continue
            n = len(self.params[j])  # ln1, ln2 (4), Q, K, V, projection, FFN first, FFN second (2 each with biases)
            per = 1 + bias
            self.compute("bwd/mlp-out", 2.0 * t * f * d * (1 + 1 / tp))
            self.tp(f"{k}/out/bwd/weight-grad", "all-reduce", f * d + d * bias, "weight gradients")
            ready(j, per)
            self.compute("bwd/mlp-in", 2.0 * t * d * f * (1 + 1 / tp))
            self.tp(f"{k}/fc/bwd/weight-grad", "all-reduce", d * f + f * bias, "weight gradients")
            ready(j, 2 * per)
            self.compute("bwd/proj", 2.0 * t * d * d * (1 + 1 / tp))
            self.tp(f"{k}/proj/bwd/weight-grad", "all-reduce", d * d + d * bias, "weight gradients")
            ready(j, 3 * per)
            self.tp(f"{k}/attn-q/bwd/all-gather", "all-gather", act, "Q")
            self.tp(f"{k}/attn-k/bwd/all-gather", "all-gather", act, "K")
            self.compute("bwd/attn", 2 * 2.0 * t * self.p.seq_len * d + 3 * 2 * 2.0 * t * d * d / tp)
            self.tp(f"{k}/attn-qkv/bwd/weight-grad", "all-reduce", 3 * (d * d + d * bias), "weight gradients")
            self.tp(f"{k}/attn-in/bwd/all-reduce", "all-reduce", act, "input gradient")
            ready(j, n - 2)  # V, K, Q, then ln2 (ready before, after them in DDP's order)
            ready(j, n)  # ln1


class _Buckets(DdpBuckets):
    """`ready(j, n)`: the last `n` tensors of the stage's unit j have their gradients, so every bucket now complete
    (and every one before it) is launched."""

    def ready(self, unit: int, n: int) -> None:
        first = next((i for i, (j, _) in enumerate(self.order) if j == unit), len(self.order))
        self.done = max(self.done, first + n)
        self.launch_ready()


def build_book_gpt_training(
    model: Transformer, plan: Plan, gpu: GpuSpec, name: str = "book-gpt-training", iterations: int = 1
) -> Workload:
    """Every rank's ops for `iterations` training steps of `model` in the book's tensor parallelism with the
    plan's data and pipeline parallelism (rank order: `plan.order`; the trainer's is tp-cp-pp-dp)."""
    problems = check_book_gpt(model, plan)
    if problems:
        raise ValueError("; ".join(problems))
    ranks = []
    for r in range(plan.world_size):
        b = _Rank(model, plan, gpu, r)
        for it in range(iterations):
            b.iteration(it)
        ranks.append(b.ops)
    tokens = plan.global_batch_size * plan.seq_len
    flops = 3.0 * 2.0 * tokens * (model.params - model.embedding_params - model.position_params)
    return Workload(
        name=name,
        ranks=ranks,
        params=model.params,
        iterations=iterations,
        flops_per_iteration=flops,
        description=f"{model.name}, {model.params:,} parameters, tp{plan.tp} (the book's style) pp{plan.pp} "
        f"dp{plan.dp}, {plan.schedule}, m={plan.micro_batches}, batch {plan.global_batch_size} x "
        f"{plan.seq_len} tokens, {plan.precision}",
    )


__all__ = ["build_book_gpt_training", "check_book_gpt"]
