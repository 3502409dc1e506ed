"""Recursive halving-doubling (Rabenseifner): ReduceScatter by recursive halving, AllGather by
recursive doubling, AllReduce = both. log2(p) steps each instead of n - 1.

p = the largest power of two <= n. The buffer is in n chunks grouped into p blocks: block b holds
chunks 2b, 2b+1 for b < n - p (its position's and one extra rank's), one chunk otherwise.

- Fold (n > p only): extra position p + k sends its whole buffer to position k, which adds it in.
- Halving, round k = 0 .. log2(p) - 1, distance d = p / 2^(k+1): position i and i XOR d split their
  current range of blocks; the one with bit d clear keeps the lower half and sends the upper half
  (the partner adds it in). Afterwards position i holds block i fully reduced.
- Doubling: the rounds in reverse; partners swap what they hold (copy), doubling it.
- Unfold: position k sends the result (AllReduce: everything; ReduceScatter: the extra rank's chunk)
  back to position p + k.

Moves cover runs of consecutive chunks (`count`), so a step is one move per rank.
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


def _plan(n: int):
    p = 1 << (n.bit_length() - 1)
    extra = n - p
    b = np.arange(p + 1)
    block_start = b + np.minimum(b, extra)  # first chunk of every block (and the end)
    return p, extra, block_start


def _halving(mb: MoveBuilder, r: np.ndarray, p: int, block_start: np.ndarray, step: int) -> int:
    i = np.arange(p)
    rounds = p.bit_length() - 1
    for k in range(rounds):
        length = p >> k
        d = length >> 1
        lo = (i // length) * length
        upper = (i & d) != 0
        send_lo = np.where(upper, lo, lo + d)
        mb.add(
            step,
            r[i],
            r[i ^ d],
            block_start[send_lo],
            MODE_REDUCE,
            "reduce-scatter (halving)",
            count=block_start[send_lo + d] - block_start[send_lo],
        )
        step += 1
    return step


def _doubling(mb: MoveBuilder, r: np.ndarray, p: int, block_start: np.ndarray, step: int) -> int:
    i = np.arange(p)
    rounds = p.bit_length() - 1
    for k in reversed(range(rounds)):
        d = p >> (k + 1)
        lo = (i // d) * d
        mb.add(
            step,
            r[i],
            r[i ^ d],
            block_start[lo],
            MODE_COPY,
            "all-gather (doubling)",
            count=block_start[lo + d] - block_start[lo],
        )
        step += 1
    return step


def _owners(r: np.ndarray, p: int, extra: int) -> np.ndarray:
    """The rank each chunk belongs to (ReduceScatter result, AllGather input)."""
    own = []
    for b in range(p):
        own.append(r[b])
        if b < extra:
            own.append(r[p + b])
    return np.array(own, dtype=np.int64)


def rhd(op: str, ranks: Sequence[int], elements: int) -> Schedule:
    r = np.asarray(ranks, dtype=np.int64)
    n = len(r)
    p, extra, block_start = _plan(n)
    k = np.arange(extra)
    ex_chunk = block_start[k] + 1  # the extra rank's own chunk inside block k
    mb = MoveBuilder()
    step = 0
    if op in ("all-reduce", "reduce-scatter"):
        if extra:
            mb.add(step, r[p + k], r[k], 0, MODE_REDUCE, "fold", count=n)
            step += 1
        step = _halving(mb, r, p, block_start, step)
    if op == "all-gather" and extra:
        mb.add(step, r[p + k], r[k], ex_chunk, MODE_COPY, "fold")
        step += 1
    if op in ("all-reduce", "all-gather"):
        step = _doubling(mb, r, p, block_start, step)
        if extra:
            mb.add(step, r[k], r[p + k], 0, MODE_COPY, "unfold", count=n)
    elif op == "reduce-scatter" and extra:
        mb.add(step, r[k], r[p + k], ex_chunk, MODE_COPY, "unfold")
    owners = _owners(r, p, extra)
    source, target = {"all-reduce": (ALL, ALL), "reduce-scatter": (ALL, owners), "all-gather": (owners, ALL)}[op]
    return mb.build(
        op,
        "rhd",
        r,
        elements,
        chunk_bounds_array(elements, n),
        source,
        target,
        notes=f"p = {p}, {p.bit_length() - 1} rounds" + (f", {extra} extra rank(s) folded" if extra else ""),
    )
