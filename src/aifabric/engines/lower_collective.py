"""Lowering one collective: its schedule (from aifabric.collectives) -> point-to-point transfer tasks.

Which schedule: a `CollectiveCall` (a `Collective` with NCCL's knobs: algorithm, protocol, channels,
pipeline pieces, root, redop, AllToAllv counts) says; "auto" asks `collectives.tuning.choose` with the
paths measured on this fabric. A plain `Collective` gets NCCL's long-standing defaults: ring (one
channel) for AllReduce / ReduceScatter / AllGather / Broadcast / Reduce, direct for AllToAll.

NVLS (`algorithm="nvls"`): inside a server every contribution crosses its GPU's NVLink up to the
NVSwitch once and the owner receives one reduced result; the owner's result goes up once and is
multicast down (see `_lower_nvls`). An explicit protocol puts 1/efficiency wire bytes per data byte
on the links and adds its per-step overhead to every transfer's latency.

Every transfer's name ends with the network it crosses: `[NVLink]`, `[rail 3]`, `[rail 0 → spine → rail 2]`.
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

from ..collectives import Layout, build_schedule, network_of, not_applicable
from ..collectives.cost import PROTOCOLS, Paths, Shape
from ..collectives.schedule import Schedule
from ..collectives.tuning import Choice, choose
from ..fabric.graph import Fabric
from ..fabric.routing import Router
from ..workload.ops import Collective
from .taskgraph import TRANSFER, CollectiveInstance, TaskGraph

DEFAULT_ALGORITHM = {"all-to-all": "direct", "all-to-allv": "direct", "send-recv": "direct",
                     "barrier": "dissemination"}
MAX_PIECES_LOWERED = 16
NVLS_PIECES = 8  # pipeline depth of in-switch reduction when not given


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
    if algorithm == "nvls" and not getattr(op, "pieces", 0):
        pieces = NVLS_PIECES
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


def _wire(op: Collective, choice: Choice | None) -> tuple[float, float]:
    """Protocol of a `CollectiveCall` (its own or the tuner's): bytes on the wire per data byte, overhead
    per step. A plain `Collective` moves its data bytes with no overhead (as the engines always have)."""
    name = getattr(op, "protocol", "")
    if name == "auto" and choice is not None:
        name = choice.protocol
    if not name or name not in PROTOCOLS:
        return 1.0, 0.0
    proto = PROTOCOLS[name]
    return 1.0 / proto.bandwidth_efficiency, proto.step_overhead_s


def _lower_nvls(g: TaskGraph, op: Collective, sched: Schedule, fabric: Fabric, router: Router,
                done: list[list[int]], ci: int, inst: CollectiveInstance, wire: float, overhead_s: float) -> None:
    """In-switch reduction inside each server, by data dependencies only (pieces overlap): every
    contribution of a piece goes up its GPU's NVLink to the NVSwitch once, the switch adds them and
    sends the owner one result; the owner sends the result up once and the switch multicasts it down
    to every GPU. Between servers the transfers are direct."""
    gps = fabric.gpus_per_server
    b = sched.chunk_bounds
    reduce_phase = sched.phases.index("switch reduce") if "switch reduce" in sched.phases else -1
    ends: dict[int, list[int]] = {r: [] for r in op.group}

    def add(src: int, dst: int, links, latency_s: float, size: float, deps: list[int], step: int) -> int:
        net = "NVLink (in-switch)" if src // gps == dst // gps else network_of(src, dst, Layout(gps))
        t = g.add(TRANSFER, src, dst, f"{op.key}/step{step} [{net}]", deps, size_bytes=size * wire, route=tuple(links),
                  latency_s=latency_s + overhead_s, step=step, collective=ci)
        inst.tasks.append(t)
        ends[src].append(t)
        if dst != src:
            ends[dst].append(t)
        return t

    result: dict[tuple[int, int], list[int]] = {}  # (owner, chunk) -> tasks that complete its reduction
    fans: list[dict[tuple[int, int], list[int]]] = [{}, {}]  # (owner, chunk) -> in-server peers, per phase
    steps: dict[tuple[int, int], int] = {}
    for i in range(sched.n_moves):
        src, dst, c = int(sched.src[i]), int(sched.dst[i]), int(sched.chunk[i])
        reducing = int(sched.phase[i]) == reduce_phase
        owner, peer = (dst, src) if reducing else (src, dst)
        steps[(owner, c)] = int(sched.step[i])
        if src // gps != dst // gps:
            size = int(b[c + sched.count[i]] - b[c]) * op.bytes_per_element
            route = router.route(src, dst, int(sched.channel[i]))
            deps = list(done[src]) + list(done[dst]) if reducing else result.get((src, c), []) or list(done[src])
            t = add(src, dst, route.links, route.latency_s, size, deps, int(sched.step[i]))
            if reducing:
                result.setdefault((dst, c), []).append(t)
            continue
        fans[0 if reducing else 1].setdefault((owner, c), []).append(peer)
    sent_up: dict[tuple[int, int], list[int]] = {}  # (GPU, piece) -> its up-transfers of that piece
    for (owner, c), peers in fans[0].items():  # contributions up, one reduced result down
        size = int(b[c + 1] - b[c]) * op.bytes_per_element
        routes = [router.route(p, owner) for p in peers]
        half = routes[0].latency_s / 2
        k = steps[(owner, c)]
        ups = []
        for p, r in zip(peers, routes):  # a GPU pushes its pieces in order (the kernel's FIFO)
            ups.append(add(p, p, r.links[:1], half, size, list(done[p]) + sent_up.get((p, k - 1), []), k))
            sent_up.setdefault((p, k), []).append(ups[-1])
        down = add(owner, owner, routes[0].links[1:], half, size, ups + list(done[owner]) + result.get((owner, c), []),
                   steps[(owner, c)])
        result[(owner, c)] = [down]
    for (owner, c), peers in fans[1].items():  # one copy up, multicast down
        size = int(b[c + 1] - b[c]) * op.bytes_per_element
        routes = [router.route(owner, p) for p in peers]
        half = routes[0].latency_s / 2
        step = steps[(owner, c)]
        up = add(owner, owner, routes[0].links[:1], half, size,
                 (result.get((owner, c), []) or list(done[owner])) + sent_up.get((owner, step - 1), []), step)
        sent_up.setdefault((owner, step), []).append(up)
        for p, r in zip(peers, routes):
            add(owner, p, r.links[1:], half, size, [up], step)
    for r in op.group:
        if ends[r]:
            done[r] = ends[r]


def lower_collective(g: TaskGraph, op: Collective, fabric: Fabric, router: Router,
                     done: list[list[int]]) -> int:
    sched, choice = plan(op, fabric, router)
    wire, overhead_s = _wire(op, choice)
    pxn = sched.algorithm == "pxn" or getattr(op, "pxn", False)
    layout = Layout(fabric.gpus_per_server)
    gps = fabric.gpus_per_server
    ci = len(g.collectives)
    inst = CollectiveInstance(op.key, op.op, sched.algorithm, op.group, op.size_bytes, op.label,
                              n_steps=sched.n_steps)
    g.collectives.append(inst)
    if sched.algorithm == "nvls":
        _lower_nvls(g, op, sched, fabric, router, done, ci, inst, wire, overhead_s)
        return ci
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
                net = network_of(a, b, layout)
                t = g.add(TRANSFER, a, b, f"{op.key}/step{k} [{net}]", deps, size_bytes=size * wire, route=route.links,
                          latency_s=route.latency_s + overhead_s, step=k, collective=ci)
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
