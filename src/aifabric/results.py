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
from itertools import chain

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


def _union_per_rank(
    rank: np.ndarray, a: np.ndarray, b: np.ndarray, world: int
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per rank, the length of the union of its intervals [a, b); and the union's runs (rank, start, end)."""
    from .analysis import union_runs

    r, s, e = union_runs(rank, a, b)
    return np.bincount(r, weights=e - s, minlength=world)[:world], (r, s, e)


def _rank_intervals(graph: TaskGraph, tl: Timeline, ran: np.ndarray, world: int):
    """Every rank's busy intervals as arrays: (compute ranks, starts, ends), (communication ranks, starts, ends).
    Compute: a task on every rank it occupies, less the folded collectives at its end, which are
    communication. Communication: point-to-point transfers on both ends; a lowered collective on each member
    from its first to its last task there."""
    n = len(graph)
    kind = np.fromiter(graph.kind, dtype=np.int8, count=n)
    start, end = tl.start_s[:n], tl.end_s[:n]
    rank = np.fromiter(graph.rank, dtype=np.int64, count=n)
    dst = np.fromiter(graph.dst, dtype=np.int64, count=n)
    coll = np.fromiter(graph.collective, dtype=np.int64, count=n)
    comm = TaskGraph.per_task(graph.comm_s, n)
    is_compute = ran & (kind == COMPUTE)
    groups = [t for t in graph.members if is_compute[t]]
    grouped = np.zeros(n, dtype=bool)
    grouped[groups] = True
    single = np.flatnonzero(is_compute & ~grouped)
    sizes = np.fromiter((len(graph.members[t]) for t in groups), dtype=np.int64, count=len(groups))
    members = np.fromiter(chain.from_iterable(graph.members[t] for t in groups), dtype=np.int64, count=int(sizes.sum()))
    owner = np.concatenate((single, np.repeat(np.asarray(groups, dtype=np.int64), sizes)))
    c_rank = np.concatenate((rank[single], members))
    c_a, c_b = start[owner], end[owner] - comm[owner]
    folded = comm[owner] > 0
    # folded collectives that ran beside a task's compute (graph.hidden_s): communication under its compute's
    # end, for as long as they took (at most the compute's length)
    hidden = TaskGraph.per_task(graph.hidden_s, n)
    beside = hidden[owner] > 0
    h_a = np.maximum(c_a, c_b - hidden[owner])[beside]
    # point-to-point transfers (pipeline activations and gradients) on both ends
    p2p = np.flatnonzero(ran & (kind != COMPUTE) & (coll < 0))
    # lowered collectives: each member from its first task to its last
    ct = np.flatnonzero(ran & (kind != COMPUTE) & (coll >= 0))
    ends = np.concatenate((rank[ct], dst[ct]))
    tasks = np.concatenate((ct, ct))
    key = coll[tasks] * world + ends
    order = np.argsort(key, kind="stable")
    key, tasks = key[order], tasks[order]
    heads = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, dtype=np.int64)
    k_lo = np.minimum.reduceat(start[tasks], heads) if len(key) else np.zeros(0)
    k_hi = np.maximum.reduceat(end[tasks], heads) if len(key) else np.zeros(0)
    k_rank = key[heads] % world if len(key) else np.zeros(0, dtype=np.int64)
    m_rank = np.concatenate((c_rank[folded], c_rank[beside], rank[p2p], dst[p2p], k_rank))
    m_a = np.concatenate((c_b[folded], h_a, start[p2p], start[p2p], k_lo))
    m_b = np.concatenate((end[owner][folded], c_b[beside], end[p2p], end[p2p], k_hi))
    return (c_rank, c_a, c_b), (m_rank, m_a, m_b)


