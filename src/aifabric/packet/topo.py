"""Small fabrics for the seeds' scenarios and the benchmark: NIC hosts on leaf (rail) switches and spines.

Hosts here are NICs (the GPU behind each is implicit); flows are NIC to NIC, routed by the fabric's
documented ECMP hash (fabric/ecmp.py) over the shortest switch paths (fabric/routing.py).
"""

from __future__ import annotations

from collections import deque

from ..fabric.ecmp import FiveTuple, ecmp_hash, roce_udp_source_port, switch_seed
from ..fabric.graph import NIC, RAIL, SPINE, TIER_HOST, TIER_SPINE, Fabric, Node
from ..units import gbps_to_bytes_per_s, ns_to_s


def leaf_spine(
    hosts_per_leaf: list[list[str]],
    leaves: list[str],
    spines: list[str],
    rate_gbps: float,
    cable_ns: float = 100.0,
    switch_ns: float = 500.0,
    spine_rate_gbps: float | None = None,
    name: str = "packet",
) -> Fabric:
    """`hosts_per_leaf[i]` hang off `leaves[i]`; every leaf has one cable to every spine."""
    f = Fabric(name=name, gpus_per_server=1, switch_latency_s=ns_to_s(switch_ns))
    for i, leaf in enumerate(leaves):
        f.add_node(Node(leaf, RAIL, index=i))
    for i, sp in enumerate(spines):
        f.add_node(Node(sp, SPINE, index=i))
    host_bps = gbps_to_bytes_per_s(rate_gbps)
    spine_bps = gbps_to_bytes_per_s(spine_rate_gbps or rate_gbps)
    n = 0
    for i, (leaf, hosts) in enumerate(zip(leaves, hosts_per_leaf)):
        for j, h in enumerate(hosts):
            f.add_node(Node(h, NIC, server=n, index=i, ip=(10 << 24) | (i << 16) | (j + 1)))
            f.add_cable(h, leaf, host_bps, ns_to_s(cable_ns), TIER_HOST)
            n += 1
    for leaf in leaves:
        for sp in spines:
            f.add_cable(leaf, sp, spine_bps, ns_to_s(cable_ns), TIER_SPINE)
    return f


def fat_tree(hosts: int, hosts_per_leaf: int, spines: int, rate_gbps: float, **kw) -> Fabric:
    """A two-tier fat tree (leaf/spine Clos) of `hosts` NICs."""
    n_leaves = -(-hosts // hosts_per_leaf)
    leaves = [f"leaf{i}" for i in range(n_leaves)]
    groups = [
        [f"h{i * hosts_per_leaf + j}" for j in range(hosts_per_leaf) if i * hosts_per_leaf + j < hosts]
        for i in range(n_leaves)
    ]
    return leaf_spine(groups, leaves, [f"spine{i}" for i in range(spines)], rate_gbps, **kw)


def link_between(f: Fabric, a: str, b: str) -> int:
    for li in f.out_links[a]:
        if f.links[li].dst == b:
            return li
    raise KeyError(f"no link {a}->{b}")


def host_switch(f: Fabric, host: str) -> str:
    return next(f.links[li].dst for li in f.out_links[host] if f.is_switch(f.links[li].dst))


def five_tuple(f: Fabric, src: str, dst: str, src_qpn: int, dst_qpn: int) -> FiveTuple:
    return FiveTuple(f.nodes[src].ip or 0, f.nodes[dst].ip or 0, roce_udp_source_port(src_qpn, dst_qpn))


def switch_distances(f: Fabric, target: str, down: frozenset[int] = frozenset()) -> dict[str, int]:
    """Hop count from every switch to switch `target` over switch-to-switch links (BFS), leaving out `down`."""
    dist = {target: 0}
    queue = deque([target])
    while queue:
        u = queue.popleft()
        for li in f.out_links[u]:
            v = f.links[li].dst
            if down and (li in down or any(lj in down for lj in f.out_links[v] if f.links[lj].dst == u)):
                continue
            if f.is_switch(v) and v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


def next_hops(f: Fabric, switch: str, dist: dict[str, int], down: frozenset[int] = frozenset()) -> list[int]:
    """Out-links of `switch` one hop closer to the target of `dist` (the ECMP group, in port order), not `down`."""
    here = dist.get(switch)
    if here is None:
        return []
    return [li for li in f.out_links[switch] if dist.get(f.links[li].dst, -1) == here - 1 and li not in down]


def ecmp_route(
    f: Fabric, src: str, dst: str, flow: FiveTuple, hash_seed: int = 0, per_switch_seed: bool = False
) -> tuple[int, ...]:
    """Host -> its switch -> ECMP switch path (the flow's 5-tuple hash at every switch) -> host, with the
    hash of fabric/ecmp.py: port = group[ecmp_hash(5-tuple, switch seed) mod len(group)]."""
    a, b = host_switch(f, src), host_switch(f, dst)
    dist = switch_distances(f, b)
    links = [link_between(f, src, a)]
    node = a
    while node != b:
        group = next_hops(f, node, dist)
        li = group[ecmp_hash(flow, switch_seed(hash_seed, node, per_switch_seed)) % len(group)]
        links.append(li)
        node = f.links[li].dst
    links.append(link_between(f, b, dst))
    return tuple(links)
