"""Derived views of a run for reports: per-rank activity segments, traffic matrices, flow distributions.

Pure functions of (task graph, fabric, timeline); computed on demand, nothing stored twice. Loops over
tasks are numpy operations on columns of the task graph, so that 1,000-GPU runs (10^5-10^6 tasks) stay
quick to report; the rank timeline's passes over every row (sort, union, merge) are plain loops compiled for large
runs (aifabric.compiled), the Python loops their reference.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from .compiled import compiled
from .engines.executor import Timeline
from .engines.taskgraph import COMPUTE, TRANSFER, TaskGraph
from .fabric.graph import SCALE_UP_TIERS, Fabric

# segment kinds, in drawing order; `RankTimeline.kind` holds indices into this tuple
KINDS = ("compute", "communication", "idle", "bubble")
COMPUTE_K, COMM_K, IDLE_K, BUBBLE_K = range(4)
# what a communication segment is, beside its collective's parallel dimension
FOLDED = "folded scale-up collectives"
BESIDE = "folded collectives beside the compute"  # a merged task's folded collectives that ran under its compute
P2P = "pipeline send/recv"

_ITERATION = re.compile(r"it(\d+)/")


@dataclass(frozen=True)
class Segment:
    rank: int
    kind: str  # "compute", "communication", "idle" or "bubble"
    name: str  # compute op name or collective key ("" for idle and bubble)
    start_s: float
    end_s: float


@dataclass(frozen=True)
class RankTimeline:
    """What every rank does over the run, as arrays aligned by segment (sorted by rank, then start).

    compute: its compute tasks (a merged task's folded collectives excluded); communication: each
    collective it takes part in (first to last transfer of the instance that involves it), each pipeline
    send or receive, the folded scale-up collectives of a merged task (what they add to it drawn at its end; those
    that ran beside its compute, `TaskGraph.hidden_s`, under the compute's end, as results.py counts them); idle: the time
    it neither computes nor communicates; bubble (pipeline-parallel runs only): the idle time before its
    first and after its last compute of each iteration (the pipeline's fill and drain), and any idle time
    that ends when a pipeline transfer to the rank starts (waiting for another stage, e.g. 1F1B's stage 0
    between its warm-up forwards and its first backward), cut from idle. The iteration of a compute task
    is its name's `it<k>/` prefix; compute without one (the optimizer step) does not bound the pipeline,
    so waiting around it counts as bubble.
    Compute and communication may overlap; idle and bubble never overlap anything.
    """

    world: int
    iterations: int
    makespan_s: float
    pipeline: bool
    rank: np.ndarray  # int64
    kind: np.ndarray  # int8, index into KINDS
    category: np.ndarray  # object: "compute", FOLDED, P2P, "<dim> collectives", "idle", "bubble"
    name: np.ndarray  # object: op name, collective key, or ""
    start_s: np.ndarray
    end_s: np.ndarray
    idle_s: np.ndarray  # per rank, per iteration: idle time including the bubble
    bubble_s: np.ndarray  # per rank, per iteration: the part of idle_s that is pipeline bubble

    def __len__(self) -> int:
        return len(self.rank)

    def segments(self, mask: np.ndarray | None = None) -> list[Segment]:
        idx = np.arange(len(self.rank)) if mask is None else np.flatnonzero(mask)
        return [
            Segment(int(r), KINDS[k], n, float(a), float(b))
            for r, k, n, a, b in zip(
                self.rank[idx].tolist(),
                self.kind[idx].tolist(),
                self.name[idx].tolist(),
                self.start_s[idx].tolist(),
                self.end_s[idx].tolist(),
            )
        ]


def _order(rank: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Indices sorting by rank, then time; ties keep their order (two stable sorts: radix on small ranks)."""
    o = np.argsort(t, kind="stable")
    r = rank[o]
    if len(r) and 0 <= r.min() and r.max() < 2**15:
        r = r.astype(np.int16)
    return o[np.argsort(r, kind="stable")]


def union_runs(rank: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-rank union of intervals [a, b): the maximal covered runs (rank, start, end), sorted by rank, start.
    Intervals sorted by (rank, start); a run grows while the next interval starts at or before the furthest
    end so far (touching intervals join), and a new one starts past it or at a new rank (`_merge_sorted`)."""
    keep = b > a
    rank, a, b = rank[keep], a[keep], b[keep]
    order = _order(rank, a)
    return _union_sorted(rank[order], a[order], b[order])


def _union_sorted(r: np.ndarray, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`union_runs` of intervals already sorted by (rank, start), none empty."""
    merge = compiled(_merge_sorted) if len(r) >= COMPILED_MIN else None
    first, end = (merge or _merge_sorted)(r, s, e)
    return r[first], s[first], end[first]


def _merge_sorted(r: np.ndarray, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Intervals sorted by (rank, start): a mask of those that start a run, and at each of them the run's end.
    The reference: one pass, compiled (aifabric.compiled) for large runs."""
    n = len(r)
    first = np.zeros(n, dtype=np.bool_)
    end = np.zeros(n)
    head = -1
    for i in range(n):
        if head < 0 or r[i] != r[head] or s[i] > end[head]:
            head = i
            first[i] = True
            end[i] = e[i]
        elif e[i] > end[head]:
            end[head] = e[i]
    return first, end


COMPILED_MIN = 100_000
"""Rows from which `union_runs` and the rank timeline use the compiled passes (numba, when installed and not turned
off by AIFABRIC_PURE_PYTHON=1); below, the Python ones."""


def _gaps(
    r: np.ndarray, s: np.ndarray, e: np.ndarray, world: int, t_end: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The complement of covered runs (sorted by rank, start) within [0, t_end] for every rank."""
    first = np.ones(len(r), dtype=bool)
    first[1:] = r[1:] != r[:-1]
    last = np.ones(len(r), dtype=bool)
    last[:-1] = r[1:] != r[:-1]
    inner = ~first  # a gap before every run but the rank's first
    idle_ranks = np.setdiff1d(np.arange(world), r)
    gr = np.concatenate((r[first], r[inner], r[last], idle_ranks))
    ga = np.concatenate((np.zeros(first.sum()), e[np.flatnonzero(inner) - 1], e[last], np.zeros(len(idle_ranks))))
    gb = np.concatenate((s[first], s[inner], np.full(last.sum(), t_end), np.full(len(idle_ranks), t_end)))
    keep = gb > ga
    order = np.lexsort((ga[keep], gr[keep]))
    return gr[keep][order], ga[keep][order], gb[keep][order]


def _inside(r: np.ndarray, t: np.ndarray, hr: np.ndarray, h0: np.ndarray, h1: np.ndarray) -> np.ndarray:
    """For points (r, t): whether t lies strictly inside one of rank r's intervals [h0, h1] (disjoint per rank)."""
    n, m = len(r), len(hr)
    rr = np.concatenate((hr, hr, r))
    tt = np.concatenate((h0, h1, t))
    dd = np.concatenate((np.ones(m, dtype=np.int64), -np.ones(m, dtype=np.int64), np.zeros(n, dtype=np.int64)))
    order = np.lexsort((dd == 0, tt, rr))  # at equal times, interval boundaries before points
    depth = np.cumsum(dd[order])
    out = np.zeros(n, dtype=bool)
    is_point = order >= 2 * m
    out[order[is_point] - 2 * m] = depth[is_point] > 0
    return out


def is_pipeline(graph: TaskGraph) -> bool:
    """The run has pipeline parallelism: point-to-point transfers (pipeline sends) or tasks of dimension pp."""
    if "pp" in graph.dim:
        return True
    return any(c < 0 for k, c in zip(graph.kind, graph.collective) if k == TRANSFER)


def rank_timeline(
    graph: TaskGraph, tl: Timeline, world: int | None = None, iterations: int = 1, pipeline: bool | None = None
) -> RankTimeline:
    """Every rank's compute, communication, idle and bubble segments (see `RankTimeline`), and per rank its
    idle and bubble time per iteration. `pipeline`: count bubbles (default: `is_pipeline(graph)`). A run keeps
    its own (`Run.rank_timeline`)."""
    return _rank_timeline(graph, tl, world, iterations, pipeline)


def _rank_timeline(
    graph: TaskGraph, tl: Timeline, world: int | None, iterations: int, pipeline: bool | None
) -> RankTimeline:
    n = len(graph)
    kind = np.fromiter(graph.kind, dtype=np.int8, count=n)
    start, end = np.asarray(tl.start_s[:n], dtype=float), np.asarray(tl.end_s[:n], dtype=float)
    ran = ~np.isnan(end)
    coll = np.fromiter(graph.collective, dtype=np.int64, count=n)
    src = np.fromiter(graph.rank, dtype=np.int64, count=n)
    dst = np.fromiter(graph.dst, dtype=np.int64, count=n)
    if world is None:
        world = (
            int(
                max(src.max(initial=-1), dst.max(initial=-1), max((max(m) for m in graph.members.values()), default=-1))
            )
            + 1
        )
    pipeline = is_pipeline(graph) if pipeline is None else pipeline
    makespan = float(tl.makespan_s)

    # compute tasks, one row per rank they occupy; folded collectives at the end of a merged task
    ct = np.flatnonzero(ran & (kind == COMPUTE))
    ranks_of = [graph.members.get(t) or (graph.rank[t],) for t in ct.tolist()]
    width = np.fromiter(map(len, ranks_of), dtype=np.int64, count=len(ct))
    c_rank = np.fromiter(chain.from_iterable(ranks_of), dtype=np.int64, count=int(width.sum()))
    c_task = np.repeat(ct, width)  # ascending
    comm = TaskGraph.per_task(graph.comm_s, n)
    c_a, c_b = start[c_task], end[c_task] - comm[c_task]
    is_c = c_b > c_a
    is_f = comm[c_task] > 0
    f_task = c_task[is_f]
    f_tasks, f_which = _runs(f_task)  # each merged task's folded collectives named once
    # folded collectives beside a task's compute: under the compute's end, for as long as they took (at most the
    # compute's length), as results.py counts them
    hidden = TaskGraph.per_task(graph.hidden_s, n)
    is_h = (hidden[c_task] > 0) & is_c
    h_task = c_task[is_h]
    h_tasks, h_which = _runs(h_task)
    h_a = np.maximum(c_a, c_b - hidden[c_task])[is_h]

    # point-to-point transfers (pipeline): on the sender and on the receiver
    pt = np.flatnonzero(ran & (kind == TRANSFER) & (coll < 0))
    # collectives: one span per (instance, rank) from its first to its last transfer involving the rank
    xt = np.flatnonzero(ran & (kind == TRANSFER) & (coll >= 0))
    x_coll = np.concatenate((coll[xt], coll[xt]))
    x_rank = np.concatenate((src[xt], dst[xt]))
    x_a, x_b = np.concatenate((start[xt], start[xt])), np.concatenate((end[xt], end[xt]))
    key = x_coll * world + x_rank
    uniq, inv = np.unique(key, return_inverse=True)
    s_a = np.full(len(uniq), np.inf)
    s_b = np.full(len(uniq), -np.inf)
    np.minimum.at(s_a, inv, x_a)
    np.maximum.at(s_b, inv, x_b)
    s_coll, s_rank = uniq // world, uniq % world

    # rows carry their category and name as codes into two tables, turned into strings once, in the final order
    # categories: the fixed ones, then each collective's; names: the tasks', the folded tasks', the collectives', ""
    n_coll = len(graph.collectives)
    cat_table = np.empty(_CAT_COLL + n_coll, dtype=object)
    cat_table[:_CAT_COLL] = _CATEGORIES
    cat_table[_CAT_COLL:] = [f"{c.dim or 'other'} collectives" for c in graph.collectives]
    nf, nh = n + len(f_tasks), n + len(f_tasks) + len(h_tasks)
    name_table = np.empty(nh + n_coll + 1, dtype=object)
    name_table[:n] = graph.name
    name_table[n:nf] = [f"{graph.name[t]}: folded collectives" for t in f_tasks.tolist()]
    name_table[nf:nh] = [f"{graph.name[t]}: folded collectives beside the compute" for t in h_tasks.tolist()]
    name_table[nh : nh + n_coll] = [c.key for c in graph.collectives]
    name_table[-1] = ""  # idle and bubble: code -1

    # the busy rows, by part: compute, folded collectives, those beside the compute, pipeline sends, pipeline
    # receives, collective spans
    c_name = c_task[is_c]
    busy_r = np.concatenate((c_rank[is_c], c_rank[is_f], c_rank[is_h], src[pt], dst[pt], s_rank))
    busy_a = np.concatenate((c_a[is_c], c_b[is_f], h_a, start[pt], start[pt], s_a))
    busy_b = np.concatenate((c_b[is_c], end[f_task], c_b[is_h], end[pt], end[pt], s_b))
    parts = np.cumsum([0, len(c_name), len(f_task), len(h_task), len(pt), len(pt), len(s_rank)]).astype(np.int64)
    busy_order = _order_ranks(busy_r, busy_a, world)  # sorted once: for the union, and for the timeline's order
    union = compiled(_union_in_order) if len(busy_r) >= COMPILED_MIN else None
    ur, us, ue = (union or _union_in_order)(busy_order, busy_r, busy_a, busy_b)
    gr, ga, gb = _gaps(ur, us, ue, world, makespan)

    bubble = np.zeros(len(gr), dtype=bool)
    if pipeline and len(gr):
        # compute hulls per (rank, iteration): first compute start to last compute end
        hr, ha, hb = c_rank[is_c], c_a[is_c], c_b[is_c]
        tasks, which = _runs(c_task[is_c])  # the iteration, read once per task
        hit = np.fromiter(map(_iteration(), map(graph.name.__getitem__, tasks.tolist())), dtype=np.int64)[which]
        if (hit >= 0).any():  # the schedule's compute carries its iteration; the optimizer step does not
            sel = hit >= 0
            hr, ha, hb, hit = hr[sel], ha[sel], hb[sel], hit[sel]
        else:
            hit = np.zeros(len(hr), dtype=np.int64)
        order = _order_ranks(hr, ha, world)  # by rank, then start (stable, as np.lexsort((ha, hr)))
        hr, ha, hb, hit = hr[order], ha[order], hb[order], hit[order]
        k = int(hit.max(initial=0)) + 1
        group = hr * k + hit
        first = np.ones(len(group), dtype=bool)
        first[1:] = group[1:] != group[:-1]
        at = np.flatnonzero(first)
        hull_r, hull_a, hull_b = hr[at], ha[at], np.maximum.reduceat(hb, at) if len(at) else hb[:0]
        bubble = ~_inside(gr, (ga + gb) / 2, hull_r, hull_a, hull_b)
        # inside the hull: waiting for the previous (or next) stage, the gap ends where a pipeline transfer
        # to this rank starts (1F1B's stage 0 waits there for its first backward)
        if len(pt):
            recv_key = np.unique(dst[pt] * (makespan + 1.0) + start[pt])
            bubble |= _member(gr * (makespan + 1.0) + gb, recv_key)

    # the busy rows in their order merged with the gaps (in order already), not sorted
    rows = compiled(_timeline_rows) if len(busy_r) + len(gr) >= COMPILED_MIN else None
    rank, kinds, cats, name_codes, row_a, row_b = (rows or _timeline_rows)(
        busy_order, busy_r, busy_a, busy_b, parts, c_name, n + f_which, nf + h_which, pt, s_coll, nh, gr, ga, gb, bubble
    )
    its = max(iterations, 1)
    return RankTimeline(
        world=world,
        iterations=its,
        makespan_s=makespan,
        pipeline=pipeline,
        rank=rank,
        kind=kinds,
        category=cat_table[cats],
        name=name_table[name_codes],
        start_s=row_a,
        end_s=row_b,
        idle_s=np.bincount(gr, weights=gb - ga, minlength=world)[:world] / its,
        bubble_s=np.bincount(gr[bubble], weights=(gb - ga)[bubble], minlength=world)[:world] / its,
    )


# the fixed categories of `RankTimeline.category` (codes into them while the timeline is built); each collective's
# "<dim> collectives" follows them
_CATEGORIES = ("compute", FOLDED, P2P, "idle", "bubble", BESIDE)
_CAT_COMPUTE, _CAT_FOLDED, _CAT_P2P, _CAT_IDLE, _CAT_BUBBLE, _CAT_BESIDE = range(6)
_CAT_COLL = len(_CATEGORIES)


def _runs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(x, return_inverse=True)` of a sorted array, by comparing neighbours instead of sorting."""
    new = np.ones(len(x), dtype=bool)
    new[1:] = x[1:] != x[:-1]
    return x[new], np.cumsum(new) - 1


def _iteration() -> Callable[[str], int]:
    """A task name's iteration, its `it<k>/` prefix (`_ITERATION`), -1 without one; read once per distinct text
    before the first "/" (the regex only looks there), so millions of tasks cost a split and a dict look-up each."""
    memo: dict[str, int] = {}

    def iteration(name: str) -> int:
        head, slash, _ = name.partition("/")
        it = memo.get(head + slash)
        if it is None:
            m = _ITERATION.match(head + slash)
            it = memo[head + slash] = int(m.group(1)) if m else -1
        return it

    return iteration


def _member(x: np.ndarray, sorted_unique: np.ndarray) -> np.ndarray:
    """`np.isin(x, sorted_unique)` for a sorted array of distinct values: a binary search each, no sort."""
    at = np.searchsorted(sorted_unique, x)
    found = at < len(sorted_unique)
    found[found] = sorted_unique[at[found]] == x[found]
    return found


def _union_in_order(
    order: np.ndarray, r: np.ndarray, s: np.ndarray, e: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`_union_sorted` of the rows taken in `order` (by rank, then start), the empty ones (not e > s) left out: each
    covered run's (rank, start, end), read through `order` instead of copies of the rows sorted and filtered. Plain
    loops: compiled (aifabric.compiled) for large runs."""
    n = len(order)
    ur = np.empty(n, dtype=np.int64)
    us = np.empty(n)
    ue = np.empty(n)
    m = -1
    for j in range(n):
        i = order[j]
        if not e[i] > s[i]:
            continue
        if m < 0 or r[i] != ur[m] or s[i] > ue[m]:
            m += 1
            ur[m] = r[i]
            us[m] = s[i]
            ue[m] = e[i]
        elif e[i] > ue[m]:
            ue[m] = e[i]
    return ur[: m + 1].copy(), us[: m + 1].copy(), ue[: m + 1].copy()


def _timeline_rows(
    order: np.ndarray,
    r: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    parts: np.ndarray,
    c_name: np.ndarray,
    f_name: np.ndarray,
    h_name: np.ndarray,
    p_name: np.ndarray,
    s_coll: np.ndarray,
    coll_name: int,
    gr: np.ndarray,
    ga: np.ndarray,
    gb: np.ndarray,
    bubble: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The timeline's rows (rank, kind, category code, name code, start, end): the busy rows (r, a, b) taken in
    `order` (by rank, then start) merged with the gaps (gr, ga, gb, in that order already; idle, or bubble where
    `bubble`), a busy row first at an equal (rank, start): the stable sort of the busy rows, the idle gaps and the
    bubble gaps by (rank, start) (no two gaps of a rank start together). A busy row's part (`parts` cuts them:
    compute, folded collectives, those beside the compute, pipeline sends, pipeline receives, collective spans) gives
    its kind and codes: names from c_name, f_name, h_name, p_name (both pipeline parts) or coll_name + its collective
    (s_coll), which also gives
    its category; gaps are named -1 (the last name). Plain loops: compiled (aifabric.compiled) for large runs."""
    nb, ng = len(order), len(gr)
    m = nb + ng
    o_r = np.empty(m, dtype=np.int64)
    o_k = np.empty(m, dtype=np.int8)
    o_c = np.empty(m, dtype=np.int64)
    o_n = np.empty(m, dtype=np.int64)
    o_a = np.empty(m)
    o_b = np.empty(m)
    i = 0
    g = 0
    for j in range(m):
        if i >= nb:
            gap = True
        elif g >= ng:
            gap = False
        else:
            x = order[i]
            gap = gr[g] < r[x] or (gr[g] == r[x] and ga[g] < a[x])
        if gap:
            o_r[j] = gr[g]
            o_a[j] = ga[g]
            o_b[j] = gb[g]
            o_n[j] = -1
            if bubble[g]:
                o_k[j] = BUBBLE_K
                o_c[j] = _CAT_BUBBLE
            else:
                o_k[j] = IDLE_K
                o_c[j] = _CAT_IDLE
            g += 1
            continue
        x = order[i]
        i += 1
        o_r[j] = r[x]
        o_a[j] = a[x]
        o_b[j] = b[x]
        if x < parts[1]:
            o_k[j] = COMPUTE_K
            o_c[j] = _CAT_COMPUTE
            o_n[j] = c_name[x]
        elif x < parts[2]:
            o_k[j] = COMM_K
            o_c[j] = _CAT_FOLDED
            o_n[j] = f_name[x - parts[1]]
        elif x < parts[3]:
            o_k[j] = COMM_K
            o_c[j] = _CAT_BESIDE
            o_n[j] = h_name[x - parts[2]]
        elif x < parts[5]:
            o_k[j] = COMM_K
            o_c[j] = _CAT_P2P
            o_n[j] = p_name[x - parts[3] if x < parts[4] else x - parts[4]]
        else:
            o_k[j] = COMM_K
            o_c[j] = _CAT_COLL + s_coll[x - parts[5]]
            o_n[j] = coll_name + s_coll[x - parts[5]]
    return o_r, o_k, o_c, o_n, o_a, o_b


def _order_ranks(rank: np.ndarray, t: np.ndarray, world: int) -> np.ndarray:
    """`_order(rank, t)` for ranks in [0, world): compiled (aifabric.compiled) for large inputs as a counting sort by
    rank and a stable sort by time within each rank (`_by_rank_then_time`), the same order."""
    fast = compiled(_by_rank_then_time) if len(rank) >= COMPILED_MIN else None
    if fast is None or not len(rank) or rank.min() < 0 or rank.max() >= world:
        return _order(rank, t)
    return fast(rank, t, world)


def _by_rank_then_time(rank: np.ndarray, t: np.ndarray, world: int) -> np.ndarray:
    """Indices sorting by rank (each in [0, world)), then time, ties in index order: a stable counting sort by rank,
    then a stable sort (merge sort) of each rank's times. Plain loops, for the compiled path of `_order_ranks`."""
    n = len(rank)
    first = np.zeros(world + 1, dtype=np.int64)
    for i in range(n):
        first[rank[i] + 1] += 1
    for k in range(world):
        first[k + 1] += first[k]
    pos = first[:world].copy()
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[pos[rank[i]]] = i
        pos[rank[i]] += 1
    for k in range(world):
        lo, hi = first[k], first[k + 1]
        if hi - lo > 1:
            seg = out[lo:hi].copy()
            out[lo:hi] = seg[np.argsort(t[seg], kind="mergesort")]
    return out


def rank_segments(graph: TaskGraph, tl: Timeline, world: int | None = None, iterations: int = 1) -> list[Segment]:
    """Every rank's segments (compute, communication, idle, bubble) as objects; see `rank_timeline`."""
    return rank_timeline(graph, tl, world, iterations).segments()


@dataclass(frozen=True)
class Flows:
    """Every transfer that ran: arrays aligned by flow."""

    task: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    size_bytes: np.ndarray
    start_s: np.ndarray
    end_s: np.ndarray
    scale_up: np.ndarray  # bool: NVLink only
    dim: np.ndarray  # parallel dimension (str): dp, tp, pp, ep, cp, zero, or "other" when unknown
    # collectives folded into GPU time (engines/fold.py): bytes per (src, dst, dim), all NVLink; not flows,
    # but counted in traffic matrices and bytes per dimension
    folded_src: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    folded_dst: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    folded_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    folded_dim: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))

    @property
    def completion_s(self) -> np.ndarray:
        return self.end_s - self.start_s

    @property
    def dims(self) -> list[str]:
        """The parallel dimensions present (transfers and folded collectives), sorted."""
        # a set, not np.unique: sorting millions of Python strings took seconds (3.5 million tasks)
        return sorted(set(self.dim.tolist()) | set(self.folded_dim.tolist()))


def _task_dims(graph: TaskGraph, ids: np.ndarray) -> np.ndarray:
    """The parallel dimension of each task in `ids`: its own, else its collective's, else "other"."""
    own = np.empty(len(graph), dtype=object)
    own[:] = ""
    own[: len(graph.dim)] = graph.dim[: len(graph)]
    d = own[ids]
    coll = np.fromiter(graph.collective, dtype=np.int64, count=len(graph))[ids]
    coll_dim = np.empty(len(graph.collectives) + 1, dtype=object)
    coll_dim[:] = [c.dim for c in graph.collectives] + [""]
    d = np.where(d == "", coll_dim[coll], d)  # coll = -1 picks the trailing ""
    return np.where(d == "", "other", d).astype(object)


def flows(graph: TaskGraph, fabric: Fabric, tl: Timeline) -> Flows:
    """Every transfer that ran, and the folded collectives' bytes per rank pair. A run keeps its own
    (`Run.flows`)."""
    return _flows(graph, tl, fabric)


def _flows(graph: TaskGraph, tl: Timeline, fabric: Fabric) -> Flows:
    n = len(graph)
    kind = np.fromiter(graph.kind, dtype=np.int8, count=n)
    ids = np.flatnonzero((kind == TRANSFER) & ~np.isnan(tl.end_s[:n])).astype(np.int64)
    routes = [graph.route[t] for t in ids.tolist()]
    lengths = np.fromiter(map(len, routes), dtype=np.int64, count=len(ids))
    flat = np.fromiter(chain.from_iterable(routes), dtype=np.int64, count=int(lengths.sum()))
    out_of_server = np.array([link.tier not in SCALE_UP_TIERS for link in fabric.links], dtype=bool)
    crossings = (
        np.bincount(np.repeat(np.arange(len(ids)), lengths), weights=out_of_server[flat], minlength=len(ids))
        if len(flat)
        else np.zeros(len(ids))
    )
    src = np.fromiter(graph.rank, dtype=np.int64, count=n)
    dst = np.fromiter(graph.dst, dtype=np.int64, count=n)
    size = graph.payload_array()  # what the workload moved (the links carry the protocol's wire bytes)
    pairs = graph.folded.pairs
    return Flows(
        task=ids,
        src=src[ids],
        dst=dst[ids],
        size_bytes=size[ids],
        start_s=np.asarray(tl.start_s[ids], dtype=float),
        end_s=np.asarray(tl.end_s[ids], dtype=float),
        scale_up=crossings == 0,
        dim=_task_dims(graph, ids),
        folded_src=np.fromiter((k[0] for k in pairs), dtype=np.int64, count=len(pairs)),
        folded_dst=np.fromiter((k[1] for k in pairs), dtype=np.int64, count=len(pairs)),
        folded_bytes=np.fromiter(pairs.values(), dtype=float, count=len(pairs)),
        folded_dim=np.array([k[2] for k in pairs], dtype=object),
    )


NETWORKS = ("all", "scale-up", "scale-out")


def traffic_matrix(
    f: Flows, world: int, group_size: int = 1, network: str = "all", dim: str | None = None
) -> np.ndarray:
    """Bytes from each source to each destination; ranks grouped by `group_size` (e.g. per server).
    `network`: "all", "scale-up" (NVLink only) or "scale-out" (crossed a NIC); `dim`: one parallel dimension.
    Folded scale-up collectives count as scale-up traffic."""
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {', '.join(NETWORKS)} (got {network!r})")
    mask = np.ones(len(f.src), dtype=bool)
    if network == "scale-up":
        mask = f.scale_up
    elif network == "scale-out":
        mask = ~f.scale_up
    if dim is not None:
        mask = mask & (f.dim == dim)
    n = (world + group_size - 1) // group_size
    src, dst, w = f.src[mask] // group_size, f.dst[mask] // group_size, f.size_bytes[mask]
    if network != "scale-out" and len(f.folded_src):
        fm = np.ones(len(f.folded_src), dtype=bool) if dim is None else f.folded_dim == dim
        src = np.concatenate((src, f.folded_src[fm] // group_size))
        dst = np.concatenate((dst, f.folded_dst[fm] // group_size))
        w = np.concatenate((w, f.folded_bytes[fm]))
    return np.bincount(src * n + dst, weights=w, minlength=n * n).reshape(n, n)


def bytes_by_dimension(f: Flows) -> dict[str, dict[str, float]]:
    """Bytes per parallel dimension, split by network (NVLink only vs crossed a NIC)."""
    out: dict[str, dict[str, float]] = {}
    dims = f.dims
    # each flow's dimension as an index into dims (one dict look-up per flow instead of a string comparison per
    # flow and dimension); the masks, hence the sums, are the same
    index = {d: k for k, d in enumerate(dims)}
    code = np.fromiter(map(index.__getitem__, f.dim.tolist()), dtype=np.int64, count=len(f.dim))
    for k, d in enumerate(dims):
        m = code == k
        out[d] = {
            "scale_up_bytes": float(f.size_bytes[m & f.scale_up].sum() + f.folded_bytes[f.folded_dim == d].sum()),
            "scale_out_bytes": float(f.size_bytes[m & ~f.scale_up].sum()),
        }
    return out


def cdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted values and their empirical cumulative fraction."""
    v = np.sort(np.asarray(values, dtype=float))
    return v, np.arange(1, len(v) + 1) / max(len(v), 1)
