"""The RDMA connections a job opens, read from its task graph on its fabric, and what setting them up costs once
before the first collective (Deep Learning for Network Engineers, Chapters 9 and 14; the cost model is
collectives/connection_setup.py). summary.json `connection_setup`, the terminal summary."""

from __future__ import annotations

from ..collectives.connection_setup import ConnectionSetup, NicPair, SetupCosts, connection_setup
from ..fabric.graph import NIC, SCALE_UP_TIERS


def route_nics(fabric, route: tuple[int, ...]) -> tuple[str, str] | None:
    """The NICs at both ends of a route's network part (a PXN route: the relay's NIC), or None inside a server."""
    links = fabric.links
    nodes = fabric.nodes
    src = next((links[li].src for li in route if nodes[links[li].src].kind == NIC
                and fabric.is_switch(links[li].dst)), None)
    dst = next((links[li].dst for li in reversed(route) if nodes[links[li].dst].kind == NIC
                and fabric.is_switch(links[li].src)), None)
    return None if src is None or dst is None else (src, dst)


def route_rtt_s(fabric, route: tuple[int, ...]) -> float:
    """Twice the route's one-way latency: its links' and its switches' (the CM runs on the hosts: PCIe counts)."""
    links = fabric.links
    one_way = sum(links[li].latency_s for li in route)
    one_way += fabric.switch_latency_s * sum(1 for li in route if fabric.is_switch(links[li].dst))
    return 2 * one_way


def job_links(graph, fabric) -> list[NicPair]:
    """The connections a job opens, from its task graph: per communicator (a collective's group), per pair of ranks
    it sends between over the network, as many as the channels it uses between them (the transfers of one step of
    one collective between the same two ranks); a point-to-point pair (pipeline send/recv) one; a pair of a folded
    collective (its bytes counted without transfers) one, at the slowest path's round trip."""
    ranks, dsts, routes, colls, steps = graph.rank, graph.dst, graph.route, graph.collective, \
        graph.step
    groups = graph.collectives
    per_step: dict[tuple, int] = {}
    info: dict[tuple, tuple[str, str, float]] = {}
    route_info: dict[tuple[int, ...], tuple[str, str, float] | None] = {}
    for t in range(len(dsts)):
        if dsts[t] < 0:  # a compute task (TaskGraph.dst: -1)
            continue
        route = routes[t]
        if route in route_info:
            ri = route_info[route]
        else:
            ri = None
            if any(fabric.links[li].tier not in SCALE_UP_TIERS and fabric.is_switch(fabric.links[li].dst)
                   for li in route):
                ends = route_nics(fabric, route)
                ri = None if ends is None else (ends[0], ends[1], route_rtt_s(fabric, route))
            route_info[route] = ri
        if ri is None:
            continue
        c = colls[t]
        comm: tuple = ("coll", groups[c].group) if c >= 0 else ("p2p",)
        pair = (comm, ranks[t], dsts[t])
        k = (pair, c, steps[t])
        per_step[k] = per_step.get(k, 0) + 1
        old = info.get(pair)
        if old is None or ri[2] > old[2]:
            info[pair] = ri
    channels: dict[tuple, int] = {}
    for (pair, _, _), count in per_step.items():
        if count > channels.get(pair, 0):
            channels[pair] = count
    out = [NicPair(info[p][0], info[p][1], info[p][2]) for p, ch in channels.items() for _ in range(ch)]
    # one per (pair, parallel dimension): each dimension's collectives run on a communicator of their own
    folded = [(s, d) for (s, d, _dim) in graph.folded_pairs if fabric.server_of(s) != fabric.server_of(d)]
    if folded:
        rtt = max((link.rtt_s for link in out), default=0.0) or _one_rtt_s(fabric)
        for s, d in folded:
            out.append(NicPair(fabric.rank_nic(s), fabric.rank_nic(d), rtt))
    return out


def _one_rtt_s(fabric) -> float:
    """A cross-server round trip on this fabric: rank 0 to the first rank of the last server."""
    from ..fabric.routing import Router

    last = fabric.world_size - fabric.gpus_per_server
    if last <= 0:
        return 0.0
    return route_rtt_s(fabric, Router(fabric).route(0, last).links)


def job_connection_setup(graph, fabric, costs: SetupCosts | None = None) -> ConnectionSetup:
    return connection_setup(job_links(graph, fabric), costs)
