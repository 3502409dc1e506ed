"""Lowering: a workload on a fabric -> a graph of tasks (compute on a GPU, transfers over a route).

Per rank, operations run in program order on the main stream. A collective is lowered
(engines/lower_collective.py) once every member of its group has reached it. A non-blocking collective
(`blocking=False`) starts after the main stream's previous op and after the previous collective of its
stream; the main stream does not wait for it until a `Wait` on that stream. A `Send` becomes one
transfer task over the router's route, ready when the sender reaches it; the matching `Recv` holds the
receiver until that transfer has arrived.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from .. import collector
from ..fabric.graph import TIER_SPINE, TIER_SUPERSPINE, Fabric
from ..fabric.routing import Router
from ..workload.ops import Block, Collective, Compute, Recv, Send, StageTransfer, Wait, Workload
from .fold import ScaleUpFolder
from .folded import FoldedKind
from .lower_collective import lower_collective
from .taskgraph import COMPUTE, TRANSFER, TaskGraph


class _Merger:
    """Merges runs of compute ops and folded collectives into single tasks (exact, see `lower`)."""

    def __init__(self, g: TaskGraph, done: list[list[int]]):
        self.g = g
        self.done = done
        self.open: dict[int, int] = {}  # rank -> the task its next compute op may extend
        self.closed: set[int] = set()  # group tasks that no longer extend
        self.pending: dict[int, dict[int, list[float]]] = {}  # group task -> rank -> [seconds, ops]

    def _extendable(self, r: int) -> int | None:
        t = self.open.get(r)
        if t is None:
            return None
        d = self.done[r]
        if len(d) != 1 or d[0] != t or t in self.closed:
            return None
        return t

    def compute(self, r: int, op: Compute) -> None:
        g = self.g
        t = self._extendable(r)
        if t is not None and t in g.members:  # a group task: remember, merge at the next folded collective
            p = self.pending[t].setdefault(r, [0.0, 0])
            p[0] += op.duration_s
            p[1] += 1
            return
        if t is None:
            self.flush(r)
            t = self._extendable(r)
        if t is not None and t not in g.members:
            g.duration_s[t] += op.duration_s
            g.ops[t] = g.ops.get(t, 1) + 1
            return
        t = g.add(COMPUTE, r, -1, op.name, list(self.done[r]), duration_s=op.duration_s)
        self.done[r] = [t]
        self.open[r] = t

    def collective(self, op: Collective, time_s: float) -> None:
        """A folded collective: extend the group's task when every member is in it, else a new one."""
        self.lockstep(op.group, op.key, 0.0, time_s, op.dim, 1)

    def lockstep(
        self,
        group: tuple[int, ...],
        name: str,
        compute_s: float,
        comm_s: float,
        dim: str,
        n_ops: int,
        hidden_s: float = 0.0,
    ) -> None:
        """Work the whole group does together after a rendezvous: `compute_s` of compute and `comm_s` of
        folded collectives (and `hidden_s` of folded collectives beside the compute). Extends the group's task
        when every member is in it, else starts a new one."""
        g = self.g
        time_s = compute_s + comm_s
        t = self._extendable(group[0])
        if t is not None and g.members.get(t) == group and all(self._extendable(m) == t for m in group):
            pend = self.pending[t]
            seconds = [pend.get(m, [0.0, 0])[0] for m in group]
            if max(seconds) - min(seconds) <= 1e-12 * max(1.0, max(seconds)):
                g.duration_s[t] += seconds[0] + time_s
                g.comm_s[t] = g.comm_s.get(t, 0.0) + comm_s
                if hidden_s:
                    g.hidden_s[t] = g.hidden_s.get(t, 0.0) + hidden_s
                g.ops[t] = g.ops.get(t, 1) + n_ops + int(pend.get(group[0], [0.0, 0])[1])
                pend.clear()
                return
        deps: list[int] = []
        done, open_pop, members, closed_add, pending = (
            self.done,
            self.open.pop,
            g.members,
            self.closed.add,
            self.pending,
        )
        for m in group:  # self.flush(m), written out: a block's eight members, tens of thousands of blocks
            o = open_pop(m, None)
            if o is not None and o in members:
                closed_add(o)
                if pending[o]:
                    self._spill(m, o)
            deps += done[m]
        # g.add(COMPUTE, group[0], -1, name, deps, duration_s=time_s, dim=dim), positionally
        t = g._append(COMPUTE, group[0], -1, name, sorted(set(deps)), time_s, 0.0, (), 0.0, -1, -1, dim)
        members[t] = group
        g.comm_s[t] = comm_s
        if hidden_s:
            g.hidden_s[t] = hidden_s
        if n_ops > 1:
            g.ops[t] = n_ops
        pending[t] = {}
        is_open = self.open
        for m in group:
            done[m] = [t]
            is_open[m] = t

    def flush(self, r: int) -> None:
        """Rank r leaves its open task: its pending compute becomes a task of its own; nothing extends
        the task any more (something is about to depend on it)."""
        t = self.open.pop(r, None)
        if t is not None and t in self.g.members:
            self.closed.add(t)
            if self.pending[t]:
                self._spill(r, t)

    def _spill(self, r: int, t: int) -> None:
        """The end of `flush` when the group task t holds pending compute: r's becomes a task of its own."""
        p = self.pending[t].pop(r, None)
        if p is not None and self.done[r] == [t]:
            e = self.g.add(COMPUTE, r, -1, f"compute after {self.g.name[t]}", [t], duration_s=p[0])
            self.g.ops[e] = int(p[1])
            self.done[r] = [e]
            self.open[r] = e

    def finish(self) -> None:
        for r in list(self.open):
            self.flush(r)
            self.open.pop(r, None)
        for t, n in self.g.ops.items():
            if n > 1:
                self.g.name[t] = f"{self.g.name[t]} (+{n - 1} ops)"


