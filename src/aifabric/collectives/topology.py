"""Topology-aware ordering of ranks for rings.

Inside a server the ring runs over NVLink; between servers it should stay on one rail, so that the
inter-server hop crosses a single rail switch and never a spine. With one NIC per GPU and rail i
joining GPU i of every server, a "snake" does it: server 0 visits its GPUs in ascending order,
server 1 in descending order, and so on. Every hop between servers then joins two GPUs with the
same local index (same rail). The closing hop, from the last server back to the first, is on a rail
too when the number of servers is even; with an odd number of servers it crosses rails (and spines).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def snake_ring(ranks: Sequence[int], server_of: Callable[[int], int], local_of: Callable[[int], int]) -> tuple[int, ...]:
    by_server: dict[int, list[int]] = {}
    for r in ranks:
        by_server.setdefault(server_of(r), []).append(r)
    ring: list[int] = []
    for k, server in enumerate(sorted(by_server)):
        members = sorted(by_server[server], key=local_of)
        ring += members if k % 2 == 0 else members[::-1]
    return tuple(ring)
