"""Results of a run: the timeline turned into the quantities engineers ask about.

Definitions (also in docs/summary-schema.md):
- iteration_time_s: simulated time of all iterations / iterations.
- compute_time_s: GPU busy time per iteration of the busiest rank.
- communication_time_s: per rank, the union of the intervals in which it takes part in a collective
  (its first transfer's start to its last transfer's end), sends or receives a point-to-point transfer
  (pipeline), or runs a folded scale-up collective (engines/fold.py), per iteration; the largest over ranks.
- compute_time_s: a merged task's folded collectives are not compute.
- exposed_communication_s: the part of that communication time during which the rank does not
  compute (what overlap would hide); the largest over ranks.
- algbw = bytes per rank / collective time; busbw = algbw x 2(n-1)/n for AllReduce, x (n-1)/n for
  AllGather, ReduceScatter and AlltoAll (nccl-tests' definitions, collectives.cost.BUSBW_FACTOR).
- mfu: model FLOPs of an iteration (no recomputation; attention over the full s x s square, Megatron's
  convention) / (iteration time x GPUs x dense peak); hfu: the same with every compute op's FLOPs,
  recomputation included (Korthikanti et al. 2022, Appendix A); model / hardware FLOP/s per GPU: the
  same numerators over iteration time x GPUs (what Megatron-LM logs as "TFLOP/s per GPU").
- compute_by_kind_s: per iteration, on the rank that computes longest, seconds by kernel kind (GEMM,
  attention, memory-bound, optimizer, launch; "all" with a `compute_efficiency` override).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .collectives.cost import busbw_factor
from .engines.executor import Timeline
from .engines.taskgraph import COMPUTE, TRANSFER, TaskGraph
from .fabric.graph import SCALE_UP_TIERS, Fabric
from .workload.ops import Workload


@dataclass(frozen=True)
class CollectiveResult:
    key: str
    op: str
    algorithm: str
    group_size: int
    size_bytes: int
    label: str
    start_s: float
    end_s: float
    transfers: int
    steps: int
    count: int = 1  # instances this row stands for (folded scale-up collectives are one row per kind)

    @property
    def time_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def algbw_bytes_per_s(self) -> float:
        return self.size_bytes / self.time_s if self.time_s > 0 else 0.0

    @property
    def busbw_bytes_per_s(self) -> float:
        return self.algbw_bytes_per_s * busbw_factor(self.op, self.group_size)


@dataclass(frozen=True)
class LinkResult:
    id: str
    src: str
    dst: str
    tier: str
    capacity_bytes_per_s: float
    bytes: float
    utilization: float
    peak_bytes_per_s: float


@dataclass(frozen=True)
class Results:
    engine: str
    iterations: int
    makespan_s: float
    iteration_time_s: float
    compute_time_s: float
    communication_time_s: float
    exposed_communication_s: float
    collectives: list[CollectiveResult]
    links: list[LinkResult]
    flow_count: int
    flow_bytes: float
    scale_up_bytes: float
    scale_out_bytes: float
    rank_compute_s: np.ndarray
    rank_comm_s: np.ndarray
    rank_exposed_s: np.ndarray
    complete: bool = True
    mfu: float = 0.0  # model FLOP utilization: model FLOPs / (time x GPUs x dense peak)
    hfu: float = 0.0  # hardware FLOP utilization: FLOPs incl. recomputation / (time x GPUs x dense peak)
    model_flops_per_gpu_s: float = 0.0  # achieved model FLOP/s per GPU
    hardware_flops_per_gpu_s: float = 0.0  # achieved FLOP/s per GPU, recomputation included
    compute_by_kind_s: tuple[tuple[str, float], ...] = ()


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, cur_start, cur_end = 0.0, None, None
    for a, b in sorted(intervals):
        if cur_end is None or a > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = a, b
        else:
            cur_end = max(cur_end, b)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def _minus(intervals: list[tuple[float, float]], holes: list[tuple[float, float]]) -> float:
    """Length of union(intervals) not covered by union(holes)."""
    both = _union_length(intervals + holes)
    return both - _union_length(holes)


def summarize(engine: str, workload: Workload, graph: TaskGraph, fabric: Fabric, tl: Timeline,
              complete: bool = True, peak_flops_per_gpu: float = 0.0) -> Results:
    world = workload.world_size
    its = workload.iterations
    ran = ~np.isnan(tl.end_s)
    compute_iv: list[list[tuple[float, float]]] = [[] for _ in range(world)]
    comm_iv: list[list[tuple[float, float]]] = [[] for _ in range(world)]
    for t in np.flatnonzero(ran):
        a, b = float(tl.start_s[t]), float(tl.end_s[t])
        if graph.kind[t] == COMPUTE:
            c = graph.comm_s.get(t, 0.0)  # folded collectives inside the task: communication, exposed
            for r in graph.ranks_of(t):
                compute_iv[r].append((a, b - c))
                if c:
                    comm_iv[r].append((b - c, b))
        elif graph.collective[t] < 0:  # point-to-point: pipeline activations and gradients
            comm_iv[graph.rank[t]].append((a, b))
            comm_iv[graph.dst[t]].append((a, b))
    collectives = []
    for inst in graph.collectives:
        ts = [t for t in inst.tasks if ran[t]]
        if not ts:
            continue
        per_rank: dict[int, list[float]] = {}
        for t in ts:
            for r in (graph.rank[t], graph.dst[t]):
                lo_hi = per_rank.setdefault(r, [np.inf, -np.inf])
                lo_hi[0] = min(lo_hi[0], tl.start_s[t])
                lo_hi[1] = max(lo_hi[1], tl.end_s[t])
        for r, (lo, hi) in per_rank.items():
            comm_iv[r].append((lo, hi))
        collectives.append(CollectiveResult(
            inst.key, inst.op, inst.algorithm, len(inst.group), inst.size_bytes, inst.label,
            float(min(tl.start_s[t] for t in ts)), float(max(tl.end_s[t] for t in ts)), len(ts), inst.n_steps))
    for (op, dim, n, size, label), (count, time_s, _, _) in graph.folded.items():
        collectives.append(CollectiveResult(f"{dim or 'other'}:{op} (folded)", op, "folded", n, size, label,
                                            0.0, time_s, 0, 0, count))
    rank_compute = np.array([_union_length(iv) for iv in compute_iv]) / its
    rank_comm = np.array([_union_length(iv) for iv in comm_iv]) / its
    rank_exposed = np.array([_minus(comm_iv[r], compute_iv[r]) for r in range(world)]) / its
    span = tl.makespan_s
    links = []
    for link in fabric.links:
        b = float(tl.link_bytes[link.index])
        links.append(LinkResult(link.id, link.src, link.dst, link.tier, link.capacity_bytes_per_s, b,
                                b / (link.capacity_bytes_per_s * span) if span > 0 else 0.0,
                                float(tl.link_peak_bytes_per_s[link.index])))
    transfers = [t for t in range(len(graph)) if graph.kind[t] == TRANSFER and ran[t]]
    scale_up = sum(graph.payload_bytes(t) for t in transfers
                   if all(fabric.links[li].tier in SCALE_UP_TIERS for li in graph.route[t]))
    folded = float(sum(count * payload for count, _, _, payload in graph.folded.values()))
    scale_up += folded
    total = float(sum(graph.payload_bytes(t) for t in transfers)) + folded
    return Results(
        engine=engine,
        iterations=its,
        makespan_s=span,
        iteration_time_s=span / its,
        compute_time_s=float(rank_compute.max(initial=0.0)),
        communication_time_s=float(rank_comm.max(initial=0.0)),
        exposed_communication_s=float(rank_exposed.max(initial=0.0)),
        collectives=collectives,
        links=links,
        flow_count=len(transfers),
        flow_bytes=total,
        scale_up_bytes=float(scale_up),
        scale_out_bytes=total - float(scale_up),
        rank_compute_s=rank_compute,
        rank_comm_s=rank_comm,
        rank_exposed_s=rank_exposed,
        complete=complete,
        mfu=(workload.flops_per_iteration / (span / its * world * peak_flops_per_gpu)
             if span > 0 and peak_flops_per_gpu > 0 else 0.0),
        hfu=(workload.hardware_flops_per_iteration / (span / its * world * peak_flops_per_gpu)
             if span > 0 and peak_flops_per_gpu > 0 else 0.0),
        model_flops_per_gpu_s=workload.flops_per_iteration / (span / its * world) if span > 0 else 0.0,
        hardware_flops_per_gpu_s=workload.hardware_flops_per_iteration / (span / its * world) if span > 0 else 0.0,
        compute_by_kind_s=workload.compute_by_kind_s,
    )
