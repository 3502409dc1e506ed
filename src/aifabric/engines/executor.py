"""The event loop shared by the flow and analytic engines: runs a task graph over a fabric.

Compute tasks occupy their GPU for their duration. A transfer is a fluid flow over its route: its
bytes drain at the rate the sharing policy gives it (max-min fair for the flow engine, the
bottleneck link's full capacity for the analytic engine), recomputed whenever flows start or end;
it completes one route latency after its last byte left (the alpha term). A task starts as soon
as every task it depends on has completed.

The active flows live in numpy arrays; the rates are recomputed once per distinct event time, from
(flow, link) incidence pairs gathered out of the routes stored as one flat array (CSR).

`run_reference` below is the definition. With numba installed, `run` hands graphs of COMPILED_MIN_TASKS
tasks or more to engines/fastloop.py: the same loop compiled, with the same timeline bit for bit
(AIFABRIC_PURE_PYTHON=1 keeps everything here).

Faults during the run (engines/fabric_events.py, from the scenario's `faults:`) are events of the same loop: a
link's rate changes, the flows on a link that went down stop, routing converges and reroutes transfers, a stopped
flow resumes at its transport's first retransmission that finds a path, or the job fails. A run with such a
timeline goes through `run_reference` (the compiled loop has no fault events).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..compiled import pure_python
from ..fabric.graph import Fabric
from .csr import csr
from .fabric_events import JobFailed
from .linkload import LinkLoad
from .maxmin import bottleneck_pairs, max_min_pairs
from .progress import reporter, takes_bound
from .taskgraph import COMPUTE, Readiness, TaskGraph

if TYPE_CHECKING:
    from .fabric_events import FabricTimeline
    from .flowlet import Flowlets

SHARING = {"flow": max_min_pairs, "analytic": bottleneck_pairs}
FINISH_RTOL = 1e-9
# below this many tasks the reference loop is quicker than loading the compiled one (~1 s: numba and its cache)
COMPILED_MIN_TASKS = 10_000
# from this many tasks a progress callback that takes `iteration_bound_s` is first told the iteration's lower bound
# (engines/bound.py: the longest path without contention, a fraction of the run's own time)
BOUND_MIN_TASKS = 20_000


@dataclass
class Timeline:
    """When every task ran, and what the links carried."""

    start_s: np.ndarray
    end_s: np.ndarray
    link_bytes: np.ndarray
    link_peak_bytes_per_s: np.ndarray
    makespan_s: float
    rate_recomputations: int
    link_load: LinkLoad
    # with faults during the run (engines/fabric_events.py), else None: the bytes each task delivered, and what
    # the faults did (`FaultLog.to_dict`)
    delivered_bytes: np.ndarray | None = None
    fault_log: FaultLog | None = None
    # with flowlet switching (engines/flowlet.py), else None: its gap, connections, flowlets started and path changes
    flowlets: dict | None = None


@dataclass
class FaultLog:
    """What the fabric events did to the run's transfers."""

    events: list[dict] = field(default_factory=list)  # each event as it happened: time, what, transfers touched
    stall_intervals: list[tuple[float, float, int]] = field(default_factory=list)  # (from, to, task) stopped
    bytes_rerouted: float = 0.0  # bytes carried on a route other than the one the transfer was lowered with
    transfers_rerouted: int = 0  # transfers that carried bytes on such a route
    transfers_stopped: int = 0  # stops (a transfer stopped twice counts twice)
    failed: dict | None = None  # the transfer whose QP ran out of retransmissions: the job ends
    moves: list[tuple[float, int]] = field(default_factory=list)  # (when, transfer) routing moved it
    routes: dict[int, tuple[int, ...]] = field(default_factory=dict)  # a moved transfer -> its last route

    def to_dict(self) -> dict:
        wall, reach = 0.0, -np.inf  # the time during which at least one transfer stood still
        for a, b in sorted((a, b) for a, b, _ in self.stall_intervals):
            if b > reach:
                wall += b - max(a, reach)
                reach = b
        longest = max((b - a for a, b, _ in self.stall_intervals), default=0.0)
        return {
            "events": self.events,
            "bytes_rerouted": float(self.bytes_rerouted),
            "transfers_rerouted": self.transfers_rerouted,
            "transfers_stopped": self.transfers_stopped,
            "stalled_s": float(wall),
            "longest_stall_s": float(longest),
            "stalled_transfer_s": float(sum(b - a for a, b, _ in self.stall_intervals)),
            "failed": self.failed,
        }


