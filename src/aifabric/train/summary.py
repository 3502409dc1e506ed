"""What a training run reports: train.json (documented in docs/train.md) and the full weights rebuilt
from the ranks' shards."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from .. import __version__
from .launcher import TrainRun

TRAIN_SCHEMA_VERSION = 1


def assemble_weights(out_dir: Path, run: TrainRun) -> dict[str, Any]:
    """Full single-process weights from the shards of the first replica (TP shards concatenated)."""
    import torch

    shards: dict[str, list[tuple[int, Any, int | None]]] = defaultdict(list)
    for r in run.results:
        c = r["coords"]
        if c["dp"] != 0:
            continue
        for name, (t, dim) in torch.load(Path(out_dir) / f"weights-rank{r['rank']}.pt").items():
            shards[name].append((c["tp"], t, dim))
    full = {}
    for name, parts in shards.items():
        parts.sort(key=lambda p: p[0])
        dim = parts[0][2]
        full[name] = parts[0][1] if dim is None else torch.cat([p[1] for p in parts], dim=dim)
    return full


def comm_table(run: TrainRun) -> list[dict[str, Any]]:
    """Per (op, tag): how many ops (all ranks, all steps), bytes, and summed time."""
    from .tracer import read_trace

    if run.trace_path is None:
        return []
    trace = read_trace(run.trace_path)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for events in trace.comms.values():
        for e in events:
            row = rows.setdefault(
                (e["op"], e["tag"]), {"op": e["op"], "tag": e["tag"], "count": 0, "bytes": 0, "time_s": 0.0}
            )
            row["count"] += 1
            row["bytes"] += e["bytes"]
            row["time_s"] += e["end_s"] - e["start_s"]
    return sorted(rows.values(), key=lambda r: (r["op"], r["tag"]))


def build_train_summary(run: TrainRun, overhead: dict[str, float] | None = None) -> dict[str, Any]:
    cfg = run.config
    times = run.step_times_s
    steady = times[1:] or times
    return {
        "schema_version": TRAIN_SCHEMA_VERSION,
        "aifabric_version": __version__,
        "model": cfg.model,
        "plan": {
            "dp": cfg.dp,
            "tp": cfg.tp,
            "pp": cfg.pp,
            "schedule": cfg.schedule,
            "micro_batches": cfg.n_micro,
            "global_batch": cfg.global_batch,
        },
        "variant": {"layers": list(cfg.layer_widths), "cell": cfg.cell, "tp_style": cfg.tp_style},
        "world_size": cfg.layout.world_size,
        "steps": cfg.steps,
        "losses": run.losses,
        "step_times_s": times,
        "median_step_time_s": statistics.median(steady),
        "wall_s": run.wall_s,
        "trace": run.trace_path.name if run.trace_path else None,
        "communication": comm_table(run),
        "tracing_overhead": overhead,
    }


def tracing_overhead(run: TrainRun) -> dict[str, float]:
    """From a run with `alternate_trace` (even steps traced, odd untraced, step 0 excluded: connection
    set-up): median step time of each kind, interleaved so that background load hits both alike."""
    times = run.step_times_s
    traced = [t for k, t in enumerate(times) if k % 2 == 0 and k > 0]
    untraced = [t for k, t in enumerate(times) if k % 2 == 1]
    a, b = statistics.median(untraced), statistics.median(traced)
    from .tracer import tracer_cost_s

    ops = max(r["comm_ops"] for r in run.results) / run.config.steps  # per rank and step
    per_op = tracer_cost_s()
    return {
        "untraced_step_s": a,
        "traced_step_s": b,
        "overhead_fraction": (b - a) / a if a else 0.0,
        "steps_each": min(len(traced), len(untraced)),
        "tracer_cost_per_op_s": per_op,
        "ops_per_step": ops,
        "tracer_cost_fraction": ops * per_op / a if a else 0.0,
    }
