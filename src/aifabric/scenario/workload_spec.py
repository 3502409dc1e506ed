"""Scenario section for the workload: the model, the parallelism plan, the batch.

Two kinds:
- `data-parallel`: the book's feed-forward network (`model.layer_widths`), one gradient AllReduce per
  iteration over every GPU (the demo).
- `llm-training`: a transformer from the zoo (`model: gpt3-175b`, or `model: {name: ...}`) or with custom
  dimensions (`model: {kind: transformer, layers: .., hidden: .., heads: .., ffn_hidden: .., vocab: ..}`),
  a `parallelism` plan (tp, pp, dp, cp, ep, schedule, micro-batches, sequence parallel, ZeRO/FSDP,
  recomputation), sequence length, global batch, precision.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .base import Strict

MAX_WIDTH = 1 << 24  # neurons in a feed-forward layer (a width of 2^63 overflowed the parameter count)
MAX_MICRO_BATCHES = 1 << 16  # per iteration: each is a pass of tasks on every stage


class ModelSpec(Strict):
    """A model: a zoo name, a feed-forward network's layer widths, or a transformer's dimensions."""

    kind: Literal["feed-forward", "transformer"] | None = Field(
        None, description="feed-forward (layer_widths) or transformer (custom dimensions); omit with `name`"
    )
    name: str | None = Field(None, description="a model of the zoo, e.g. gpt3-175b, llama3-70b, mixtral-8x7b")
    layer_widths: list[int] | None = Field(
        None,
        min_length=2,
        max_length=10_000,
        description="feed-forward: neurons per layer, input first, e.g. [784, 128, 10]",
    )
    bias: bool = True
    # transformer dimensions (custom models)
    layers: int | None = Field(None, ge=1, le=10_000)
    hidden: int | None = Field(None, ge=1, le=1 << 20)
    heads: int | None = Field(None, ge=1, le=1 << 16)
    kv_heads: int | None = Field(None, ge=1, le=1 << 16, description="grouped-query attention key/value heads")
    kv_channels: int | None = Field(
        None, ge=1, le=1 << 16, description="width of each attention head (default hidden / heads; Qwen3: 128)"
    )
    ffn_hidden: int | None = Field(None, ge=1, le=1 << 22, description="MLP width (default 4 x hidden)")
    vocab: int | None = Field(None, ge=1, le=1 << 24)
    gated_mlp: bool = False
    norm: Literal["layernorm", "rmsnorm"] = Field(
        "layernorm", description="custom transformer: LayerNorm (scale and bias, GPT-3) or RMSNorm (scale, Llama)"
    )
    positions: Literal["learned", "rotary"] = Field(
        "learned",
        description="custom transformer: a learned table of max_seq_len x hidden added to the embedding (GPT-3, "
        "MPT) or rotary embeddings applied to Q and K (Llama: no table)",
    )
    max_seq_len: int = Field(
        2048,
        ge=1,
        le=1 << 24,
        description="custom transformer with learned positions: the table's length, the "
        "longest sequence it can train on",
    )
    tied_embeddings: bool = Field(True, description="custom transformer: the output layer shares the token embedding")
    sliding_window: int | None = Field(
        None,
        ge=1,
        le=1 << 24,
        description="custom transformer: sliding-window attention, each query seeing this many keys before it "
        "(Mistral 7B 4,096; GPT-OSS 128); default: every key",
    )
    global_every: int = Field(
        0,
        ge=0,
        le=10_000,
        description="with sliding_window: every k-th block (the k-th, 2k-th, ...) attends to the whole sequence "
        "instead (GPT-OSS and Gemma 2: 2, alternating; Gemma 3: 6); 0: every block through the window",
    )
    experts: int | None = Field(None, ge=1, le=1 << 16, description="MoE: routed experts per layer")
    top_k: int = Field(2, ge=1, le=1 << 16)
    expert_ffn_hidden: int | None = Field(None, ge=1, le=1 << 22)
    shared_experts: int = Field(0, ge=0, le=1 << 16)

    @model_validator(mode="before")
    @classmethod
    def _name_shorthand(cls, data: Any) -> Any:
        return {"name": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _kind(self) -> ModelSpec:
        if self.name is not None:  # a zoo model: its own architecture; other fields would be silently ignored
            extra = sorted(self.model_fields_set - {"name", "kind"})
            if extra:
                raise ValueError(
                    f"{', '.join(extra)}: describe a custom model (kind: transformer or "
                    f"feed-forward, without name); the zoo's {self.name!r} has its own architecture"
                )
        if self.kind is None and self.name is None:
            object.__setattr__(self, "kind", "feed-forward")
        if self.kind == "feed-forward" and self.layer_widths is None:
            raise ValueError("a feed-forward model needs layer_widths (or give a zoo model's name)")
        if self.kind == "transformer":
            missing = [f for f in ("layers", "hidden", "heads", "vocab") if getattr(self, f) is None]
            if missing:
                raise ValueError(f"a custom transformer needs {', '.join(missing)}")
            if self.global_every and self.sliding_window is None:
                raise ValueError("global_every says which blocks skip the sliding window: give sliding_window too")
        return self

    @field_validator("layer_widths")
    @classmethod
    def _positive(cls, widths: list[int] | None) -> list[int] | None:
        given = widths or []
        bad = [i for i, w in enumerate(given) if w < 1]
        if bad:
            raise ValueError(f"every width must be >= 1 (index {bad[0]} is {given[bad[0]]})")
        big = [i for i, w in enumerate(given) if w > MAX_WIDTH]
        if big:
            raise ValueError(f"every width must be <= {MAX_WIDTH:,} (index {big[0]} is {given[big[0]]})")
        return widths


FeedForwardSpec = ModelSpec  # the name the schema has always exported


class ParallelismSpec(Strict):
    tp: int = Field(1, ge=1, le=1 << 20, description="tensor-parallel size (Megatron column/row split)")
    pp: int = Field(1, ge=1, le=1 << 20, description="pipeline-parallel stages")
    dp: int | None = Field(None, ge=1, le=1 << 24, description="data-parallel size (default: GPUs / (tp x pp x cp))")
    cp: int = Field(1, ge=1, le=1 << 20, description="context-parallel size (sequence split in attention)")
    ep: int = Field(1, ge=1, le=1 << 20, description="expert-parallel size (MoE), divides dp")
    schedule: Literal["gpipe", "1f1b", "interleaved"] = "1f1b"
    chunks: int = Field(1, ge=1, le=1024, description="model chunks per stage (interleaved 1F1B)")
    micro_batch_size: int = Field(1, ge=1, le=1 << 24, description="sequences per micro-batch")
    micro_batches: int | None = Field(
        None,
        ge=1,
        le=MAX_MICRO_BATCHES,
        description="micro-batches per iteration (default: global batch / (dp x micro_batch_size))",
    )
    sequence_parallel: bool = False
    zero: Literal[0, 1, 2, 3] = Field(0, description="ZeRO stage: 1 optimizer, 2 + gradients, 3 + weights")
    fsdp: bool = Field(False, description="PyTorch FSDP full shard (= ZeRO-3)")
    recompute: Literal["none", "selective", "full"] = "none"
    bucket_mb: float | None = Field(
        None,
        gt=0,
        description="gradient bucket size, MiB; default: Megatron-core's, max(40 M, 1 M x dp) "
        "parameters (PyTorch DDP's default is 25)",
    )
    overlap_grad_reduce: bool = Field(True, description="launch bucket AllReduces during the backward pass")
    backward_prefetch: Literal["pre", "post"] = Field(
        "pre",
        description="ZeRO-3 / FSDP: in the backward, the next block's weights are gathered before the current "
        "block's gradients are computed, beside them (pre: PyTorch FSDP's BACKWARD_PRE default, FSDP2, Megatron-Core's "
        "FSDP), or after (post: BACKWARD_POST, Composer's default), so the next block waits for its gather; the "
        "forward always gathers one block ahead",
    )
    grad_reduce_precision: Literal["auto", "fp32", "bf16", "fp16"] = Field(
        "auto",
        description="precision the data-parallel gradient reductions move; auto: fp32 when training in bf16 "
        "or fp8 (Megatron-LM accumulates and all-reduces those gradients in fp32), else the training precision",
    )
    order: str = Field("tp-cp-dp-pp", description="rank order, fastest-varying dimension first (Megatron)")
    layers_per_stage: list[int] | None = Field(
        None,
        description="decoder blocks of each pipeline stage (of each virtual stage, in order, with the "
        "interleaved schedule), when not an even split: Llama 3 405B puts 126 blocks on 16 stages, one fewer on "
        "the first and the last ([7, 8, ..., 8, 7])",
    )
    pipeline_scatter_gather: bool | None = Field(
        None,
        description="Megatron's scatter/gather of pipeline tensors: with tp > 1 and no sequence parallelism "
        "each tensor-parallel rank sends 1/tp of the activation to the next stage, which all-gathers it over "
        "NVLink (default: on whenever it applies, as Megatron-LM)",
    )


class WorkloadSpec(Strict):
    kind: Literal["data-parallel", "llm-training"] = "data-parallel"
    model: ModelSpec
    global_batch_size: int = Field(
        ..., ge=1, le=1 << 24, description="samples (sequences) per iteration across all GPUs"
    )
    data_parallel: int | None = Field(None, ge=1, le=1 << 24, description="data-parallel ranks (default: every GPU)")
    parallelism: ParallelismSpec | None = Field(None, description="llm-training: the parallelism plan")
    seq_len: int | None = Field(
        None, ge=1, le=1 << 24, description="llm-training: tokens per sequence (default: the model's)"
    )
    precision: Literal["fp32", "tf32", "bf16", "fp16", "fp8"] = "bf16"
    compute_efficiency: float | None = Field(
        None,
        ge=0.001,
        le=1,
        description="override of the kernel model: every compute op takes its FLOPs / (the GPU's "
        "dense peak FLOP/s at the precision x this fraction), recomputation included, no optimizer step on "
        "data-parallel workloads (default: none, each kernel timed from its shape; docs/validation.md)",
    )
    attention: Literal["flash", "flash2", "cudnn", "flash3", "ck", "unfused"] = Field(
        "flash",
        description="attention kernels: flash (the fused kernel Transformer Engine picks on the GPU: cuDNN on "
        "Hopper and Blackwell, FlashAttention-2 on Ampere), a fused kernel by name (flash2: FlashAttention-2, "
        "cudnn: cuDNN 9.1, flash3: FlashAttention-3, Hopper only; ck: the MI300X's), each at its measured rate "
        "by sequence length and head dimension (docs/validation.md), or unfused (Megatron-LM before "
        "FlashAttention: batched GEMMs around a fused softmax and a dropout)",
    )
    fp8_recipe: Literal["delayed", "current", "mxfp8"] = Field(
        "delayed",
        description="precision fp8: Transformer Engine's scaling recipe, which sets what each cast of a linear "
        "layer's input or output gradient costs: delayed (the scale from earlier iterations' amax; the norm "
        "before a layer writes FP8 itself), current (Float8CurrentScaling, Megatron Bridge's FP8-CS: an amax pass "
        "over each tensor before its cast, the amax of a sequence-parallel input all-reduced over the "
        "tensor-parallel group), mxfp8 (MXFP8BlockScaling, FP8-MX, Blackwell only: a scale per 32 elements, "
        "rowwise and columnwise copies); kernels/transformer.py",
    )
    software: Literal["current", "megatron-2022", "megatron-2021"] = Field(
        "current",
        description="the kernels the run is made with: current (GEMMs at the GPU's maximum achievable "
        "matmul throughput, 2025 software; norms at the achievable HBM bandwidth), megatron-2022 (GEMMs at the "
        "GPU's CUDA 11.7 measurement: A100 only), megatron-2021 (that, Megatron-LM's 2021 fused LayerNorm "
        "at its measured bandwidth, and its backward's tensor-parallel exchanges one after the other, before it "
        "overlapped them with the GEMMs); kernels/model.py, docs/validation.md",
    )

    memory_check: bool = Field(True, description="llm-training: refuse a plan that does not fit GPU memory")
    iterations: int = Field(1, ge=1, le=1000)
