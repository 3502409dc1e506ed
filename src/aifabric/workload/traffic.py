"""Bytes per iteration a workload puts on the networks, per parallel dimension, before any simulation.

Each rank's bytes sent follow the ring algorithms' textbook volumes (nccl-tests' busbw factors):
AllReduce 2(n-1)/n x size, AllGather and ReduceScatter (n-1)/n x size (size = the whole buffer), AllToAll
(n-1)/n x size (what stays on the rank is not sent), Send: its size.

Scale-up (NVLink, inside a server) or scale-out (the backend fabric): a pipeline transfer by its two
ends; a ring collective over a group spanning k servers, with its ring ordered server by server, crosses
servers on k of its n hops, so k/n of its bytes are scale-out; an AllToAll sends to every peer equally,
so the share of peers on other servers is scale-out.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .ops import Collective, Send, Workload

RING_FACTOR = {
    "all-reduce": lambda n: 2 * (n - 1) / n,
    "all-gather": lambda n: (n - 1) / n,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}


def bytes_sent_per_rank(op: Collective) -> float:
    n = len(op.group)
    return RING_FACTOR[op.op](n) * op.size_bytes if n > 1 else 0.0


def scale_out_share(op: Collective, gpus_per_server: int) -> float:
    n = len(op.group)
    servers = {r // gpus_per_server for r in op.group}
    if len(servers) == 1:
        return 0.0
    if op.op == "all-to-all":
        per: dict[int, int] = defaultdict(int)
        for r in op.group:
            per[r // gpus_per_server] += 1
        # mean over ranks of (peers on other servers) / (n - 1)
        return sum(c * (n - c) for c in per.values()) / (n * (n - 1))
    return len(servers) / n


@dataclass(frozen=True)
class DimTraffic:
    total_bytes: float  # all ranks, per iteration
    scale_up_bytes: float
    scale_out_bytes: float
    per_gpu_max_bytes: float
    per_gpu_mean_bytes: float


def traffic_summary(w: Workload, gpus_per_server: int) -> dict[str, DimTraffic]:
    """{dimension: traffic} for "dp", "tp", "pp", "ep", "cp", "zero" (those present) and "all"."""
    world, its = w.world_size, w.iterations
    per_rank: dict[str, list[float]] = defaultdict(lambda: [0.0] * world)
    up: dict[str, float] = defaultdict(float)
    out: dict[str, float] = defaultdict(float)
    cache: dict[int, tuple[str, float, float]] = {}
    for r, ops in enumerate(w.ranks):
        acc: dict[str, float] = defaultdict(float)
        for op in ops:
            if type(op) is Collective:
                c = cache.get(id(op))
                if c is None:
                    c = cache[id(op)] = (op.dim or "dp", bytes_sent_per_rank(op), scale_out_share(op, gpus_per_server))
                dim, b, share = c
            elif type(op) is Send:
                dim, b = op.dim, float(op.size_bytes)
                share = 0.0 if op.src // gpus_per_server == op.dst // gpus_per_server else 1.0
            else:
                continue
            acc[dim] += b
            out[dim] += b * share
            up[dim] += b * (1 - share)
        for dim, b in acc.items():
            per_rank[dim][r] = b
    result: dict[str, DimTraffic] = {}
    for dim, sent in per_rank.items():
        result[dim] = DimTraffic(
            (up[dim] + out[dim]) / its, up[dim] / its, out[dim] / its, max(sent) / its, sum(sent) / world / its
        )
    if result:
        totals = [sum(per_rank[d][r] for d in per_rank) for r in range(world)]
        u, o = sum(up.values()), sum(out.values())
        result["all"] = DimTraffic((u + o) / its, u / its, o / its, max(totals) / its, sum(totals) / world / its)
    return result
