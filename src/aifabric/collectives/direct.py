"""Direct (mesh) algorithms: every rank talks to every peer in one step, as NCCL's AllToAll and as
the one-shot / two-shot AllReduce on a full NVLink mesh. Also Send/Recv and in-switch reduction.

- ReduceScatter: every rank sends chunk j to rank j, which adds it in (one step).
- AllGather: rank j sends its chunk j to every rank (one step).
- AllReduce: ReduceScatter then AllGather (two steps, "two-shot").
- Broadcast: the root sends the whole buffer to every rank; Reduce: every rank sends to the root.
- AllToAll(v): rank i's block for rank j goes straight to j; the working buffer holds every (i, j)
  block, block (i, j) is counts[i][j] elements (AllToAll: the buffer split evenly over the ranks).
(In-switch reduction, NVLS / SHARP, is in hierarchical.py: `nvls_all_reduce`.)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .schedule import (
    ALL,
    MODE_COPY,
    MODE_REDUCE,
    MoveBuilder,
    Schedule,
    chunk_bounds_array,
)


def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    return i, j


def direct_reduce_scatter(
    ranks: Sequence[int] | np.ndarray,
    elements: int,
    first_step: int = 0,
    mb: MoveBuilder | None = None,
    phase: str = "reduce-scatter",
) -> MoveBuilder:
    r = np.asarray(ranks, dtype=np.int64)
    i, j = _pairs(len(r))
    mb = mb or MoveBuilder()
    mb.add(first_step, r[i], r[j], j, MODE_REDUCE, phase)
    return mb


def direct_all_gather(
    ranks: Sequence[int] | np.ndarray,
    elements: int,
    first_step: int = 0,
    mb: MoveBuilder | None = None,
    phase: str = "all-gather",
) -> MoveBuilder:
    r = np.asarray(ranks, dtype=np.int64)
    i, j = _pairs(len(r))
    mb = mb or MoveBuilder()
    mb.add(first_step, r[j], r[i], j, MODE_COPY, phase)
    return mb


def direct(
    op: str, ranks: Sequence[int], elements: int, root: int = -1, algorithm: str = "direct", pieces: int = 1
) -> Schedule:
    r = np.asarray(ranks, dtype=np.int64)
    n = len(r)
    bounds = chunk_bounds_array(elements, n)
    if op == "reduce-scatter":
        return direct_reduce_scatter(r, elements).build(op, algorithm, r, elements, bounds, ALL, r)
    if op == "all-gather":
        return direct_all_gather(r, elements).build(op, algorithm, r, elements, bounds, r, ALL)
    if op == "all-reduce":
        mb = direct_reduce_scatter(r, elements, 0)
        direct_all_gather(r, elements, 1, mb)
        return mb.build(op, algorithm, r, elements, bounds, ALL, ALL, notes="two-shot")
    one = chunk_bounds_array(elements, 1)
    others = r[r != root]
    mb = MoveBuilder()
    if op == "broadcast":
        mb.add(0, root, others, 0, MODE_COPY, "broadcast")
        return mb.build(op, algorithm, r, elements, one, root, ALL, root=root)
    if op == "reduce":
        mb.add(0, others, root, 0, MODE_REDUCE, "reduce")
        return mb.build(op, algorithm, r, elements, one, ALL, root, root=root)
    raise ValueError(f"direct {op} is not defined")


def all_to_all(
    ranks: Sequence[int], elements: int, counts: np.ndarray | None = None, algorithm: str = "direct"
) -> Schedule:
    """AllToAll (counts None: `elements` per rank split evenly over destinations) or AllToAllv
    (counts[i][j]: elements position i sends to position j)."""
    r = np.asarray(ranks, dtype=np.int64)
    n = len(r)
    if counts is None:
        per_dst = np.diff(chunk_bounds_array(elements, n))
        counts = np.broadcast_to(per_dst, (n, n))
        op = "all-to-all"
    else:
        counts = np.asarray(counts, dtype=np.int64).reshape(n, n)
        op = "all-to-allv"
    bounds = np.concatenate(([0], np.cumsum(counts.reshape(-1)))).astype(np.int64)
    i, j = _pairs(n)
    keep = counts[i, j] > 0
    mb = MoveBuilder()
    mb.add(0, r[i[keep]], r[j[keep]], i[keep] * n + j[keep], MODE_COPY, op)
    src = np.repeat(r, n)
    dst = np.tile(r, n)
    return mb.build(
        op,
        algorithm,
        r,
        int(counts.sum()),
        bounds,
        src,
        dst,
        notes="every block straight to its destination; PXN relays cross-rail blocks over NVLink"
        if algorithm == "pxn"
        else "every block straight to its destination",
    )


def send_recv(src: int, dst: int, elements: int) -> Schedule:
    mb = MoveBuilder()
    mb.add(0, src, dst, 0, MODE_COPY, "send/recv")
    return mb.build("send-recv", "direct", (src, dst), elements, chunk_bounds_array(elements, 1), src, dst)
