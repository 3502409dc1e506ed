from .algorithms import ALGORITHMS, OPS, build_schedule, not_applicable
from .ring import ring_all_gather, ring_all_reduce, ring_reduce_scatter
from .schedule import (
    ALL,
    COPY,
    REDUCE,
    REDUCE_OPS,
    ChunkMove,
    Schedule,
    chunk_bounds,
    execute,
    reference,
)
from .topology import Layout, network_of, snake_ring

__all__ = [
    "ALGORITHMS", "ALL", "COPY", "OPS", "REDUCE", "REDUCE_OPS", "ChunkMove", "Layout", "Schedule", "build_schedule",
    "chunk_bounds", "execute", "network_of", "not_applicable", "reference", "ring_all_gather", "ring_all_reduce",
    "ring_reduce_scatter", "snake_ring",
]
