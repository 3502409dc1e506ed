"""Flowlet switching in the flow engine: a fluid model of what a flowlet / DLB switch does with a connection's bursts.

A switch running flowlets (`fabric.load_balancing: flowlet`, or Cisco's DLB in mode flowlet, `fabric.qos.dlb`)
keeps, per connection (a QP: its 5-tuple), the uplink it chose and when its last packet passed. A packet that comes
after an idle time longer than the gap (`fabric.flowlet_gap_us`, DLB's `flowlet_aging_us`) starts a new flowlet,
which goes out on the least-loaded equal-cost uplink at that moment; a packet within the gap follows its flowlet.

The flow engine's transfers are fluid: a transfer drains continuously from its first byte to its last, so it has no
gap inside it and stays on one path (as a line-rate RDMA message does on a switch whose gap exceeds the jitter
between its packets). Gaps are between transfers: a connection (the transfer's source and destination rank and its
lowered ECMP route, which names its QP as the packet engine's `Router.queue_pairs` does) that starts a transfer
while another of its transfers is draining, or within `gap_s` of the last byte of its previous one, keeps its path;
one idle for longer than `gap_s` starts a new flowlet, whose path is chosen then, switch by switch along the route:
at each hop with a choice, the equal-cost link with the fewest flows draining on it per unit of its rate (the
fluid counterpart of the switch's load estimate), ties to the lowest link index (the packet engine's
`min(group, key=(load, link))`). Transfers starting at the same instant choose one after the other, each counting
those before it.

`choose_path` is plain Python on arrays: the reference loop (engines/executor.py) calls it as it is, the compiled
loop (engines/fastloop.py) compiles the same function.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..fabric.graph import NIC, TIER_SPINE, TIER_SUPERSPINE, Fabric
from ..fabric.routing import Router
from .taskgraph import TRANSFER, TaskGraph

BALANCED_TIERS = (TIER_SPINE, TIER_SUPERSPINE)  # as engines.tasks.spread_over_paths: the tiers with equal-cost paths


def flowlet_gap_s(fabric_spec) -> float | None:
    """The flowlet gap the switches run, in seconds, or None when they do not switch flowlets: DLB in mode
    flowlet (its `flowlet_aging_us`, else `fabric.flowlet_gap_us`), or, with DLB off, `load_balancing: flowlet`
    (`fabric.flowlet_gap_us`). Spray, adaptive and DLB per-packet balance every packet (the flow engine's even
    spread over the paths); ECMP hashes."""
    d = fabric_spec.qos.dlb
    if d.mode == "flowlet":
        return (d.flowlet_aging_us if d.flowlet_aging_us is not None else fabric_spec.flowlet_gap_us) * 1e-6
    if d.mode == "off" and fabric_spec.load_balancing == "flowlet":
        return fabric_spec.flowlet_gap_us * 1e-6
    return None


@dataclass
class Flowlets:
    """What the event loops need to switch flowlets: per transfer its connection (-1: it keeps its route), per
    connection its candidate paths (`n_paths` x the route's length links from `cand_ptr[c]` in `cand_flat`)."""

    gap_s: float
    conn: np.ndarray  # int64, one per task
    cand_ptr: np.ndarray  # int64, one per connection
    n_paths: np.ndarray  # int64, one per connection
    cand_flat: np.ndarray  # int64
    length: np.ndarray  # int64, one per connection: its paths' length in links
    keys: list[tuple[int, int, tuple[int, ...]]] = field(default_factory=list)  # each connection: (src, dst, route)

    @property
    def n_conn(self) -> int:
        return len(self.n_paths)


def flowlet_paths(graph: TaskGraph, fabric: Fabric, router: Router, gap_s: float) -> Flowlets:
    """The connections of `graph`'s transfers that cross a spine tier, each with its equal-cost paths
    (`Router.paths`, as long as the lowered route, leaving the NIC by the same port: a dual-port NIC's LAG hash is the
    NIC's, not a switch's; a connection with one path keeps it)."""
    if not gap_s >= 0:
        raise ValueError(f"flowlet gap must be a time >= 0 s (got {gap_s!r})")
    n = len(graph)
    conn = np.full(n, -1, dtype=np.int64)
    multi = np.array([link.tier in BALANCED_TIERS for link in fabric.links], dtype=bool)
    ids: dict[tuple[int, int, tuple[int, ...]], int] = {}
    paths_of: dict[tuple[int, int], list[tuple[int, ...]]] = {}
    cand_ptr: list[int] = []
    n_paths: list[int] = []
    lengths: list[int] = []
    flat: list[int] = []
    keys: list[tuple[int, int, tuple[int, ...]]] = []
    if multi.any():
        for t in range(n):
            route = graph.route[t]
            if graph.kind[t] != TRANSFER or not route or not multi[list(route)].any():
                continue
            key = (graph.rank[t], graph.dst[t], tuple(route))
            c = ids.get(key)
            if c is None:
                pair = key[:2]
                paths = paths_of.get(pair)
                if paths is None:
                    paths = paths_of[pair] = [r.links for r, _ in router.paths(*pair)]
                port = next((i for i, li in enumerate(route) if fabric.nodes[fabric.links[li].src].kind == NIC), None)
                same = [p for p in paths if len(p) == len(route) and (port is None or p[port] == route[port])]
                c = ids[key] = -1 if len(same) < 2 else len(keys)
                if c >= 0:
                    keys.append(key)
                    cand_ptr.append(len(flat))
                    n_paths.append(len(same))
                    lengths.append(len(route))
                    for p in same:
                        flat.extend(p)
            conn[t] = c
    return Flowlets(
        gap_s,
        conn,
        np.array(cand_ptr, dtype=np.int64),
        np.array(n_paths, dtype=np.int64),
        np.array(flat, dtype=np.int64),
        np.array(lengths, dtype=np.int64),
        keys,
    )


def choose_path(cand_flat, start, n_paths, length, linkcnt, capacity, alive):
    """A new flowlet's path among `n_paths` candidates of `length` links at `cand_flat[start:]`: hop by hop, where
    the candidates still open differ, the link with the fewest flows per unit of rate (`linkcnt / capacity`; a
    link without capacity is never preferred), ties to the lowest index. `alive`: scratch booleans (>= n_paths).
    Returns the candidate's index."""
    for p in range(n_paths):
        alive[p] = True
    left = n_paths
    for i in range(length):
        if left <= 1:
            break
        best_li = -1
        best_load = np.inf
        for p in range(n_paths):
            if alive[p]:
                li = cand_flat[start + p * length + i]
                c = capacity[li]
                load = linkcnt[li] / c if c > 0 else np.inf
                if best_li < 0 or load < best_load or (load == best_load and li < best_li):
                    best_li = li
                    best_load = load
        for p in range(n_paths):
            if alive[p] and cand_flat[start + p * length + i] != best_li:
                alive[p] = False
                left -= 1
    for p in range(n_paths):
        if alive[p]:
            return p
    return 0


class FlowletState:
    """The reference loop's flowlet state: per connection its path, its transfers draining (or stopped by a fault),
    when its last byte left; which transfers have joined (a transfer a fault stopped keeps its path when it
    resumes)."""

    def __init__(self, fl: Flowlets, n_links: int, n_tasks: int):
        self.fl = fl
        self.n_links = n_links
        self.active = np.zeros(fl.n_conn, dtype=np.int64)
        self.last_s = np.full(fl.n_conn, -np.inf)
        self.path = np.full(fl.n_conn, -1, dtype=np.int64)
        self.joined = np.zeros(n_tasks, dtype=bool)
        self.alive = np.zeros(int(fl.n_paths.max()) if fl.n_conn else 0, dtype=np.bool_)
        self.flowlets = 0
        self.switches = 0

    def join(
        self,
        new,
        now: float,
        route_ptr: np.ndarray,
        route_flat: np.ndarray,
        capacity: np.ndarray,
        active_links: np.ndarray,
        routes: tuple[list, ...] = (),
    ) -> None:
        """Transfers starting at `now`, in order: each balanced one takes its flowlet's path (a new flowlet's
        chosen now, counting the flows on `active_links` and those that joined before it) into `route_flat`, and
        into each list of `routes` (the graph's and the fault loop's current routes)."""
        fl = self.fl
        linkcnt = np.bincount(active_links, minlength=self.n_links).astype(np.int64)
        for t in new.tolist():
            a, b = int(route_ptr[t]), int(route_ptr[t + 1])
            c = int(fl.conn[t])
            length = b - a
            if c >= 0 and not self.joined[t] and length == fl.length[c]:
                self.joined[t] = True
                p = int(self.path[c])
                if p < 0 or (self.active[c] == 0 and now - self.last_s[c] > fl.gap_s):
                    q = choose_path(fl.cand_flat, fl.cand_ptr[c], fl.n_paths[c], length, linkcnt, capacity, self.alive)
                    self.flowlets += 1
                    if p >= 0 and q != p:
                        self.switches += 1
                    self.path[c] = p = q
                s = int(fl.cand_ptr[c]) + p * length
                route_flat[a:b] = fl.cand_flat[s : s + length]
                if routes:
                    path = tuple(route_flat[a:b].tolist())
                    for r in routes:
                        r[t] = path
                self.active[c] += 1
            np.add.at(linkcnt, route_flat[a:b], 1)

    def leave(self, t: int, now: float) -> None:
        """Transfer `t` drained its last byte at `now`."""
        c = int(self.fl.conn[t])
        if c >= 0 and self.joined[t]:
            self.active[c] -= 1
            if self.active[c] == 0:
                self.last_s[c] = now

    def stats(self) -> dict:
        return flowlet_stats(self.fl, self.flowlets, self.switches)


def flowlet_stats(fl: Flowlets, flowlets: int, switches: int) -> dict:
    """What the run's flowlet switching did (Timeline.flowlets)."""
    return {"gap_s": fl.gap_s, "connections": fl.n_conn, "flowlets": int(flowlets), "switches": int(switches)}


def write_routes(graph: TaskGraph, fl: Flowlets, route_ptr: np.ndarray, route_flat: np.ndarray, start) -> None:
    """Each balanced transfer that ran keeps, as its route in `graph`, the path its flowlet took (it had its ECMP
    route): the links and flows the results and the report read are those the loop loaded."""
    ran = np.flatnonzero((fl.conn >= 0) & ~np.isnan(np.asarray(start)[: len(fl.conn)]))
    for t in ran.tolist():
        graph.route[t] = tuple(route_flat[route_ptr[t] : route_ptr[t + 1]].tolist())
