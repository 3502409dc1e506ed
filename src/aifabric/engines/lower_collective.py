"""Lowering one collective: its schedule (from aifabric.collectives) -> point-to-point transfer tasks.

Which schedule: a `CollectiveCall` (a `Collective` with NCCL's knobs: algorithm, protocol, channels,
pipeline pieces, root, redop, AllToAllv counts) says; "auto" asks `collectives.tuning.choose` with the
paths measured on this fabric. A plain `Collective` gets NCCL's long-standing defaults: ring (one
channel) for AllReduce / ReduceScatter / AllGather / Broadcast / Reduce, direct for AllToAll.

Moves of one step between the same two ranks on the same channel become one transfer (a run of
chunks, or several runs, in one message). The first transfers of a rank wait for both the sender and
the receiver to reach the collective (NCCL's kernels rendezvous); every later transfer of a rank waits
for the rank's sends and receives of its previous step (it forwards what it received). The rank's
next operation waits for all its transfers.

PXN (`algorithm="pxn"`, or `pxn=True` with any algorithm): a transfer between servers whose GPUs sit
on different rails is relayed over NVLink to the GPU of the source server on the destination's rail,
which sends it on that rail, so no transfer crosses a spine (NCCL's PXN, seeds Ch. 13 §6.5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..collectives import Layout, build_schedule, not_applicable
from ..collectives.cost import Paths, Shape
from ..collectives.schedule import Schedule
from ..collectives.tuning import Choice, choose
from ..fabric.graph import Fabric
from ..fabric.routing import Router
from ..workload.ops import Collective
from .taskgraph import TRANSFER, CollectiveInstance, TaskGraph

DEFAULT_ALGORITHM = {"all-to-all": "direct", "all-to-allv": "direct", "send-recv": "direct",
                     "barrier": "dissemination"}
MAX_PIECES_LOWERED = 16


@dataclass(frozen=True)
class CollectiveCall(Collective):
    """A `Collective` with NCCL's knobs (defaults: let the tuner choose)."""

    algorithm: str = "auto"
    protocol: str = "auto"
    channels: int = 0  # 0: tuner
    pieces: int = 0  # pipeline chunks per channel; 0: tuner
    root: int = -1  # Broadcast / Reduce; -1: the group's first rank
    reduce_op: str = "sum"
    counts: tuple[int, ...] = ()  # AllToAllv: n*n elements, row = sender position
    in_switch: bool = False  # NVLS / SHARP hardware present
    pxn: bool = False


def plan(op: Collective, fabric: Fabric, router: Router) -> tuple[Schedule, Choice | None]:
    """The schedule of one collective on this fabric, and the tuner's choice when it was asked."""
    layout = Layout(fabric.gpus_per_server)
    algorithm = getattr(op, "algorithm", "") or DEFAULT_ALGORITHM.get(op.op, "ring")
    channels = getattr(op, "channels", 0)
    pieces = getattr(op, "pieces", 0)
    choice = None
    if not hasattr(op, "algorithm"):  # plain Collective: NCCL's defaults, one ring
        channels, pieces = 1, 1
    if algorithm == "auto" or getattr(op, "protocol", "simple") == "auto" or not channels or not pieces:
        shape = Shape.of(op.group, fabric.gpus_per_server)
        choice = choose(op.op, shape, op.size_bytes, Paths.from_fabric(fabric, router),
                        algorithm=algorithm, protocol=getattr(op, "protocol", "simple"), channels=channels,
                        pieces=pieces, in_switch=getattr(op, "in_switch", False),
                        runnable=lambda a: not_applicable(op.op, a, op.group, layout) is None)
        algorithm, channels, pieces = choice.algorithm, channels or choice.channels, pieces or choice.pieces
    counts = getattr(op, "counts", ())
    n = len(op.group)
    sched = build_schedule(op.op, algorithm, op.group, op.elements, layout, channels=max(1, channels),
                           pieces=min(MAX_PIECES_LOWERED, max(1, pieces)), root=getattr(op, "root", -1),
                           counts=np.array(counts).reshape(n, n) if counts else None)
    return sched, choice


def transfers(sched: Schedule) -> tuple[np.ndarray, ...]:
    """Moves merged per (step, src, dst, channel): arrays step, src, dst, channel, elements."""
    if sched.n_moves == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, z, z
    n = int(max(sched.src.max(), sched.dst.max())) + 1
    ch = int(sched.channel.max()) + 1
    key = ((sched.step.astype(np.int64) * n + sched.src) * n + sched.dst) * ch + sched.channel
    uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    elements = np.bincount(inverse, weights=sched.move_elements(), minlength=len(uniq)).astype(np.int64)
    return sched.step[first], sched.src[first], sched.dst[first], sched.channel[first], elements


def lower_collective(g: TaskGraph, op: Collective, fabric: Fabric, router: Router,
                     done: list[list[int]]) -> int:
    sched, _ = plan(op, fabric, router)
    pxn = sched.algorithm == "pxn" or getattr(op, "pxn", False)
    gps = fabric.gpus_per_server
    ci = len(g.collectives)
    inst = CollectiveInstance(op.key, op.op, sched.algorithm, op.group, op.size_bytes, op.label,
                              n_steps=sched.n_steps)
    g.collectives.append(inst)
    last_in: dict[int, list[int]] = {}
    last_out: dict[int, list[int]] = {}
    steps, srcs, dsts, chans, elems = transfers(sched)
    bounds = np.searchsorted(steps, np.arange(sched.n_steps + 1))
    for k in range(sched.n_steps):
        step_in: dict[int, list[int]] = {}
        step_out: dict[int, list[int]] = {}
        for i in range(bounds[k], bounds[k + 1]):
            src, dst, channel = int(srcs[i]), int(dsts[i]), int(chans[i])
            if src in last_in or src in last_out:
                deps = last_in.get(src, []) + last_out.get(src, [])
            else:
                deps = list(done[src])
            if dst not in last_in and dst not in last_out:
                deps += done[dst]
            size = int(elems[i]) * op.bytes_per_element
            hops = [(src, dst)]
            if pxn and src // gps != dst // gps and src % gps != dst % gps:
                relay = (src // gps) * gps + dst % gps
                hops = [(src, relay), (relay, dst)]
            first = None
            for a, b in hops:
                route = router.route(a, b, channel)
                t = g.add(TRANSFER, a, b, f"{op.key}/step{k}", deps, size_bytes=size, route=route.links,
                          latency_s=route.latency_s, step=k, collective=ci)
                inst.tasks.append(t)
                first = t if first is None else first
                deps = [t]
            step_out.setdefault(src, []).append(first)
            step_in.setdefault(dst, []).append(deps[0])
        last_in.update(step_in)
        last_out.update(step_out)
    for r in op.group:
        finish = last_in.get(r, []) + last_out.get(r, [])
        if finish:
            done[r] = finish
    return ci
