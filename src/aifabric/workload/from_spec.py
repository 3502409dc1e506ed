"""Scenario workload section -> (transformer, plan), with every problem named by its field path."""

from __future__ import annotations

from ..errors import InputError, Problem
from ..models.transformer import MoE, Transformer
from ..models.zoo import MODELS
from .plan import Plan
from .ranks import parse_order

P = "workload.parallelism"


def megatron_bucket_mb(dp: int, precision: str) -> float:
    """Megatron-core's default gradient bucket (DistributedDataParallel: `bucket_size = max(40_000_000,
    1_000_000 * data_parallel_world_size)` parameters), in MiB of gradients of `precision`."""
    from ..units import BYTES_PER_ELEMENT

    return max(40_000_000, 1_000_000 * dp) * BYTES_PER_ELEMENT[precision] / 2**20


def resolve_model(spec, field: str = "workload.model") -> Transformer:
    """The transformer a `workload.model` section names or describes."""
    if spec.name is not None:
        model = MODELS.get(spec.name.lower())
        if model is None:
            known = ", ".join(k for k, m in MODELS.items() if isinstance(m, Transformer))
            raise InputError(Problem(f"{field}.name", f"unknown model {spec.name!r}; known transformers: {known}"))
        if not isinstance(model, Transformer):
            raise InputError(Problem(f"{field}.name", f"{spec.name!r} is not a transformer; llm-training needs one"))
        return model
    if spec.kind != "transformer":
        raise InputError(Problem(f"{field}.kind", "llm-training needs a transformer: a zoo name or kind: transformer"))
    moe = None
    if spec.experts:
        moe = MoE(
            spec.experts, spec.top_k, spec.expert_ffn_hidden or spec.ffn_hidden or 4 * spec.hidden, spec.shared_experts
        )
    return Transformer(
        "custom",
        spec.layers,
        spec.hidden,
        spec.heads,
        spec.ffn_hidden or 4 * spec.hidden,
        spec.vocab,
        kv_heads=spec.kv_heads,
        kv_channels=spec.kv_channels,
        gated_mlp=spec.gated_mlp,
        bias=spec.bias,
        norm=spec.norm,
        learned_positions=spec.positions == "learned",
        max_seq_len=spec.max_seq_len,
        tied_embeddings=spec.tied_embeddings,
        sliding_window=spec.sliding_window,
        global_every=spec.global_every,
        moe=moe,
    )


