"""Collective schedules as data: steps of chunk moves between ranks, independent of any network.

A schedule splits a buffer of `elements` into chunks and says, step by step, which rank sends which
chunk to which rank and whether the receiver adds it into its own copy (reduce) or overwrites its
copy (copy). `execute` runs a schedule on real numpy arrays, which is how every schedule is proven.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

REDUCE, COPY = "reduce", "copy"


@dataclass(frozen=True)
class ChunkMove:
    step: int
    src: int  # global rank
    dst: int  # global rank
    chunk: int
    mode: str  # REDUCE or COPY
    phase: str  # e.g. "reduce-scatter", "all-gather"


@dataclass(frozen=True)
class Schedule:
    op: str
    algorithm: str
    ranks: tuple[int, ...]  # the group, in algorithm order (e.g. ring order)
    elements: int
    chunk_bounds: tuple[int, ...]  # chunk c = elements [chunk_bounds[c], chunk_bounds[c+1])
    moves: tuple[ChunkMove, ...]

    @property
    def n_steps(self) -> int:
        return 1 + max((m.step for m in self.moves), default=-1)

    @property
    def n_chunks(self) -> int:
        return len(self.chunk_bounds) - 1

    def chunk_elements(self, chunk: int) -> int:
        return self.chunk_bounds[chunk + 1] - self.chunk_bounds[chunk]

    def steps(self) -> list[list[ChunkMove]]:
        out: list[list[ChunkMove]] = [[] for _ in range(self.n_steps)]
        for m in self.moves:
            out[m.step].append(m)
        return out


def chunk_bounds(elements: int, n_chunks: int) -> tuple[int, ...]:
    """Split `elements` into `n_chunks` contiguous chunks whose sizes differ by at most one
    (the first `elements % n_chunks` chunks get the extra element)."""
    base, extra = divmod(elements, n_chunks)
    bounds = [0]
    for c in range(n_chunks):
        bounds.append(bounds[-1] + base + (1 if c < extra else 0))
    return tuple(bounds)


def execute(schedule: Schedule, buffers: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    """Run a schedule on real arrays: `buffers[rank]` is that rank's input; returns every rank's output.

    All moves of one step read the senders' state from before the step, as on real hardware where
    the sends of a step happen concurrently.
    """
    state = {r: np.array(buffers[r], copy=True) for r in schedule.ranks}
    b = schedule.chunk_bounds
    for step in schedule.steps():
        sent = [state[m.src][b[m.chunk] : b[m.chunk + 1]].copy() for m in step]
        for m, data in zip(step, sent):
            target = state[m.dst][b[m.chunk] : b[m.chunk + 1]]
            if m.mode == REDUCE:
                target += data
            else:
                target[...] = data
    return state
