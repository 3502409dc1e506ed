"""Decoder-only transformers, dense and mixture-of-experts, as data: parameter and FLOP counts computed
from the architecture (seeds Ch. 7; GPT-3: Brown et al. 2020; Llama: Touvron et al. 2023, Dubey et al.
2024; Mixtral: Jiang et al. 2024; DeepSeekMoE: Dai et al. 2024).

Per decoder block (h = hidden, a = heads, g = key/value heads, d = h/a the head size, f = FFN hidden):
- attention: W_Q (h x h), W_K and W_V (h x g*d each), W_O (h x h), plus biases when the model has them;
- MLP: two matrices h x f (GELU, GPT-3) or three (SwiGLU gate/up/down, Llama); in an MoE layer one MLP
  per expert (expert FFN width f_e) plus a router h x E, plus shared experts (DeepSeekMoE) always active;
- two norms: LayerNorm (scale + bias, 2h) or RMSNorm (scale only, h).
Outside the blocks: token embedding V x h, learned positions (GPT-3) or none (rotary), a final norm, and an
output projection V x h unless tied to the embedding.

FLOPs are counted as 2 per multiply-accumulate (the seeds' convention, Ch. 1) for the matrix products,
which carry all but a fraction of a percent of the work; attention scores Q·K^T and probabilities·V add
2 x 2 x s x (a x d) per token per layer, counted over the full s x s square (Megatron's convention,
Narayanan et al. 2021; a causal kernel skips about half of it). A block with sliding-window attention (Mistral
7B; every other block of Gemma 2 and GPT-OSS) lets each query see the w keys before it: 2 x 2 x min(w, s) x (a x d)
per token, the band in place of the square.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MoE:
    experts: int  # routed experts per MoE layer
    top_k: int  # routed experts each token visits
    expert_ffn_hidden: int
    shared_experts: int = 0  # experts every token visits (DeepSeekMoE)
    first_dense_layers: int = 0  # leading blocks with a dense MLP instead (DeepSeekMoE: 1)


@dataclass(frozen=True)
class MLA:
    """Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values through low-rank latents."""

    q_lora_rank: int  # 0: queries projected directly
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    def params(self, hidden: int, heads: int) -> int:
        qk = heads * (self.qk_nope_head_dim + self.qk_rope_head_dim)
        q = hidden * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * qk if self.q_lora_rank else hidden * qk
        kv_a = hidden * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank  # + its RMSNorm
        kv_b = self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim)
        return q + kv_a + kv_b + heads * self.v_head_dim * hidden

    def core_width(self, heads: int) -> int:
        """Per-token width of the score and value products: heads x (q·k head dim + v head dim) / 2."""
        return heads * (self.qk_nope_head_dim + self.qk_rope_head_dim + self.v_head_dim) // 2


@dataclass(frozen=True)
class Transformer:
    name: str
    layers: int
    hidden: int
    heads: int
    ffn_hidden: int
    vocab: int
    kv_heads: int | None = None  # grouped-query attention; None = heads (multi-head attention)
    # each head's width when it is not hidden / heads (Megatron's kv_channels: Qwen3 has 32 heads of 128 on a
    # hidden of 2,048, so its attention is 4,096 wide)
    kv_channels: int | None = None
    qk_norm: bool = False  # an RMSNorm over each head's Q and K before the rotary embedding (Qwen3)
    max_seq_len: int = 2048
    gated_mlp: bool = False  # SwiGLU: three matrices per MLP
    bias: bool = True  # biases in the linear layers (GPT-3 yes, Llama no)
    norm: str = "layernorm"  # or "rmsnorm"
    learned_positions: bool = True  # GPT-3: a learned s x h table; rotary models: none
    tied_embeddings: bool = True  # output projection shares the token embedding
    # sliding-window attention: each query sees the `sliding_window` keys before it (None: every key); with
    # `global_every` k > 0 every k-th block (the k-th, 2k-th, ...) attends to the whole sequence instead
    sliding_window: int | None = None
    global_every: int = 0
    moe: MoE | None = None
    mla: MLA | None = None  # multi-head latent attention instead of Q/K/V/O projections
    published_params: float | None = None  # the count the authors publish, for the tests
    source: str = ""

    # ---- shapes -------------------------------------------------------------------------------
    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads if self.kv_channels is None else self.kv_channels

    @property
    def q_dim(self) -> int:
        """Width of Q (and of the attention's output, the output projection's input): h, or heads x d when
        the heads' width is set apart from h (`kv_channels`)."""
        return self.hidden if self.kv_channels is None else self.heads * self.kv_channels

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V): that of Q for multi-head attention, g x d with grouped-query attention."""
        return self.q_dim if self.kv_heads is None else self.kv_heads * self.head_dim

    @property
    def norm_params(self) -> int:
        return 2 * self.hidden if self.norm == "layernorm" else self.hidden

    # ---- parameters per part --------------------------------------------------------------------
    @property
    def attention_params(self) -> int:
        if self.mla:
            return self.mla.params(self.hidden, self.heads)
        h, q, kv = self.hidden, self.q_dim, self.kv_dim
        weights = 2 * h * q + 2 * h * kv
        biases = (q + h + 2 * kv) if self.bias else 0
        return weights + biases + (2 * self.head_dim if self.qk_norm else 0)

    def mlp_params(self, ffn_hidden: int) -> int:
        h, f = self.hidden, ffn_hidden
        mats = 3 if self.gated_mlp else 2
        biases = ((2 if self.gated_mlp else 1) * f + h) if self.bias else 0
        return mats * h * f + biases

    @property
    def dense_mlp_params(self) -> int:
        return self.mlp_params(self.ffn_hidden)

    @property
    def expert_params(self) -> int:
        """One expert's MLP."""
        return self.mlp_params(self.moe.expert_ffn_hidden) if self.moe else 0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.moe.first_dense_layers if self.moe else 0

    @property
    def dense_layers(self) -> int:
        return self.layers - self.moe_layers

    def moe_mlp_params(self, active_only: bool = False) -> int:
        """Routed + shared experts + router of one MoE layer (active_only: the experts one token visits)."""
        m = self.moe
        assert m is not None, "an MoE model's"
        routed = m.top_k if active_only else m.experts
        return (routed + m.shared_experts) * self.expert_params + self.hidden * m.experts

    def block_params(self, moe_layer: bool = False, active_only: bool = False) -> int:
        mlp = self.moe_mlp_params(active_only) if moe_layer else self.dense_mlp_params
        return self.attention_params + mlp + 2 * self.norm_params

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def position_params(self) -> int:
        return self.max_seq_len * self.hidden if self.learned_positions else 0

    @property
    def output_params(self) -> int:
        return 0 if self.tied_embeddings else self.vocab * self.hidden

    @property
    def blocks_params(self) -> int:
        dense = self.dense_layers * self.block_params(False)
        return dense + (self.moe_layers * self.block_params(True) if self.moe else 0)

    @property
    def params(self) -> int:
        return self.embedding_params + self.position_params + self.blocks_params + self.norm_params + self.output_params

    @property
    def active_params(self) -> int:
        """Parameters one token passes through (MoE: top-k + shared experts)."""
        if not self.moe:
            return self.params
        active = self.dense_layers * self.block_params(False) + self.moe_layers * self.block_params(True, True)
        return self.embedding_params + self.position_params + active + self.norm_params + self.output_params

    # ---- FLOPs (forward, per token) ----------------------------------------------------------
    def attention_matmul_flops_per_token(self) -> float:
        if self.mla:
            return 2.0 * self.mla.params(self.hidden, self.heads)
        h, q, kv = self.hidden, self.q_dim, self.kv_dim
        return 2.0 * (2 * h * q + 2 * h * kv)

    def is_windowed(self, layer: int) -> bool:
        """Whether block `layer` (0-based) attends through the sliding window."""
        if self.sliding_window is None:
            return False
        return self.global_every == 0 or (layer + 1) % self.global_every != 0

    @property
    def windowed_layers(self) -> int:
        return sum(self.is_windowed(i) for i in range(self.layers))

    def attention_span(self, seq_len: int, windowed: bool = False) -> int:
        """The keys a query's scores are counted over: the sequence, or the window of a windowed block."""
        return min(seq_len, self.sliding_window) if windowed and self.sliding_window else seq_len

    def attention_core_flops_per_token(self, seq_len: int, windowed: bool = False) -> float:
        """Q·K^T and softmax·V over the full s x s square (a windowed block's s x w band): 2 products x 2 FLOP x
        s (or w) x (the heads' width)."""
        span = self.attention_span(seq_len, windowed)
        return 4.0 * span * (self.mla.core_width(self.heads) if self.mla else self.q_dim)

    def attention_core_flops_all_layers(self, seq_len: int) -> float:
        """Every block's attention-core FLOPs per token, windowed blocks on their band."""
        windowed = self.windowed_layers
        return windowed * self.attention_core_flops_per_token(seq_len, True) + (
            self.layers - windowed
        ) * self.attention_core_flops_per_token(seq_len)

    def mlp_flops_per_token(self, moe_layer: bool = False) -> float:
        mats = 3 if self.gated_mlp else 2
        if moe_layer:
            m = self.moe
            assert m is not None, "an MoE model's"
            return (
                2.0 * mats * self.hidden * m.expert_ffn_hidden * (m.top_k + m.shared_experts)
                + 2.0 * self.hidden * m.experts
            )
        return 2.0 * mats * self.hidden * self.ffn_hidden

    def logits_flops_per_token(self) -> float:
        return 2.0 * self.vocab * self.hidden

    def forward_flops_per_token(self, seq_len: int) -> float:
        total = self.layers * self.attention_matmul_flops_per_token() + self.attention_core_flops_all_layers(seq_len)
        total += self.dense_layers * self.mlp_flops_per_token(False)
        if self.moe:
            total += self.moe_layers * self.mlp_flops_per_token(True)
        return total + self.logits_flops_per_token()
