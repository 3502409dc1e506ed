"""What the scale-up collectives folded at lowering (engines/fold.py) leave in the task graph: no transfers, but
their count and time per kind, their bytes and peak rates per link, the payload between each pair of ranks, and
each merged task's share of link bytes (spread over the task's run when link load over time is recorded)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

KindKey = tuple[str, str, int, int, str]  # (op, dim, group size, bytes, label)


@dataclass
class FoldedKind:
    """One kind of collective folded into its GPUs' time: how many ran, and the time, label and payload bytes of
    one."""

    count: int
    time_s: float
    label: str
    payload_bytes: float


@dataclass
class FoldedCollectives:
    """The folded collectives of a task graph (filled by engines/fold.py's `ScaleUpFolder` during lowering)."""

    kinds: dict[KindKey, FoldedKind] = field(default_factory=dict)  # the collectives of each kind
    link_bytes: np.ndarray | None = None  # per link: the folded collectives' bytes (None: nothing folded)
    link_peak: np.ndarray | None = None  # per link: the highest rate a folded collective reached
    pairs: dict[tuple[int, int, str], float] = field(default_factory=dict)  # (src rank, dst rank, dim) -> bytes
    task_bytes: dict[int, list] = field(default_factory=dict)  # merged task -> [(links, bytes)] folded into it
