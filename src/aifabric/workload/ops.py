"""What each rank does in an iteration, in order: compute with a duration, collectives with a group."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Compute:
    name: str  # e.g. "forward", "backward"
    flops: float
    duration_s: float


@dataclass(frozen=True)
class Collective:
    """One rank's part in a collective. Every member of `group` has an op with the same `key`."""

    key: str  # identifies the collective instance across ranks, e.g. "it0/grad-allreduce"
    op: str  # "all-reduce", ...
    group: tuple[int, ...]
    elements: int
    bytes_per_element: int
    label: str = ""  # what is communicated, e.g. "gradients"

    @property
    def size_bytes(self) -> int:
        return self.elements * self.bytes_per_element


Op = Compute | Collective


@dataclass(frozen=True)
class Workload:
    """Per-rank ordered operations plus the facts the report needs."""

    name: str
    ranks: list[list[Op]]
    params: int
    iterations: int
    flops_per_iteration: float  # all ranks together
    description: str = ""

    @property
    def world_size(self) -> int:
        return len(self.ranks)
