"""Choosing the algorithm, protocol, channels and pipeline depth, as NCCL's tuner does.

The rule (documented, overridable): among the algorithms the operation supports (`algorithm="auto"`:
every algorithm of this package; `"nccl"`: those NCCL itself runs, `NCCL_ALGORITHMS`, what a workload's
collectives get) and that can run on the group (`algorithms.not_applicable`), every protocol (Simple, LL128, LL), channels in {1, GPUs per
server} and pipeline pieces in {1, 2, 4, ..., 16}, take the combination the α-β model
(`cost.collective_time_s`) says is fastest; ties go to the earlier algorithm in `ALGORITHMS[op]`.
In-switch reduction (`nvls`) is a candidate only when the hardware has it (`in_switch=True`).
Any of the four can be fixed by the caller ("auto" / 0 leaves it to the rule).

What this gives (non-blocking rail fabric, 8 GPUs per server): LL / tree or recursive halving-doubling
for small buffers, where the α term dominates and ring's 2(n-1) steps cost most; ring with one channel
per NIC for large buffers on a few servers; hierarchical / tree at thousands of ranks, where a flat
ring's 2(n-1) steps cost tens of milliseconds of latency along a chunk's path whatever the size (16k ranks:
~65 ms), until, at several GiB, the ring's bandwidth wins it back.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from .algorithms import ALGORITHMS
from .cost import PROTOCOLS, Paths, Shape, collective_time_s

PIECES = (1, 2, 4, 8, 16)
NCCL_ALGORITHMS = {  # what NCCL itself runs (2.18-2.28): `algorithm="nccl"` chooses among these only
    "all-reduce": ("ring", "tree", "nvls"),
    "reduce-scatter": ("ring",),
    "all-gather": ("ring",),
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "all-to-all": ("direct", "pxn"),
    "all-to-allv": ("direct", "pxn"),
    "send-recv": ("direct",),
    "barrier": ("dissemination",),
}
PIPELINED = frozenset({"tree", "nvls"})  # algorithms whose time depends on the pipeline depth
# NVLS inside one server streams 128 KiB chunks (NCCL_NVLS_CHUNKSIZE): thousands per large buffer, so its
# pipeline barely fills; lowered as pieces, it is given up to 64 (the simulated fill then costs ~3 / 64 of
# the transfer instead of 3 / 16). Only inside a server: 8 GPUs x 4 transfers x 64 pieces stays small.
NVLS_PIECES = PIECES + (32, 64)
NVLS_CHUNK_BYTES = 128 * 1024


@dataclass(frozen=True)
class Choice:
    algorithm: str
    protocol: str
    channels: int
    pieces: int
    time_s: float


def choose(
    op: str,
    shape: Shape,
    size_bytes: float,
    paths: Paths,
    *,
    algorithm: str = "auto",
    protocol: str = "auto",
    channels: int = 0,
    pieces: int = 0,
    in_switch: bool = False,
    runnable: Callable[[str], bool] | None = None,
) -> Choice:
    if algorithm == "nccl":
        algorithms = tuple(a for a in NCCL_ALGORITHMS[op] if a in ALGORITHMS[op])
    else:
        algorithms = ALGORITHMS[op] if algorithm == "auto" else (algorithm,)
    if algorithm in ("auto", "nccl") and not in_switch:
        algorithms = tuple(a for a in algorithms if a != "nvls")
    if runnable is not None:
        algorithms = tuple(a for a in algorithms if runnable(a)) or algorithms[:1]
    protocols = tuple(PROTOCOLS) if protocol == "auto" else (protocol,)
    best: Choice | None = None
    for alg in algorithms:
        chans = (channels,) if channels else tuple(sorted({1, max(1, shape.per_server)}))
        if pieces:
            piece_set: tuple[int, ...] = (pieces,)
        elif alg == "nvls" and shape.servers == 1:  # no more pieces than the GPU's shard has NVLS chunks
            chunks = math.ceil(size_bytes / (max(1, shape.per_server) * NVLS_CHUNK_BYTES))
            piece_set = tuple(p for p in NVLS_PIECES if p <= chunks) or (1,)
        else:
            piece_set = PIECES if alg in PIPELINED or op in ("broadcast", "reduce") else (1,)
        for proto in protocols:
            for c in chans:
                for p in piece_set:
                    t = collective_time_s(op, alg, shape, size_bytes, paths, protocol=proto, channels=c, pieces=p)
                    if best is None or t < best.time_s * (1 - 1e-12):
                        best = Choice(alg, proto, c, p, t)
    assert best is not None
    return best
