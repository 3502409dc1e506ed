"""Topology-aware ordering of ranks for rings and trees, and the network each hop crosses.

Inside a server the ring runs over NVLink; between servers it should stay on one rail, so that the
inter-server hop crosses a single rail switch and never a spine. With one NIC per GPU and rail i
joining GPU i of every server, a "snake" does it: server 0 visits its GPUs in ascending order,
server 1 in descending order, and so on. Every hop between servers then joins two GPUs with the
same local index (same rail). The closing hop, from the last server back to the first, is on a rail
too when the number of servers is even; with an odd number of servers it crosses rails (and spines)
unless PXN relays it over NVLink (see engines/lower_collective.py).

Channels (NCCL runs several rings at once, each on its own NICs): channel c rotates every server's
order by c before snaking, so channel c's inter-server hops use rails c-1 and c; with as many
channels as GPUs per server every NIC carries exactly one channel in each direction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Layout:
    """Where ranks sit: torchrun order, `gpus_per_server` consecutive ranks per server, one NIC per GPU
    on the rail of its local index (as `Fabric.server_of` / `Fabric.local_index`)."""

    gpus_per_server: int

    def server_of(self, rank):
        return rank // self.gpus_per_server

    def local_of(self, rank):
        return rank % self.gpus_per_server


NVLINK = "NVLink"


def network_of(src: int, dst: int, layout: Layout) -> str:
    """The network a transfer crosses: NVLink inside a server, one rail between servers on the same
    rail, rail → spine → rail otherwise."""
    if layout.server_of(src) == layout.server_of(dst):
        return NVLINK
    a, b = layout.local_of(src), layout.local_of(dst)
    return f"rail {a}" if a == b else f"rail {a} → spine → rail {b}"


def by_server(ranks: Sequence[int], server_of: Callable[[int], int], local_of: Callable[[int], int]) -> list[list[int]]:
    """The group's ranks per server (servers ascending), each server's members by local index."""
    groups: dict[int, list[int]] = {}
    for r in ranks:
        groups.setdefault(server_of(r), []).append(r)
    return [sorted(groups[s], key=local_of) for s in sorted(groups)]


def snake_ring(
    ranks: Sequence[int], server_of: Callable[[int], int], local_of: Callable[[int], int], channel: int = 0
) -> tuple[int, ...]:
    ring: list[int] = []
    for k, members in enumerate(by_server(ranks, server_of, local_of)):
        shift = channel % len(members)
        rotated = members[shift:] + members[:shift]
        ring += rotated if k % 2 == 0 else rotated[::-1]
    return tuple(ring)


def channel_rings(ranks: Sequence[int], layout: Layout, channels: int) -> np.ndarray:
    """One snake ring per channel, shape (channels, n)."""
    return np.array(
        [snake_ring(ranks, layout.server_of, layout.local_of, c) for c in range(channels)], dtype=np.int64
    ).reshape(channels, len(ranks))


def server_matrix(ranks: Sequence[int], layout: Layout) -> np.ndarray | None:
    """(servers, per-server) matrix of the group's ranks when every server holds the same number of
    them, else None (hierarchical algorithms need that)."""
    groups = by_server(ranks, layout.server_of, layout.local_of)
    if len({len(g) for g in groups}) != 1:
        return None
    return np.array(groups, dtype=np.int64)
