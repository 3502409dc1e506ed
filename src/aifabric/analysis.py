"""Derived views of a run for reports: per-rank activity segments, traffic matrices, flow distributions.

Pure functions of (task graph, fabric, timeline); computed on demand, nothing stored twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .engines.executor import Timeline
from .engines.taskgraph import COMPUTE, TRANSFER, TaskGraph
from .fabric.graph import SCALE_UP_TIERS, Fabric


@dataclass(frozen=True)
class Segment:
    rank: int
    kind: str  # "compute" or "communication"
    name: str  # compute op name or collective key
    start_s: float
    end_s: float


def rank_segments(graph: TaskGraph, tl: Timeline) -> list[Segment]:
    """Compute tasks per rank, plus one segment per (rank, collective) from its first to its last transfer."""
    out: list[Segment] = []
    ran = ~np.isnan(tl.end_s)
    for t in np.flatnonzero(ran):
        a, b = float(tl.start_s[t]), float(tl.end_s[t])
        if graph.kind[t] == COMPUTE:
            c = graph.comm_s.get(t, 0.0)
            for r in graph.ranks_of(t):
                if b - c > a:
                    out.append(Segment(r, "compute", graph.name[t], a, b - c))
                if c:  # folded scale-up collectives, interleaved with the compute; drawn after it
                    out.append(Segment(r, "communication", f"{graph.name[t]}: folded collectives", b - c, b))
        elif graph.collective[t] < 0:
            for r in (graph.rank[t], graph.dst[t]):
                out.append(Segment(r, "communication", graph.name[t], a, b))
    for inst in graph.collectives:
        span: dict[int, list[float]] = {}
        for t in inst.tasks:
            if not ran[t]:
                continue
            for r in (graph.rank[t], graph.dst[t]):
                lo_hi = span.setdefault(r, [np.inf, -np.inf])
                lo_hi[0] = min(lo_hi[0], tl.start_s[t])
                lo_hi[1] = max(lo_hi[1], tl.end_s[t])
        out += [Segment(r, "communication", inst.key, float(a), float(b)) for r, (a, b) in span.items()]
    return out


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
    dim: np.ndarray  # parallel dimension (str): dp, tp, pp, ep, cp, zero, or "" when unknown
    # collectives folded into GPU time (engines/fold.py): bytes per (src, dst, dim), all NVLink; not flows,
    # but counted in traffic matrices and bytes per dimension
    folded_src: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    folded_dst: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    folded_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    folded_dim: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))

    @property
    def completion_s(self) -> np.ndarray:
        return self.end_s - self.start_s


def flows(graph: TaskGraph, fabric: Fabric, tl: Timeline) -> Flows:
    ids = np.array([t for t in range(len(graph)) if graph.kind[t] == TRANSFER and not np.isnan(tl.end_s[t])],
                    dtype=np.int64)
    scale_up = np.array([all(fabric.links[li].tier in SCALE_UP_TIERS for li in graph.route[t]) for t in ids],
                        dtype=bool)
    return Flows(
        task=ids,
        src=np.array([graph.rank[t] for t in ids], dtype=np.int64),
        dst=np.array([graph.dst[t] for t in ids], dtype=np.int64),
        size_bytes=np.array([graph.size_bytes[t] for t in ids], dtype=float),
        start_s=tl.start_s[ids] if len(ids) else np.zeros(0),
        end_s=tl.end_s[ids] if len(ids) else np.zeros(0),
        scale_up=scale_up,
        dim=np.array([task_dim(graph, int(t)) for t in ids], dtype=object),
        folded_src=np.array([k[0] for k in graph.folded_pairs], dtype=np.int64),
        folded_dst=np.array([k[1] for k in graph.folded_pairs], dtype=np.int64),
        folded_bytes=np.array(list(graph.folded_pairs.values()), dtype=float),
        folded_dim=np.array([k[2] for k in graph.folded_pairs], dtype=object),
    )


def task_dim(graph: TaskGraph, t: int) -> str:
    """The parallel dimension a task serves: its own, else its collective's."""
    d = graph.dim[t] if t < len(graph.dim) else ""
    if not d and graph.collective[t] >= 0:
        d = graph.collectives[graph.collective[t]].dim
    return d or "other"


def traffic_matrix(f: Flows, world: int, group_size: int = 1, network: str = "all", dim: str | None = None
                   ) -> np.ndarray:
    """Bytes from each source to each destination; ranks grouped by `group_size` (e.g. per server).
    `network`: "all", "scale-up" (NVLink only) or "scale-out" (crossed a NIC); `dim`: one parallel dimension."""
    mask = np.ones(len(f.src), dtype=bool)
    if network == "scale-up":
        mask = f.scale_up
    elif network == "scale-out":
        mask = ~f.scale_up
    if dim is not None:
        mask = mask & (f.dim == dim)
    n = (world + group_size - 1) // group_size
    m = np.zeros((n, n))
    np.add.at(m, (f.src[mask] // group_size, f.dst[mask] // group_size), f.size_bytes[mask])
    if network != "scale-out" and len(f.folded_src):
        fm = np.ones(len(f.folded_src), dtype=bool) if dim is None else f.folded_dim == dim
        np.add.at(m, (f.folded_src[fm] // group_size, f.folded_dst[fm] // group_size), f.folded_bytes[fm])
    return m


def bytes_by_dimension(f: Flows) -> dict[str, dict[str, float]]:
    """Bytes per parallel dimension, split by network (NVLink only vs crossed a NIC)."""
    out: dict[str, dict[str, float]] = {}
    for d in sorted(set(f.dim.tolist()) | set(f.folded_dim.tolist())):
        m = f.dim == d
        out[d] = {"scale_up_bytes": float(f.size_bytes[m & f.scale_up].sum() + f.folded_bytes[f.folded_dim == d].sum()),
                  "scale_out_bytes": float(f.size_bytes[m & ~f.scale_up].sum())}
    return out


def cdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted values and their empirical cumulative fraction."""
    v = np.sort(np.asarray(values, dtype=float))
    return v, np.arange(1, len(v) + 1) / max(len(v), 1)
