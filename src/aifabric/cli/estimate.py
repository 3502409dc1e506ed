"""Before simulating: what a scenario will take (tasks, memory, time), from its plan alone, and the refusal of a
scenario this machine cannot hold.

The figures are the measured costs of whole `aifabric simulate` runs (docs/performance.md: memory grows with the
task count, about 2 kB a task, plus the fabric and per-rank results; 50-230 µs of wall time a task) applied to a
count of tasks made from the plan without building anything:

- llm-training: every data-parallel replica's pipeline lanes, dp x cp x pp x micro-batches x 2 (forward and
  backward) x (blocks per stage + the tp pipeline sends between stages), per iteration. Against the task
  graphs lowered: 0.4-1.1 times the count on small plans, 0.5-0.9 on the benchmarks (GPT-3 175B on 1,024 and
  8,192 GPUs, Llama 3 405B on 16,384 and 32,768, the 1T model on 3,072).
- data-parallel: per rank and iteration its compute ops and its part in the gradient all-reduce, whose
  transfers grow with the square root of the gradient's bytes (pipelined pieces): 35 + 0.117 sqrt(bytes),
  against 35 (8 kB), 513 (16 MB) and 4,083 (1 GB) measured per rank.

Only a scenario whose estimate is past what this machine's memory holds is refused (exit 2, naming the field that
drives it, with what it would take and how to reduce it); `--force` runs it anyway.

The packet engine's cost is its packets: the bytes that cross NICs (the workload's traffic summary) in 4 KB
packets, at 34 µs of wall time each (bench/bench_packet.py: 272 k packet hops of 65,536 packets in 2.2 s, ~4 hops a
packet; docs/performance.md). Its memory stays small; a run estimated past a week is refused the same way. A
replayed trace is not estimated here (its cost is the trace's size).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, Problem
from ..estimate import duration
from ..units import BYTES_PER_ELEMENT

BASE_BYTES = 0.5e9  # the interpreter, numpy, numba and the libraries: a small run's peak
BYTES_PER_TASK = 2_200  # the 1T model: 7.6 GB peak for 3.5 M tasks, the report included
BYTES_PER_GPU = 30_000  # the fabric and per-rank results: Llama 3 405B on 32,768 GPUs, 5.6 GB for 1.5 M tasks
SECONDS_PER_TASK = 6.0e-5  # whole command, wall, 2026-11-26: 28 µs (1T, 3,072 GPUs) to 80 µs (Llama 3, 16,384) a task
MEMORY_SHARE = 0.8  # of this machine's memory (or the process's cgroup limit) a run may be estimated to need
PACKET_BYTES = 4096  # RoCE payload per packet at a 4,096-byte path MTU
SECONDS_PER_PACKET = 34e-6  # the packet engine, wall: bench/bench_packet.py, ~4 hops a packet at 125 k hops/s
PACKET_LIMIT_S = 7 * 86400  # a packet-engine run estimated past a week is refused (--force runs it)


@dataclass(frozen=True)
class Estimate:
    tasks: int
    memory_bytes: float
    seconds: float
    counted: str  # how the tasks were counted, in words
    field: str  # the scenario field that drives the count most
    reduce: str  # how to make it smaller


def _gb(n: float) -> str:
    return f"{n / 1e9:,.1f} GB" if n < 1e12 else f"{n / 1e12:,.1f} TB"


def _of(tasks: float, gpus: int, counted: str, field: str, reduce: str) -> Estimate:
    tasks = max(1, int(tasks))
    return Estimate(
        tasks,
        BASE_BYTES + BYTES_PER_TASK * tasks + BYTES_PER_GPU * gpus,
        SECONDS_PER_TASK * tasks,
        counted,
        field,
        reduce,
    )


def estimate(s) -> Estimate | None:
    """The work of simulating scenario `s` on the flow or analytic engine; None when the plan itself has problems
    (simulate names them) or the workload is not one counted here."""
    w, gpus = s.workload, s.cluster.total_gpus
    its = w.iterations
    if w.kind == "llm-training":
        from ..workload.from_spec import resolve_plan

        try:
            model, plan, problems = resolve_plan(s)
        except (InputError, ValueError, KeyError):
            return None
        if problems:
            return None
        chunks = plan.chunks if plan.schedule == "interleaved" else 1
        mb = max(1, plan.micro_batches)
        per_stage = model.layers / plan.pp + (plan.tp * chunks if plan.pp > 1 else 0)
        lanes = plan.dp * plan.cp * plan.pp
        tasks = lanes * mb * 2 * per_stage * its
        cp = f" x {plan.cp} context-parallel ranks" if plan.cp > 1 else ""
        counted = (
            f"{plan.dp:,} data-parallel replica(s){cp} x {plan.pp} pipeline stage(s) x {mb:,} "
            f"micro-batches x 2 passes x ~{per_stage:,.0f} tasks each" + (f" x {its} iterations" if its > 1 else "")
        )
        if its > 1 and its >= mb:
            field, reduce = "workload.iterations", "fewer iterations (one shows the steady state)"
        elif mb >= plan.dp:
            field, reduce = (
                "workload.global_batch_size",
                "fewer micro-batches: a smaller global_batch_size, or a larger parallelism.micro_batch_size",
            )
        else:
            field, reduce = (
                "cluster.servers",
                "fewer GPUs (fewer data-parallel replicas: the iteration time of a "
                "replica changes little with their number)",
            )
        return _of(tasks, gpus, counted, field, reduce)
    model = w.model
    try:
        from ..models import FeedForward, get_model

        if model.layer_widths is not None:
            params = FeedForward(tuple(model.layer_widths), model.bias).params
        else:
            params = get_model(model.name, "workload.model.name").params
    except Exception:  # noqa: BLE001 - an unknown model: simulate names it
        return None
    grad_bytes = params * BYTES_PER_ELEMENT.get(w.precision, 2)
    per_rank = 4 + (35 + 0.117 * math.sqrt(grad_bytes) if gpus > 1 else 0)
    tasks = gpus * per_rank * its
    counted = (
        f"{gpus:,} GPUs x ~{per_rank:,.0f} tasks each (compute, and the all-reduce of "
        f"{_gb(grad_bytes)} of gradients)" + (f" x {its} iterations" if its > 1 else "")
    )
    if its > 1 and its >= 10:
        return _of(tasks, gpus, counted, "workload.iterations", "fewer iterations (one shows the steady state)")
    return _of(tasks, gpus, counted, "cluster.servers", "fewer GPUs, or a smaller model")


def estimate_packet(s) -> Estimate | None:
    """The packet engine's work on scenario `s`: every byte that crosses a NIC, in packets; None when the workload
    cannot be built (simulate names why)."""
    from ..simulate import build_workload
    from ..workload import traffic_summary

    try:
        w = build_workload(s)
    except (InputError, ValueError, KeyError):
        return None
    summary = traffic_summary(w, gpus_per_server=s.cluster.gpus_per_server)
    network = sum(v.scale_out_bytes for k, v in summary.items() if k != "all")
    packets = max(1, int(network / PACKET_BYTES))
    return Estimate(
        packets,
        BASE_BYTES,
        packets * SECONDS_PER_PACKET,
        f"{_gb(network)} across NICs in {PACKET_BYTES:,}-byte packets",
        "engine",
        "the flow engine for the whole iteration (engine: flow), or the packet engine on fewer servers, "
        "a smaller batch or fewer iterations",
    )


def memory_limit_bytes() -> float:
    """This machine's memory, or the cgroup limit of this process when that is lower."""
    try:
        total = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        total = 16e9
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:
            total = float(int(text))
        break
    return total


