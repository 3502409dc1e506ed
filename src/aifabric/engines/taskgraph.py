"""The task graph every engine executes: compute tasks on GPUs, transfer tasks over routes, dependencies."""

from __future__ import annotations

from dataclasses import dataclass, field

from .folded import FoldedCollectives

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
    dim: str = ""  # parallel dimension it serves: dp, tp, pp, ep, cp, zero ("" if unknown)


@dataclass
class TaskGraph:
    kind: list[int] = field(default_factory=list)
    rank: list[int] = field(default_factory=list)  # compute: the GPU; transfer: the sender
    dst: list[int] = field(default_factory=list)  # transfer: the receiver; compute: -1
    name: list[str] = field(default_factory=list)
    duration_s: list[float] = field(default_factory=list)  # compute only
    size_bytes: list[float] = field(default_factory=list)  # transfer only: bytes on the wire (what links carry)
    route: list[tuple[int, ...]] = field(default_factory=list)
    latency_s: list[float] = field(default_factory=list)
    deps: list[list[int]] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    collective: list[int] = field(default_factory=list)  # index into collectives, or -1
    dim: list[str] = field(default_factory=list)  # parallel dimension of the task ("" if none)
    collectives: list[CollectiveInstance] = field(default_factory=list)
    # merged tasks (engines/tasks.py): a compute task may stand for several ops, on several ranks in lockstep
    members: dict[int, tuple[int, ...]] = field(default_factory=dict)  # task -> its ranks (absent: (rank,))
    comm_s: dict[int, float] = field(default_factory=dict)  # task -> seconds of folded collectives inside it
    # task -> seconds of folded collectives that ran beside its compute (the "tp" stream), not adding to it
    hidden_s: dict[int, float] = field(default_factory=dict)
    ops: dict[int, int] = field(default_factory=dict)  # task -> workload ops merged into it (absent: 1)
    # sprayed transfers (load balancing other than ECMP on the flow/analytic engines): the route holds every
    # link of every equal-cost path, and this the share of the transfer's rate on each (absent: 1 each)
    route_weight: dict[int, tuple[float, ...]] = field(default_factory=dict)
    folded: FoldedCollectives = field(default_factory=FoldedCollectives)  # the scale-up collectives folded at lowering
    # a collective's protocol puts more bytes on the wire than its payload (LL: 2 x, LL128: 1 / 0.92, NVLS):
    # transfer -> wire bytes per payload byte (absent: 1); `payload_bytes` gives what the workload moved
    wire: dict[int, float] = field(default_factory=dict)
    # task -> the transfers among its deps it waits for only until their bytes have left the sender, not until
    # they arrive (a ring's next step: NCCL keeps several steps in flight, so a send's latency does not hold
    # the next one back); engines without drain times wait for arrival
    drain_deps: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def drain_pairs(self) -> list[tuple[int, int]]:
        """(task, dependency) pairs released when the dependency's bytes have left: `drain_deps` on transfers that
        carry bytes (a transfer of none, or one an engine turned into a compute task, is waited for to its end)."""
        kind, size = self.kind, self.size_bytes
        return [(d, t) for d, early in self.drain_deps.items() for t in early if kind[t] == TRANSFER and size[t] > 0]

    def payload_bytes(self, t: int) -> float:
        return self.size_bytes[t] / self.wire.get(t, 1.0)

    def payload_array(self):
        """Payload bytes of every task (0 for compute), as a numpy array."""
        import numpy as np

        size = np.fromiter(self.size_bytes, dtype=float, count=len(self.kind))
        if self.wire:
            idx = np.fromiter(self.wire.keys(), dtype=np.int64, count=len(self.wire))
            size[idx] /= np.fromiter(self.wire.values(), dtype=float, count=len(self.wire))
        return size

    @staticmethod
    def per_task(values: dict[int, float], n: int):
        """A task -> seconds table (`comm_s`, `hidden_s`) as a numpy array over the first n tasks, 0 where absent."""
        import numpy as np

        out = np.zeros(n)
        if values:
            keys = np.fromiter(values.keys(), dtype=np.int64, count=len(values))
            out[keys] = np.fromiter(values.values(), dtype=float, count=len(values))
        return out

    def ranks_of(self, t: int) -> tuple[int, ...]:
        """The ranks a compute task occupies."""
        return self.members.get(t) or (self.rank[t],)

    def __len__(self) -> int:
        return len(self.kind)

    def dependency_counts(self) -> tuple[list[int], list[list[int]]]:
        """(waiting, dependents): how many tasks each task waits for, and the tasks waiting for each (in task
        order). An engine's event loop counts `waiting` down as tasks complete and starts a task at zero. Plain
        lists: the per-completion bookkeeping is scalar work, where lists beat numpy."""
        waiting = [len(d) for d in self.deps]
        dependents: list[list[int]] = [[] for _ in range(len(self.kind))]
        for t, deps in enumerate(self.deps):
            for d in deps:
                dependents[d].append(t)
        return waiting, dependents

    def add(
        self,
        kind: int,
        rank: int,
        dst: int,
        name: str,
        deps: list[int],
        *,
        duration_s: float = 0.0,
        size_bytes: float = 0.0,
        route: tuple[int, ...] = (),
        latency_s: float = 0.0,
        step: int = -1,
        collective: int = -1,
        dim: str = "",
        wire: float = 1.0,
    ) -> int:
        t = self._append(kind, rank, dst, name, deps, duration_s, size_bytes, route, latency_s, step, collective, dim)
        if wire != 1.0:
            self.wire[t] = wire
        return t

    def add_transfer(
        self,
        src: int,
        dst: int,
        name: str,
        deps: list[int],
        size_bytes: float,
        route: tuple[int, ...],
        latency_s: float,
        dim: str,
    ) -> int:
        """`add(TRANSFER, ...)` of a point-to-point send, without keyword handling: the lowering adds millions."""
        return self._append(TRANSFER, src, dst, name, deps, 0.0, size_bytes, route, latency_s, -1, -1, dim)

    def _append(
        self,
        kind: int,
        rank: int,
        dst: int,
        name: str,
        deps: list[int],
        duration_s: float,
        size_bytes: float,
        route: tuple[int, ...],
        latency_s: float,
        step: int,
        collective: int,
        dim: str,
    ) -> int:
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
        self.dim.append(dim)
        return len(self.kind) - 1


