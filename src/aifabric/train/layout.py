"""Rank <-> group arithmetic of a 3D-parallel job, in one place, as pure functions (Megatron's
`parallel_state`, in the seeds' order).

World = dp x pp x tp. Tensor-parallel ranks are adjacent (they share a server's scale-up domain), then
pipeline stages, then data-parallel replicas (seeds' Blog D, WE-D.4: GPU0/GPU1 = TP ranks of stage 1,
GPU2/GPU3 = stage 2, GPUs 0-3 = one replica, GPUs 4-7 = the other):

    rank = dp_index * (pp * tp) + pp_index * tp + tp_index
"""

from __future__ import annotations

from dataclasses import dataclass

from ..workload.pipeline import stage_bounds  # noqa: F401 - the trainer's stage split, shared with the workload layer


@dataclass(frozen=True)
class Coords:
    dp: int
    pp: int
    tp: int


@dataclass(frozen=True)
class Layout:
    dp: int = 1
    tp: int = 1
    pp: int = 1

    @property
    def world_size(self) -> int:
        return self.dp * self.tp * self.pp

    def rank(self, dp: int, pp: int, tp: int) -> int:
        return dp * (self.pp * self.tp) + pp * self.tp + tp

    def coords(self, rank: int) -> Coords:
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} outside world of {self.world_size}")
        dp, rest = divmod(rank, self.pp * self.tp)
        pp, tp = divmod(rest, self.tp)
        return Coords(dp, pp, tp)

    def tp_group(self, rank: int) -> tuple[int, ...]:
        c = self.coords(rank)
        return tuple(self.rank(c.dp, c.pp, t) for t in range(self.tp))

    def dp_group(self, rank: int) -> tuple[int, ...]:
        c = self.coords(rank)
        return tuple(self.rank(d, c.pp, c.tp) for d in range(self.dp))

    def pp_group(self, rank: int) -> tuple[int, ...]:
        c = self.coords(rank)
        return tuple(self.rank(c.dp, p, c.tp) for p in range(self.pp))

    def tp_groups(self) -> list[tuple[int, ...]]:
        return _unique(self.tp_group(r) for r in range(self.world_size))

    def dp_groups(self) -> list[tuple[int, ...]]:
        return _unique(self.dp_group(r) for r in range(self.world_size))

    def pp_groups(self) -> list[tuple[int, ...]]:
        return _unique(self.pp_group(r) for r in range(self.world_size))

    def next_stage(self, rank: int) -> int | None:
        c = self.coords(rank)
        return self.rank(c.dp, c.pp + 1, c.tp) if c.pp + 1 < self.pp else None

    def prev_stage(self, rank: int) -> int | None:
        c = self.coords(rank)
        return self.rank(c.dp, c.pp - 1, c.tp) if c.pp > 0 else None


def _unique(groups) -> list[tuple[int, ...]]:
    seen: dict[tuple[int, ...], None] = {}
    for g in groups:
        seen.setdefault(g, None)
    return list(seen)


def split_evenly(n: int, parts: int, index: int) -> tuple[int, int]:
    """[start, stop) of part `index` when n items are split into `parts` contiguous parts (n % parts == 0)."""
    size = n // parts
    return index * size, (index + 1) * size
