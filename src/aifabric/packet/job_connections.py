"""The RDMA connections a job opens, read from its task graph on its fabric, and what setting them up costs once
before the first collective (Deep Learning for Network Engineers, Chapters 9 and 14; the cost model is
collectives/connection_setup.py). summary.json `connection_setup`, the terminal summary."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..collectives.connection_setup import ConnectionSetup, NicPair, SetupCosts, setup_of_nics
from ..fabric.graph import NIC, SCALE_UP_TIERS


def route_nics(fabric, route: tuple[int, ...]) -> tuple[str, str] | None:
    """The NICs at both ends of a route's network part (a PXN route: the relay's NIC), or None inside a server."""
    links = fabric.links
    nodes = fabric.nodes
    src = next(
        (links[li].src for li in route if nodes[links[li].src].kind == NIC and fabric.is_switch(links[li].dst)), None
    )
    dst = next(
        (
            links[li].dst
            for li in reversed(route)
            if nodes[links[li].dst].kind == NIC and fabric.is_switch(links[li].src)
        ),
        None,
    )
    return None if src is None or dst is None else (src, dst)


def route_rtt_s(fabric, route: tuple[int, ...]) -> float:
    """Twice the route's one-way latency: its links' and its switches' (the CM runs on the hosts: PCIe counts)."""
    links = fabric.links
    one_way = sum(links[li].latency_s for li in route)
    one_way += fabric.switch_latency_s * sum(1 for li in route if fabric.is_switch(links[li].dst))
    return 2 * one_way


SETUP_NAME = "connection setup"  # names of the first iteration's setup tasks begin with it (engines/setup_tasks.py)


@dataclass(frozen=True)
class JobPairs:
    """The job's connections grouped by (communicator, sender, receiver): both NICs, the slowest round trip, and how
    many connections (channels) the pair has."""

    nics: list[str]  # NIC names; the arrays below index into it
    src_nic: np.ndarray
    dst_nic: np.ndarray
    rtt_s: np.ndarray
    channels: np.ndarray

    @property
    def connections(self) -> int:
        return int(self.channels.sum())


@dataclass(frozen=True)
class NetworkTransfers:
    """The transfers of a task graph that cross a NIC (their route leaves the server: a queue pair carries them),
    with both NICs and the route's round trip."""

    nics: list[str]  # NIC names; src_nic and dst_nic index into it
    tasks: np.ndarray  # task ids, ascending
    src_nic: np.ndarray
    dst_nic: np.ndarray
    rtt_s: np.ndarray


def network_transfers(graph, fabric) -> NetworkTransfers:
    """Every transfer whose route crosses a NIC, in task order; not the first iteration's connection setups
    (engines/setup_tasks.py: zero bytes, named SETUP_NAME ...), which stand for the connections, not a use of one."""
    dst_all = np.asarray(graph.dst, dtype=np.int64)
    tasks = np.flatnonzero(dst_all >= 0)  # transfers (a compute task's dst is -1)
    size, name = graph.size_bytes, graph.name
    setups = [i for i, t in enumerate(tasks.tolist()) if size[t] == 0 and name[t].startswith(SETUP_NAME)]
    if setups:
        tasks = np.delete(tasks, setups)
    routes = graph.route
    # routes by identity (the Router hands out one tuple per QP, so this is cheap; equal tuples just repeat work)
    ids = np.fromiter(map(id, map(routes.__getitem__, tasks.tolist())), dtype=np.int64, count=len(tasks))
    _, first_of_route, rid = np.unique(ids, return_index=True, return_inverse=True)
    rid = rid.reshape(-1)
    route_of = [routes[t] for t in tasks[first_of_route].tolist()]
    nic_id: dict[str, int] = {}
    r_src = np.full(len(route_of), -1, dtype=np.int64)
    r_dst = np.full(len(route_of), -1, dtype=np.int64)
    r_rtt = np.zeros(len(route_of))
    for k, route in enumerate(route_of):
        if not any(
            fabric.links[li].tier not in SCALE_UP_TIERS and fabric.is_switch(fabric.links[li].dst) for li in route
        ):
            continue  # inside a server: NVLink, no queue pair
        ends = route_nics(fabric, route)
        if ends is None:
            continue
        r_src[k] = nic_id.setdefault(ends[0], len(nic_id))
        r_dst[k] = nic_id.setdefault(ends[1], len(nic_id))
        r_rtt[k] = route_rtt_s(fabric, route)
    keep = r_src[rid] >= 0
    rid = rid[keep]
    return NetworkTransfers(list(nic_id), tasks[keep], r_src[rid], r_dst[rid], r_rtt[rid])


