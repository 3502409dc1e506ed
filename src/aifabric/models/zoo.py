"""The model zoo: the seeds' own models and the LLMs trained today, as data. Every parameter count is
computed from the architecture; `published_params` is what the authors state, kept for the tests."""

from __future__ import annotations

from ..errors import InputError, Problem
from .cnn import CNN, Conv
from .feedforward import FeedForward
from .lstm import LSTM
from .transformer import MLA, MoE, Transformer

Model = FeedForward | CNN | LSTM | Transformer


def _gpt3(name: str, layers: int, hidden: int, heads: int, published: float, vocab: int = 50257) -> Transformer:
    return Transformer(
        name,
        layers,
        hidden,
        heads,
        ffn_hidden=4 * hidden,
        vocab=vocab,
        max_seq_len=2048,
        published_params=published,
        source="Brown et al. 2020, Table 2.1",
    )


def _llama(
    name: str,
    layers: int,
    hidden: int,
    heads: int,
    kv_heads: int | None,
    ffn: int,
    vocab: int,
    published: float,
    source: str,
    seq: int,
    **more,
) -> Transformer:
    """Llama's architecture (RMSNorm, SwiGLU, rotary positions, no biases, an untied output layer), which others
    share with a few fields `more` (Qwen3: wider heads, Q/K norms, experts)."""
    fields = dict(
        ffn_hidden=ffn,
        vocab=vocab,
        kv_heads=kv_heads,
        max_seq_len=seq,
        gated_mlp=True,
        bias=False,
        norm="rmsnorm",
        learned_positions=False,
        tied_embeddings=False,
        published_params=published,
        source=source,
    )
    return Transformer(name, layers, hidden, heads, **{**fields, **more})


def _gpt_oss(name: str, layers: int, experts: int, published: float, card: str) -> Transformer:
    """OpenAI's gpt-oss: Llama's layers with biases in the attention and the experts, 64 heads of 64 on a hidden of
    2,880, 8 key/value heads, top-4 SwiGLU experts 2,880 wide, every other block (the first, third, ...) through a
    128-token sliding window; its attention sinks (a logit per head) and the router's bias, some thousand
    parameters, not counted."""
    return _llama(
        name,
        layers,
        2880,
        64,
        8,
        2880,
        201088,
        published,
        f"OpenAI 2025 (gpt-oss model card: {card})",
        131072,
        kv_channels=64,
        bias=True,
        sliding_window=128,
        global_every=2,
        moe=MoE(experts, 4, 2880),
    )


