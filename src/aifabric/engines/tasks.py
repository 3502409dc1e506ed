"""Lowering: a workload on a fabric -> a graph of tasks (compute on a GPU, transfers over a route).

Per rank, operations run in program order. A collective is lowered (engines/lower_collective.py) once
every member of its group has reached it.
"""

from __future__ import annotations

from ..fabric.graph import Fabric
from ..fabric.routing import Router
from ..workload.ops import Collective, Compute, Workload
from .lower_collective import lower_collective
from .taskgraph import COMPUTE, TaskGraph


def lower(workload: Workload, fabric: Fabric, router: Router) -> TaskGraph:
    g = TaskGraph()
    world = workload.world_size
    if world > fabric.world_size:
        raise ValueError(f"workload has {world} ranks but the fabric has {fabric.world_size} GPUs")
    done: list[list[int]] = [[] for _ in range(world)]  # tasks that end each rank's previous op
    cursor = [0] * world
    instances: dict[str, int] = {}
    # Advance all ranks in program order; a collective is lowered once, when its first member reaches it.
    progressed = True
    while progressed:
        progressed = False
        for r in range(world):
            while cursor[r] < len(workload.ranks[r]):
                op = workload.ranks[r][cursor[r]]
                if isinstance(op, Compute):
                    t = g.add(COMPUTE, r, -1, op.name, list(done[r]), duration_s=op.duration_s)
                    done[r] = [t]
                    cursor[r] += 1
                    progressed = True
                    continue
                # lower only when every member's cursor points at this collective
                ready = all(
                    cursor[m] < len(workload.ranks[m])
                    and isinstance(workload.ranks[m][cursor[m]], Collective)
                    and workload.ranks[m][cursor[m]].key == op.key
                    for m in op.group
                )
                if not ready:
                    break
                instances[op.key] = lower_collective(g, op, fabric, router, done)
                for m in op.group:
                    cursor[m] += 1
                progressed = True
    stuck = [r for r in range(world) if cursor[r] < len(workload.ranks[r])]
    if stuck:
        op = workload.ranks[stuck[0]][cursor[stuck[0]]]
        raise ValueError(f"deadlock: rank {stuck[0]} waits in {getattr(op, 'key', op)} for ranks that never arrive")
    return g
