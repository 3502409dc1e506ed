"""Every (operation, algorithm) NCCL-style schedule, behind one function.

`build_schedule(op, algorithm, ranks, elements, layout, ...)` returns the `Schedule`; `ALGORITHMS[op]`
lists what each operation supports; `not_applicable` says why an algorithm cannot run on a group
(the auto rule in `tuning.py` skips those).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .direct import all_to_all, direct, send_recv
from .hierarchical import (
    hierarchical_all_gather,
    hierarchical_all_reduce,
    hierarchical_reduce_scatter,
    nvls_all_reduce,
)
from .names import ALGORITHMS, OPS
from .rhd import rhd
from .ring import (
    chain_broadcast,
    chain_reduce,
    ring_all_gather,
    ring_all_reduce,
    ring_reduce_scatter,
)
from .schedule import ALL, MODE_COPY, MoveBuilder, Schedule, chunk_bounds_array
from .topology import Layout, channel_rings, server_matrix
from .tree import tree_all_reduce, tree_broadcast, tree_reduce

ROOTED = frozenset({"broadcast", "reduce"})


def dissemination_barrier(ranks: Sequence[int]) -> Schedule:
    """ceil(log2 n) rounds; in round k position i signals position i + 2^k: afterwards every rank has
    (transitively) heard from every other rank. No data: one empty chunk."""
    r = np.asarray(ranks, dtype=np.int64)
    n = len(r)
    mb = MoveBuilder()
    i = np.arange(n)
    k, d = 0, 1
    while d < n:
        mb.add(k, r[i], r[(i + d) % n], 0, MODE_COPY, "barrier")
        k, d = k + 1, d * 2
    return mb.build(
        "barrier",
        "dissemination",
        r,
        0,
        chunk_bounds_array(0, 1),
        ALL,
        ALL,
        notes=f"{k} rounds of signals at distance 1, 2, 4, ...",
    )


def not_applicable(op: str, algorithm: str, ranks: Sequence[int], layout: Layout) -> str | None:
    if op not in ALGORITHMS:
        return f"unknown operation {op!r}; one of {', '.join(OPS)}"
    if algorithm not in ALGORITHMS[op]:
        return f"{op} has no {algorithm!r} algorithm; one of {', '.join(ALGORITHMS[op])}"
    if (algorithm.startswith("hierarchical") or algorithm == "nvls") and server_matrix(ranks, layout) is None:
        return f"{algorithm} needs the same number of group ranks on every server"
    if op == "send-recv" and len(ranks) != 2:
        return "send-recv needs exactly two ranks (sender, receiver)"
    return None


def build_schedule(
    op: str,
    algorithm: str,
    ranks: Sequence[int],
    elements: int,
    layout: Layout,
    *,
    channels: int = 1,
    pieces: int = 1,
    root: int | None = None,
    counts: np.ndarray | None = None,
) -> Schedule:
    """`ranks`: the group (any global ranks); `elements`: nccl-tests' count (AllGather: the gathered
    output, ReduceScatter: the input, AllToAll: all a rank sends); `root` for Broadcast / Reduce
    (default: the group's first rank); `counts` (n x n) for AllToAllv; `channels` rings / tree pairs;
    `pieces` pipeline chunks per channel (Broadcast / Reduce / tree)."""
    reason = not_applicable(op, algorithm, ranks, layout)
    if reason:
        raise ValueError(reason)
    ranks = [int(r) for r in ranks]
    root = ranks[0] if root is None or root < 0 else int(root)
    if op in ROOTED and root not in ranks:
        raise ValueError(f"root {root} is not in the group")
    if op == "barrier":
        return dissemination_barrier(ranks)
    if op == "send-recv":
        return send_recv(ranks[0], ranks[1], elements)
    if op in ("all-to-all", "all-to-allv"):
        return all_to_all(ranks, elements, counts if op == "all-to-allv" else None, algorithm)
    if algorithm == "nvls":
        m = server_matrix(ranks, layout)
        assert m is not None  # not_applicable refused a group uneven over the servers
        return nvls_all_reduce(m, elements, pieces)
    if algorithm == "direct":
        return direct(op, ranks, elements, root, algorithm)
    if algorithm == "rhd":
        return rhd(op, ranks, elements)
    if algorithm.startswith("hierarchical"):
        m = server_matrix(ranks, layout)
        assert m is not None  # not_applicable refused a group uneven over the servers
        if op == "reduce-scatter":
            return hierarchical_reduce_scatter(m, elements)
        if op == "all-gather":
            return hierarchical_all_gather(m, elements)
        return hierarchical_all_reduce(m, elements, "rhd" if algorithm == "hierarchical-rhd" else "ring")
    if algorithm == "tree":
        if op == "all-reduce":
            return tree_all_reduce(ranks, elements, layout, pieces, channels)
        return (tree_broadcast if op == "broadcast" else tree_reduce)(ranks, elements, layout, root, pieces)
    # ring
    rings = channel_rings(ranks, layout, channels)
    if op == "all-reduce":
        return ring_all_reduce(rings, elements)
    if op == "reduce-scatter":
        return ring_reduce_scatter(rings, elements)
    if op == "all-gather":
        return ring_all_gather(rings, elements)
    return (chain_broadcast if op == "broadcast" else chain_reduce)(rings, elements, root, pieces)