def check_work(
    s, engine: str | None, force: bool = False, limit_bytes: float | None = None, limit_s: float = PACKET_LIMIT_S
) -> Estimate | None:
    """Refuse (InputError naming the driving field) a scenario whose estimated memory is past what this machine
    holds (flow, analytic) or whose packet-engine run would take past `limit_s`, unless `force`; the estimate
    otherwise (None when not estimated)."""
    if (engine or s.engine) == "packet":
        est = estimate_packet(s)
        if est is not None and not force and est.seconds > limit_s:
            raise InputError(
                Problem(
                    est.field,
                    (
                        f"the packet engine would take about {duration(est.seconds)} on this scenario ({est.tasks:,} "
                        f"packets: {est.counted}). To reduce it: {est.reduce}. --force runs it anyway"
                    ),
                )
            )
        return est
    est = estimate(s)
    if est is None or force:
        return est
    limit = memory_limit_bytes() if limit_bytes is None else limit_bytes
    if est.memory_bytes > MEMORY_SHARE * limit:
        raise InputError(
            Problem(
                est.field,
                (
                    f"this scenario would take about {_gb(est.memory_bytes)} of memory and {duration(est.seconds)} to "
                    f"simulate ({est.tasks:,} tasks: {est.counted}); this machine has {_gb(limit)}. To reduce it: "
                    f"{est.reduce}. --force runs it anyway"
                ),
            )
        )
    return est


def describe(est: Estimate) -> str:
    return f"about {est.tasks:,} tasks, {_gb(est.memory_bytes)} of memory, {duration(est.seconds)}"
