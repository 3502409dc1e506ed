"""Lowering: a workload on a fabric -> a graph of tasks (compute on a GPU, transfers over a route).

Per rank, operations run in program order. A collective is expanded by its schedule into steps of
point-to-point transfers. Its first transfers wait for both the sender and the receiver to reach the
collective (NCCL's kernels rendezvous); every later transfer of a rank waits for the rank's sends and
receives of the step before (it forwards what it received). The rank's next operation waits for all
of its transfers in the collective to finish.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..collectives import ring_all_reduce, snake_ring
from ..fabric.graph import Fabric
from ..fabric.routing import Router
from ..workload.ops import Collective, Compute, Workload

COMPUTE, TRANSFER = 0, 1


@dataclass
class CollectiveInstance:
    key: str
    op: str
    algorithm: str
    group: tuple[int, ...]
    size_bytes: int
    label: str
    tasks: list[int] = field(default_factory=list)
    n_steps: int = 0


@dataclass
class TaskGraph:
    kind: list[int] = field(default_factory=list)
    rank: list[int] = field(default_factory=list)  # compute: the GPU; transfer: the sender
    dst: list[int] = field(default_factory=list)  # transfer: the receiver; compute: -1
    name: list[str] = field(default_factory=list)
    duration_s: list[float] = field(default_factory=list)  # compute only
    size_bytes: list[float] = field(default_factory=list)  # transfer only
    route: list[tuple[int, ...]] = field(default_factory=list)
    latency_s: list[float] = field(default_factory=list)
    deps: list[list[int]] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    collective: list[int] = field(default_factory=list)  # index into collectives, or -1
    collectives: list[CollectiveInstance] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.kind)

    def add(self, kind: int, rank: int, dst: int, name: str, deps: list[int], *, duration_s: float = 0.0,
            size_bytes: float = 0.0, route: tuple[int, ...] = (), latency_s: float = 0.0, step: int = -1,
            collective: int = -1) -> int:
        self.kind.append(kind)
        self.rank.append(rank)
        self.dst.append(dst)
        self.name.append(name)
        self.duration_s.append(duration_s)
        self.size_bytes.append(size_bytes)
        self.route.append(route)
        self.latency_s.append(latency_s)
        self.deps.append(deps)
        self.step.append(step)
        self.collective.append(collective)
        return len(self.kind) - 1


def _schedule(op: Collective, fabric: Fabric):
    if op.op == "all-reduce":
        ring = snake_ring(op.group, fabric.server_of, fabric.local_index)
        return ring_all_reduce(ring, op.elements)
    raise NotImplementedError(f"collective {op.op!r} is not supported yet")


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
                instances[op.key] = _lower_collective(g, op, fabric, router, done)
                for m in op.group:
                    cursor[m] += 1
                progressed = True
    stuck = [r for r in range(world) if cursor[r] < len(workload.ranks[r])]
    if stuck:
        op = workload.ranks[stuck[0]][cursor[stuck[0]]]
        raise ValueError(f"deadlock: rank {stuck[0]} waits in {getattr(op, 'key', op)} for ranks that never arrive")
    return g


def _lower_collective(g: TaskGraph, op: Collective, fabric: Fabric, router: Router,
                      done: list[list[int]]) -> int:
    sched = _schedule(op, fabric)
    ci = len(g.collectives)
    inst = CollectiveInstance(op.key, op.op, sched.algorithm, op.group, op.size_bytes, op.label,
                              n_steps=sched.n_steps)
    g.collectives.append(inst)
    last_in: dict[int, list[int]] = {}
    last_out: dict[int, list[int]] = {}
    for step in sched.steps():
        step_in: dict[int, list[int]] = {}
        step_out: dict[int, list[int]] = {}
        for m in step:
            if m.src in last_in or m.src in last_out:
                deps = last_in.get(m.src, []) + last_out.get(m.src, [])
            else:
                deps = list(done[m.src])
            if m.dst not in last_in and m.dst not in last_out:
                deps += done[m.dst]
            route = router.route(m.src, m.dst)
            size = sched.chunk_elements(m.chunk) * op.bytes_per_element
            t = g.add(TRANSFER, m.src, m.dst, f"{op.key}/step{m.step}", deps, size_bytes=size,
                      route=route.links, latency_s=route.latency_s, step=m.step, collective=ci)
            inst.tasks.append(t)
            step_out.setdefault(m.src, []).append(t)
            step_in.setdefault(m.dst, []).append(t)
        last_in.update(step_in)
        last_out.update(step_out)
    for r in op.group:
        finish = last_in.get(r, []) + last_out.get(r, [])
        if finish:
            done[r] = finish
    return ci
