"""The trainer's ranks: a 3D-parallel job's rank <-> group arithmetic as the trainer asks for it. The arithmetic
itself is the workload layer's (workload/ranks.py `RankLayout`, Megatron's `parallel_state` as pure functions), in
the seeds' order "tp-cp-pp-dp" (no context parallelism).

World = dp x pp x tp. Tensor-parallel ranks are adjacent (they share a server's scale-up domain), then
pipeline stages, then data-parallel replicas (seeds' Blog D, WE-D.4: GPU0/GPU1 = TP ranks of stage 1,
GPU2/GPU3 = stage 2, GPUs 0-3 = one replica, GPUs 4-7 = the other):

    rank = dp_index * (pp * tp) + pp_index * tp + tp_index
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..workload.pipeline import stage_bounds  # noqa: F401 - the trainer's stage split, shared with the workload layer
from ..workload.ranks import RankLayout

ORDER = "tp-cp-pp-dp"  # fastest-varying first: tensor, (context: 1), pipeline, data


@lru_cache(maxsize=64)
def _ranks(dp: int, tp: int, pp: int) -> RankLayout:
    return RankLayout(tp=tp, pp=pp, dp=dp, order=ORDER)


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
        return self.dp * self.tp * self.pp  # also for sizes the trainer's checks then refuse (< 1)

    @property
    def ranks(self) -> RankLayout:
        return _ranks(self.dp, self.tp, self.pp)

    def rank(self, dp: int, pp: int, tp: int) -> int:
        return self.ranks.rank(tp=tp, dp=dp, pp=pp)

    def coords(self, rank: int) -> Coords:
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} outside world of {self.world_size}")
        c = self.ranks.coords(rank)
        return Coords(c["dp"], c["pp"], c["tp"])

    def tp_group(self, rank: int) -> tuple[int, ...]:
        return self.ranks.group(rank, "tp")

    def dp_group(self, rank: int) -> tuple[int, ...]:
        return self.ranks.group(rank, "dp")

    def pp_group(self, rank: int) -> tuple[int, ...]:
        return self.ranks.group(rank, "pp")

    def tp_groups(self) -> list[tuple[int, ...]]:
        return self.ranks.groups("tp")

    def dp_groups(self) -> list[tuple[int, ...]]:
        return self.ranks.groups("dp")

    def pp_groups(self) -> list[tuple[int, ...]]:
        return self.ranks.groups("pp")

    def next_stage(self, rank: int) -> int | None:
        c = self.coords(rank)
        return self.rank(c.dp, c.pp + 1, c.tp) if c.pp + 1 < self.pp else None

    def prev_stage(self, rank: int) -> int | None:
        c = self.coords(rank)
        return self.rank(c.dp, c.pp - 1, c.tp) if c.pp > 0 else None


def split_evenly(n: int, parts: int, index: int) -> tuple[int, int]:
    """[start, stop) of part `index` when n items are split into `parts` contiguous parts (n % parts == 0)."""
    size = n // parts
    return index * size, (index + 1) * size
