"""Lowering one collective: its schedule (from aifabric.collectives) -> point-to-point transfer tasks.

Which schedule: a `CollectiveCall` (a `Collective` with NCCL's knobs: algorithm, protocol, channels,
pipeline pieces, root, redop, AllToAllv counts) says; "auto" asks `collectives.tuning.choose` with the
paths measured on this fabric. A plain `Collective` (every collective of a workload) leaves all four to
the tuner, as NCCL does each call: the algorithm among NCCL's own (`tuning.NCCL_ALGORITHMS`: ring, tree,
NVLS for AllReduce), the protocol, one channel per NIC of the server
(rings whose inter-server hops each take another rail), the pipeline depth; in-switch reduction (NVLS)
for an AllReduce inside one server where the GPUs have it (`Fabric.nvls`). The tuner's choices are
cached per fabric and group shape (`Router.cache`).

NVLS / SHARP (`algorithm="nvls"`): every contribution crosses its GPU's path up to the switch (the
NVSwitch inside a server, the rail switch between servers) once and the owner receives one reduced
result; a result goes up once and the switch multicasts it down (see `_lower_in_switch`).

Protocol (a `CollectiveCall`'s own, or the tuner's): 1/efficiency wire bytes per data byte on the
links, its per-step overhead (NVLink or network, by the transfer's route) added to every transfer's
latency and its base latency to the first step's (collectives/cost.py); NVLS moves 1/NVLS_EFFICIENCY
times the bytes over the NVSwitch (its measured rate; SHARP in the rail switch, no such factor).

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

from dataclasses import dataclass, replace

import numpy as np

from ..collectives import Layout, build_schedule, network_of, not_applicable
from ..collectives.cost import (
    NET,
    NVLINK,
    NVLS_EFFICIENCY,
    NVLS_LATENCY_S,
    PROTOCOLS,
    SHARP_LATENCY_S,
    Paths,
    Protocol,
    Shape,
    ll_efficiency,
    ll_network_scale,
    route_bytes_per_s,
)
from ..collectives.schedule import MODE_REDUCE, Schedule
from ..collectives.tuning import Choice, choose
from ..fabric.graph import NVSWITCH, RAIL, Fabric
from ..fabric.routing import Router
from ..workload.ops import Collective
from .taskgraph import TRANSFER, CollectiveInstance, TaskGraph

DEFAULT_ALGORITHM = {"all-to-all": "direct", "all-to-allv": "direct", "send-recv": "direct", "barrier": "dissemination"}
MAX_PIECES_LOWERED = 16
RING_FORWARDS = frozenset({"all-reduce", "reduce-scatter", "all-gather"})  # every rank sends what it received
# in-switch lowering: a piece lists its GPU's earlier work (`done`) only when none of its dependencies already waited
# for it (False: every piece lists it, the reference the tests compare with)
ANCHOR_DONE = True
# the same in-switch collective again (schedule, group, element size, wire): its tasks from the first one's template
# (False: lowered afresh each time, the reference the tests compare with)
IN_SWITCH_TEMPLATES = True
# what the next op waits for after an in-switch collective: each GPU's last tasks there, those another of them does not
# already wait for (False: all its tasks there, the reference the tests compare with)
FRONTIER_DONE = True
MAX_PIECES_NVLS = 64  # collectives/tuning.py NVLS_PIECES: in-switch reduction inside one server


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


def _paths(fabric: Fabric, router: Router) -> Paths:
    paths = router.cache.get("paths")
    if paths is None:
        paths = router.cache["paths"] = Paths.from_fabric(fabric, router)
    return paths


def _choose(
    op: Collective,
    fabric: Fabric,
    router: Router,
    algorithm: str,
    protocol: str,
    channels: int,
    pieces: int,
    in_switch: bool,
) -> Choice:
    """The tuner's choice, cached per group shape (position in its server and strides) and size."""
    gps = fabric.gpus_per_server
    g0 = op.group[0]
    key = (
        "choice",
        op.op,
        g0 % gps,
        tuple(r - g0 for r in op.group),
        op.size_bytes,
        algorithm,
        protocol,
        channels,
        pieces,
        in_switch,
    )
    choice = router.cache.get(key)
    if choice is None:
        layout = Layout(gps)
        shape = Shape.of(op.group, gps)
        choice = router.cache[key] = choose(
            op.op,
            shape,
            op.size_bytes,
            _paths(fabric, router),
            algorithm=algorithm,
            protocol=protocol,
            channels=channels,
            pieces=pieces,
            in_switch=in_switch,
            runnable=lambda a: not_applicable(op.op, a, op.group, layout) is None,
        )
    return choice


