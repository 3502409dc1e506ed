from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # what the lazy exports below are, for type checkers
    from .algorithms import build_schedule, not_applicable
    from .names import ALGORITHMS, OPS, REDUCE_OPS
    from .ring import ring_all_gather, ring_all_reduce, ring_reduce_scatter
    from .schedule import ALL, COPY, REDUCE, ChunkMove, Schedule, chunk_bounds, execute, reference
    from .topology import Layout, network_of, snake_ring

_EXPORTS = {
    "ALGORITHMS": ".names",
    "OPS": ".names",
    "REDUCE_OPS": ".names",
    "build_schedule": ".algorithms",
    "not_applicable": ".algorithms",
    "ring_all_gather": ".ring",
    "ring_all_reduce": ".ring",
    "ring_reduce_scatter": ".ring",
    "ALL": ".schedule",
    "COPY": ".schedule",
    "REDUCE": ".schedule",
    "ChunkMove": ".schedule",
    "Schedule": ".schedule",
    "chunk_bounds": ".schedule",
    "execute": ".schedule",
    "reference": ".schedule",
    "Layout": ".topology",
    "network_of": ".topology",
    "snake_ring": ".topology",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [
    "ALGORITHMS",
    "ALL",
    "COPY",
    "ChunkMove",
    "Layout",
    "OPS",
    "REDUCE",
    "REDUCE_OPS",
    "Schedule",
    "build_schedule",
    "chunk_bounds",
    "execute",
    "network_of",
    "not_applicable",
    "reference",
    "ring_all_gather",
    "ring_all_reduce",
    "ring_reduce_scatter",
    "snake_ring",
]
