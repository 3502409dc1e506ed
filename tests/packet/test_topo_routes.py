"""The packet side's ECMP routes and next-hop groups against a reference written here from the definitions.

The reference: hop counts to the destination switch by a plain breadth-first search over the switch-to-switch links
that are up, the ECMP group of a switch = its up out-links to a switch one hop closer (in cabling order), and the
documented hash of fabric/ecmp.py (fmix32(CRC-32(5-tuple) XOR seed), the seed XOR CRC-32(switch name) per switch),
coded again here with zlib and struct. The code under test (packet/topo.py `ecmp_route`, packet/network.py
`Network.next_hops`) must give exactly these routes, so that moving them onto fabric/routing.py's Router changes
no packet's path.
"""

from __future__ import annotations

import struct
import zlib
from collections import deque
from itertools import product

import pytest

from aifabric.fabric import build
from aifabric.fabric.ecmp import FiveTuple
from aifabric.fabric.graph import Fabric
from aifabric.packet.config import PacketConfig
from aifabric.packet.network import Network
from aifabric.packet.topo import ecmp_route, fat_tree, five_tuple, leaf_spine
from aifabric.scenario.fabric_spec import ClusterSpec, FabricSpec

SEEDS = (0, 1, 7, 0xDEADBEEF)


def fmix32(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    return h ^ (h >> 16)


def ref_hash(flow: FiveTuple, seed: int, switch: str, per_switch: bool) -> int:
    key = struct.pack(">IIBHH", flow.src_ip, flow.dst_ip, 17, flow.src_port, 4791)
    if per_switch:
        seed ^= zlib.crc32(switch.encode())
    return fmix32(zlib.crc32(key) ^ (seed & 0xFFFFFFFF))


def ref_distances(f: Fabric, target: str, down: frozenset[int]) -> dict[str, int]:
    """Hops from each switch to `target` over up switch-to-switch links, in their forwarding direction."""
    into: dict[str, list[str]] = {}
    for link in f.links:
        if link.index not in down and f.is_switch(link.src) and f.is_switch(link.dst):
            into.setdefault(link.dst, []).append(link.src)
    dist, queue = {target: 0}, deque([target])
    while queue:
        u = queue.popleft()
        for v in into.get(u, []):
            if v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


def ref_group(f: Fabric, switch: str, dist: dict[str, int], down: frozenset[int]) -> list[int]:
    if switch not in dist:
        return []
    return [
        li
        for li in f.out_links[switch]
        if li not in down and f.is_switch(f.links[li].dst) and dist.get(f.links[li].dst) == dist[switch] - 1
    ]


def ref_route(f: Fabric, src: str, dst: str, flow: FiveTuple, seed: int, per_switch: bool) -> tuple[int, ...]:
    (up,) = [li for li in f.out_links[src] if f.is_switch(f.links[li].dst)]
    (down_link,) = [li for li in range(len(f.links)) if f.links[li].dst == dst]
    a, b = f.links[up].dst, f.links[down_link].src
    dist = ref_distances(f, b, frozenset())
    links, node = [up], a
    while node != b:
        group = ref_group(f, node, dist, frozenset())
        li = group[ref_hash(flow, seed, node, per_switch) % len(group)]
        links.append(li)
        node = f.links[li].dst
    return (*links, down_link)


def _fabrics() -> dict[str, Fabric]:
    return {
        "fat_tree 8 hosts, 1 leaf": fat_tree(8, 8, 1, 100),
        "fat_tree 10 hosts, 4 per leaf, 3 spines": fat_tree(10, 4, 3, 100),
        "fat_tree 32 hosts, 2 spines": fat_tree(32, 16, 2, 400),
        "fat_tree 64 hosts, 4 spines": fat_tree(64, 16, 4, 400),
        "fat_tree 128 hosts, 8 spines": fat_tree(128, 16, 8, 400),
        "leaf_spine, uneven leaves, spines at 400": leaf_spine(
            [["a0", "a1"], ["b0"], ["c0", "c1", "c2"]], ["l0", "l1", "l2"], ["s0", "s1"], 100, spine_rate_gbps=400
        ),
    }


FABRICS = _fabrics()


@pytest.mark.parametrize("name", list(FABRICS))
def test_ecmp_route_is_the_reference_route(name):
    f = FABRICS[name]
    hosts = [n for n in f.nodes if not f.is_switch(n)]
    pairs = [(s, d) for s, d in product(hosts, hosts) if s != d]
    pairs = pairs[:: max(1, len(pairs) // 300)]  # a few hundred pairs per fabric, spread over all of them
    checked = 0
    for seed, per_switch in product(SEEDS, (False, True)):
        for k, (s, d) in enumerate(pairs):
            flow = five_tuple(f, s, d, 0x100 + k, 0x800 + 3 * k)
            got = ecmp_route(f, s, d, flow, seed, per_switch)
            assert got == ref_route(f, s, d, flow, seed, per_switch), (name, s, d, seed, per_switch)
            checked += 1
    assert checked >= 8 * min(300, len(pairs))


def test_ecmp_route_spreads_over_every_spine():
    """The reference is not vacuous: over many flows, every spine of a 4-spine fat tree carries some."""
    f = FABRICS["fat_tree 64 hosts, 4 spines"]
    spines = set()
    for k in range(64):
        route = ecmp_route(f, "h0", "h63", five_tuple(f, "h0", "h63", 0x100 + k, 0x900))
        assert len(route) == 4
        spines.add(f.links[route[1]].dst)
    assert spines == {f"spine{i}" for i in range(4)}


def _multi_pod() -> Fabric:
    return build(
        ClusterSpec(servers=8, gpus_per_server=4),
        FabricSpec(topology="multi-pod", pods=2, superspines=2, servers_per_segment=2, spines=2),
    )


def _cable(f: Fabric, a: str, b: str) -> set[int]:
    return {li for li in f.out_links[a] if f.links[li].dst == b} | {li for li in f.out_links[b] if f.links[li].dst == a}


def _down_sets(f: Fabric) -> list[frozenset[int]]:
    """Nothing down; one cable; three cables; a switch (every link of it); a leaf cut off (all its uplinks)."""
    cables = sorted(
        {frozenset((x.src, x.dst)) for x in f.links if f.is_switch(x.src) and f.is_switch(x.dst)}, key=sorted
    )
    out = [frozenset()]
    if cables:
        out.append(frozenset(_cable(f, *sorted(cables[0]))))
        out.append(
            frozenset().union(*(_cable(f, *sorted(c)) for c in cables[1 : len(cables) : max(1, len(cables) // 3)]))
        )
    spine = next((n for n in f.nodes if f.is_switch(n) and "spine" in n), None)
    if spine is not None:
        out.append(frozenset(x.index for x in f.links if spine in (x.src, x.dst)))
    leaf = next(n for n in f.nodes if f.is_switch(n) and "spine" not in n)
    out.append(frozenset(li for c in cables if leaf in c for li in _cable(f, *sorted(c))))
    return out


@pytest.mark.parametrize("name", [*FABRICS, "multi-pod, 2 pods, 2 superspines"])
def test_switch_next_hops_are_the_reference_groups_with_links_down(name):
    """The switches' ECMP groups (flowlet, spray, adaptive routing choose in them), before and after routing
    converges around failed cables and switches; a switch with no way to the target has none."""
    f = FABRICS[name] if name in FABRICS else _multi_pod()
    net = Network(f, PacketConfig())
    switches = [i for i, dev in enumerate(net.devices) if f.is_switch(dev.id)]
    empty = 0
    for down in _down_sets(f):
        net.converge(down)
        for t in switches:
            dist = ref_distances(f, net.devices[t].id, down)
            for s in switches:
                if s == t:  # a switch never asks for its own group: it sends to the host itself
                    continue
                want = ref_group(f, net.devices[s].id, dist, down)
                assert net.next_hops(s, t) == want, (name, sorted(down), net.devices[s].id, net.devices[t].id)
                empty += not want
    if len(switches) > 1:
        assert empty > 0  # the cut-off leaf: no group to it, none from it