class Readiness:
    """Which tasks may start, as an event loop asks: every task's count of dependencies not yet finished, counted
    down as tasks finish (the bookkeeping of executor.run_reference and packet.run_packet; engines/fastloop.py keeps
    the same counts in arrays)."""

    __slots__ = ("dependents", "waiting", "drain_dependents")

    def __init__(self, graph: TaskGraph, drains: bool = False) -> None:
        self.waiting, self.dependents = graph.dependency_counts()
        self.drain_dependents: dict[int, list[int]] = {}
        if drains:
            for d, t in graph.drain_pairs():
                self.dependents[t].remove(d)
                self.drain_dependents.setdefault(t, []).append(d)

    def drained(self, t: int) -> list[int]:
        """Transfer t's bytes have all left: the tasks that were waiting only for that."""
        waiting = self.waiting
        ready = []
        for d in self.drain_dependents.get(t, ()):
            waiting[d] -= 1
            if waiting[d] == 0:
                ready.append(d)
        return ready

    def initial(self) -> list[int]:
        """The tasks that wait for nothing, in task order."""
        return [t for t, w in enumerate(self.waiting) if w == 0]

    def finished(self, t: int) -> list[int]:
        """Task t has finished: the tasks that were waiting only for it, in the order they depend on it."""
        waiting = self.waiting
        ready = []
        for d in self.dependents[t]:
            waiting[d] -= 1
            if waiting[d] == 0:
                ready.append(d)
        return ready