def job_pairs(graph, fabric) -> JobPairs:
    """The connections a job opens, from its task graph: per communicator (a collective's group), per pair of ranks
    it sends between over the network, as many as the channels it uses between them (the transfers of one step of
    one collective between the same two ranks); a point-to-point pair (pipeline send/recv) one; a pair of a folded
    collective (its bytes counted without transfers) one per parallel dimension, at the slowest path's round trip."""
    nt = network_transfers(graph, fabric)
    tasks = nt.tasks
    nic_id = {name: i for i, name in enumerate(nt.nics)}
    coll = np.asarray(graph.collective, dtype=np.int64)[tasks]
    comm_of: dict[tuple[int, ...], int] = {}
    comm_ids = np.array(
        [comm_of.setdefault(tuple(c.group), len(comm_of)) for c in graph.collectives] + [-1], dtype=np.int64
    )
    comm = comm_ids[coll]  # coll -1 (point to point) -> the last entry, -1
    src = np.asarray(graph.rank, dtype=np.int64)[tasks]
    dst = np.asarray(graph.dst, dtype=np.int64)[tasks]
    step = np.asarray(graph.step, dtype=np.int64)[tasks]
    # transfers of one step of one collective between two ranks: one per channel
    world = int(max(src.max(initial=0), dst.max(initial=0))) + 1
    pair_key = ((comm + 1) * world + src) * world + dst  # (communicator, sender, receiver)
    pairs, pair_of_task = np.unique(pair_key, return_inverse=True)
    pair_of_task = pair_of_task.reshape(-1)
    steps = int(step.max(initial=0)) + 2  # step -1 (a merged ring) .. max
    per_pair = steps * (len(graph.collectives) + 1)  # (collective, step) combinations, collective -1 included
    _, inverse, counts = np.unique(
        pair_of_task * per_pair + (coll + 1) * steps + step + 1, return_inverse=True, return_counts=True
    )
    inverse = inverse.reshape(-1)
    # the pair's channels: the most any (collective, step) used; its NICs and slowest round trip over its transfers
    channels = np.zeros(len(pairs), dtype=np.int64)
    np.maximum.at(channels, pair_of_task, np.where(coll >= 0, counts[inverse], 1))  # sends: one per pair
    first = np.full(len(pairs), len(tasks), dtype=np.int64)
    np.minimum.at(first, pair_of_task, np.arange(len(tasks)))
    rtt = np.zeros(len(pairs))
    np.maximum.at(rtt, pair_of_task, nt.rtt_s)
    p_src, p_dst = nt.src_nic[first], nt.dst_nic[first]
    # folded collectives: no transfers, their pairs from graph.folded.pairs
    folded = [(s, d) for (s, d, _dim) in graph.folded.pairs if fabric.server_of(s) != fabric.server_of(d)]
    if folded:
        f_rtt = float(rtt.max()) if len(rtt) else _one_rtt_s(fabric)
        f_src = np.array([nic_id.setdefault(fabric.rank_nic(s), len(nic_id)) for s, _ in folded], dtype=np.int64)
        f_dst = np.array([nic_id.setdefault(fabric.rank_nic(d), len(nic_id)) for _, d in folded], dtype=np.int64)
        p_src, p_dst = np.concatenate([p_src, f_src]), np.concatenate([p_dst, f_dst])
        rtt = np.concatenate([rtt, np.full(len(folded), f_rtt)])
        channels = np.concatenate([channels, np.ones(len(folded), dtype=np.int64)])
    return JobPairs(list(nic_id), p_src, p_dst, rtt, channels)


def job_links(graph, fabric) -> list[NicPair]:
    """Every connection of `job_pairs` on its own (a pair with k channels: k connections)."""
    jp = job_pairs(graph, fabric)
    return [
        NicPair(jp.nics[a], jp.nics[b], float(r))
        for a, b, r, k in zip(jp.src_nic.tolist(), jp.dst_nic.tolist(), jp.rtt_s.tolist(), jp.channels.tolist())
        for _ in range(k)
    ]


def _one_rtt_s(fabric) -> float:
    """A cross-server round trip on this fabric: rank 0 to the first rank of the last server."""
    from ..fabric.routing import Router

    last = fabric.world_size - fabric.gpus_per_server
    if last <= 0:
        return 0.0
    return route_rtt_s(fabric, Router(fabric).route(0, last).links)


def job_connection_setup(graph, fabric, costs: SetupCosts | None = None) -> ConnectionSetup:
    """summary.json `connection_setup`: the job's connections, set up once before its first collective."""
    jp = job_pairs(graph, fabric)
    n_nics = len(jp.nics)
    count = np.zeros(n_nics, dtype=np.int64)
    slow = np.zeros(n_nics)
    for ends in (jp.src_nic, jp.dst_nic):
        np.add.at(count, ends, jp.channels)
        np.maximum.at(slow, ends, jp.rtt_s)
    per_nic = {jp.nics[i]: (int(count[i]), float(slow[i])) for i in range(n_nics) if count[i]}
    n = jp.connections
    return setup_of_nics(per_nic, n, float(jp.rtt_s.min()) if n else 0.0, float(jp.rtt_s.max()) if n else 0.0, costs)
