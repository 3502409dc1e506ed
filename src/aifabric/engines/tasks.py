"""Lowering: a workload on a fabric -> a graph of tasks (compute on a GPU, transfers over a route).

Per rank, operations run in program order on the main stream. A collective is lowered
(engines/lower_collective.py) once every member of its group has reached it. A non-blocking collective
(`blocking=False`) starts after the main stream's previous op and after the previous collective of its
stream; the main stream does not wait for it until a `Wait` on that stream. A `Send` becomes one
transfer task over the router's route, ready when the sender reaches it; the matching `Recv` holds the
receiver until that transfer has arrived.
"""

from __future__ import annotations

from ..fabric.graph import Fabric
from ..fabric.routing import Router
from ..workload.ops import Collective, Compute, Recv, Send, Wait, Workload
from .lower_collective import lower_collective
from .taskgraph import COMPUTE, TRANSFER, TaskGraph


def _ready(workload: Workload, cursor: list[int], op: Collective) -> bool:
    """Every member's cursor points at this collective."""
    for m in op.group:
        ops = workload.ranks[m]
        if cursor[m] >= len(ops):
            return False
        other = ops[cursor[m]]
        if not isinstance(other, Collective) or other.key != op.key:
            return False
    return True


def lower(workload: Workload, fabric: Fabric, router: Router) -> TaskGraph:
    g = TaskGraph()
    world = workload.world_size
    if world > fabric.world_size:
        raise ValueError(f"workload has {world} ranks but the fabric has {fabric.world_size} GPUs")
    done: list[list[int]] = [[] for _ in range(world)]  # tasks that end each rank's previous op
    streams: list[dict[str, list[int]]] = [{} for _ in range(world)]  # last tasks of each side stream
    cursor = [0] * world
    sent: dict[str, int] = {}  # Send key -> its transfer task
    # Advance all ranks in program order; a collective is lowered once, when its first member reaches it.
    progressed = True
    while progressed:
        progressed = False
        for r in range(world):
            ops = workload.ranks[r]
            while cursor[r] < len(ops):
                op = ops[cursor[r]]
                if isinstance(op, Compute):
                    t = g.add(COMPUTE, r, -1, op.name, list(done[r]), duration_s=op.duration_s)
                    done[r] = [t]
                elif isinstance(op, Send):
                    route = router.route(op.src, op.dst)
                    sent[op.key] = g.add(TRANSFER, op.src, op.dst, op.key, list(done[r]), size_bytes=op.size_bytes,
                                         route=route.links, latency_s=route.latency_s, dim=op.dim)
                elif isinstance(op, Recv):
                    t = sent.get(op.key)
                    if t is None:
                        break  # the sender has not reached its Send yet
                    done[r] = done[r] + [t]
                elif isinstance(op, Wait):
                    done[r] = done[r] + streams[r].pop(op.stream, [])
                else:
                    if not _ready(workload, cursor, op):
                        break
                    if op.blocking:
                        ci = lower_collective(g, op, fabric, router, done)
                    else:
                        side = {m: done[m] + streams[m].get(op.stream, []) for m in op.group}
                        ci = lower_collective(g, op, fabric, router, side)  # type: ignore[arg-type]
                        for m in op.group:
                            streams[m][op.stream] = side[m]
                    if op.dim and not g.collectives[ci].dim:
                        g.collectives[ci].dim = op.dim
                    for m in op.group:
                        if m != r:
                            cursor[m] += 1
                cursor[r] += 1
                progressed = True
    stuck = [r for r in range(world) if cursor[r] < len(workload.ranks[r])]
    if stuck:
        op = workload.ranks[stuck[0]][cursor[stuck[0]]]
        raise ValueError(f"deadlock: rank {stuck[0]} waits in {getattr(op, 'key', op)} for ranks that never arrive")
    return g