def resolve_plan(s) -> tuple[Transformer, Plan, list[Problem]]:
    """The model and plan of an llm-training scenario, and the problems that make it impossible."""
    w, gpus = s.workload, s.cluster.total_gpus
    model = resolve_model(w.model)
    par = w.parallelism
    if par is None:
        from ..scenario.workload_spec import ParallelismSpec

        par = ParallelismSpec()
    out: list[Problem] = []
    try:
        parse_order(par.order)
    except ValueError as exc:
        out.append(Problem(f"{P}.order", str(exc)))
    per_replica = par.tp * par.pp * par.cp
    dp = par.dp if par.dp is not None else max(1, gpus // per_replica)
    if per_replica * dp != gpus:
        out.append(
            Problem(
                P,
                f"tp x pp x dp x cp = {par.tp} x {par.pp} x {dp} x {par.cp} = {per_replica * dp} "
                f"must equal the cluster's {gpus} GPUs",
            )
        )
    if w.data_parallel is not None:
        out.append(Problem("workload.data_parallel", "llm-training takes the data-parallel size from parallelism.dp"))
    gps = s.cluster.gpus_per_server
    if par.tp > gps or gps % par.tp:
        out.append(
            Problem(
                f"{P}.tp",
                f"tp={par.tp} must divide the {gps} GPUs per server so that each "
                "tensor-parallel group stays on NVLink inside one server",
            )
        )
    if model.heads % par.tp:
        out.append(Problem(f"{P}.tp", f"tp={par.tp} must divide the model's {model.heads} attention heads"))
    chunks = par.chunks if par.schedule == "interleaved" else 1
    if par.chunks > 1 and par.schedule != "interleaved":
        out.append(Problem(f"{P}.chunks", "model chunks per stage need schedule: interleaved"))
    stages = par.pp * chunks
    if par.layers_per_stage is not None:
        counts = par.layers_per_stage
        if len(counts) != stages:
            out.append(
                Problem(
                    f"{P}.layers_per_stage",
                    f"needs one count per (virtual) stage: pp x chunks = {stages} (got {len(counts)})",
                )
            )
        elif sum(counts) != model.layers or min(counts) < 1:
            out.append(
                Problem(
                    f"{P}.layers_per_stage",
                    f"counts of at least 1 summing to the model's {model.layers} "
                    f"layers (got {sum(counts)}, smallest {min(counts)})",
                )
            )
    elif model.layers % stages:
        out.append(
            Problem(
                f"{P}.pp",
                f"pp x chunks = {stages} must divide the model's {model.layers} layers "
                "(or give parallelism.layers_per_stage)",
            )
        )
    if par.ep > 1:
        if model.moe is None:
            out.append(Problem(f"{P}.ep", f"ep={par.ep} needs a mixture-of-experts model ({model.name} is dense)"))
        elif model.moe.experts % par.ep:
            out.append(Problem(f"{P}.ep", f"ep={par.ep} must divide the model's {model.moe.experts} experts"))
        if dp % par.ep:
            out.append(Problem(f"{P}.ep", f"ep={par.ep} must divide the data-parallel size {dp}"))
    seq = w.seq_len or model.max_seq_len
    if model.learned_positions and seq > model.max_seq_len:
        fix = " (raise workload.model.max_seq_len, or set positions: rotary)" if w.model.name is None else ""
        out.append(
            Problem(
                "workload.seq_len",
                f"{model.name} has learned positions for {model.max_seq_len} tokens (got {seq}){fix}",
            )
        )
    if seq % par.cp:
        out.append(Problem("workload.seq_len", f"must be divisible by cp={par.cp} (got {seq})"))
    if model.sliding_window is not None and model.sliding_window < seq and model.windowed_layers:
        if par.cp > 1:
            out.append(Problem(f"{P}.cp", "context parallelism with sliding-window attention is not modelled"))
        if w.attention == "unfused":
            out.append(Problem("workload.attention", "sliding-window attention is timed on a fused kernel only"))
    per_step = dp * par.micro_batch_size
    if w.global_batch_size % per_step:
        out.append(
            Problem(
                "workload.global_batch_size",
                f"must be divisible by dp x micro_batch_size = {dp} x "
                f"{par.micro_batch_size} = {per_step} (got {w.global_batch_size})",
            )
        )
    m = w.global_batch_size // per_step if per_step else 0
    if par.micro_batches is not None and par.micro_batches != m:
        out.append(
            Problem(
                f"{P}.micro_batches",
                f"global batch {w.global_batch_size} / (dp {dp} x micro_batch_size "
                f"{par.micro_batch_size}) gives {m} micro-batches, not {par.micro_batches}",
            )
        )
    if par.schedule == "interleaved" and m % par.pp:
        out.append(
            Problem(
                f"{P}.micro_batches", f"the interleaved schedule needs micro-batches ({m}) divisible by pp ({par.pp})"
            )
        )
    if (par.zero or par.fsdp) and dp * par.cp == 1:
        out.append(Problem(f"{P}.zero", "ZeRO / FSDP shard over data-parallel ranks: dp is 1"))
    if par.backward_prefetch != "pre" and par.zero < 3 and not par.fsdp:
        out.append(
            Problem(
                f"{P}.backward_prefetch",
                f"when ZeRO-3 / FSDP gathers the next block's weights: set zero: 3 or fsdp: true (zero is {par.zero})",
            )
        )
    plan = Plan(
        tp=par.tp,
        pp=par.pp,
        dp=dp,
        cp=par.cp,
        ep=par.ep,
        schedule=par.schedule,
        chunks=chunks,
        micro_batch_size=par.micro_batch_size,
        global_batch_size=w.global_batch_size,
        seq_len=seq,
        precision=w.precision,
        recompute=par.recompute,
        sequence_parallel=par.sequence_parallel and par.tp > 1,
        zero=3 if par.fsdp else par.zero,
        bucket_mb=par.bucket_mb
        or megatron_bucket_mb(
            dp, Plan(precision=w.precision, grad_reduce_precision=par.grad_reduce_precision).grad_precision
        ),
        overlap_grad_reduce=par.overlap_grad_reduce,
        backward_prefetch=par.backward_prefetch,
        grad_reduce_precision=par.grad_reduce_precision,
        order=par.order if not any(p.path == f"{P}.order" for p in out) else Plan.order,
        compute_efficiency=w.compute_efficiency,
        attention=w.attention,
        fp8_recipe=w.fp8_recipe,
        layers_per_stage=tuple(par.layers_per_stage or ()),
        pipeline_scatter_gather=(par.pipeline_scatter_gather if par.pipeline_scatter_gather is not None else True)
        and par.tp > 1
        and not par.sequence_parallel,
        tp_async_backward=w.software != "megatron-2021",
    )
    return model, plan, out
