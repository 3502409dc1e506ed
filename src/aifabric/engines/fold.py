"""Scale-up collectives folded into their GPUs' time (scenario `fidelity.scale_up_collectives: analytic`).

A blocking collective whose group sits in one server and whose routes stay on NVLink (tensor
parallelism, mostly) is not expanded into transfers for the whole run. It is lowered once, on its own,
and executed by the flow engine with nothing else in the network; the time that takes becomes a task
that occupies every member from the moment the last member arrives (NCCL's rendezvous). Compute ops
and folded collectives that follow one another on the same ranks are then merged into one task per
group (engines/tasks.py), because ranks that rendezvous at every collective run in lockstep. A
collective that such a run launches beside its compute (on the "tp" stream: the backward's exchanges that
Megatron-LM overlaps with its GEMMs, workload/llm.py) adds to the task only what outlasts the compute it
runs beside, up to the run's `Wait("tp")`.

Why this is sound: inside a server the NVSwitch is non-blocking, so a TP collective contends only with
other traffic on the same GPU's NVLink ports: PXN relays and the intra-server hops of DP/PP rings,
which cross NVLink at a small fraction of its bandwidth. What is lost: that contention, and NVLink
load inside the task (each folded collective's bytes are spread evenly over its merged task's run when
the link load over time is recorded, and added to its links' byte counts and peaks). The
agreement with the expanded form is a test (tests/test_fold.py).

The time of a collective depends only on (operation, sizes, the members' local GPU indices), so the
flow run is done once per distinct shape on server 0 and reused for every server by translating link
names (`s0/...` -> `s<k>/...`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..fabric.graph import Fabric
from ..fabric.routing import Router
from ..workload.ops import Collective, Wait
from .folded import FoldedKind
from .taskgraph import TRANSFER, TaskGraph


@dataclass(frozen=True)
class FoldedCost:
    time_s: float
    link_bytes: tuple[tuple[int, float], ...]  # (link index on server 0, bytes)
    pairs: tuple[tuple[int, int, float], ...]  # (src, dst, payload bytes), local GPU indices
    link_peak: tuple[tuple[int, float], ...] = ()  # (link index on server 0, highest rate, bytes/s)


class ScaleUpFolder:
    """Decides which collectives fold, and what each costs (cached per shape)."""

    def __init__(self, fabric: Fabric, router: Router):
        self.fabric = fabric
        self.router = router
        self.gps = fabric.gpus_per_server
        self._cost: dict[Collective, FoldedCost] = {}
        # a server's nodes by what they are (kind, local index), to find another server's copy of a link
        self._node_at = {(n.kind, n.index, n.server): n.id for n in fabric.nodes.values() if n.server is not None}
        self._translated: dict[tuple[int, int], int] = {}
        self.link_bytes = np.zeros(len(fabric.links))  # every folded collective's bytes, per link
        self.link_peak = np.zeros(len(fabric.links))  # the highest rate a folded collective put on each link
        self.last: tuple[np.ndarray, np.ndarray] = (np.zeros(0, dtype=np.int64), np.zeros(0))  # last fold's bytes
        self.pairs: dict[tuple[int, int, str], float] = {}  # (src rank, dst rank, dim) -> payload bytes
        self._blocks: dict[tuple, tuple] = {}
        self._where: dict[tuple, tuple[tuple, int]] = {}  # (shape, group) -> (the block's cache key, its server)
        self._moved_links: dict[tuple, np.ndarray] = {}  # (block key, server) -> its links on that server
        self._pending: dict[tuple, list] = {}  # (block key, server) -> [blocks folded, the graph's table]
        # (shape, group) -> (time, time beside the compute, its links and bytes on its server, its `_pending` entry):
        # fold_block's answer again, until `finish` empties `_pending`
        self._fast: dict[tuple, tuple[float, float, tuple[np.ndarray, np.ndarray], list]] = {}
        self._group_ok: dict[tuple[int, ...], bool] = {}
        # (shape, server) -> the cost's links and bytes, and its peak links and rates, on that server
        self._placed: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        self._pair_counts: dict[tuple, int] = {}  # (shape, server, dim) -> collectives folded, pairs not yet added
        self.last_hidden_s = 0.0  # the last folded block's collectives beside its compute, seconds

    def foldable(self, op: Collective) -> bool:
        return op.blocking and self._in_server(op)

    def _in_server(self, op: Collective) -> bool:
        """The collective's group sits in one server and its routes stay on NVLink."""
        group = op.group
        if len(group) < 2:
            return False
        server = self.fabric.server_of(group[0])
        if any(self.fabric.server_of(r) != server for r in group):
            return False
        return self.router.route(group[0], group[1]).scale_up

    def _shape(self, op: Collective) -> tuple[int, Collective]:
        """The server of the op's group, and the op as a cache key: on server 0, without its names."""
        server = self.fabric.server_of(op.group[0])
        base = server * self.gps
        return server, replace(op, key="", label="", dim="", group=tuple(r - base for r in op.group))

    def fold(self, op: Collective) -> float:
        """The collective's time on its own; its bytes are added to `link_bytes` (on its own server), its
        pairs counted (added to `pairs` by `_flush_pairs`: an expert all-to-all of 32 GPUs has 992 pairs, and a
        run folds it a hundred thousand times)."""
        server, shape = self._shape(op)
        cost = self._cost.get(shape)
        if cost is None:
            cost = self._cost[shape] = self._run(shape)
        placed = self._placed.get((shape, server))
        if placed is None:  # the cost's links (distinct: one entry each) and peaks, on this server
            on = self._on_server
            placed = self._placed[(shape, server)] = (
                np.fromiter((on(li, server) for li, _ in cost.link_bytes), dtype=np.int64, count=len(cost.link_bytes)),
                np.fromiter((b for _, b in cost.link_bytes), dtype=float, count=len(cost.link_bytes)),
                np.fromiter((on(li, server) for li, _ in cost.link_peak), dtype=np.int64, count=len(cost.link_peak)),
                np.fromiter((r for _, r in cost.link_peak), dtype=float, count=len(cost.link_peak)),
            )
        links, values, peak_links, peak_rates = placed
        self.link_bytes[links] += values
        self.last = (links, values)
        if len(peak_links):
            self.link_peak[peak_links] = np.maximum(self.link_peak[peak_links], peak_rates)
        key = (shape, server, op.dim or "other")
        self._pair_counts[key] = self._pair_counts.get(key, 0) + 1
        return cost.time_s

    def _flush_pairs(self) -> None:
        """Adds the pairs of the collectives folded since the last call to `pairs`, once per shape and server."""
        for (shape, server, dim), count in self._pair_counts.items():
            base = server * self.gps
            for a, b, size in self._cost[shape].pairs:
                key = (a + base, b + base, dim)
                self.pairs[key] = self.pairs.get(key, 0.0) + count * size
        self._pair_counts.clear()

    def block_foldable(self, block) -> bool:
        """Every collective of the block folds (checked once per group)."""
        ok = self._group_ok.get(block.group)
        if ok is None:
            ok = self._group_ok[block.group] = all(
                self._in_server(op) for op in block.ops if isinstance(op, Collective)
            )
        return ok

    def fold_block(self, block, folded: dict) -> float:
        """The folded collectives of a `Block`: the time they add to its compute (`last_hidden_s`: the time of
        those that ran beside it); bytes and per-kind counts recorded (into `folded`, the TaskGraph's table).
        Cached per (shape, GPU indices in the server)."""
        fast = self._fast.get((block.shape, block.group))
        if fast is not None:  # this group's block of this shape again (tens of thousands at 1,024 GPUs)
            time_s, self.last_hidden_s, self.last, entry = fast
            entry[0] += 1
            return time_s
        where = self._where.get((block.shape, block.group))
        if where is None:
            server = self.fabric.server_of(block.group[0])
            base = server * self.gps
            where = self._where[(block.shape, block.group)] = (
                (block.shape, tuple(r - base for r in block.group)),
                server,
            )
        key, server = where
        cached = self._blocks.get(key)
        if cached is None:
            self._flush_pairs()  # what was folded before this block goes to the run's pairs
            before_links, before_pairs, before_peak = self.link_bytes, self.pairs, self.link_peak
            self.link_bytes, self.pairs = np.zeros(len(self.fabric.links)), {}
            self.link_peak = np.zeros(len(self.fabric.links))
            time_s, kinds = 0.0, dict[tuple[str, str, int, int, str], FoldedKind]()
            side_s = 0.0  # what the "tp" stream still has to run
            for op in block.ops:
                if isinstance(op, Collective):
                    t = self.fold(replace(op, group=key[1]))  # on server 0
                    if op.blocking:
                        time_s += t
                        side_s = max(0.0, side_s - t)
                    else:  # beside the compute that follows, after what the stream already holds
                        side_s += t
                    k = (op.op, op.dim, len(op.group), op.size_bytes, op.label)
                    if k in kinds:
                        kinds[k].count += 1
                    else:
                        kinds[k] = FoldedKind(1, t, op.label, self.payload_bytes(replace(op, group=key[1])))
                elif isinstance(op, Wait):  # the main stream waits for what the "tp" stream has left
                    time_s += side_s
                    side_s = 0.0
                else:
                    side_s = max(0.0, side_s - op.duration_s)
            time_s += side_s  # a block ends with its stream drained (the workload waits inside the block)
            hidden_s = sum(kind.time_s * kind.count for kind in kinds.values()) - time_s
            self._flush_pairs()  # the block's own
            nz = np.flatnonzero(self.link_bytes)
            cached = self._blocks[key] = (
                (time_s, max(0.0, hidden_s)),
                nz,
                self.link_bytes[nz],
                [(a, b, d, v) for (a, b, d), v in self.pairs.items()],
                kinds,
                self.link_peak[nz],
            )
            self.link_bytes, self.pairs, self.link_peak = before_links, before_pairs, before_peak
        (time_s, self.last_hidden_s), links, values, pairs, kinds, peaks = cached
        if server:
            where = (key, server)
            moved = self._moved_links.get(where)
            if moved is None:
                moved = self._moved_links[where] = np.fromiter(
                    (self._on_server(int(li), server) for li in links), dtype=np.int64, count=len(links)
                )
            links = moved
        self.last = (links, values)
        count = self._pending.get((key, server))
        if count is None:
            count = self._pending[(key, server)] = [1, folded]
        else:
            count[0] += 1
        self._fast[(block.shape, block.group)] = (time_s, self.last_hidden_s, self.last, count)
        return time_s

    def finish(self) -> None:
        """Adds the blocks folded since the last call to the link totals, peaks, pairs and per-kind counts
        (once per block shape and server, times its count: a block repeats thousands of times), and the pairs of
        the collectives folded one by one."""
        self._flush_pairs()
        for (key, server), (count, folded) in self._pending.items():
            _, links, values, pairs, kinds, peaks = self._blocks[key]
            if server:
                links = self._moved_links[(key, server)]
            base = server * self.gps
            self.link_bytes[links] += count * values
            self.link_peak[links] = np.maximum(self.link_peak[links], peaks)
            for a, b, d, v in pairs:
                k = (a + base, b + base, d)
                self.pairs[k] = self.pairs.get(k, 0.0) + count * v
            for k, kind in kinds.items():
                entry = folded.get(k)
                if entry is None:  # a new entry: the block's cached kinds stay as they are
                    folded[k] = FoldedKind(count * kind.count, kind.time_s, kind.label, kind.payload_bytes)
                else:
                    entry.count += count * kind.count
        self._pending.clear()
        self._fast.clear()

    def payload_bytes(self, op: Collective) -> float:
        """Bytes the transfers of one folded collective carry (after `fold`)."""
        return sum(size for _, _, size in self._cost[self._shape(op)[1]].pairs)

    def _simulate(self, op: Collective, run, lower_collective):
        from .executor import Interrupted

        g = TaskGraph()
        done: list[list[int]] = [[] for _ in range(self.gps)]
        lower_collective(g, op, self.fabric, self.router, done)
        try:
            return g, (run(g, self.fabric, "flow") if len(g) else None)
        except Interrupted:  # a Ctrl-C while timing a collective to fold: the lowering was stopped, not a run
            raise KeyboardInterrupt from None

    def _on_server(self, li: int, server: int) -> int:
        """Server `server`'s copy of link `li` of server 0: the link between the nodes that are, there, what its
        ends are on server 0 (same kind and local index), found from the nodes' places, not their names."""
        if server == 0:
            return li
        key = (li, server)
        out = self._translated.get(key)
        if out is None:
            link, nodes = self.fabric.links[li], self.fabric.nodes
            a, b = nodes[link.src], nodes[link.dst]
            out = self._translated[key] = self.fabric.link_between(
                self._node_at[(a.kind, a.index, server)], self._node_at[(b.kind, b.index, server)]
            )
        return out

    def _run(self, op: Collective) -> FoldedCost:
        """The collective on the flow engine, alone. When the tuner's choice is not the ring, the ring is
        timed too and the faster kept: NCCL's tuner is tuned on the hardware, so it picks what is faster
        there, while ours ranks by the α-β model, which is optimistic for NVLS's pipeline (tested)."""
        from .executor import run
        from .lower_collective import CollectiveCall, lower_collective, plan

        g, tl = self._simulate(op, run, lower_collective)
        if not len(g):
            return FoldedCost(0.0, (), ())
        _, choice = plan(op, self.fabric, self.router)
        if (
            choice is not None
            and choice.algorithm != "ring"
            and op.op in ("all-reduce", "all-gather", "reduce-scatter")
        ):
            ring = CollectiveCall(
                op.key,
                op.op,
                op.group,
                op.elements,
                op.bytes_per_element,
                op.label,
                op.blocking,
                op.stream,
                op.dim,
                algorithm="ring",
            )
            g2, tl2 = self._simulate(ring, run, lower_collective)
            if tl2.makespan_s < tl.makespan_s:
                g, tl = g2, tl2
        nz = np.flatnonzero(tl.link_bytes)
        pairs: dict[tuple[int, int], float] = {}
        for t in range(len(g)):
            if g.kind[t] == TRANSFER:  # NVLS: a GPU's contribution up to the switch is (p, p)
                pairs[(g.rank[t], g.dst[t])] = pairs.get((g.rank[t], g.dst[t]), 0.0) + g.payload_bytes(t)
        return FoldedCost(
            float(tl.makespan_s),
            tuple((int(i), float(tl.link_bytes[i])) for i in nz),
            tuple((a, b, s) for (a, b), s in pairs.items()),
            tuple((int(i), float(tl.link_peak_bytes_per_s[i])) for i in nz),
        )
