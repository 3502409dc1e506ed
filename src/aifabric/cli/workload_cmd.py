"""`aifabric workload FILE`: what a scenario's training asks of GPUs and networks, before simulating it."""

from __future__ import annotations

from pathlib import Path

import typer

from .app import app
from .console import make_console

console = make_console()

DIM_NAMES = {
    "dp": "data parallel",
    "tp": "tensor parallel",
    "pp": "pipeline",
    "ep": "expert parallel",
    "cp": "context parallel",
    "zero": "ZeRO / FSDP shards",
    "all": "all",
}


def _gB(x: float) -> str:
    return f"{x / 1e9:,.2f}"


@app.command("workload")
def workload(file: Path = typer.Argument(..., help="scenario YAML")) -> int:
    """Per-GPU memory, FLOPs, and the bytes per iteration of each parallel dimension on scale-up (NVLink)
    and scale-out (backend fabric), computed from the scenario's model and parallelism plan."""
    from rich.table import Table

    from ..catalog import gpu
    from ..scenario import load_scenario
    from ..simulate import build_workload
    from ..workload.traffic import traffic_summary

    s = load_scenario(file)
    spec = gpu(s.cluster.gpu)
    if s.workload.kind == "llm-training":
        from ..workload.from_spec import resolve_plan
        from ..workload.memory import memory_per_gpu

        model, plan, _ = resolve_plan(s)  # load_scenario has refused a plan with problems
        console.print(
            f"[bold]{model.name}[/]: {model.params:,} parameters"
            + (f" ({model.active_params:,} active per token)" if model.moe else "")
            + f"; tp {plan.tp} × pp {plan.pp} × dp {plan.dp} × cp {plan.cp}, ep {plan.ep}, "
            f"{plan.schedule}, {plan.micro_batches} micro-batches of {plan.micro_batch_size} × "
            f"{plan.seq_len} tokens"
        )
        mem = Table(title=f"memory per GPU, GB ({spec.name}: {spec.hbm_gB:g} GB)")
        for col in ("stage", "parameters", "weights", "gradients", "optimizer", "activations", "total"):
            mem.add_column(col, justify="right")
        for st in range(plan.pp):
            e = memory_per_gpu(model, plan, st)
            g = e.as_gB()
            mem.add_row(
                str(st),
                f"{e.params / 1e9:.2f} B",
                *(f"{g[k]:.1f}" for k in ("weights", "gradients", "optimizer", "activations", "total")),
            )
        console.print(mem)
    w = build_workload(s)
    peak = spec.peak_flops(s.workload.precision)
    ideal_s = w.flops_per_iteration / (w.world_size * peak)
    console.print(f"{w.description}; {w.flops_per_iteration:.3e} model FLOP per iteration", highlight=False)
    console.print(
        f"ideal iteration time {ideal_s:.3f} s: the whole iteration if all {w.world_size} GPUs computed at "
        f"their dense {s.workload.precision} peak ({peak / 1e12:,.0f} TFLOP/s each) and never waited "
        "(MFU 100%; the simulated iteration time is longer)",
        highlight=False,
    )
    tr = traffic_summary(w, s.cluster.gpus_per_server)
    t = Table(title="bytes per iteration (GB): sent by each GPU, and in total over scale-up and scale-out")
    for col in ("dimension", "per GPU (max)", "per GPU (mean)", "total", "scale-up (NVLink)", "scale-out (fabric)"):
        t.add_column(col, justify="right" if col != "dimension" else "left")
    for dim, d in tr.items():
        t.add_row(
            DIM_NAMES.get(dim, dim),
            _gB(d.per_gpu_max_bytes),
            _gB(d.per_gpu_mean_bytes),
            _gB(d.total_bytes),
            _gB(d.scale_up_bytes),
            _gB(d.scale_out_bytes),
        )
    console.print(t)
    return 0


@app.command("models")
def models(
    gpu_memory_gb: float = typer.Option(80.0, "--gpu-memory-gb", help="GPU memory for the 'GPUs for weights' column"),
    bytes_per_param: float = typer.Option(2.0, "--bytes-per-param", help="2 = FP16/BF16 weights (Figure 13-3)"),
) -> int:
    """The model zoo: parameters computed from the architecture, the published count, and how many GPUs the
    weights alone need (Deep Learning for Network Engineers, Ch. 13, Figure 13-3: 8B -> 1, 70B -> 2, 405B -> 11
    at 80 GB)."""
    import math

    from rich.table import Table

    from ..errors import InputError, Problem
    from ..models import MODELS, Transformer
    from ..workload.memory import min_gpus_for_weights

    bad = [
        Problem(flag, f"must be a number > 0 (got {v:g})")
        for flag, v in (("--gpu-memory-gb", gpu_memory_gb), ("--bytes-per-param", bytes_per_param))
        if not (math.isfinite(v) and v > 0)
    ]
    if bad:
        raise InputError(bad)
    t = Table(
        title=f"model zoo (weights at {bytes_per_param:g} bytes per parameter, {gpu_memory_gb:g} GB GPUs)",
        caption="window: the keys a query sees in a sliding-window block; /k: every k-th block sees all of them",
    )
    columns = ("model", "parameters", "published", "active", "layers", "hidden", "heads (kv)", "window")
    for col in (*columns, "GPUs for weights"):
        t.add_column(col, justify="left" if col == "model" else "right")
    for name, m in MODELS.items():
        pub = getattr(m, "published_params", None)
        if isinstance(m, Transformer):
            kv = f"{m.heads} ({m.kv_heads})" if m.kv_heads else str(m.heads)
            window = "" if m.sliding_window is None else f"{m.sliding_window:,}"
            if window and m.global_every:
                window += f"/{m.global_every}"
            row = [f"{m.active_params:,}" if m.moe else "", str(m.layers), str(m.hidden), kv, window]
        else:
            row = ["", "", "", "", ""]
        t.add_row(
            name,
            f"{m.params:,}",
            f"{pub:,.0f}" if pub else "",
            *row,
            str(min_gpus_for_weights(m.params, bytes_per_param, gpu_memory_gb)),
        )
    console.print(t)
    return 0
