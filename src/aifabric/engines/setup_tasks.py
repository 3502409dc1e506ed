"""The job's first iteration: each RDMA connection set up before its first use (Deep Learning for Network Engineers,
Chapter 9: queue pairs, INIT -> RTR -> RTS, the CM's REQ -> REP -> RTU; Chapter 14: NCCL's communicator).

NCCL connects lazily (NCCL_RUNTIME_CONNECT=1, the default since NCCL 2.22): the first collective of a communicator
that needs a peer connects its channels to that peer before it moves data, and later calls reuse them; a
point-to-point send connects at its first send. So a steady-state iteration pays nothing, and the first one pays,
per connection, what collectives/connection_setup.py counts: 2 QP creations, 6 QP state changes, 3 CM messages and
1.5 round trips of the connection's path.

`add_connection_setup` puts that into a task graph: for every connection (communicator, sender, receiver, as
packet/job_connections.py counts them) a zero-byte task on the route of its first transfer (every engine takes a
zero-byte transfer as a delay of its `latency_s`: no link carries anything), named SETUP_NAME ..., that
starts when both its ranks have reached the collective that first uses it (NCCL connects all of a collective's
connections at its launch, before any data moves: a tree's way down with its way up), or with a send's first
transfer, and that every transfer of the connection waits for, and in that collective every transfer of its two
ranks (a rank's kernel starts once its connections are up). A NIC sets up
`SetupCosts.concurrency` connections at a time: a connection first used by a collective takes as long as the busier
of its two NICs needs for all the connections that collective opens there (rounds x one connection on that NIC's
slowest path), so a collective that opens them all at once reproduces `job_connection_setup`'s time. The setup
tasks belong to the collective that opens them (its time includes them, as NCCL's first call does) and count as
that collective's communication on both ranks. Run once, on a freshly lowered graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..collectives.connection_setup import SetupCosts
from ..packet.job_connections import SETUP_NAME, network_transfers
from .taskgraph import TRANSFER, TaskGraph


@dataclass(frozen=True)
class FirstIterationSetup:
    """What `add_connection_setup` added."""

    connections: int  # connections set up (NCCL connections: channels count one each)
    tasks: int  # setup tasks added (one per communicator, sender and receiver)
    longest_s: float  # the longest setup task
    first_task: int  # index of the first setup task (they are the graph's last `tasks` tasks)


def add_connection_setup(
    graph: TaskGraph, fabric, costs: SetupCosts | None = None, cm_on_wire: bool = False
) -> FirstIterationSetup:
    """Add the first iteration's connection setup to `graph` (see the module's note); returns what it added.
    `cm_on_wire`: the packet engine sends each QP's REQ -> REP -> RTU itself before its first Write (`--cm`), so the
    tasks carry only the QP creations and state changes (`SetupCosts.qp_work_s`), not the exchange a second time."""
    costs = costs or SetupCosts()
    first_new = len(graph)
    nt = network_transfers(graph, fabric)
    if not len(nt.tasks):
        return FirstIterationSetup(0, 0, 0.0, first_new)
    tasks = nt.tasks  # ascending: within a communicator, and for a sender's sends, the order of program order
    coll = np.asarray(graph.collective, dtype=np.int64)[tasks]
    comm_of: dict[tuple[int, ...], int] = {}
    comm_ids = np.array(
        [comm_of.setdefault(tuple(c.group), len(comm_of)) for c in graph.collectives] + [-1], dtype=np.int64
    )
    comm = comm_ids[coll]
    src = np.asarray(graph.rank, dtype=np.int64)[tasks]
    dst = np.asarray(graph.dst, dtype=np.int64)[tasks]
    step = np.asarray(graph.step, dtype=np.int64)[tasks]
    world = int(max(src.max(), dst.max())) + 1
    keys, key_of = np.unique(((comm + 1) * world + src) * world + dst, return_inverse=True)
    key_of = key_of.reshape(-1)
    n_keys = len(keys)
    first = np.full(n_keys, len(tasks), dtype=np.int64)  # position (in `tasks`) of each connection's first use
    np.minimum.at(first, key_of, np.arange(len(tasks)))
    first_coll = coll[first]
    # the connection's channels: its transfers in one step of the collective that first uses it (the most of any
    # step); a point-to-point connection: one
    in_first = (coll == first_coll[key_of]) & (coll >= 0)
    steps = int(step.max(initial=0)) + 2
    _, inv, counts = np.unique(key_of[in_first] * steps + step[in_first] + 1, return_inverse=True, return_counts=True)
    channels = np.ones(n_keys, dtype=np.int64)
    np.maximum.at(channels, key_of[in_first], counts[inv.reshape(-1)])
    rtt = np.zeros(n_keys)
    np.maximum.at(rtt, key_of, nt.rtt_s)
    k_src, k_dst = nt.src_nic[first], nt.dst_nic[first]
    # the connections opened together: by one collective, or by one point-to-point send
    opener = np.where(first_coll >= 0, first_coll, -2 - tasks[first])
    n_nics = len(nt.nics)
    group, group_of = np.unique(opener, return_inverse=True)
    group_of = group_of.reshape(-1)
    slot = np.concatenate((group_of * n_nics + k_src, group_of * n_nics + k_dst))
    nic_slots, slot_of = np.unique(slot, return_inverse=True)
    slot_of = slot_of.reshape(-1)
    count = np.bincount(slot_of, weights=np.concatenate((channels, channels)), minlength=len(nic_slots))
    slow = np.zeros(len(nic_slots))
    np.maximum.at(slow, slot_of, np.concatenate((rtt, rtt)))
    rounds = np.ceil(count / costs.concurrency)
    one_s = [costs.qp_work_s() if cm_on_wire else costs.connection_s(t) for t in slow.tolist()]
    nic_s = np.array([r * one for r, one in zip(rounds.tolist(), one_s)])
    setup_s = np.maximum(nic_s[slot_of[:n_keys]], nic_s[slot_of[n_keys:]])
    arrival = _arrivals(graph, {int(c) for c in first_coll.tolist() if c >= 0})
    # one task per connection, in the order of first use; every transfer of the connection waits for it
    setup_task = np.empty(n_keys, dtype=np.int64)
    for k in np.argsort(first, kind="stable").tolist():
        t1 = int(tasks[first[k]])
        c = int(first_coll[k])
        s, d, q = int(src[first[k]]), int(dst[first[k]]), int(channels[k]) * costs.qps_per_connection
        when = sorted(set(arrival.get((c, s), ())) | set(arrival.get((c, d), ()))) if c >= 0 else []
        setup_task[k] = graph.add(
            TRANSFER,
            s,
            d,
            f"{SETUP_NAME} rank {s} -> rank {d}: {q} QP{'s' if q > 1 else ''} each end, CM REQ -> REP -> RTU",
            when or list(graph.deps[t1]),
            route=graph.route[t1],  # where it happens (no bytes: the engines take it as a delay)
            latency_s=float(setup_s[k]),
            collective=c,
            dim=graph.dim[t1],
        )
        if c >= 0:
            graph.collectives[c].tasks.append(int(setup_task[k]))
    # every transfer of a connection waits for its setup; in the collective that opens it, so does every transfer
    # of its two ranks (NCCL launches a rank's kernel once its connections are up: its NVLink steps wait too)
    wait: dict[int, set[int]] = {}
    for t, st in zip(tasks.tolist(), setup_task[key_of].tolist()):
        wait.setdefault(t, set()).add(st)
    of_rank: dict[tuple[int, int], list[int]] = {}
    for k in range(n_keys):
        c = int(first_coll[k])
        if c >= 0:
            for r in (int(src[first[k]]), int(dst[first[k]])):
                of_rank.setdefault((c, r), []).append(int(setup_task[k]))
    for c in sorted({c for c, _ in of_rank}):
        for t in graph.collectives[c].tasks:
            if t < first_new:
                for r in (graph.rank[t], graph.dst[t]):
                    wait.setdefault(t, set()).update(of_rank.get((c, r), ()))
    deps = graph.deps
    for t in sorted(wait):
        deps[t] = deps[t] + sorted(wait[t])  # a new list: the lowering may share one list between tasks
    return FirstIterationSetup(int(channels.sum()), n_keys, float(setup_s.max()), first_new)


def _arrivals(graph: TaskGraph, collectives: set[int]) -> dict[tuple[int, int], list[int]]:
    """(collective, rank) -> what the rank's first transfer in the collective waits for outside it: the rank (and
    its first peer) reaching the collective. NCCL connects every connection a collective needs when it is launched,
    before any of its data moves (a tree's way down as its way up)."""
    kind = np.asarray(graph.kind, dtype=np.int8)
    coll = np.asarray(graph.collective, dtype=np.int64)
    keep = np.zeros(len(graph.collectives) + 1, dtype=bool)
    keep[list(collectives)] = True
    tr = np.flatnonzero((kind == TRANSFER) & keep[coll])  # coll -1 -> the trailing False
    first: dict[tuple[int, int], int] = {}
    rank, dst = graph.rank, graph.dst
    for t in tr.tolist():  # ascending: the first seen is the first
        c = int(coll[t])
        first.setdefault((c, rank[t]), t)
        first.setdefault((c, dst[t]), t)
    deps, tcoll = graph.deps, graph.collective
    return {key: [d for d in deps[t] if tcoll[d] != key[0]] for key, t in first.items()}
