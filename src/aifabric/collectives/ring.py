"""Ring AllReduce = ReduceScatter + AllGather (seeds Ch. 14, Figures 14-5 to 14-17).

With n ranks in ring order p_0 .. p_{n-1} and the buffer in n chunks:

- ReduceScatter, steps s = 0 .. n-2: position i sends chunk (i - s) mod n to position i+1, which adds
  it into its own copy. Afterwards position i holds the full sum of chunk (i + 1) mod n.
- AllGather, steps s = 0 .. n-2: position i sends chunk (i + 1 - s) mod n to position i+1, which
  overwrites its copy.

2(n-1) steps in all; each rank sends 2(n-1)/n of the buffer.
"""

from __future__ import annotations

from .schedule import COPY, REDUCE, ChunkMove, Schedule, chunk_bounds

RS, AG = "reduce-scatter", "all-gather"


def _ring_moves(ring: tuple[int, ...], phase: str, first_step: int) -> list[ChunkMove]:
    n = len(ring)
    moves = []
    for s in range(n - 1):
        for i in range(n):
            chunk = (i - s) % n if phase == RS else (i + 1 - s) % n
            mode = REDUCE if phase == RS else COPY
            moves.append(ChunkMove(first_step + s, ring[i], ring[(i + 1) % n], chunk, mode, phase))
    return moves


def ring_reduce_scatter(ring: tuple[int, ...] | list[int], elements: int) -> Schedule:
    ring = tuple(ring)
    return Schedule("reduce-scatter", "ring", ring, elements, chunk_bounds(elements, len(ring)),
                    tuple(_ring_moves(ring, RS, 0)))


def ring_all_gather(ring: tuple[int, ...] | list[int], elements: int) -> Schedule:
    """AllGather on a buffer where position i starts owning chunk (i + 1) mod n (as ReduceScatter leaves it)."""
    ring = tuple(ring)
    return Schedule("all-gather", "ring", ring, elements, chunk_bounds(elements, len(ring)),
                    tuple(_ring_moves(ring, AG, 0)))


def ring_all_reduce(ring: tuple[int, ...] | list[int], elements: int) -> Schedule:
    ring = tuple(ring)
    n = len(ring)
    moves = _ring_moves(ring, RS, 0) + _ring_moves(ring, AG, n - 1)
    return Schedule("all-reduce", "ring", ring, elements, chunk_bounds(elements, n), tuple(moves))


def owned_chunk_after_reduce_scatter(position: int, n: int) -> int:
    return (position + 1) % n
