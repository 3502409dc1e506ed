"""`aifabric pipeline`: a pipeline schedule as a per-time-step table of who works on what."""

from __future__ import annotations

import typer

from ..errors import InputError, Problem
from ..workload.pipeline import SCHEDULES
from .app import app
from .console import make_console

console = make_console()

GPU_NAMES = {"book": ["0a", "1a", "0b", "1b"], "blog": ["A1", "A2", "B1", "B2"]}


MAX_CELLS = 64 * 256 * 2 * 2  # the largest table the earlier limits allowed: about 6 s


@app.command("pipeline")
def pipeline(
    stages: int = typer.Option(4, "--stages", "-p", help="pipeline stages (one GPU each)"),
    micro_batches: int = typer.Option(4, "--micro-batches", "-m", help="micro-batches per iteration"),
    schedule: str = typer.Option("book", "--schedule", "-s", help=f"one of {', '.join(SCHEDULES)}"),
    chunks: int = typer.Option(2, "--chunks", "-v", help="model chunks per stage (interleaved only)"),
    backward_steps: int = typer.Option(
        1, "--backward-steps", help="time steps of a backward pass (gpipe, 1f1b, interleaved); a forward takes one"
    ),
    gpus_per_server: int = typer.Option(
        0,
        "--gpus-per-server",
        help="stages per server, for NVLink vs RDMA (default: 2 for book/blog as in the book, else 8)",
    ),
) -> int:
    """Per-time-step table: which stage runs which micro-batch forward (F) or backward (B), active and idle
    GPUs, utilization per step and overall (book / blog: the 4-GPU example of Deep Learning for Network Engineers,
    Ch. 8, 10 time steps, and of its companion blog post, 11 steps)."""
    from rich.table import Table

    from ..workload.pipeline import bubble_fraction, step_table, step_transfers

    problems = []
    if schedule not in SCHEDULES:
        problems.append(Problem("--schedule", f"must be one of {', '.join(SCHEDULES)} (got {schedule!r})"))
    if stages < 1:
        problems.append(Problem("--stages", f"must be >= 1 (got {stages})"))
    if micro_batches < 1:
        problems.append(Problem("--micro-batches", f"must be >= 1 (got {micro_batches})"))
    if chunks < 1:
        problems.append(Problem("--chunks", f"must be >= 1 (got {chunks})"))
    if backward_steps < 1:
        problems.append(Problem("--backward-steps", f"must be >= 1 (got {backward_steps})"))
    if schedule == "interleaved" and stages >= 1 and micro_batches % stages:
        problems.append(
            Problem(
                "--micro-batches",
                f"the interleaved schedule needs a multiple of --stages ({stages}), got {micro_batches}",
            )
        )
    if gpus_per_server < 0:
        problems.append(Problem("--gpus-per-server", f"must be >= 1 (got {gpus_per_server})"))
    if stages > 64:
        problems.append(Problem("--stages", f"the table is for reading: at most 64 stages (got {stages:,})"))
    if micro_batches > 256:
        problems.append(
            Problem("--micro-batches", f"the table is for reading: at most 256 micro-batches (got {micro_batches:,})")
        )
    if chunks > 16:
        problems.append(Problem("--chunks", f"the table is for reading: at most 16 chunks per stage (got {chunks:,})"))
    if backward_steps > 16:
        problems.append(
            Problem(
                "--backward-steps",
                f"the table is for reading: at most 16 time steps per backward pass (got {backward_steps:,})",
            )
        )
    work = stages * micro_batches * (chunks if schedule == "interleaved" else 1) * (1 + backward_steps)
    if not problems and work > MAX_CELLS:  # the table's cells: seconds each thousand
        problems.append(
            Problem(
                "--micro-batches",
                f"stages x micro-batches x chunks x (1 + backward steps) = "
                f"{work:,}: at most {MAX_CELLS:,} (lower one of them)",
            )
        )
    if problems:
        raise InputError(problems)
    v = chunks if schedule == "interleaved" else 1
    table = step_table(schedule, stages, micro_batches, v, backward_steps)
    names = GPU_NAMES.get(schedule) if stages == 4 else None
    names = names or [f"stage {s + 1}" for s in range(stages)]
    t = Table(
        title=f"{schedule} pipeline: {stages} stages, {micro_batches} micro-batches"
        + (f", {v} chunks per stage" if v > 1 else "")
        + " (F = forward, B = backward of micro-batch n; .c = chunk)"
    )
    t.add_column("step", justify="right")
    for n in names:
        t.add_column(n, justify="center")
    t.add_column("transfers (y activations, E errors)")
    t.add_column("active", justify="right")
    t.add_column("idle")
    t.add_column("utilization", justify="right")
    gps = gpus_per_server or (2 if schedule in GPU_NAMES else 8)

    def hop(x) -> str:
        net = "NVLink" if x.src_stage // gps == x.dst_stage // gps else "RDMA"
        return f"{x.what}{x.micro_batch + 1} {names[x.src_stage]}→{names[x.dst_stage]} {net}"

    for i, row in enumerate(table.steps):
        idle = [names[s] for s in range(stages) if not row[s]]
        cells = [" ".join(r.label(v) for r in sorted(cell, key=lambda r: r.kind != "F")) or "·" for cell in row]
        t.add_row(
            str(i + 1),
            *cells,
            "; ".join(hop(x) for x in step_transfers(table, i)) or "—",
            str(len(table.active(i))),
            ", ".join(idle) or "none",
            f"{table.utilization(i):.0%}",
        )
    console.print(t)
    console.print(
        f"overall utilization {table.overall_utilization:.1%} over {len(table.steps)} steps; "
        f"bubble (idle share) {table.bubble_fraction:.1%}"
    )
    if schedule in ("gpipe", "1f1b", "interleaved"):
        console.print(f"textbook bubble (p−1)/(v·m+p−1) = {bubble_fraction(stages, micro_batches, v):.1%}")
    return 0
