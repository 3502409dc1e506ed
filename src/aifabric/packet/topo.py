"""Small fabrics for the seeds' scenarios and the benchmark: NIC hosts on leaf (rail) switches and spines.

Hosts here are NICs (the GPU behind each is implicit); flows are NIC to NIC, routed by the fabric's
documented ECMP hash (fabric/ecmp.py) over the shortest switch paths (fabric/routing.py).
"""

from __future__ import annotations

from ..fabric.ecmp import FiveTuple, roce_udp_source_port
from ..fabric.graph import NIC, RAIL, SPINE, TIER_HOST, TIER_SPINE, Fabric, Node
from ..fabric.routing import Router
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
    host_bytes_per_s = gbps_to_bytes_per_s(rate_gbps)
    spine_bytes_per_s = gbps_to_bytes_per_s(spine_rate_gbps or rate_gbps)
    n = 0
    for i, (leaf, hosts) in enumerate(zip(leaves, hosts_per_leaf)):
        for j, h in enumerate(hosts):
            f.add_node(Node(h, NIC, server=n, index=i, ip=(10 << 24) | (i << 16) | (j + 1)))
            f.add_cable(h, leaf, host_bytes_per_s, ns_to_s(cable_ns), TIER_HOST)
            n += 1
    for leaf in leaves:
        for sp in spines:
            f.add_cable(leaf, sp, spine_bytes_per_s, ns_to_s(cable_ns), TIER_SPINE)
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


def five_tuple(f: Fabric, src: str, dst: str, src_qpn: int, dst_qpn: int) -> FiveTuple:
    return FiveTuple(f.nodes[src].ip or 0, f.nodes[dst].ip or 0, roce_udp_source_port(src_qpn, dst_qpn))


def ecmp_route(
    f: Fabric, src: str, dst: str, flow: FiveTuple, hash_seed: int = 0, per_switch_seed: bool = False
) -> tuple[int, ...]:
    """Host -> its switch -> ECMP switch path (the flow's 5-tuple hash at every switch) -> host: the fabric's
    Router (fabric/routing.py), with the hash of fabric/ecmp.py: port = group[ecmp_hash(5-tuple, switch seed) mod
    len(group)]."""
    return Router(f, hash_seed, per_switch_seed).nic_route(src, dst, flow)
