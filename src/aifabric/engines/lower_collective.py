"""Lowering one collective: its schedule (from aifabric.collectives) -> point-to-point transfer tasks.

The first transfers of a rank wait for both the sender and the receiver to reach the collective (NCCL's
kernels rendezvous); every later transfer of a rank waits for the rank's sends and receives of its
previous step (it forwards what it received). The rank's next operation waits for all its transfers.
"""

from __future__ import annotations

from ..collectives import ring_all_reduce, snake_ring
from ..fabric.graph import Fabric
from ..fabric.routing import Router
from ..workload.ops import Collective
from .taskgraph import TRANSFER, CollectiveInstance, TaskGraph


def _schedule(op: Collective, fabric: Fabric):
    if op.op == "all-reduce":
        ring = snake_ring(op.group, fabric.server_of, fabric.local_index)
        return ring_all_reduce(ring, op.elements)
    raise NotImplementedError(f"collective {op.op!r} is not supported yet")


def lower_collective(g: TaskGraph, op: Collective, fabric: Fabric, router: Router,
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
