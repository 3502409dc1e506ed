"""Checks of the workload section against the cluster (GPU counts, batch, parallel sizes, memory)."""

from __future__ import annotations

from ..catalog import gpu
from ..errors import InputError, Problem
from .schema import Scenario
from .workload_spec import MAX_MICRO_BATCHES


def check_workload(s: Scenario) -> list[Problem]:
    out = check_software(s)
    if s.workload.kind == "llm-training":
        return out + check_llm_training(s)
    return out + check_data_parallel(s)


def check_software(s: Scenario) -> list[Problem]:
    """workload.software other than current needs the GPU's matmul measurement with that software; a fused
    attention kernel named in workload.attention, the GPU's measurement of it."""
    from ..kernels.model import KernelModel

    w = s.workload
    out: list[Problem] = []
    if w.fp8_recipe != "delayed" and "fp8_recipe" in w.model_fields_set and w.precision != "fp8":
        out.append(Problem("workload.fp8_recipe", f"applies to precision: fp8 (the run is {w.precision})"))
    elif w.fp8_recipe == "mxfp8" and not gpu(s.cluster.gpu).mxfp8:
        out.append(
            Problem(
                "workload.fp8_recipe",
                f"mxfp8 needs MXFP8 tensor cores (Blackwell: B200, GB200); {s.cluster.gpu} has none",
            )
        )
    if w.compute_efficiency is not None:
        return out
    if w.kind == "llm-training" and w.attention != "unfused":
        try:
            gpu(s.cluster.gpu).attention_kernel(w.attention)
        except (ValueError, KeyError) as e:
            out.append(Problem("workload.attention", str(e).removeprefix("workload.attention: ")))
    if w.software == "current":
        return out
    try:
        KernelModel(gpu(s.cluster.gpu), w.precision, software=w.software)
    except (ValueError, KeyError) as e:
        out.append(Problem("workload.software", str(e).removeprefix("workload.software: ")))
    return out


def check_data_parallel(s: Scenario) -> list[Problem]:
    out: list[Problem] = []
    w, gpus = s.workload, s.cluster.total_gpus
    if w.model.layer_widths is None and w.model.name is None:
        out.append(
            Problem(
                "workload.model.layer_widths",
                "the data-parallel workload trains a feed-forward "
                "network (give its layer widths) or a zoo model (name)",
            )
        )
    elif w.model.layer_widths is None:
        from ..models import MODELS, Transformer

        m = MODELS.get((w.model.name or "").lower())  # a name here: the branch above took none
        if m is None:
            out.append(
                Problem("workload.model.name", f"unknown model {w.model.name!r}; known: {', '.join(sorted(MODELS))}")
            )
        elif isinstance(m, Transformer):
            out.append(Problem("workload.model.name", f"{w.model.name!r} is a transformer: use kind: llm-training"))
    if w.parallelism is not None:
        out.append(Problem("workload.parallelism", "only for kind: llm-training"))
    spec = gpu(s.cluster.gpu)
    if w.precision not in spec.peak_tflops:  # was a KeyError in simulate
        out.append(Problem("workload.precision", f"{spec.name} has no {w.precision} tensor cores"))
    dp = w.data_parallel if w.data_parallel is not None else gpus
    if w.data_parallel is not None and w.data_parallel != gpus:
        out.append(
            Problem(
                "workload.data_parallel",
                f"must equal the cluster's GPU count {gpus} "
                f"({s.cluster.servers} servers x {s.cluster.gpus_per_server} GPUs) for pure data parallelism",
            )
        )
    if w.global_batch_size % dp:
        out.append(
            Problem(
                "workload.global_batch_size",
                f"must be divisible by the {dp} data-parallel ranks (got {w.global_batch_size})",
            )
        )
    return out


def check_llm_training(s: Scenario) -> list[Problem]:
    from ..workload.from_spec import resolve_plan
    from ..workload.memory import GB, memory_per_gpu

    try:
        model, plan, out = resolve_plan(s)
    except InputError as exc:
        return exc.problems
    spec = gpu(s.cluster.gpu)
    if s.workload.precision not in spec.peak_tflops:
        out.append(Problem("workload.precision", f"{spec.name} has no {s.workload.precision} tensor cores"))
    if plan.micro_batches > MAX_MICRO_BATCHES:  # each a pass of tasks on every stage: past memory and patience
        out.append(
            Problem(
                "workload.global_batch_size",
                f"gives {plan.micro_batches:,} micro-batches per iteration "
                f"(at most {MAX_MICRO_BATCHES:,}): raise micro_batch_size or lower the batch",
            )
        )
    if out or not s.workload.memory_check:
        return out
    est = memory_per_gpu(model, plan)
    if est.total_bytes > spec.hbm_gB * GB:
        g = est.as_gB()
        out.append(
            Problem(
                "workload.parallelism",
                f"does not fit GPU memory: stage {est.stage} needs {g['total']:.1f} GB per GPU (weights "
                f"{g['weights']:.1f}, gradients {g['gradients']:.1f}, optimizer states {g['optimizer']:.1f}, "
                f"activations {g['activations']:.1f}) but a {spec.name} has {spec.hbm_gB:g} GB; raise tp/pp, "
                "use zero/fsdp, sequence_parallel or recompute, or lower micro_batch_size",
            )
        )
    return out
