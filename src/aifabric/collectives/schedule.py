"""Collective schedules as data: steps of chunk moves between ranks, independent of any network.

A schedule splits a buffer of `elements` into chunks and says, step by step, which rank sends which
run of chunks to which rank and whether the receiver adds it into its own copy (reduce) or
overwrites its copy (copy). `execute` runs a schedule on real numpy arrays, which is how every
schedule is proven.

The moves are a struct of numpy arrays (`step`, `src`, `dst`, `chunk`, `count`, `mode`, `phase`,
`channel`), sorted by step, so that a schedule of tens of millions of moves costs 24 bytes per
move and is generated without a Python loop per move. `moves` / `steps()` give `ChunkMove` objects
for small schedules (explain tables, tests).

What the buffer means is data too, per chunk:

- `source[c]`: the rank whose input chunk c is (AllGather, Broadcast, AllToAll), or -1 when every
  rank contributes and the contributions are reduced (AllReduce, ReduceScatter, Reduce);
- `target[c]`: the rank that must hold chunk c's result at the end, or -1 for every rank.

So AllReduce is source -1 / target -1, ReduceScatter -1 / owner, AllGather owner / -1, Broadcast
root / -1, Reduce -1 / root, AllToAll(v) i / j for the block rank i sends to rank j.
`reference` computes the expected result from these alone, without looking at the moves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .names import REDUCE_OPS

REDUCE, COPY = "reduce", "copy"
MODE_COPY, MODE_REDUCE = 0, 1
MODES = (COPY, REDUCE)
ALL = -1  # source: every rank contributes (reduced); target: every rank receives

_UFUNC = {"sum": np.add, "avg": np.add, "max": np.maximum, "min": np.minimum}


@dataclass(frozen=True)
class ChunkMove:
    step: int
    src: int  # global rank
    dst: int  # global rank
    chunk: int  # first chunk of the run
    mode: str  # REDUCE or COPY
    phase: str  # e.g. "reduce-scatter", "all-gather"
    count: int = 1  # chunks chunk .. chunk+count-1
    channel: int = 0


@dataclass(frozen=True, eq=False)
class Schedule:
    op: str
    algorithm: str
    ranks: tuple[int, ...]  # the group, in algorithm order (e.g. ring order)
    elements: int
    chunk_bounds: np.ndarray  # chunk c = elements [chunk_bounds[c], chunk_bounds[c+1])
    step: np.ndarray  # int32, non-decreasing
    src: np.ndarray  # int32 global ranks
    dst: np.ndarray
    chunk: np.ndarray  # int32 first chunk of each move
    count: np.ndarray  # int32 chunks per move
    mode: np.ndarray  # int8 MODE_COPY / MODE_REDUCE
    phase: np.ndarray  # int8 index into `phases`
    phases: tuple[str, ...]
    source: np.ndarray  # per chunk, see module doc
    target: np.ndarray
    channel: np.ndarray = field(default=None)  # type: ignore[arg-type]  # int16, default all 0
    root: int = -1
    notes: str = ""  # one line on how the algorithm runs (shown by --explain)

    def __post_init__(self):
        if self.channel is None:
            object.__setattr__(self, "channel", np.zeros(len(self.step), dtype=np.int16))

    def shifted(self, delta: int) -> Schedule:
        """The same schedule on the group whose every rank is `delta` higher (chunks, steps, phases unchanged):
        a schedule built once serves every translate of its group."""
        if delta == 0:
            return self
        from dataclasses import replace

        def up(a: np.ndarray) -> np.ndarray:
            return np.where(a >= 0, a + delta, a).astype(a.dtype)

        return replace(
            self,
            ranks=tuple(r + delta for r in self.ranks),
            src=(self.src + delta).astype(self.src.dtype),
            dst=(self.dst + delta).astype(self.dst.dtype),
            source=up(self.source),
            target=up(self.target),
            root=self.root + delta if self.root >= 0 else self.root,
        )

    # -- sizes ----------------------------------------------------------------------------------
    @property
    def n_moves(self) -> int:
        return len(self.step)

    @property
    def n_steps(self) -> int:
        return int(self.step[-1]) + 1 if len(self.step) else 0

    @property
    def n_chunks(self) -> int:
        return len(self.chunk_bounds) - 1

    @property
    def n_channels(self) -> int:
        return int(self.channel.max()) + 1 if len(self.channel) else 1

    def chunk_elements(self, chunk: int, count: int = 1) -> int:
        return int(self.chunk_bounds[chunk + count] - self.chunk_bounds[chunk])

    def move_elements(self) -> np.ndarray:
        """Elements carried by every move (vectorized)."""
        b = self.chunk_bounds
        return b[self.chunk + self.count] - b[self.chunk]

    @property
    def nbytes(self) -> int:
        """Memory held by the move arrays."""
        return sum(
            a.nbytes
            for a in (self.step, self.src, self.dst, self.chunk, self.count, self.mode, self.phase, self.channel)
        )

    # -- as objects, for small schedules ----------------------------------------------------------
    def move(self, i: int) -> ChunkMove:
        return ChunkMove(
            int(self.step[i]),
            int(self.src[i]),
            int(self.dst[i]),
            int(self.chunk[i]),
            MODES[self.mode[i]],
            self.phases[self.phase[i]],
            int(self.count[i]),
            int(self.channel[i]),
        )

    @property
    def moves(self) -> tuple[ChunkMove, ...]:
        cols = (
            self.step.tolist(),
            self.src.tolist(),
            self.dst.tolist(),
            self.chunk.tolist(),
            [MODES[m] for m in self.mode.tolist()],
            [self.phases[p] for p in self.phase.tolist()],
            self.count.tolist(),
            self.channel.tolist(),
        )
        return tuple(ChunkMove(*row) for row in zip(*cols))

    def step_starts(self) -> np.ndarray:
        """Index of the first move of every step (length n_steps + 1)."""
        return np.searchsorted(self.step, np.arange(self.n_steps + 1), side="left")

    def steps(self) -> list[list[ChunkMove]]:
        starts = self.step_starts().tolist()
        moves = self.moves
        return [list(moves[starts[k] : starts[k + 1]]) for k in range(self.n_steps)]


def chunk_bounds(elements: int, n_chunks: int) -> tuple[int, ...]:
    """Split `elements` into `n_chunks` contiguous chunks whose sizes differ by at most one
    (the first `elements % n_chunks` chunks get the extra element)."""
    return tuple(int(x) for x in chunk_bounds_array(elements, n_chunks))


def chunk_bounds_array(elements: int, n_chunks: int) -> np.ndarray:
    base, extra = divmod(elements, n_chunks)
    sizes = np.full(n_chunks, base, dtype=np.int64)
    sizes[:extra] += 1
    return np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)


@dataclass
class MoveBuilder:
    """Collects blocks of moves (arrays or scalars broadcast together) and builds a `Schedule`."""

    phases: list[str] = field(default_factory=list)
    _blocks: list[tuple[tuple[int, ...], list[np.ndarray], int, int]] = field(default_factory=list)

    def add(self, step, src, dst, chunk, mode: int, phase: str, count=1, channel=0) -> None:
        """Moves given as arrays (or scalars) that broadcast together; nothing is copied until `build`."""
        if phase not in self.phases:
            self.phases.append(phase)
        typed = [
            np.asarray(x, dtype=t)
            for x, t in (
                (step, np.int32),
                (src, np.int32),
                (dst, np.int32),
                (chunk, np.int32),
                (count, np.int32),
                (channel, np.int16),
            )
        ]
        shape = np.broadcast_shapes(*(a.shape for a in typed))
        if int(np.prod(shape)) == 0:
            return
        self._blocks.append((shape, typed, mode, self.phases.index(phase)))

    def build(
        self,
        op: str,
        algorithm: str,
        ranks,
        elements: int,
        bounds: np.ndarray,
        source,
        target,
        root: int = -1,
        notes: str = "",
    ) -> Schedule:
        """One allocation per column, each block broadcast straight into its slice."""
        dtypes = (np.int32,) * 5 + (np.int8, np.int8, np.int16)
        sizes = [int(np.prod(shape)) for shape, *_ in self._blocks]
        total = sum(sizes)
        cols = [np.empty(total, dtype=t) for t in dtypes]
        off = 0
        for (shape, typed, mode, phase), n in zip(self._blocks, sizes):
            for k, col in zip((0, 1, 2, 3, 4, 7), typed):
                np.copyto(cols[k][off : off + n].reshape(shape), col)
            cols[5][off : off + n] = mode
            cols[6][off : off + n] = phase
            off += n
        step = cols[0]
        if len(step) > 1 and np.any(step[1:] < step[:-1]):
            order = np.argsort(step, kind="stable")
            cols = [c[order] for c in cols]
        n_chunks = len(bounds) - 1
        return Schedule(
            op,
            algorithm,
            tuple(int(r) for r in ranks),
            int(elements),
            np.asarray(bounds, dtype=np.int64),
            cols[0],
            cols[1],
            cols[2],
            cols[3],
            cols[4],
            cols[5],
            cols[6],
            tuple(self.phases),
            np.broadcast_to(np.asarray(source, dtype=np.int64), (n_chunks,)).copy(),
            np.broadcast_to(np.asarray(target, dtype=np.int64), (n_chunks,)).copy(),
            cols[7],
            root,
            notes,
        )


def execute(schedule: Schedule, buffers: dict[int, np.ndarray], reduce_op: str = "sum") -> dict[int, np.ndarray]:
    """Run a schedule on real arrays: `buffers[rank]` is that rank's input; returns every rank's buffer.

    All moves of one step read the senders' state from before the step, as on real hardware where
    the sends of a step happen concurrently. `reduce_op` is NCCL's redop: sum, avg (sum, then ÷ n on
    the reduced chunks, as the book's Ch. 14 averaging), max, min.
    """
    if reduce_op not in _UFUNC:
        raise ValueError(f"unknown reduction {reduce_op!r}; one of {', '.join(REDUCE_OPS)}")
    ufunc = _UFUNC[reduce_op]
    state = {r: np.array(buffers[r], copy=True) for r in schedule.ranks}
    b = schedule.chunk_bounds.tolist()
    starts = schedule.step_starts().tolist()
    src, dst, mode = schedule.src.tolist(), schedule.dst.tolist(), schedule.mode.tolist()
    lo_of = [b[c] for c in schedule.chunk.tolist()]
    hi_of = [b[c + k] for c, k in zip(schedule.chunk.tolist(), schedule.count.tolist())]
    for k in range(schedule.n_steps):
        idx = range(starts[k], starts[k + 1])
        sent = [state[src[i]][lo_of[i] : hi_of[i]].copy() for i in idx]
        for i, data in zip(idx, sent):
            target = state[dst[i]][lo_of[i] : hi_of[i]]
            if mode[i] == MODE_REDUCE:
                ufunc(target, data, out=target)
            else:
                target[...] = data
    if reduce_op == "avg":
        n = len(schedule.ranks)
        for c in np.flatnonzero(schedule.source == ALL):
            for r in schedule.ranks:
                seg = state[r][b[c] : b[c + 1]]
                seg[...] = seg / n
    return state


def reference(
    schedule: Schedule, buffers: dict[int, np.ndarray], reduce_op: str = "sum"
) -> dict[int, list[tuple[int, int, np.ndarray]]]:
    """What every rank must hold at the end, from the op's definition alone (source / target per chunk):
    rank -> [(lo, hi, expected elements [lo, hi))]."""
    b = schedule.chunk_bounds
    out: dict[int, list[tuple[int, int, np.ndarray]]] = {r: [] for r in schedule.ranks}
    for c in range(schedule.n_chunks):
        lo, hi = int(b[c]), int(b[c + 1])
        src = int(schedule.source[c])
        if src == ALL:
            parts = [np.asarray(buffers[r][lo:hi]) for r in schedule.ranks]
            if reduce_op in ("sum", "avg"):
                value = np.sum(parts, axis=0)
                if reduce_op == "avg":
                    value = value / len(schedule.ranks)
            else:
                value = (np.max if reduce_op == "max" else np.min)(parts, axis=0)
        else:
            value = np.asarray(buffers[src][lo:hi])
        tgt = int(schedule.target[c])
        for r in schedule.ranks if tgt == ALL else (tgt,):
            out[r].append((lo, hi, value))
    return out
