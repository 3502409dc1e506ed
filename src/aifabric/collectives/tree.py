"""Trees, topology-aware as NCCL builds them: inside a server a chain over NVLink starting at the
server's head GPU; across servers a binary tree over the servers' heads, whose GPUs all have the same
local index, so every inter-server edge stays on that one rail (Queue Pairs over the backend).

- Broadcast (seeds Ch. 14, Figure 14-4): one tree rooted at the root rank; piece p leaves a rank at
  depth d at step p + d (pipelined).
- Reduce: the same tree upwards; a rank of height h forwards piece p (its own plus its children's)
  at step p + h.
- AllReduce, double binary tree: two trees (per channel), the second one mirrored (server order
  reversed) and headed by another local GPU, so that a server interior in one is near the leaves of
  the other and the two use different rails. Each tree reduces half the buffer up to its root and
  broadcasts it back down; a piece goes down as soon as the root has it, so up and down overlap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from .schedule import (
    ALL,
    MODE_COPY,
    MODE_REDUCE,
    MoveBuilder,
    Schedule,
    chunk_bounds_array,
)
from .topology import Layout, by_server


@dataclass(frozen=True)
class Tree:
    root: int
    nodes: np.ndarray  # every non-root rank
    parent: np.ndarray  # its parent
    depth: np.ndarray  # edges from the root
    height: np.ndarray  # longest path down to a leaf
    root_height: int


def build_tree(
    ranks: Sequence[int], layout: Layout, head: int = 0, mirror: bool = False, root: int | None = None
) -> Tree:
    groups = by_server(ranks, layout.server_of, layout.local_of)
    if root is not None:
        rs = next(k for k, g in enumerate(groups) if root in g)
        groups = groups[rs:] + groups[:rs]
        heads = []
        for g in groups:
            same = [r for r in g if layout.local_of(r) == layout.local_of(root)]
            heads.append(g.index(root) if root in g else (g.index(same[0]) if same else 0))
    else:
        heads = [head % len(g) for g in groups]
    order = list(range(len(groups)))
    if mirror:
        order = order[::-1]
    parent: dict[int, int] = {}
    chains = []
    for g, h in zip(groups, heads):
        chain = g[h:] + g[:h]
        chains.append(chain)
        for a, b in pairwise(chain):
            parent[b] = a
    for j in range(1, len(order)):  # binary heap over the servers' heads
        parent[chains[order[j]][0]] = chains[order[(j - 1) // 2]][0]
    tree_root = chains[order[0]][0]
    children: dict[int, list[int]] = {}
    for v, p in parent.items():
        children.setdefault(p, []).append(v)
    depth = {tree_root: 0}
    bfs = [tree_root]
    for v in bfs:
        for c in children.get(v, ()):
            depth[c] = depth[v] + 1
            bfs.append(c)
    height = dict.fromkeys(bfs, 0)
    for v in reversed(bfs):
        if v != tree_root:
            height[parent[v]] = max(height[parent[v]], height[v] + 1)
    nodes = np.array([v for v in bfs if v != tree_root], dtype=np.int64)
    return Tree(
        tree_root,
        nodes,
        np.array([parent[v] for v in nodes], dtype=np.int64),
        np.array([depth[v] for v in nodes], dtype=np.int64),
        np.array([height[v] for v in nodes], dtype=np.int64),
        height[tree_root],
    )


def _pieces(p: int) -> np.ndarray:
    return np.arange(p).reshape(-1, 1)


def tree_broadcast(ranks: Sequence[int], elements: int, layout: Layout, root: int, pieces: int = 1) -> Schedule:
    t = build_tree(ranks, layout, root=root)
    mb = MoveBuilder()
    p = _pieces(pieces)
    mb.add(p + t.depth - 1, t.parent, t.nodes, p, MODE_COPY, "broadcast")
    return mb.build(
        "broadcast",
        "tree",
        [t.root, *t.nodes.tolist()],
        elements,
        chunk_bounds_array(elements, pieces),
        root,
        ALL,
        root=root,
        notes=f"tree from rank {root}: NVLink chains in servers, rail tree across",
    )


def tree_reduce(ranks: Sequence[int], elements: int, layout: Layout, root: int, pieces: int = 1) -> Schedule:
    t = build_tree(ranks, layout, root=root)
    mb = MoveBuilder()
    p = _pieces(pieces)
    mb.add(p + t.height, t.nodes, t.parent, p, MODE_REDUCE, "reduce")
    return mb.build(
        "reduce",
        "tree",
        [t.root, *t.nodes.tolist()],
        elements,
        chunk_bounds_array(elements, pieces),
        ALL,
        root,
        root=root,
        notes=f"tree towards rank {root}",
    )


def double_trees(ranks: Sequence[int], layout: Layout, channels: int = 1) -> list[Tree]:
    per_server = min(len(g) for g in by_server(ranks, layout.server_of, layout.local_of)) if len(ranks) else 1
    trees = []
    for c in range(channels):
        trees.append(build_tree(ranks, layout, head=(2 * c) % per_server, mirror=False))
        trees.append(build_tree(ranks, layout, head=(2 * c + 1) % per_server, mirror=True))
    return trees


def tree_all_reduce(
    ranks: Sequence[int], elements: int, layout: Layout, pieces: int = 1, channels: int = 1
) -> Schedule:
    trees = double_trees(ranks, layout, channels)
    mb = MoveBuilder()
    p = _pieces(pieces)
    for k, t in enumerate(trees):
        chunk = k * pieces + p
        mb.add(p + t.height, t.nodes, t.parent, chunk, MODE_REDUCE, "reduce (up the tree)", channel=k)
        mb.add(
            p + t.root_height + t.depth - 1, t.parent, t.nodes, chunk, MODE_COPY, "broadcast (down the tree)", channel=k
        )
    return mb.build(
        "all-reduce",
        "tree",
        ranks,
        elements,
        chunk_bounds_array(elements, len(trees) * pieces),
        ALL,
        ALL,
        notes=f"{len(trees)} trees (double binary tree × {channels} channel(s)), {pieces} piece(s) each",
    )
