"""Derived views of a run for reports: per-rank activity segments, traffic matrices, flow distributions.

Pure functions of (task graph, fabric, timeline); computed on demand, nothing stored twice. Loops over
tasks are numpy operations on columns of the task graph, so that 1,000-GPU runs (10^5-10^6 tasks) stay
quick to report.
"""

from __future__ import annotations

import re
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
    send or receive, the folded scale-up collectives of a merged task (drawn at its end); idle: the time
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


def _interleave(r: np.ndarray, t: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Rows cut into consecutive blocks at `bounds`, each block already in (rank, time) order: the indices that put
    all rows in (rank, time) order, ties in block order then row order (what `_order` of the whole gives, by a
    k-way merge instead of a sort). Plain loops: compiled (aifabric.compiled) for large runs."""
    k = len(bounds) - 1
    pos = bounds[:-1].copy()
    out = np.empty(bounds[-1], dtype=np.int64)
    for i in range(bounds[-1]):
        best = -1
        for j in range(k):
            p = pos[j]
            if p < bounds[j + 1] and (
                best < 0 or r[p] < r[pos[best]] or (r[p] == r[pos[best]] and t[p] < t[pos[best]])
            ):
                best = j
        out[i] = pos[best]
        pos[best] += 1
    return out


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
"""Intervals from which `union_runs` merges with the compiled pass (numba, when installed and not turned off by
AIFABRIC_PURE_PYTHON=1); below, the Python one."""


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
    names = np.empty(n, dtype=object)
    names[:] = graph.name
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
    c_task = np.repeat(ct, width)
    comm = np.zeros(n)
    if graph.comm_s:
        folded_t = np.fromiter(graph.comm_s.keys(), dtype=np.int64, count=len(graph.comm_s))
        comm[folded_t] = np.fromiter(graph.comm_s.values(), dtype=float, count=len(graph.comm_s))
    c_a, c_b = start[c_task], end[c_task] - comm[c_task]
    is_c = c_b > c_a
    is_f = comm[c_task] > 0
    folded_names = {t: f"{graph.name[t]}: folded collectives" for t in np.unique(c_task[is_f]).tolist()}
    f_task = c_task[is_f]
    f_names = np.empty(len(f_task), dtype=object)
    f_names[:] = [folded_names[t] for t in f_task.tolist()]

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
    coll_keys = np.array([c.key for c in graph.collectives] or [""], dtype=object)
    coll_cat = np.array([f"{c.dim or 'other'} collectives" for c in graph.collectives] or [""], dtype=object)

    def objs(value: str, count: int) -> np.ndarray:
        out = np.empty(count, dtype=object)
        out[:] = value
        return out

    parts = [  # (rank, kind, category, name, start, end)
        (c_rank[is_c], COMPUTE_K, objs("compute", int(is_c.sum())), names[c_task[is_c]], c_a[is_c], c_b[is_c]),
        (c_rank[is_f], COMM_K, objs(FOLDED, len(f_task)), f_names, c_b[is_f], end[f_task]),
        (
            np.concatenate((src[pt], dst[pt])),
            COMM_K,
            objs(P2P, 2 * len(pt)),
            np.concatenate((names[pt], names[pt])),
            np.concatenate((start[pt], start[pt])),
            np.concatenate((end[pt], end[pt])),
        ),
        (s_rank, COMM_K, coll_cat[s_coll], coll_keys[s_coll], s_a, s_b),
    ]
    busy_r = np.concatenate([p[0] for p in parts])
    busy_a = np.concatenate([p[4] for p in parts])
    busy_b = np.concatenate([p[5] for p in parts])
    busy_order = _order(busy_r, busy_a)  # sorted once: for the union here, and for the timeline's order below
    sr, sa, sb = busy_r[busy_order], busy_a[busy_order], busy_b[busy_order]
    nonempty = sb > sa
    ur, us, ue = _union_sorted(sr[nonempty], sa[nonempty], sb[nonempty])
    gr, ga, gb = _gaps(ur, us, ue, world, makespan)

    bubble = np.zeros(len(gr), dtype=bool)
    if pipeline and len(gr):
        # compute hulls per (rank, iteration): first compute start to last compute end
        hr, ha, hb = c_rank[is_c], c_a[is_c], c_b[is_c]
        tasks, which = np.unique(c_task[is_c], return_inverse=True)  # the iteration, read once per task
        matches = (_ITERATION.match(graph.name[t]) for t in tasks.tolist())
        hit = np.fromiter((int(m.group(1)) if m else -1 for m in matches), dtype=np.int64, count=len(tasks))[which]
        if (hit >= 0).any():  # the schedule's compute carries its iteration; the optimizer step does not
            sel = hit >= 0
            hr, ha, hb, hit = hr[sel], ha[sel], hb[sel], hit[sel]
        else:
            hit = np.zeros(len(hr), dtype=np.int64)
        order = _order(hr, ha)  # by rank, then start (stable, as np.lexsort((ha, hr)))
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
            bubble |= np.isin(gr * (makespan + 1.0) + gb, recv_key)
    parts.append(
        (
            gr[~bubble],
            IDLE_K,
            objs("idle", int((~bubble).sum())),
            objs("", int((~bubble).sum())),
            ga[~bubble],
            gb[~bubble],
        )
    )
    parts.append(
        (gr[bubble], BUBBLE_K, objs("bubble", int(bubble.sum())), objs("", int(bubble.sum())), ga[bubble], gb[bubble])
    )

    rank = np.concatenate([p[0] for p in parts]).astype(np.int64)
    kinds = np.concatenate([np.full(len(p[0]), p[1], dtype=np.int8) for p in parts])
    a = np.concatenate([p[4] for p in parts])
    # the busy rows in their order, then the idle and the bubble gaps (each in order already): merged, not sorted
    n_busy, n_idle = len(busy_r), int((~bubble).sum())
    blocks = np.concatenate((busy_order, np.arange(n_busy, len(rank), dtype=np.int64)))
    bounds = np.array([0, n_busy, n_busy + n_idle, len(rank)], dtype=np.int64)
    interleave = compiled(_interleave) if len(rank) >= COMPILED_MIN else None
    order = blocks[(interleave or _interleave)(rank[blocks], a[blocks], bounds)]
    its = max(iterations, 1)
    return RankTimeline(
        world=world,
        iterations=its,
        makespan_s=makespan,
        pipeline=pipeline,
        rank=rank[order],
        kind=kinds[order],
        category=np.concatenate([p[2] for p in parts])[order],
        name=np.concatenate([p[3] for p in parts])[order],
        start_s=a[order],
        end_s=np.concatenate([p[5] for p in parts])[order],
        idle_s=np.bincount(gr, weights=gb - ga, minlength=world)[:world] / its,
        bubble_s=np.bincount(gr[bubble], weights=(gb - ga)[bubble], minlength=world)[:world] / its,
    )


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