PROGRESS_OPS = 200_000  # ops lowered between progress reports (a few tenths of a second)


def _first_blocks(blocked: list[list]) -> list[Block]:
    """A block of every group (a rank's blocks all belong to its group)."""
    out: dict[tuple[int, ...], Block] = {}
    for ops in blocked:
        b = next((op for op in ops if isinstance(op, Block)), None)
        if b is not None:
            out.setdefault(b.group, b)
    return list(out.values())


def spread_over_paths(g: TaskGraph, fabric: Fabric, router: Router) -> None:
    """Transfers that cross a spine tier split evenly over every equal-cost path (the fluid limit of
    per-packet spraying; flowlet switching and adaptive routing spread the same way over the long run,
    seeds Ch. 12): the route becomes every link of every path, weighted by the share of the transfer's
    bytes it carries (`Router.spray_split`). ECMP keeps one hashed path per QP."""
    multi = {li for li, link in enumerate(fabric.links) if link.tier in (TIER_SPINE, TIER_SUPERSPINE)}
    if not multi:
        return
    cache: dict[tuple[int, int], tuple[tuple[int, ...], tuple[float, ...]]] = {}
    for t in range(len(g)):
        if g.kind[t] != TRANSFER or not any(li in multi for li in g.route[t]):
            continue
        pair = (g.rank[t], g.dst[t])
        split = cache.get(pair)
        if split is None:
            shares = router.spray_split(*pair)
            links = tuple(sorted(shares))
            split = cache[pair] = (links, tuple(shares[li] for li in links))
        g.route[t] = split[0]
        if any(w != 1.0 for w in split[1]):
            g.route_weight[t] = split[1]