MODELS: dict[str, Model] = {
    # --- the seeds ---
    # Ch. 3: MNIST 784-128-10; the book counts weights only (101,632).
    "mnist-784-128-10": FeedForward((784, 128, 10), bias=False),
    # Ch. 4: 96x96 RGB, Kirsch conv (8 kernels 3x3x3) + pool 2, conv 16 x 3x3x8 + pool 2, FC 4000-1000-10.
    "ch4-cnn": CNN("ch4-cnn", 96, 3, (Conv(8, 3, 1, pool=2), Conv(16, 3, 1, pool=2)), (4000, 1000, 10)),
    # Ch. 6: two LSTM layers and a SoftMax over the 4-letter vocabulary of "alley" (sizes are ours).
    "ch6-lstm": LSTM("ch6-lstm", input_size=4, hidden=16, layers=2, output_size=4, bias=False),
    # `aifabric train`'s models on the 8x8 digits (train/models.py; workload/small_models.py): Ch. 3's network,
    # a Ch. 4-style CNN (conv 3x3 x8, ReLU, max-pool 2, 72-32-10), Ch. 6's LSTM reading 8 rows of 8 pixels
    "digits-fnn": FeedForward((64, 128, 10)),
    "digits-cnn": CNN("digits-cnn", 8, 1, (Conv(8, 3, 1, pool=2),), (32, 10), bias=True),
    "digits-lstm": LSTM("digits-lstm", input_size=8, hidden=32, output_size=10, time_steps=8),
    # Ch. 7/8: GPT-3 175B as the book counts it (vocabulary 50,000; no position table in its sum).
    "gpt3-175b-book": Transformer(
        "gpt3-175b-book",
        96,
        12288,
        96,
        4 * 12288,
        50_000,
        max_seq_len=2048,
        learned_positions=False,
        published_params=175e9,
        source="seeds Ch. 7/8",
    ),
    # --- GPT-3 family (the paper rounds its names; 350M, 1.3B, 2.7B are 1-2% off their names) ---
    "gpt3-125m": _gpt3("gpt3-125m", 12, 768, 12, 125e6),
    "gpt3-350m": _gpt3("gpt3-350m", 24, 1024, 16, 350e6),
    "gpt3-760m": _gpt3("gpt3-760m", 24, 1536, 16, 760e6),
    "gpt3-1.3b": _gpt3("gpt3-1.3b", 24, 2048, 24, 1.3e9),
    "gpt3-2.7b": _gpt3("gpt3-2.7b", 32, 2560, 32, 2.7e9),
    "gpt3-6.7b": _gpt3("gpt3-6.7b", 32, 4096, 32, 6.7e9),
    "gpt3-13b": _gpt3("gpt3-13b", 40, 5140, 40, 13e9),
    "gpt3-175b": _gpt3("gpt3-175b", 96, 12288, 96, 175e9),
    # --- Llama (HF config.json of each release; counts from the model cards) ---
    "llama2-7b": _llama(
        "llama2-7b", 32, 4096, 32, None, 11008, 32000, 6_738_415_616, "Touvron et al. 2023 (Llama 2)", 4096
    ),
    "llama2-13b": _llama(
        "llama2-13b", 40, 5120, 40, None, 13824, 32000, 13_015_864_320, "Touvron et al. 2023 (Llama 2)", 4096
    ),
    "llama2-70b": _llama(
        "llama2-70b", 80, 8192, 64, 8, 28672, 32000, 68_976_648_192, "Touvron et al. 2023 (Llama 2)", 4096
    ),
    "llama3-8b": _llama(
        "llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8_030_261_248, "Dubey et al. 2024 (Llama 3)", 8192
    ),
    "llama3-70b": _llama(
        "llama3-70b", 80, 8192, 64, 8, 28672, 128256, 70_553_706_496, "Dubey et al. 2024 (Llama 3)", 8192
    ),
    "llama3-405b": _llama(
        "llama3-405b", 126, 16384, 128, 8, 53248, 128256, 405e9, "Dubey et al. 2024 (Llama 3.1 405B)", 8192
    ),
    # sliding-window attention in every block, 4,096 keys (Jiang et al. 2023, Table 1: window_size 4096,
    # context_len 8192)
    "mistral-7b": _llama(
        "mistral-7b",
        32,
        4096,
        32,
        8,
        14336,
        32000,
        7.24e9,
        "Jiang et al. 2023 (Mistral 7B; 7.24 B parameters as released)",
        8192,
        sliding_window=4096,
    ),
    # --- mixture of experts ---
    "mixtral-8x7b": Transformer(
        "mixtral-8x7b",
        32,
        4096,
        32,
        14336,
        32000,
        kv_heads=8,
        max_seq_len=32768,
        gated_mlp=True,
        bias=False,
        norm="rmsnorm",
        learned_positions=False,
        tied_embeddings=False,
        moe=MoE(8, 2, 14336),
        published_params=46_702_792_704,
        source="Jiang et al. 2024 (Mixtral of Experts)",
    ),
    "deepseek-moe-16b": Transformer(
        "deepseek-moe-16b",
        28,
        2048,
        16,
        10944,
        102400,
        max_seq_len=4096,
        gated_mlp=True,
        bias=False,
        norm="rmsnorm",
        learned_positions=False,
        tied_embeddings=False,
        moe=MoE(64, 6, 1408, shared_experts=2, first_dense_layers=1),
        published_params=16.4e9,
        source="Dai et al. 2024 (DeepSeekMoE 16B)",
    ),
    # OpenAI gpt-oss (the model card's counts; its active ones without the input embedding)
    "gpt-oss-120b": _gpt_oss("gpt-oss-120b", 36, 128, 116.83e9, "116.83 B total, 5.13 B active"),
    "gpt-oss-20b": _gpt_oss("gpt-oss-20b", 24, 32, 20.91e9, "20.91 B total, 3.61 B active"),
    # Qwen3 MoE (Qwen Team 2025, Qwen3 technical report, Table 2; the models' published configurations): every
    # block an MoE of 128 experts, 8 per token, no shared expert; 4 key/value heads; heads of 128 wider than
    # hidden / heads; an RMSNorm over each head's Q and K
    "qwen3-30b-a3b": _llama(
        "qwen3-30b-a3b",
        48,
        2048,
        32,
        4,
        6144,
        151936,
        30.5e9,
        "Qwen Team 2025 (Qwen3 technical report: 30.5 B total, 3.3 B activated)",
        32768,
        kv_channels=128,
        qk_norm=True,
        moe=MoE(128, 8, 768),
    ),
    "qwen3-235b-a22b": _llama(
        "qwen3-235b-a22b",
        94,
        4096,
        64,
        4,
        12288,
        151936,
        235e9,
        "Qwen Team 2025 (Qwen3 technical report: 235 B total, 22 B activated)",
        32768,
        kv_channels=128,
        qk_norm=True,
        moe=MoE(128, 8, 1536),
    ),
    # DeepSeek-V3: MLA attention, 3 dense blocks then 58 MoE blocks of 256 routed + 1 shared expert, top-8
    # (the multi-token-prediction module, 14 B more in the checkpoint, is not part of the 671 B)
    "deepseek-v3": Transformer(
        "deepseek-v3",
        61,
        7168,
        128,
        18432,
        129280,
        max_seq_len=4096,
        gated_mlp=True,
        bias=False,
        norm="rmsnorm",
        learned_positions=False,
        tied_embeddings=False,
        moe=MoE(256, 8, 2048, shared_experts=1, first_dense_layers=3),
        mla=MLA(1536, 512, 128, 64, 128),
        published_params=671e9,
        source="DeepSeek-AI 2024 (DeepSeek-V3 technical report)",
    ),
}


def get_model(name: str, field: str = "workload.model") -> Model:
    try:
        return MODELS[name.lower()]
    except KeyError:
        raise InputError(Problem(field, f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")) from None


def transformers() -> dict[str, Transformer]:
    return {k: m for k, m in MODELS.items() if isinstance(m, Transformer)}
