"""A parallelism plan: how a transformer's training is split over GPUs, as plain data."""

from __future__ import annotations

from dataclasses import dataclass

from .ranks import DEFAULT_ORDER, RankLayout

RECOMPUTE = ("none", "selective", "full")
DDP_BUCKET_MB = 25.0  # PyTorch DistributedDataParallel's default bucket_cap_mb


@dataclass(frozen=True)
class Plan:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    schedule: str = "1f1b"  # gpipe | 1f1b | interleaved
    chunks: int = 1  # model chunks per stage (interleaved 1F1B)
    micro_batch_size: int = 1  # sequences per micro-batch
    global_batch_size: int = 1  # sequences per iteration, all data-parallel ranks together
    seq_len: int = 2048
    precision: str = "bf16"
    recompute: str = "none"  # none | selective | full
    sequence_parallel: bool = False
    zero: int = 0  # 0 none, 1 optimizer states, 2 + gradients, 3 + weights (= FSDP full shard)
    bucket_mb: float = DDP_BUCKET_MB
    overlap_grad_reduce: bool = True  # DDP: bucket AllReduce launched during the backward pass
    backward_prefetch: str = "pre"  # ZeRO-3: the next block's gather before (pre) or after (post) its backward's
    grad_reduce_precision: str = "auto"  # see grad_precision
    order: str = DEFAULT_ORDER
    compute_efficiency: float | None = None  # None: the kernel model; else every op at this fraction of peak
    fp8_recipe: str = "delayed"  # precision fp8: Transformer Engine's scaling recipe (kernels/transformer.py)
    attention: str = "flash"  # a fused kernel (flash: the GPU's default; flash2, cudnn, flash3, ck) | unfused
    pipeline_scatter_gather: bool = False  # Megatron: with tp > 1 and no sequence parallelism, each TP rank
    # sends 1/tp of the activation to the next stage, which all-gathers it over NVLink
    layers_per_stage: tuple[int, ...] = ()  # decoder blocks of each virtual stage, in order; () = an even split
    tp_async_backward: bool = True  # the column-parallel layers' backward exchanges beside their GEMMs (Megatron-LM
    # from late 2021, Transformer Engine): the input re-gathered under the input-gradient GEMM (sequence
    # parallelism), the input gradient reduced under the weight-gradient GEMM; False: Megatron-LM of early 2021

    @property
    def layout(self) -> RankLayout:
        return RankLayout(tp=self.tp, pp=self.pp, dp=self.dp, cp=self.cp, ep=self.ep, order=self.order)

    @property
    def grad_precision(self) -> str:
        """The precision of the data-parallel gradient reductions (buckets, ZeRO / FSDP reduce-scatters, the
        tied embedding's all-reduce). `auto`: fp32 when training in bf16 or fp8, as Megatron-LM does ("bfloat16
        requires gradient accumulation and all-reduce to be done in fp32": its fp32 main-gradient buffer is
        what is reduced; torchtitan's FSDP reduces in fp32 by default too), else the training precision."""
        if self.grad_reduce_precision != "auto":
            return self.grad_reduce_precision
        return "fp32" if self.precision in ("bf16", "fp8") else self.precision

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def micro_batches(self) -> int:
        """Micro-batches per data-parallel rank per iteration (also the pipeline's m)."""
        return self.global_batch_size // (self.dp * self.micro_batch_size)

    @property
    def virtual_stages(self) -> int:
        return self.pp * (self.chunks if self.schedule == "interleaved" else 1)

    def virtual_stage_layers(self, layers: int) -> list[range]:
        """The blocks of each virtual stage: `layers_per_stage` when given (Llama 3 405B: 126 blocks over 16
        stages, one fewer on the first and the last), else an even split."""
        counts = list(self.layers_per_stage) or [layers // self.virtual_stages] * self.virtual_stages
        out, start = [], 0
        for c in counts:
            out.append(range(start, start + c))
            start += c
        return out