@collector.paused()  # millions of small lists, no cycles
def lower(
    workload: Workload,
    fabric: Fabric,
    router: Router,
    *,
    fold_scale_up: bool = False,
    merge_ring_steps: bool = False,
    spread_paths: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> TaskGraph:
    """The task graph of `workload` on `fabric`.

    fold_scale_up: blocking collectives inside one server's NVLink domain become time on their members
    (engines/fold.py), and consecutive compute ops / folded collectives of the same ranks merge into one
    task. Merging is exact: a task that nothing else depends on yet is extended only by ops that would
    have started the moment it ended (same ranks, same stream); a group of ranks merges only while all
    its members run equal work between rendezvous.
    merge_ring_steps: ring collectives between servers become one transfer per ring edge
    (engines/lower_collective.py).
    spread_paths: transfers split over every equal-cost path (`spread_over_paths`; the flow and analytic
    engines' model of spraying, flowlets and adaptive routing; the packet engine balances per packet).
    progress: `progress(ops lowered, ops in all)` about every PROGRESS_OPS ops and at the end.
    The garbage collector is paused while it runs (aifabric.collector).
    """
    g = TaskGraph()
    world = workload.world_size
    if world > fabric.world_size:
        raise ValueError(f"workload has {world} ranks but the fabric has {fabric.world_size} GPUs")
    done: list[list[int]] = [[] for _ in range(world)]  # tasks that end each rank's previous op
    streams: list[dict[str, list[int]]] = [{} for _ in range(world)]  # last tasks of each side stream
    cursor = [0] * world
    sent: dict[str | tuple[str, int], int] = {}  # Send key (a StageTransfer's: (key, sender)) -> its transfer task
    send_routes: list[list[Any] | None] = [None] * world  # per rank, the route to each pipeline peer
    folder = ScaleUpFolder(fabric, router) if fold_scale_up else None
    merge = _Merger(g, done)
    program = workload.ranks
    if (
        folder is not None
        and workload.blocked is not None
        and all(folder.block_foldable(b) for b in _first_blocks(workload.blocked))
    ):
        program = workload.blocked  # lockstep runs as one op each: far fewer ops at thousands of GPUs
    peers_of = workload.pipeline_peers or []  # blocked programs' StageTransfers: each rank's pipeline
    # Advance the ranks in program order, each until it waits: for a Recv whose Send is not posted yet, or at
    # a collective (or block) until its last member arrives, which lowers it once and wakes the others.
    queue = deque(range(world))
    queued = [True] * world
    total_ops = sum(map(len, program)) if progress is not None else 0
    lowered = 0  # ops passed, every rank's (progress)
    next_report = PROGRESS_OPS
    arrived: dict[str, int] = {}  # collective / block key -> members waiting at it
    waiting_recv: dict[str | tuple[str, int], int] = {}  # Send key -> the rank waiting in its Recv

    # the loop runs once per op of every rank (millions at thousands of GPUs): names bound locally, ops
    # dispatched on their exact class (Collective has a subclass: collectives and blocks take the last branch)
    flush, route_of = merge.flush, router.route
    open_pop, members, closed_add, pending, spill = (
        merge.open.pop,
        g.members,
        merge.closed.add,
        merge.pending,
        merge._spill,
    )
    popleft, push = queue.popleft, queue.append
    # a transfer's columns appended in place (TaskGraph._append's order): 172,032 pipeline sends at 1,024 GPUs
    appends = (g.kind.append, g.rank.append, g.dst.append, g.name.append, g.duration_s.append, g.size_bytes.append)
    kind_app, rank_app, dst_app, name_app, duration_app, size_app = appends
    route_app, latency_app, deps_app = g.route.append, g.latency_s.append, g.deps.append
    step_app, coll_app, dim_app, kinds = g.step.append, g.collective.append, g.dim.append, g.kind
    at_rank = [f"@{r}" for r in range(world)] if peers_of else []  # a pipeline send's name: its key @ its rank
    while queue:
        r = popleft()
        queued[r] = False
        ops = program[r]
        c, n_ops = cursor[r], len(ops)
        while c < n_ops:
            op: Any = ops[c]  # narrowed by `cls is ...` below, which mypy does not follow
            cls = op.__class__
            if cls is StageTransfer:  # the stage's shared send / receive, aimed at this rank's pipeline peer
                # (172,032 sends and as many receives at 1,024 GPUs: matched by (key, sender), not by a formatted
                # string, and a send's route cached per rank and peer)
                peers = peers_of[r]
                i = op.vstage % len(peers)
                if op.kind != "send":
                    match = (op.key, peers[i])
                    sender = sent.pop(match, None)  # its only receive: the table holds only sends in flight
                    if sender is None:
                        waiting_recv[match] = r  # the sender has not reached its Send yet
                        break
                    o = open_pop(r, None)  # merge.flush(r), written out
                    if o is not None and o in members:
                        closed_add(o)
                        if pending[o]:
                            spill(r, o)
                    done[r] = done[r] + [sender]
                    c += 1
                    continue
                o = open_pop(r, None)  # merge.flush(r), written out
                if o is not None and o in members:
                    closed_add(o)
                    if pending[o]:
                        spill(r, o)
                routes = send_routes[r]
                if routes is None:
                    routes = send_routes[r] = [None] * len(peers)
                route = routes[i]
                if route is None:
                    route = routes[i] = route_of(r, peers[i])
                match = (op.key, r)
                sent[match] = len(kinds)  # g.add_transfer(...), written out
                kind_app(TRANSFER)
                rank_app(r)
                dst_app(peers[i])
                name_app(op.key + at_rank[r])  # f"{op.key}@{r}"
                duration_app(0.0)
                size_app(op.size_bytes)
                route_app(route.links)
                latency_app(route.latency_s)
                deps_app(list(done[r]))
                step_app(-1)
                coll_app(-1)
                dim_app("pp")
                waiter = waiting_recv.pop(match, None)
                if waiter is not None and not queued[waiter]:
                    queued[waiter] = True
                    push(waiter)
                c += 1
                continue
            if cls is Send or cls is Recv:
                p2p_key, src, dst, size, dim = op.key, op.src, op.dst, op.size_bytes, op.dim
            if cls is Recv:
                sender = sent.get(p2p_key)
                if sender is None:
                    waiting_recv[p2p_key] = r  # the sender has not reached its Send yet
                    break
                o = open_pop(r, None)  # merge.flush(r), written out
                if o is not None and o in members:
                    closed_add(o)
                    if pending[o]:
                        spill(r, o)
                done[r] = done[r] + [sender]
            elif cls is Send:
                o = open_pop(r, None)  # merge.flush(r), written out
                if o is not None and o in members:
                    closed_add(o)
                    if pending[o]:
                        spill(r, o)
                route = route_of(src, dst)
                sent[p2p_key] = len(kinds)  # g.add_transfer(...), written out
                kind_app(TRANSFER)
                rank_app(src)
                dst_app(dst)
                name_app(p2p_key)
                duration_app(0.0)
                size_app(size)
                route_app(route.links)
                latency_app(route.latency_s)
                deps_app(list(done[r]))
                step_app(-1)
                coll_app(-1)
                dim_app(dim)
                waiter = waiting_recv.pop(p2p_key, None)
                if waiter is not None and not queued[waiter]:
                    queued[waiter] = True
                    push(waiter)
            elif cls is Compute:
                if fold_scale_up:
                    merge.compute(r, op)
                else:
                    t = g.add(COMPUTE, r, -1, op.name, list(done[r]), duration_s=op.duration_s)
                    done[r] = [t]
            elif cls is Wait:
                flush(r)
                done[r] = done[r] + streams[r].pop(op.stream, [])
            else:  # a collective or a block: lowered when its last member arrives
                group = op.group
                n = arrived.get(op.key, 0) + 1
                if n < len(group):
                    arrived[op.key] = n
                    break
                arrived.pop(op.key, None)
                if cls is Block:
                    assert folder is not None  # blocks exist only where scale-up collectives fold
                    comm_s = folder.fold_block(op, g.folded.kinds)
                    merge.lockstep(group, op.key, op.compute_s, comm_s, "tp", len(op.ops), folder.last_hidden_s)
                    g.folded.task_bytes.setdefault(done[group[0]][0], []).append(folder.last)
                elif folder is not None and folder.foldable(op):
                    time_s = folder.fold(op)
                    merge.collective(op, time_s)
                    g.folded.task_bytes.setdefault(done[group[0]][0], []).append(folder.last)
                    key = (op.op, op.dim, len(group), op.size_bytes, op.label)
                    entry = g.folded.kinds.get(key)
                    if entry is None:
                        entry = g.folded.kinds[key] = FoldedKind(0, time_s, op.label, folder.payload_bytes(op))
                    entry.count += 1
                else:
                    for m in group:
                        flush(m)
                    if op.blocking:
                        ci = lower_collective(g, op, fabric, router, done, merge_ring_steps=merge_ring_steps)
                    else:
                        side = {m: done[m] + streams[m].get(op.stream, []) for m in group}
                        ci = lower_collective(
                            g,
                            op,
                            fabric,
                            router,
                            side,  # type: ignore[arg-type]
                            merge_ring_steps=merge_ring_steps,
                        )
                        for m in group:
                            streams[m][op.stream] = side[m]
                    if op.dim and not g.collectives[ci].dim:
                        g.collectives[ci].dim = op.dim
                for m in group:
                    if m != r:
                        cursor[m] += 1
                        lowered += 1
                        if not queued[m]:
                            queued[m] = True
                            push(m)
            c += 1
        if progress is not None:
            lowered += c - cursor[r]
            if lowered >= next_report:
                progress(lowered, total_ops)
                next_report = lowered + PROGRESS_OPS
        cursor[r] = c
    if progress is not None:
        progress(total_ops, total_ops)
    merge.finish()
    if spread_paths:
        spread_over_paths(g, fabric, router)
    if folder is not None:
        folder.finish()
        g.folded.link_bytes = folder.link_bytes
        g.folded.link_peak = folder.link_peak
        g.folded.pairs = folder.pairs
    stuck = [r for r in range(world) if cursor[r] < len(program[r])]
    if stuck:
        op = program[stuck[0]][cursor[stuck[0]]]
        raise ValueError(f"deadlock: rank {stuck[0]} waits in {getattr(op, 'key', op)} for ranks that never arrive")
    return g
