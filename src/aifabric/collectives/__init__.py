from .ring import ring_all_gather, ring_all_reduce, ring_reduce_scatter
from .schedule import COPY, REDUCE, ChunkMove, Schedule, chunk_bounds, execute
from .topology import snake_ring

__all__ = [
    "COPY", "REDUCE", "ChunkMove", "Schedule", "chunk_bounds", "execute",
    "ring_all_gather", "ring_all_reduce", "ring_reduce_scatter", "snake_ring",
]