def plan(op: Collective, fabric: Fabric, router: Router) -> tuple[Schedule, Choice | None]:
    """The schedule of one collective on this fabric, and the tuner's choice when it was asked."""
    sched, base, choice, _ = _plan(op, fabric, router)
    return sched.shifted(base), choice


def _plan(op: Collective, fabric: Fabric, router: Router) -> tuple[Schedule, int, Choice | None, tuple | None]:
    """(schedule, base, choice, key): the schedule on the group shifted down by `base` ranks (whole servers),
    and the key it is cached under in `router.cache` (None when it is built for this call alone)."""
    layout = Layout(fabric.gpus_per_server)
    call = hasattr(op, "algorithm")
    algorithm = (getattr(op, "algorithm", "") or DEFAULT_ALGORITHM.get(op.op, "ring")) if call else "nccl"
    channels = getattr(op, "channels", 0)
    pieces = getattr(op, "pieces", 0)
    protocol = getattr(op, "protocol", "auto")
    gps = fabric.gpus_per_server
    in_switch = (
        getattr(op, "in_switch", False) if call else (fabric.nvls and min(op.group) // gps == max(op.group) // gps)
    )  # the group inside one server
    choice = None
    if algorithm in ("auto", "nccl") or protocol == "auto" or not channels or not pieces:
        choice = _choose(op, fabric, router, algorithm, protocol, channels, pieces, in_switch)
        algorithm, channels, pieces = choice.algorithm, channels or choice.channels, pieces or choice.pieces
    counts = getattr(op, "counts", ())
    n = len(op.group)
    pieces = min(MAX_PIECES_NVLS if algorithm == "nvls" else MAX_PIECES_LOWERED, max(1, pieces))
    root = getattr(op, "root", -1)
    if counts or op.op in ("broadcast", "reduce"):  # AllToAllv's counts; a root (named in the schedule's notes)
        sched = build_schedule(
            op.op,
            algorithm,
            op.group,
            op.elements,
            layout,
            channels=max(1, channels),
            pieces=pieces,
            root=root,
            counts=np.array(counts).reshape(n, n) if counts else None,
        )
        return sched, 0, choice, None
    # a schedule depends on the group only through its ranks relative to the first one's server: built once,
    # shifted onto every translate of the group by whole servers (data-parallel groups, their buckets)
    g0 = op.group[0]
    base = g0 - g0 % layout.gpus_per_server
    relative = tuple(r - base for r in op.group)
    key = ("schedule", op.op, algorithm, relative, op.elements, max(1, channels), pieces)
    sched = router.cache.get(key)
    if sched is None:
        sched = router.cache[key] = build_schedule(
            op.op, algorithm, relative, op.elements, layout, channels=max(1, channels), pieces=pieces
        )
    return sched, base, choice, key


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


class _Wire:
    """What the protocol (the collective's own or the tuner's) adds to its transfers: wire bytes per data
    byte (`factor`; `net_factor` on routes over the network), a per-step latency by the route's tier, and the
    collective's base latency on its first step.

    LL holds a link for twice its data (its flags), inside one server up to NCCL's ceiling for one node
    (`_ll_factor`); across servers a network route's bytes count 1 / `ll_network_scale` more, so the collective's
    bus bandwidth stays under NCCL's ceiling across servers, as `collective_time_s` has it (`Paths.ll_across`)."""

    def __init__(self, op: Collective, choice: Choice | None, fabric: Fabric, router: Router):
        name = getattr(op, "protocol", "auto")
        if name == "auto":
            name = choice.protocol if choice is not None else "simple"
        self.proto: Protocol = PROTOCOLS[name]
        self.factor = 1.0 / self.proto.bandwidth_efficiency
        self.net_factor = self.factor
        self.base_s = self.proto.base_latency_s
        if name == "ll" and fabric.ll_max_bytes_per_s:
            self.factor = self.net_factor = _ll_factor(op.group, fabric, router) or self.factor
        if name == "ll" and any(fabric.ll_max_across_bytes_per_s):
            channels = getattr(op, "channels", 0) or (choice.channels if choice is not None else 1)
            self.net_factor = self.factor / _ll_network_scale(op.group, channels, fabric, router)

    def step_s(self, route) -> float:
        return self.proto.step_overhead_s(NVLINK if route.scale_up else NET)

    def factor_of(self, route) -> float:
        return self.factor if route.scale_up else self.net_factor


def _ll_network_scale(group, channels: int, fabric: Fabric, router: Router) -> float:
    """`ll_network_scale` for a group across servers (1 inside one): NCCL's ceiling for its server count over the
    NICs its channels use, on the paths the tuner measured."""
    shape = Shape.of(group, fabric.gpus_per_server)
    if shape.servers < 2:
        return 1.0
    paths = _paths(fabric, router)
    nics = min(max(1, channels), shape.per_server, paths.nics_per_server or shape.per_server)
    ceiling = paths.ll_max_across_bytes_per_s[0 if shape.servers <= 2 else 1]
    return ll_network_scale(paths.rail.bandwidth_bytes_per_s, ceiling, nics)


def _ll_factor(group, fabric: Fabric, router: Router) -> float | None:
    """LL's wire bytes per data byte inside one server: NCCL's LL ceiling for one node on the bus bandwidth of the
    group's slowest hop (a ring's); once per set of local GPUs. None for a group across servers."""
    gps = fabric.gpus_per_server
    if len(group) < 2 or min(group) // gps != max(group) // gps:
        return None
    key = ("ll-factor", tuple(sorted(r % gps for r in group)))
    factor = router.cache.get(key)
    if factor is None:
        ring = zip(group, group[1:] + group[:1])
        bw = min(route_bytes_per_s(fabric, router.route(a, b)) for a, b in ring)
        factor = router.cache[key] = 1.0 / ll_efficiency(bw, fabric.ll_max_bytes_per_s)
    return factor


def _split_at_switch(fabric: Fabric, links: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A route's links up to the first switch (NVSwitch or rail switch) and from it on."""
    for k, li in enumerate(links):
        if fabric.nodes[fabric.links[li].dst].kind in (NVSWITCH, RAIL):
            return links[: k + 1], links[k + 1 :]
    return links, ()


def _lower_in_switch(
    g: TaskGraph,
    op: Collective,
    sched: Schedule,
    fabric: Fabric,
    router: Router,
    done: list[list[int]],
    ci: int,
    inst: CollectiveInstance,
    wire: _Wire,
) -> None:
    """In-switch reduction and multicast (NVLS in the NVSwitch, SHARP in the rail switch), by data
    dependencies only, so pieces overlap: every contribution of a chunk run crosses its GPU's path up
    to the switch once, the switch adds them and sends the owner one result; a multicast goes up
    once and the switch copies it down to every member. A GPU pushes its pieces up in step order, each once its
    last push's bytes have left (`TaskGraph.drain_deps`): NCCL's NVLS channels keep pieces in flight, so a piece's
    latency does not hold the next one back."""
    b = sched.chunk_bounds
    ready: dict[tuple[int, int], list[int]] = {}  # (rank, chunk) -> tasks that delivered its latest value
    # (rank, step, phase) -> its up-transfers at that step: contributions ("r") and multicasts ("m") are pushed
    # by separate warps in NCCL's NVLS kernel, each stream in step order
    pushed: dict[tuple[int, int, str], list[int]] = {}
    started: set[int] = set()
    firsts: set[int] = set()  # each GPU's first push: it carries NCCL's NVLS latency

    # rank -> its tasks here that start only once its earlier work (`done[rank]`) has ended: a task that waits for
    # one of them (its arrival, or its bytes' drain: a task starts only after its own dependencies) need not list
    # `done[rank]` again. Listing it on every piece made the graph quadratic: 64 NVLS pieces of a data-parallel
    # AllReduce on 8 GPUs, each waiting for the ~1,000 tasks of the GPU's last collective, 4.7 million edges.
    anchored: dict[int, set[int]] = {r: set() for r in op.group}

    def deps_of(rank: int, chunk: int, count: int, also: list[int] | tuple = ()) -> list[int]:
        out: list[int] = []
        for c in range(chunk, chunk + count):
            out += ready.get((rank, c), [])
        mine = anchored[rank]
        if ANCHOR_DONE and (any(t in mine for t in out) or any(t in mine for t in also)):
            return out
        return list(done[rank]) + out

    def add(
        src: int,
        dst: int,
        links,
        latency_s: float,
        size: float,
        deps: list[int],
        step: int,
        net: str,
        first: bool = False,
    ) -> int:
        nvswitch = net == "NVSwitch"
        # NCCL's NVLS latency once, on a GPU's first contribution; pieces then stream with no per-step overhead
        over = (NVLS_LATENCY_S if nvswitch else SHARP_LATENCY_S) if first else 0.0
        factor = (wire.factor / NVLS_EFFICIENCY) if nvswitch else wire.net_factor  # NVLink SHARP's measured rate
        t = g.add(
            TRANSFER,
            src,
            dst,
            f"{op.key}/step{step} [{net}]",
            deps,
            size_bytes=size * factor,
            route=tuple(links),
            latency_s=latency_s + over,
            step=step,
            collective=ci,
            wire=factor,
        )
        inst.tasks.append(t)
        return t

    groups: dict[tuple[int, int, int, int, int], list[int]] = {}  # (step, phase, owner, chunk, count) -> peers
    for i in range(sched.n_moves):
        reducing = int(sched.mode[i]) == MODE_REDUCE
        owner, peer = (int(sched.dst[i]), int(sched.src[i])) if reducing else (int(sched.src[i]), int(sched.dst[i]))
        key = (int(sched.step[i]), int(sched.phase[i]), owner, int(sched.chunk[i]), int(sched.count[i]))
        groups.setdefault(key, []).append(peer)
    finals: dict[int, list[int]] = {r: [] for r in op.group}
    for (step, phase, owner, chunk, count), peers in sorted(groups.items()):
        size = int(b[chunk + count] - b[chunk]) * op.bytes_per_element
        name = sched.phases[phase]
        net = "NVSwitch" if "NVLS" in name else f"rail switch {owner % fabric.gpus_per_server}"
        reducing = "reduce" in name
        routes = [router.route(p, owner) if reducing else router.route(owner, p) for p in peers]
        if reducing:  # contributions up, one reduced result down
            ups = []
            for p, r in zip(peers, routes):
                up_links, _ = _split_at_switch(fabric, r.links)
                before = pushed.get((p, step - 1, "r"), [])
                ups.append(
                    add(
                        p,
                        p,
                        up_links,
                        r.latency_s / 2,
                        size,
                        deps_of(p, chunk, count, before) + before,
                        step,
                        net,
                        first=p not in started,
                    )
                )
                anchored[p].add(ups[-1])
                if p not in started:
                    firsts.add(ups[-1])
                elif before and firsts.isdisjoint(before):  # the stream's next push once the last one's bytes
                    g.drain_deps[ups[-1]] = tuple(before)  # have left (after a first push: once it has arrived,
                started.add(p)  # its NVLS latency a start-up cost the stream waits for)
                pushed.setdefault((p, step, "r"), []).append(ups[-1])
                finals[p].append(ups[-1])
            _, down_links = _split_at_switch(fabric, routes[0].links)
            t = add(
                owner,
                owner,
                down_links,
                routes[0].latency_s / 2,
                size,
                ups + deps_of(owner, chunk, count, ups),
                step,
                net,
            )
            anchored[owner].add(t)
            for c in range(chunk, chunk + count):
                ready[(owner, c)] = [t]
            finals[owner].append(t)
        else:  # one copy up, multicast down
            up_links, _ = _split_at_switch(fabric, routes[0].links)
            before = pushed.get((owner, step - 1, "m"), [])
            up = add(
                owner,
                owner,
                up_links,
                routes[0].latency_s / 2,
                size,
                deps_of(owner, chunk, count, before) + before,
                step,
                net,
            )
            anchored[owner].add(up)
            if before and firsts.isdisjoint(before):
                g.drain_deps[up] = tuple(before)
            pushed.setdefault((owner, step, "m"), []).append(up)
            finals[owner].append(up)
            for p, r in zip(peers, routes):
                _, down_links = _split_at_switch(fabric, r.links)
                t = add(owner, p, down_links, r.latency_s / 2, size, [up], step, net)
                for c in range(chunk, chunk + count):
                    ready[(p, c)] = [t]
                finals[p].append(t)
    last = _last_of(g, inst.tasks, finals) if FRONTIER_DONE else finals
    for r in op.group:
        if last[r]:
            done[r] = last[r]


def _last_of(g: TaskGraph, tasks: list[int], finals: dict[int, list[int]]) -> dict[int, list[int]]:
    """Each GPU's tasks here that the next op must wait for: its `finals` less those another of them waits for to
    the end, through this collective's arrival dependencies (not a drain: a task released at its dependency's
    drain may end first). A contribution pushed up, say, ends before the multicast that brings its reduced chunk
    back: waiting for the multicast waits for it. Exact, and half the dependencies of the next op's pieces."""
    mine = set(tasks)
    drains = g.drain_deps
    out = {}
    for r, fin in finals.items():
        seen: set[int] = set()
        stack = [d for t in fin for d in g.deps[t] if d in mine and d not in drains.get(t, ())]
        while stack:
            x = stack.pop()
            if x in seen:
                continue
            seen.add(x)
            stack += [d for d in g.deps[x] if d in mine and d not in drains.get(x, ()) and d not in seen]
        out[r] = [t for t in fin if t not in seen]
    return out


@dataclass(frozen=True)
class _InSwitchTemplate:
    """One in-switch collective lowered once on a scratch graph, its GPUs' earlier work (`done`) left as markers
    (-1 - rank): the same collective again (same schedule, group, element size and wire) is this, renumbered."""

    kind: list[int]
    rank: list[int]
    dst: list[int]
    names: list[str]  # after the collective's key
    deps: list[list[int]]
    size_bytes: list[float]
    route: list[tuple[int, ...]]
    latency_s: list[float]
    step: list[int]
    wire: dict[int, float]
    drain_deps: dict[int, tuple[int, ...]]
    finals: dict[int, list[int]]
    marked: frozenset[int]  # tasks whose dependencies hold a marker


def _in_switch_from_template(
    g: TaskGraph,
    op: Collective,
    sched: Schedule,
    fabric: Fabric,
    router: Router,
    done: list[list[int]],
    ci: int,
    inst: CollectiveInstance,
    wire: _Wire,
    key: tuple,
) -> None:
    """`_lower_in_switch`, from the template of the same collective lowered before (made on first use): the
    graph gets the same tasks, dependencies and drains (a data-parallel job repeats its gradient buckets' sizes;
    each NVLS bucket is some 8,000 transfers)."""
    tkey = ("in-switch", key, op.group, op.bytes_per_element, wire.factor, wire.net_factor, ANCHOR_DONE, FRONTIER_DONE)
    tpl = router.cache.get(tkey)
    if tpl is None:
        scratch = TaskGraph()
        # `done` is a list by rank, or a dict by member for a collective off the main stream
        marks = {r: [-1 - r] for r in op.group}
        proto = CollectiveInstance("", op.op, sched.algorithm, op.group, op.size_bytes, op.label)
        # without its key, the template's task names start after it
        _lower_in_switch(scratch, replace(op, key=""), sched, fabric, router, marks, 0, proto, wire)  # type: ignore[arg-type]
        assert proto.tasks == list(range(len(scratch.kind)))
        tpl = router.cache[tkey] = _InSwitchTemplate(
            scratch.kind,
            scratch.rank,
            scratch.dst,
            scratch.name,
            scratch.deps,
            scratch.size_bytes,
            scratch.route,
            scratch.latency_s,
            scratch.step,
            dict(scratch.wire),
            dict(scratch.drain_deps),
            {r: list(marks[r]) for r in op.group},
            frozenset(i for i, deps in enumerate(scratch.deps) if any(d < 0 for d in deps)),
        )
    base = len(g.kind)
    n = len(tpl.kind)

    def expand(deps: list[int]) -> list[int]:
        out: list[int] = []
        for d in deps:
            if d >= 0:
                out.append(d + base)
            else:
                out += done[-1 - d]
        return out

    # the columns TaskGraph._append fills, a template at a time
    g.kind.extend(tpl.kind)
    g.rank.extend(tpl.rank)
    g.dst.extend(tpl.dst)
    g.name.extend([op.key + name for name in tpl.names])
    g.duration_s.extend([0.0] * n)
    g.size_bytes.extend(tpl.size_bytes)
    g.route.extend(tpl.route)
    g.latency_s.extend(tpl.latency_s)
    g.deps.extend([expand(deps) if i in tpl.marked else [d + base for d in deps] for i, deps in enumerate(tpl.deps)])
    g.step.extend(tpl.step)
    g.collective.extend([ci] * n)
    g.dim.extend([""] * n)
    for i, factor in tpl.wire.items():
        g.wire[i + base] = factor
    for i, early in tpl.drain_deps.items():
        g.drain_deps[i + base] = tuple(d + base for d in early)
    inst.tasks.extend(range(base, base + n))
    for r, finals in tpl.finals.items():
        if finals and finals != [-1 - r]:
            done[r] = [t + base for t in finals]


def _ring_edges(sched: Schedule) -> list[tuple[int, int, int, int, int]]:
    """(src, dst, channel, elements, steps) of every ring edge, in order of first appearance."""
    steps, srcs, dsts, chans, elems = transfers(sched)
    n = int(max(srcs.max(), dsts.max())) + 1 if len(srcs) else 0
    ch = int(chans.max()) + 1 if len(chans) else 1
    key = (srcs.astype(np.int64) * n + dsts) * ch + chans
    uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    edge_elements = np.rint(np.bincount(inverse, weights=elems, minlength=len(uniq))).astype(np.int64)
    edge_steps = np.bincount(inverse, minlength=len(uniq))
    order = np.argsort(first, kind="stable")  # in order of first appearance
    at = first[order]
    return list(
        zip(
            srcs[at].tolist(),
            dsts[at].tolist(),
            chans[at].tolist(),
            edge_elements[order].tolist(),
            edge_steps[order].tolist(),
        )
    )


def _lower_ring_edges(
    g: TaskGraph,
    op: Collective,
    edges: list[tuple[int, int, int, int, int]],
    base: int,
    fabric: Fabric,
    router: Router,
    done: list[list[int]],
    ci: int,
    inst: CollectiveInstance,
    wire: _Wire,
    cache: bool = False,
) -> None:
    """A ring as one transfer per ring edge (src, dst, channel) carrying the bytes of all its steps, with
    the latency of all its steps; it starts when both ends have reached the collective. `edges` are
    `_ring_edges` of the schedule on the group shifted down by `base` ranks.

    On its own an edge then takes steps x alpha + bytes / bandwidth, the ring's alpha-beta time, and
    edges that share a link share it max-min fairly for the whole collective. What is lost is the
    step-by-step lockstep: in a real ring a slow edge holds every edge back at each step; here the
    other edges finish early and free their links (a mildly optimistic approximation, used for
    `fidelity.ring_steps: merged`, the default of LLM workloads where rings have thousands of steps).
    """
    finals: dict[int, list[int]] = {r: [] for r in op.group}
    name = f"{op.key}/ring ["
    append, tasks, wires = g._append, inst.tasks, g.wire
    template = _ring_edge_template(op, edges, base, fabric, router, wire, cache)
    for src, dst, net, size, links, latency, factor in template:
        t = append(  # g.add(TRANSFER, ..., step=-1, collective=ci, wire=factor), positionally
            TRANSFER,
            src,
            dst,
            f"{name}{net}]",
            sorted(set(done[src] + done[dst])),
            0.0,
            size,
            links,
            latency,
            -1,
            ci,
            "",
        )
        if factor != 1.0:
            wires[t] = factor
        tasks.append(t)
        finals[src].append(t)
        finals[dst].append(t)
    for r in op.group:
        if finals[r]:
            done[r] = finals[r]


def _ring_edge_template(
    op: Collective,
    edges: list[tuple[int, int, int, int, int]],
    base: int,
    fabric: Fabric,
    router: Router,
    wire: _Wire,
    cache: bool,
) -> list[tuple[int, int, str, float, tuple, float, float]]:
    """Each edge's transfer but its dependencies: (src, dst, network name, wire bytes, route links, latency, wire
    factor), once per edge list, placement and protocol (a group's collectives repeat every layer and micro-batch)."""
    # cached only where the edges and the wire are cached themselves (a workload's collectives with a cached
    # schedule, `_planned`): a bench's calls, an AllToAllv, build their own each time
    key = ("ring-edge-template", id(edges), base, op.bytes_per_element, id(wire))
    hit = router.cache.get(key) if cache else None
    if hit is not None and hit[0] is edges and hit[1] is wire:
        return hit[2]
    gps = fabric.gpus_per_server
    layout = Layout(gps)
    bpe, factor_of, base_s, route_of = op.bytes_per_element, wire.factor_of, wire.base_s, router.route
    # network_of depends on the two ranks' local indices and whether they share a server: one string per such pair
    nets = router.cache.setdefault("ring-edge-networks", {})
    # a chunk crosses every hop of its channel's ring in turn (and a GPU does not wait for its last step's arrival
    # to send the next, as the stepped lowering has it): each step costs the ring's mean hop latency, NVLink on
    # most hops and the network on the server boundaries, not the edge's own latency on every step
    routes = [route_of(src + base, dst + base, channel) for src, dst, channel, _, _ in edges]
    alpha_sum: dict[int, float] = {}
    hops: dict[int, int] = {}
    for (_, _, channel, _, _), route in zip(edges, routes, strict=True):
        alpha_sum[channel] = alpha_sum.get(channel, 0.0) + route.latency_s + wire.step_s(route)
        hops[channel] = hops.get(channel, 0) + 1
    out = []
    for (src, dst, channel, elements, n_steps), route in zip(edges, routes, strict=True):
        src += base
        dst += base
        where = (src % gps, dst % gps, src // gps == dst // gps)
        net = nets.get(where)
        if net is None:
            net = nets[where] = network_of(src, dst, layout)
        factor = factor_of(route)
        latency = n_steps * alpha_sum[channel] / hops[channel] + base_s
        out.append((src, dst, net, elements * bpe * factor, route.links, latency, factor))
    if cache:
        router.cache[key] = (edges, wire, out)  # the edges and wire kept alive: their ids stay theirs
    return out


def _planned(
    op: Collective, fabric: Fabric, router: Router
) -> tuple[Schedule, int, Choice | None, tuple | None, _Wire]:
    """`_plan` and the protocol's `_Wire`, once per workload collective of the same operation, group and size (a
    run lowers each group's collectives thousands of times: every layer, every micro-batch)."""
    fast = not hasattr(op, "algorithm")  # a workload's Collective: nothing but its operation, group and size decides
    fkey = ("planned", op.op, op.group, op.elements, op.bytes_per_element) if fast else None
    hit = router.cache.get(fkey) if fast else None
    if hit is None:
        sched, base, choice, key = _plan(op, fabric, router)
        hit = (sched, base, choice, key, _Wire(op, choice, fabric, router))
        if fast:
            router.cache[fkey] = hit
    return hit


def lower_collective(
    g: TaskGraph, op: Collective, fabric: Fabric, router: Router, done: list[list[int]], merge_ring_steps: bool = False
) -> int:
    sched, base, choice, key, wire = _planned(op, fabric, router)
    pxn = sched.algorithm == "pxn" or getattr(op, "pxn", False)
    if merge_ring_steps and sched.algorithm == "ring" and not pxn:
        ci = len(g.collectives)
        g.collectives.append(
            CollectiveInstance(op.key, op.op, sched.algorithm, op.group, op.size_bytes, op.label, n_steps=sched.n_steps)
        )
        # the edges depend on the group only through its shape: computed once per cached schedule
        edges = router.cache.get(("ring-edges", key)) if key is not None else None
        if edges is None:
            edges = _ring_edges(sched)
            if key is not None:
                router.cache[("ring-edges", key)] = edges
        cache = key is not None and not hasattr(op, "algorithm")  # edges and wire cached: so is their template
        _lower_ring_edges(g, op, edges, base, fabric, router, done, ci, g.collectives[ci], wire, cache)
        return ci
    sched = sched.shifted(base)
    layout = Layout(fabric.gpus_per_server)
    gps = fabric.gpus_per_server
    ci = len(g.collectives)
    inst = CollectiveInstance(op.key, op.op, sched.algorithm, op.group, op.size_bytes, op.label, n_steps=sched.n_steps)
    g.collectives.append(inst)
    if sched.algorithm == "nvls":
        if IN_SWITCH_TEMPLATES and key is not None:
            _in_switch_from_template(g, op, sched, fabric, router, done, ci, inst, wire, key)
        else:
            _lower_in_switch(g, op, sched, fabric, router, done, ci, inst, wire)
        return ci
    last_in: dict[int, list[int]] = {}
    last_out: dict[int, list[int]] = {}
    # a ring (NCCL's: each channel a thread block of its own, up to NCCL_STEPS steps in flight) forwards at each step
    # what its channel received at the last one: a step waits for that to arrive and for the channel's last send
    # to have left (its bytes, not its latency: TaskGraph.drain_deps), not for the GPU's other channels (which,
    # spread over the NICs, always include one crossing the network). A chunk's latency then adds up along its
    # path, NVLink hops and the server boundaries', as NCCL's own ring model has it.
    forward = sched.algorithm == "ring" and op.op in RING_FORWARDS
    steps, srcs, dsts, chans, elems = transfers(sched)
    bounds = np.searchsorted(steps, np.arange(sched.n_steps + 1))
    for k in range(sched.n_steps):
        step_in: dict = {}
        step_out: dict = {}
        for i in range(bounds[k], bounds[k + 1]):
            src, dst, channel = int(srcs[i]), int(dsts[i]), int(chans[i])
            ks, kd = ((src, channel), (dst, channel)) if forward else (src, dst)
            if ks in last_in or ks in last_out:
                deps = last_in.get(ks, []) + last_out.get(ks, [])
            else:
                deps = list(done[src])
            if kd not in last_in and kd not in last_out:
                deps += done[dst]
            size = int(elems[i]) * op.bytes_per_element
            hops = [(src, dst)]
            if pxn and src // gps != dst // gps and src % gps != dst % gps:
                relay = (src // gps) * gps + dst % gps
                hops = [(src, relay), (relay, dst)]
            first = None
            early = tuple(last_out.get(ks, ())) if forward else ()
            for a, b in hops:
                route = router.route(a, b, channel)
                net = network_of(a, b, layout)
                t = g.add(
                    TRANSFER,
                    a,
                    b,
                    f"{op.key}/step{k} [{net}]",
                    deps,
                    size_bytes=size * wire.factor_of(route),
                    route=route.links,
                    latency_s=route.latency_s + wire.step_s(route) + (wire.base_s if k == 0 and first is None else 0.0),
                    step=k,
                    collective=ci,
                    wire=wire.factor_of(route),
                )
                inst.tasks.append(t)
                if early and first is None:
                    g.drain_deps[t] = early
                first = t if first is None else first
                deps = [t]
            step_out.setdefault(ks, []).append(first)
            step_in.setdefault(kd, []).append(deps[0])
        last_in.update(step_in)
        last_out.update(step_out)
    if forward:
        finish: dict[int, list[int]] = {}
        for (r, _), ts in list(last_in.items()) + list(last_out.items()):
            finish.setdefault(r, []).extend(ts)
        for r in op.group:
            if finish.get(r):
                done[r] = sorted(finish[r])
        return ci
    for r in op.group:
        finish_r = last_in.get(r, []) + last_out.get(r, [])
        if finish_r:
            done[r] = finish_r
    return ci