class Interrupted(Exception):
    """Raised by `run` on Ctrl-C (KeyboardInterrupt); carries the timeline so far."""

    def __init__(self, timeline: Timeline):
        super().__init__("simulation interrupted")
        self.timeline = timeline


def _gather(ptr: np.ndarray, flat: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concatenated values of `rows`, for each value the position of its row in `rows`, and its index in `flat`."""
    lengths = ptr[rows + 1] - ptr[rows]
    total = int(lengths.sum())
    row_of = np.repeat(np.arange(len(rows)), lengths)
    offsets = np.repeat(ptr[rows] - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    at = offsets + np.arange(total)
    return flat[at], row_of, at


def run(
    graph: TaskGraph,
    fabric: Fabric,
    engine: str = "flow",
    progress: Callable[[int, int], None] | None = None,
    faults: FabricTimeline | None = None,
    flowlets: Flowlets | None = None,
) -> Timeline:
    """Run the task graph. Graphs of COMPILED_MIN_TASKS tasks or more run on the compiled loop
    (engines/fastloop.py) when numba is installed, with identical results; AIFABRIC_PURE_PYTHON=1 keeps
    them on `run_reference`, the definition. Faults during the run (`faults`) always run on `run_reference`.
    A progress callback that takes `iteration_bound_s` hears first, on graphs of BOUND_MIN_TASKS or more, the
    iteration's lower bound (engines/bound.py), what its simulated time `t_s` goes towards.
    `flowlets` (engines/flowlet.py): flowlet switching, the path of each balanced transfer chosen when its
    connection starts a new flowlet; `graph.route` then holds the path each one took."""
    if faults is not None and faults.events:
        return run_reference(graph, fabric, engine, progress, faults, flowlets)
    if progress is not None and len(graph) >= BOUND_MIN_TASKS and takes_bound(progress):
        from .bound import longest_path_s

        # what the progress line counts the simulated time against: the iteration without contention
        tell: Any = progress  # its signature takes the keywords (takes_bound)
        tell(0, len(graph), t_s=0.0, iteration_bound_s=longest_path_s(graph, fabric))
    if uses_compiled_loop(len(graph)):
        from . import fastloop

        return fastloop.run(graph, fabric, engine, progress, flowlets)
    return run_reference(graph, fabric, engine, progress, flowlets=flowlets)


def uses_compiled_loop(n_tasks: int) -> bool:
    """Whether `run` hands a graph of n_tasks to the compiled loop."""
    if n_tasks < COMPILED_MIN_TASKS or pure_python():
        return False
    from . import fastloop

    return fastloop.AVAILABLE and fastloop.recorder_matches(LinkLoad())


def compiles_first(n_tasks: int) -> bool:
    """Whether running n_tasks will first compile the event loop (once per installation, about a minute)."""
    if not uses_compiled_loop(n_tasks):
        return False
    from . import fastloop

    return not fastloop.cached_on_disk()


def run_reference(
    graph: TaskGraph,
    fabric: Fabric,
    engine: str = "flow",
    progress: Callable[[int, int], None] | None = None,
    faults: FabricTimeline | None = None,
    flowlets: Flowlets | None = None,
) -> Timeline:
    """The event loop in Python and numpy: the definition the compiled loop is held to. `faults`: the fabric's
    events during the run (engines/fabric_events.py); JobFailed when a transfer's QP runs out of retransmissions.
    `flowlets`: flowlet switching (engines/flowlet.py): a balanced transfer's links are its flowlet's path, chosen
    as it joins the active flows (with faults: before its path is checked; a transfer they stop and resume keeps
    its path, routing's convergence may move it as any other)."""
    share = SHARING[engine]
    report = reporter(progress)  # progress(done, total), with the simulated time when it takes t_s
    n = len(graph)
    n_links = len(fabric.links)
    capacity = np.array([link.rate_bytes_per_s for link in fabric.links], dtype=float)  # achievable payload rate
    kind = graph.kind
    duration = graph.duration_s
    size = np.asarray(graph.size_bytes, dtype=float)
    latency = graph.latency_s
    route_ptr, route_flat = csr(graph.route, n)
    # share of a transfer's rate on each of its links: 1 on a path; less where a sprayed transfer splits
    weight_flat = np.ones(len(route_flat))
    for t, w in graph.route_weight.items():
        weight_flat[route_ptr[t] : route_ptr[t + 1]] = w
    weighted = bool(graph.route_weight)
    readiness = Readiness(graph, drains=True)

    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    link_bytes = np.zeros(n_links)
    link_peak = np.zeros(n_links)
    link_load = LinkLoad()
    events: list[tuple[float, int]] = []  # (time, task) completions
    act_task = np.zeros(0, dtype=np.int64)  # transfers draining
    act_rem = np.zeros(0)
    act_rate = np.zeros(0)
    started: list[int] = []  # transfers started since the last rate computation
    state: dict[str, Any] = {"now": 0.0, "completed": 0, "recomputations": 0}
    fx = _Faults(graph, capacity, faults) if faults is not None and faults.events else None
    fs = None
    if flowlets is not None:
        from .flowlet import FlowletState

        fs = FlowletState(flowlets, n_links, n)

    def begin(t: int, now: float) -> None:
        start[t] = now
        if kind[t] == COMPUTE:
            heapq.heappush(events, (now + (duration[t] if fx is None else fx.compute_began(t, now)), t))
        elif size[t] <= 0:
            heapq.heappush(events, (now + latency[t], t))
        else:
            started.append(t)

    for t in readiness.initial():
        begin(t, 0.0)

    now = 0.0
    dirty = bool(started)
    try:
        while events or len(act_task) or started or (fx is not None and fx.stalled):
            if fx is not None and fx.next_s() <= now:
                # the fabric changes (before the transfers starting now): link rates, stopped flows, routes, the
                # retransmissions due; the flows in flight carry their remaining bytes to their new routes
                act_task, act_rem, changed = fx.apply(now, act_task, act_rem, link_bytes, started, end, events)
                route_ptr, route_flat, weight_flat, weighted = fx.csr
                dirty = dirty or changed
            if started:
                new = np.array(started, dtype=np.int64)
                started.clear()
                if fs is not None:  # each balanced transfer's flowlet path, a new flowlet's chosen now
                    fs.join(
                        new,
                        now,
                        route_ptr,
                        route_flat,
                        capacity,
                        _gather(route_ptr, route_flat, act_task)[0],
                        () if fx is None else (graph.route, fx.routes),
                    )
                if fx is None:
                    rem_new = size[new]
                else:  # a resumed transfer brings what it has left; one whose path is down stops at once
                    rem_new, live = fx.admit(new, size, now)
                    new, rem_new = new[live], rem_new[live]
                    route_ptr, route_flat, weight_flat, weighted = fx.csr
                links, row, at = _gather(route_ptr, route_flat, new)
                np.add.at(link_bytes, links, rem_new[row] * weight_flat[at])
                act_task = np.concatenate((act_task, new))
                act_rem = np.concatenate((act_rem, rem_new))
                dirty = True
            if dirty:
                links, row, at = _gather(route_ptr, route_flat, act_task)
                used, inverse = np.unique(links, return_inverse=True)  # the links in use, compacted
                w_at = weight_flat[at] if weighted else None
                act_rate = share(row, inverse, len(act_task), capacity[used], w_at)
                load = np.bincount(
                    inverse, weights=act_rate[row] if w_at is None else act_rate[row] * w_at, minlength=len(used)
                )
                link_peak[used] = np.maximum(link_peak[used], load)
                link_load.set_sparse(now, used, load)
                state["recomputations"] += 1
                dirty = False
            t_event = events[0][0] if events else np.inf
            if fx is not None:
                t_event = min(t_event, fx.next_s())
            if len(act_task):
                drain = act_rem / act_rate
                first = drain.min()
                t_drain = now + first
            else:
                t_drain = np.inf
            t_next = min(t_drain, t_event)
            if len(act_task):
                dt = t_next - now
                if fx is not None:
                    fx.delivered[act_task] += np.minimum(act_rate * dt, act_rem)
                if t_drain <= t_event:
                    finished = drain <= first * (1 + FINISH_RTOL)
                    for t in act_task[finished].tolist():
                        if fs is not None:
                            fs.leave(t, t_next)
                        for d in readiness.drained(t):
                            begin(d, t_next)
                        if fx is None:
                            heapq.heappush(events, (t_next + latency[t], t))
                        else:  # a transfer routing moved pays its new route's latency
                            heapq.heappush(events, (t_next + latency[t] + fx.extra_latency_s(t), t))
                            fx.segment_end(t, 0.0)
                    keep = ~finished
                    act_task, act_rem, act_rate = act_task[keep], act_rem[keep] - act_rate[keep] * dt, act_rate[keep]
                    dirty = True
                else:
                    act_rem = act_rem - act_rate * dt
                # rounding must not leave a negative remainder: its drain time would lie in the past and
                # no flow would ever count as finished (an endless loop seen at 1,024 GPUs)
                np.maximum(act_rem, 0.0, out=act_rem)
            now = t_next
            state["now"] = now
            while events and events[0][0] <= now:
                t_due, t = heapq.heappop(events)
                if fx is not None and fx.stale(t, t_due):  # a compute task a straggler event rescheduled
                    continue
                end[t] = now
                state["completed"] += 1
                for d in readiness.finished(t):
                    begin(d, now)
            if report is not None:
                report(state["completed"], n, now)
    except KeyboardInterrupt:
        link_load.close(now)
        out = _timeline(start, end, link_bytes, link_peak, state["recomputations"], link_load, fx)
        _flowlets_done(graph, fs, route_ptr, route_flat, start, out, fx)
        raise Interrupted(out) from None
    except JobFailed as exc:
        link_load.close(now)
        exc.timeline = _timeline(start, end, link_bytes, link_peak, state["recomputations"], link_load, fx)
        raise
    link_load.close(now)
    unfinished = int(np.isnan(end).sum())
    if unfinished:
        raise RuntimeError(f"{unfinished} tasks never ran: the task graph has a cycle")
    out = _timeline(start, end, link_bytes, link_peak, state["recomputations"], link_load, fx)
    _flowlets_done(graph, fs, route_ptr, route_flat, start, out, fx)
    return out


def _flowlets_done(graph: TaskGraph, fs, route_ptr, route_flat, start, out: Timeline, fx) -> None:
    """The paths the flowlets took into `graph.route` (with faults, each transfer's was written as it joined; the
    loop's last routes include routing's detours, which the fault log keeps), and what the flowlets did."""
    if fs is not None:
        from .flowlet import write_routes

        if fx is None:
            write_routes(graph, fs.fl, route_ptr, route_flat, start)
        out.flowlets = fs.stats()


class _Faults:
    """The fabric's events during a run, as `run_reference` applies them (engines/fabric_events.py says what each
    does). Keeps each transfer's current route (the lowered one until routing moves it), the stopped transfers,
    and the retransmissions and QP failures due."""

    def __init__(self, graph: TaskGraph, capacity: np.ndarray, timeline: FabricTimeline):
        self.graph, self.capacity, self.tl = graph, capacity, timeline
        self.base = capacity.copy()
        self.events = sorted(timeline.events, key=lambda e: e.t_s)
        self.i = 0
        self.routes: list[tuple[int, ...]] = list(graph.route)
        self.weights: dict[int, tuple[float, ...]] = dict(graph.route_weight)
        self.delivered = np.zeros(len(graph))
        self.stalled: dict[int, tuple[float, float]] = {}  # task -> (bytes left, stopped at)
        self.gen: dict[int, int] = {}  # task -> how many times it stopped (a due action of an older stop is void)
        self.retry_due: set[int] = set()  # stopped tasks with a retransmission due that may find a path
        self.due: list[tuple[float, int, int, int, int]] = []  # (time, order, action, task, gen); 0 retry, 1 fail
        self.seq = 0
        self.resume_rem: dict[int, float] = {}
        self.detour: dict[int, float] = {}  # task on a route other than its own -> its bytes left then
        self.detoured: set[int] = set()
        self.away: set[int] = set()  # tasks routing moved off their own route
        self.slow: dict[int, float] = {}  # rank -> how many times slower it computes now
        self.computing: dict[int, tuple[float, float]] = {}  # compute task running -> (its end, its pace)
        self.log = FaultLog()
        self._build_csr()

    def _build_csr(self) -> None:
        n = len(self.graph)
        ptr, flat = csr(self.routes, n)
        w = np.ones(len(flat))
        for t, ws in self.weights.items():
            w[ptr[t] : ptr[t + 1]] = ws
        self.csr = (ptr, flat, w, bool(self.weights))

    def next_s(self) -> float:
        a = self.events[self.i].t_s if self.i < len(self.events) else np.inf
        b = self.due[0][0] if self.due else np.inf
        return min(a, b)

    def _live(self, t: int) -> bool:
        return bool(all(self.capacity[li] > 0 for li in self.routes[t]))

    # a transfer's bytes on a route other than the one it was lowered with are rerouted bytes
    def segment_begin(self, t: int, rem: float) -> None:
        if self.routes[t] is not self.graph.route[t]:
            self.detour[t] = rem
            self.detoured.add(t)

    def segment_end(self, t: int, rem: float) -> None:
        was = self.detour.pop(t, None)
        if was is not None:
            self.log.bytes_rerouted += max(0.0, was - rem)

    def _path_latency_s(self, links: tuple[int, ...]) -> float:
        """A route's cables and switches (fabric.routing's Route.latency_s)."""
        f = self.tl.rerouter.fabric
        return sum(f.links[li].latency_s for li in links) + f.switch_latency_s * sum(
            1 for li in links if f.is_switch(f.links[li].dst)
        )

    def extra_latency_s(self, t: int) -> float:
        """What a transfer finishing on a route other than its own adds to the latency it was lowered with: the new
        route's latency less its own, once per step it stands for (a merged ring edge: every step of the ring, those
        after the move: their share of its bytes). Sprayed transfers keep theirs (their route is every path)."""
        g = self.graph
        cur, own = self.routes[t], g.route[t]
        if cur is own or t in self.weights or t in g.route_weight:
            return 0.0
        delta = self._path_latency_s(cur) - self._path_latency_s(own)
        ci = g.collective[t]
        if g.step[t] == -1 and ci >= 0 and "/ring [" in g.name[t]:  # engines/lower_collective.py's merged ring edge
            size = g.size_bytes[t]
            share = self.detour.get(t, size) / size if size > 0 else 1.0
            return delta * g.collectives[ci].n_steps * share
        return delta

    def _stop(self, t: int, rem: float, now: float) -> None:
        self.stalled[t] = (rem, now)
        g = self.gen[t] = self.gen.get(t, 0) + 1
        self.retry_due.discard(t)
        self.log.transfers_stopped += 1
        rto, retries = self.tl.retransmit_timeout_s, self.tl.retry_count
        self._push(now + (retries + 1) * rto, 1, t, g)

    def _push(self, t_s: float, action: int, t: int, g: int) -> None:
        self.seq += 1
        heapq.heappush(self.due, (t_s, self.seq, action, t, g))

    def _schedule_retries(self, now: float) -> None:
        """A stopped transfer whose path is up again resumes at its QP's next retransmission, if it has one left."""
        rto, retries = self.tl.retransmit_timeout_s, self.tl.retry_count
        for t, (_, t0) in self.stalled.items():
            if t in self.retry_due or not self._live(t):
                continue
            k = max(1, int(np.ceil((now - t0) / rto - 1e-9)))
            if k <= retries:
                self.retry_due.add(t)
                self._push(t0 + k * rto, 0, t, self.gen[t])

    def admit(self, new: np.ndarray, size: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
        """Bytes left of each starting transfer, and which of them find their path up (the others stop)."""
        rem = np.array([self.resume_rem.pop(int(t), size[t]) for t in new.tolist()], dtype=float)
        live = np.ones(len(new), dtype=bool)
        for k, t in enumerate(new.tolist()):
            if self._live(t):
                self.segment_begin(t, rem[k])
            else:
                live[k] = False
                self._stop(t, float(rem[k]), now)
        return rem, live

    # stragglers during the run: a compute task's compute part (not the collectives folded into it) goes at the
    # pace of its slowest rank; a change of pace reschedules the running tasks' completions
    def _pace(self, t: int) -> float:
        return max((self.slow.get(r, 1.0) for r in self.graph.ranks_of(t)), default=1.0)

    def _length(self, t: int, pace: float) -> float:
        comm = self.graph.comm_s.get(t, 0.0)
        return comm + (self.graph.duration_s[t] - comm) * pace

    def compute_began(self, t: int, now: float) -> float:
        pace = self._pace(t)
        length = self._length(t, pace)
        self.computing[t] = (now + length, pace)
        return length

    def stale(self, t: int, t_due: float) -> bool:
        due = self.computing.get(t)
        if due is None:
            return False
        if due[0] != t_due:
            return True
        del self.computing[t]
        return False

    def _repace(self, now: float, ranks, events: list) -> int:
        changed = 0
        for t, (t_end, pace) in list(self.computing.items()):
            if not any(r in ranks for r in self.graph.ranks_of(t)):
                continue
            new = self._pace(t)
            if new == pace:
                continue
            full_old, full_new = self._length(t, pace), self._length(t, new)
            t_new = now + (t_end - now) * (full_new / full_old if full_old > 0 else 1.0)
            self.computing[t] = (t_new, new)
            heapq.heappush(events, (t_new, t))
            changed += 1
        return changed

    def apply(
        self,
        now: float,
        act_task: np.ndarray,
        act_rem: np.ndarray,
        link_bytes: np.ndarray,
        started: list[int],
        end: np.ndarray,
        events: list,
    ) -> tuple[np.ndarray, np.ndarray, bool]:
        changed = False
        while self.next_s() <= now:
            if self.i < len(self.events) and self.events[self.i].t_s <= now:
                ev = self.events[self.i]
                self.i += 1
                entry: dict[str, Any] = {"t_s": now, "what": ev.label}
                if ev.rate_fraction:
                    for li, frac in ev.rate_fraction.items():
                        self.capacity[li] = self.base[li] * frac
                    changed = True
                    dead = [k for k, t in enumerate(act_task.tolist()) if not self._live(t)]
                    if dead:
                        ptr, flat, w, _ = self.csr
                        for k in dead:
                            t = int(act_task[k])
                            rem = float(act_rem[k])
                            link_bytes[flat[ptr[t] : ptr[t + 1]]] -= rem * w[ptr[t] : ptr[t + 1]]  # never carried
                            self.segment_end(t, rem)
                            self._stop(t, rem, now)
                        keep = np.ones(len(act_task), dtype=bool)
                        keep[dead] = False
                        act_task, act_rem = act_task[keep], act_rem[keep]
                    entry["transfers_stopped"] = len(dead)
                if ev.gpu_slowdown:
                    for r, f in ev.gpu_slowdown.items():
                        self.slow[r] = f
                    entry["compute_tasks_repaced"] = self._repace(now, ev.gpu_slowdown, events)
                if ev.routing_down is not None:
                    moved, act_task, act_rem = self._reroute(now, ev.routing_down, act_task, act_rem, link_bytes, end)
                    entry["transfers_rerouted"] = moved
                    changed = True
                self.log.events.append(entry)
                self._schedule_retries(now)
            else:
                _, _, action, t, g = heapq.heappop(self.due)
                if self.gen.get(t) != g or t not in self.stalled:
                    continue
                rem, t0 = self.stalled[t]
                if action == 1:
                    self.log.stall_intervals.append((t0, now, t))
                    self.log.failed = {
                        "t_s": now,
                        "task": t,
                        "src": int(self.graph.rank[t]),
                        "dst": int(self.graph.dst[t]),
                        "stalled_at_s": t0,
                    }
                    raise JobFailed(now, t, int(self.graph.rank[t]), int(self.graph.dst[t]), t0, None)
                self.retry_due.discard(t)
                if self._live(t):  # the retransmission gets through: the rest of the transfer follows
                    del self.stalled[t]
                    self.log.stall_intervals.append((t0, now, t))
                    self.resume_rem[t] = rem
                    started.append(t)
                    changed = True
                else:
                    self._schedule_retries(now)
        return act_task, act_rem, changed

    def _reroute(
        self,
        now: float,
        down: frozenset[int],
        act_task: np.ndarray,
        act_rem: np.ndarray,
        link_bytes: np.ndarray,
        end: np.ndarray,
    ) -> tuple[int, np.ndarray, np.ndarray]:
        """Routing has converged around `down`: a transfer not finished whose route crosses it takes the converged
        route; one that was moved and whose own route is whole again goes back to it; the rest keep theirs."""
        g = self.graph
        pos = {int(t): k for k, t in enumerate(act_task.tolist())}
        ptr, flat, w, _ = self.csr
        moved = 0
        hit = np.zeros(len(self.capacity), dtype=bool)
        hit[list(down)] = True
        crosses = np.zeros(len(g), dtype=bool)  # each task's current route crosses `down`
        crosses[np.repeat(np.arange(len(g)), np.diff(ptr))[hit[flat]]] = True
        candidates = crosses.copy()
        candidates[list(self.away)] = True
        candidates &= np.isnan(end)
        for t in np.flatnonzero(candidates).tolist():
            own = g.route[t]
            cur = self.routes[t]
            if crosses[t]:
                found = self.tl.rerouter.route(t, own, down)
                if found is None:
                    continue  # no path: it stops (or stays stopped) until its QP gives up
                links, weights = found
                if links == tuple(own) and weights == g.route_weight.get(t):
                    links = own  # its own route after all
            elif cur is not own and not any(li in down for li in own):
                links, weights = own, g.route_weight.get(t)
            else:
                continue
            if links == cur and weights == self.weights.get(t):
                continue
            k = pos.get(t)
            if k is not None:  # in flight: what is left moves
                rem = float(act_rem[k])
                link_bytes[flat[ptr[t] : ptr[t + 1]]] -= rem * w[ptr[t] : ptr[t + 1]]
                self.segment_end(t, rem)
            self.routes[t] = links
            if links is own:
                self.away.discard(t)
            else:
                self.away.add(t)
            self.log.moves.append((now, t))
            self.log.routes[t] = links
            if weights is None:
                self.weights.pop(t, None)
            else:
                self.weights[t] = weights
            if k is not None:
                for li, wl in zip(links, weights or (1.0,) * len(links), strict=True):
                    link_bytes[li] += rem * wl
                self.segment_begin(t, rem)
            moved += 1
        self._build_csr()
        live = np.array([self._live(int(t)) for t in act_task.tolist()], dtype=bool)
        ptr, flat, w, _ = self.csr
        if not live.all():  # moved onto a route that is down (routing ahead of the links): stops there
            for k in np.flatnonzero(~live).tolist():
                t = int(act_task[k])
                rem = float(act_rem[k])
                link_bytes[flat[ptr[t] : ptr[t + 1]]] -= rem * w[ptr[t] : ptr[t + 1]]
                self.segment_end(t, rem)
                self._stop(t, rem, now)
            act_task, act_rem = act_task[live], act_rem[live]
        return moved, act_task, act_rem


def _timeline(start, end, link_bytes, link_peak, recomputations, link_load, fx: _Faults | None = None) -> Timeline:
    finished = end[~np.isnan(end)]
    out = Timeline(
        start, end, link_bytes, link_peak, float(finished.max()) if len(finished) else 0.0, recomputations, link_load
    )
    if fx is not None:
        fx.log.transfers_rerouted = len(fx.detoured)
        out.delivered_bytes, out.fault_log = fx.delivered, fx.log
    return out