def summarize(
    engine: str,
    workload: Workload,
    graph: TaskGraph,
    fabric: Fabric,
    tl: Timeline,
    complete: bool = True,
    peak_flops_per_gpu: float = 0.0,
) -> Results:
    world = workload.world_size
    its = workload.iterations
    ran = ~np.isnan(tl.end_s)
    (c_rank, c_a, c_b), (m_rank, m_a, m_b) = _rank_intervals(graph, tl, ran, world)
    collectives = []
    for inst in graph.collectives:
        ts = np.asarray(inst.tasks, dtype=np.int64)
        ts = ts[ran[ts]]
        if not len(ts):
            continue
        collectives.append(
            CollectiveResult(
                inst.key,
                inst.op,
                inst.algorithm,
                len(inst.group),
                inst.size_bytes,
                inst.label,
                float(tl.start_s[ts].min()),
                float(tl.end_s[ts].max()),
                len(ts),
                inst.n_steps,
            )
        )
    for (op, dim, n, size, label), kind in graph.folded.kinds.items():
        collectives.append(
            CollectiveResult(
                f"{dim or 'other'}:{op} (folded)", op, "folded", n, size, label, 0.0, kind.time_s, 0, 0, kind.count
            )
        )
    compute_s, (cr, cs, ce) = _union_per_rank(c_rank, c_a, c_b, world)
    comm_s, (mr, ms, me) = _union_per_rank(m_rank, m_a, m_b, world)
    rank_compute, rank_comm = compute_s / its, comm_s / its
    # communication not hidden under compute: union(both) - union(compute); the union of both sets is that of
    # their unions' runs (the same maximal runs, so the same lengths summed in the same order), fewer to sort
    both = _union_per_rank(np.concatenate((cr, mr)), np.concatenate((cs, ms)), np.concatenate((ce, me)), world)[0] / its
    rank_exposed = np.maximum(both - rank_compute, 0.0)
    span = tl.makespan_s
    links = []
    link_bytes, link_peak = tl.link_bytes.tolist(), tl.link_peak_bytes_per_s.tolist()  # floats, not numpy scalars
    for link in fabric.links:
        b = link_bytes[link.index]
        links.append(
            LinkResult(
                link.id,
                link.src,
                link.dst,
                link.tier,
                link.capacity_bytes_per_s,
                b,
                b / (link.capacity_bytes_per_s * span) if span > 0 else 0.0,
                link_peak[link.index],
            )
        )
    n = len(graph)
    transfers = np.flatnonzero((np.fromiter(graph.kind, dtype=np.int8, count=n) == TRANSFER) & ran[:n])
    payload = graph.payload_array()
    up_link = [link.tier in SCALE_UP_TIERS for link in fabric.links]
    # routes repeat as the same objects (the router's cached tuples): each distinct object checked once
    routes = graph.route
    ids = np.fromiter(map(id, map(routes.__getitem__, transfers.tolist())), dtype=np.int64, count=len(transfers))
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    up_of = np.array([all(map(up_link.__getitem__, routes[t])) for t in transfers[first].tolist()], dtype=bool)
    on_scale_up = up_of[inverse.reshape(-1)]
    scale_up = float(payload[transfers][on_scale_up].sum())
    folded = float(sum(kind.count * kind.payload_bytes for kind in graph.folded.kinds.values()))
    scale_up += folded
    total = float(payload[transfers].sum()) + folded
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
        mfu=(
            workload.flops_per_iteration / (span / its * world * peak_flops_per_gpu)
            if span > 0 and peak_flops_per_gpu > 0
            else 0.0
        ),
        hfu=(
            workload.hardware_flops_per_iteration / (span / its * world * peak_flops_per_gpu)
            if span > 0 and peak_flops_per_gpu > 0
            else 0.0
        ),
        model_flops_per_gpu_s=workload.flops_per_iteration / (span / its * world) if span > 0 else 0.0,
        hardware_flops_per_gpu_s=workload.hardware_flops_per_iteration / (span / its * world) if span > 0 else 0.0,
        compute_by_kind_s=workload.compute_by_kind_s,
    )
