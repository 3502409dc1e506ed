"""Each topology builds what its design says: counts, cabling, routes, against hand-computed cases."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.fabric import Router, build
from aifabric.fabric.graph import NIC, RAIL, SPINE, SUPERSPINE
from aifabric.scenario.fabric_spec import ClusterSpec, FabricSpec


def kinds(f):
    return Counter(n.kind for n in f.nodes.values())


def test_rail_optimized_default_is_the_skeleton_fabric():
    f = build(ClusterSpec(servers=2, gpus_per_server=4), FabricSpec())
    assert sorted(n for n in f.nodes if f.is_switch(n)) == ["rail0", "rail1", "rail2", "rail3", "spine0", "spine1"]
    assert f.world_size == 8 and f.rank_gpu[5] == "s1/gpu1"


def test_segments_and_spines_counts():
    # 8 servers in segments of 2, 8 rails, single-rail switches: 4 segments x 8 = 32 rail switches, 4 spines,
    # each rail switch: 2 host ports + 4 uplinks; each spine: 32 down ports
    f = build(
        ClusterSpec(servers=8, gpus_per_server=8, nic_speed_gbps=400), FabricSpec(servers_per_segment=2, spines=4)
    )
    k = kinds(f)
    assert (k[RAIL], k[SPINE], k[NIC]) == (32, 4, 64)
    assert all(len(f.out_links[n]) == 6 for n, node in f.nodes.items() if node.kind == RAIL)
    assert all(len(f.out_links[n]) == 32 for n, node in f.nodes.items() if node.kind == SPINE)


@pytest.mark.parametrize("rails_per_switch,switches", [(1, 8), (2, 4), (8, 1)])
def test_single_dual_multi_rail_per_switch(rails_per_switch, switches):
    # Figures 13-12 / 13-11 / 13-10: one, two or eight rails per physical switch
    f = build(ClusterSpec(servers=4, gpus_per_server=8), FabricSpec(rails_per_switch=rails_per_switch, spines=2))
    assert kinds(f)[RAIL] == switches
    host_ports = Counter(link.dst for link in f.links if f.nodes[link.src].kind == NIC and f.is_switch(link.dst))
    assert set(host_ports.values()) == {4 * rails_per_switch}


def test_dual_port_nic_to_two_switches_active_active():
    f = build(
        ClusterSpec(servers=4, gpus_per_server=8, nic_ports=2, nic_speed_gbps=200),
        FabricSpec(rails_per_switch=8, spines=2),
    )
    assert sorted(n for n, x in f.nodes.items() if x.kind == RAIL) == ["leaf0-A", "leaf0-B"]
    nic_links = [f.links[li].dst for li in f.out_links["s0/nic3"] if f.is_switch(f.links[li].dst)]
    assert nic_links == ["leaf0-A", "leaf0-B"]
    # LAG: different QPs of the same pair use both ports
    router = Router(f)
    first_hops = {f.links[router.route(0, 8, ch).links[1]].dst for ch in range(16)}
    assert first_hops == {"leaf0-A", "leaf0-B"}
    assert len(router.paths(0, 8)) == 2  # one switch hop either way


def test_multi_pod_superspine_planes():
    # 2 pods x 4 spines; 8 super-spines in 4 planes: spine j of each pod -> the 2 super-spines of plane j
    f = build(
        ClusterSpec(servers=4, gpus_per_server=8),
        FabricSpec(topology="multi-pod", pods=2, spines=4, superspines=8, superspine_planes=4),
    )
    assert kinds(f)[SUPERSPINE] == 8
    ups = sorted(f.links[li].dst for li in f.out_links["pod1/spine2"] if f.links[li].dst.startswith("superspine"))
    assert ups == ["superspine4", "superspine5"]
    assert all(len(f.out_links[f"superspine{k}"]) == 2 for k in range(8))  # one spine per pod


def test_partial_mesh_gives_each_leaf_a_distinct_subset():
    f = build(
        ClusterSpec(servers=2, gpus_per_server=4), FabricSpec(spines=4, spine_cabling="partial-mesh", spines_per_leaf=2)
    )
    subsets = [
        tuple(f.links[li].dst for li in f.out_links[f"rail{r}"] if f.links[li].dst.startswith("spine"))
        for r in range(4)
    ]
    assert subsets == [("spine0", "spine1"), ("spine1", "spine2"), ("spine2", "spine3"), ("spine3", "spine0")]
    # §6.12: the same hash index (0) maps to a different physical spine at every leaf
    assert len({s[0] for s in subsets}) == 4


def test_partial_mesh_breaks_polarization_at_the_spine(monkeypatch):
    """§6.12: every leaf computes the same hash result for flows to one destination: with a full mesh they all
    pick the same spine; with a partial mesh the same index is a different spine at each leaf."""
    from aifabric.fabric import routing

    monkeypatch.setattr(routing, "ecmp_hash", lambda flow, seed: 0)

    def spines_used(cabling):
        fabric = FabricSpec(spines=4, spine_cabling=cabling, spines_per_leaf=3 if cabling == "partial-mesh" else None)
        f = build(ClusterSpec(servers=2, gpus_per_server=8), fabric)
        router = Router(f, hash_seed=0)
        dst = 8 + 7  # s1/gpu7 on rail7
        used = set()
        for src_rail in range(7):
            route = router.route_with_source_port(src_rail, dst, 0xC001)  # same source port: identical hash
            used |= {f.links[li].dst for li in route.links if f.links[li].dst.startswith("spine")}
        return used

    assert len(spines_used("full-mesh")) == 1
    assert len(spines_used("partial-mesh")) > 1


def test_rail_only_has_no_spine_and_same_rail_goes_direct():
    f = build(ClusterSpec(servers=3, gpus_per_server=4), FabricSpec(topology="rail-only"))
    assert kinds(f)[SPINE] == 0
    router = Router(f)
    assert [f.links[li].dst for li in router.route(1, 5).links] == ["s0/nic1", "rail1", "s1/nic1", "s1/gpu1"]


def test_pxn_on_rail_optimized_avoids_the_spine():
    f = build(ClusterSpec(servers=2, gpus_per_server=4), FabricSpec(spines=2))
    plain = Router(f).route(0, 4 + 3)
    pxn = Router(f, pxn=True).route(0, 4 + 3)
    assert any(f.links[li].dst.startswith("spine") for li in plain.links)
    assert not any(f.links[li].dst.startswith("spine") for li in pxn.links)
    assert pxn.relay_rank == 3


def test_nvl72_domain():
    f = build(
        ClusterSpec(gpu="GB200", servers=2, gpus_per_server=72, scale_up="nvl72"),
        FabricSpec(rails_per_switch=8, spines=9, link_speed_gbps=800, switch_radix=64),
    )
    assert f.world_size == 144
    r = Router(f).route(0, 71)
    assert r.scale_up  # 72 GPUs on one NVLink domain
    assert f.links[r.links[0]].capacity_bytes_per_s == 900e9  # 1.8 TB/s both directions / 2


def test_custom_topology_from_switches_and_links():
    cluster = ClusterSpec(servers=2, gpus_per_server=2, nic_speed_gbps=400)
    custom = {
        "switches": [{"id": "leafA", "kind": "leaf"}, {"id": "leafB", "kind": "leaf"}, {"id": "core", "kind": "spine"}],
        "links": [
            {"a": "s0/nic0", "b": "leafA"},
            {"a": "s0/nic1", "b": "leafB"},
            {"a": "s1/nic0", "b": "leafA"},
            {"a": "leafB", "b": "s1/nic1"},
            {"a": "leafA", "b": "core", "speed_gbps": 800, "count": 2},
            {"a": "leafB", "b": "core", "speed_gbps": 800, "count": 2},
        ],
    }
    f = build(cluster, FabricSpec(topology="custom", custom=custom))
    router = Router(f)
    hops = [f.links[li].dst for li in router.route(0, 3).links]
    assert hops == ["s0/nic0", "leafA", "core", "leafB", "s1/nic1", "s1/gpu1"]
    assert len(router.paths(0, 3)) == 4  # 2 parallel cables up x 2 down
    tiers = Counter(f.links[li].tier for li in range(len(f.links)))
    assert tiers["spine"] == 8 and tiers["host"] == 8


small_designs = st.fixed_dictionaries(
    {
        "topology": st.sampled_from(["single-switch", "rail-only", "rail-optimized", "multi-pod"]),
        "servers": st.sampled_from([2, 4]),
        "gpus": st.sampled_from([2, 4]),
        "ports": st.sampled_from([1, 2]),
        "rps": st.sampled_from([1, 2]),
        "spines": st.sampled_from([1, 2, 3]),
        "seed": st.integers(0, 2**32 - 1),
    }
)


def _build_small(p):
    multi = p["topology"] == "multi-pod"
    fabric = FabricSpec(
        topology=p["topology"],
        rails_per_switch=p["rps"],
        spines=p["spines"],
        servers_per_segment=1 if not multi else None,
        pods=2 if multi else 1,
        superspines=2 if multi else 0,
        ecmp_hash_seed=p["seed"],
    )
    return build(ClusterSpec(servers=p["servers"], gpus_per_server=p["gpus"], nic_ports=p["ports"]), fabric)


@settings(max_examples=40, deadline=None)
@given(small_designs)
def test_every_route_is_a_walk_from_gpu_to_gpu_and_one_of_the_equal_cost_paths(p):
    f = _build_small(p)
    router = Router(f, hash_seed=p["seed"])
    n = f.world_size
    for src, dst in [(0, n - 1), (n - 1, 0), (0, 1), (1, n // 2)]:
        if src == dst:
            continue
        route = router.route(src, dst)
        links = [f.links[li] for li in route.links]
        assert links[0].src == f.rank_gpu[src] and links[-1].dst == f.rank_gpu[dst]
        assert all(a.dst == b.src for a, b in itertools.pairwise(links))
        paths = router.paths(src, dst)
        assert route.links in {r.links for r, _ in paths}
        assert sum(share for _, share in paths) == pytest.approx(1.0)
        lengths = {len([li for li in r.links if f.is_switch(f.links[li].dst)]) for r, _ in paths}
        assert len(lengths) == 1  # equal cost: the same number of switches


def test_identical_seeds_polarize_three_tier_uplinks_per_switch_seeds_do_not():
    """With one hash and one seed on every switch, a spine picks its super-spine uplink with the same index
    the leaf used to pick that spine: each spine uses one of its uplinks (Ch. 13 §6.12). Per-switch seeds
    spread the same flows."""
    import numpy as np

    from aifabric.fabric.polarization import analyze

    f = build(
        ClusterSpec(servers=16, gpus_per_server=8),
        FabricSpec(topology="multi-pod", pods=2, servers_per_segment=8, spines=4, superspines=4),
    )
    same = analyze(Router(f, hash_seed=7), "permutation", 10, np.random.default_rng(3))
    per_switch = analyze(Router(f, hash_seed=7, per_switch_seed=True), "permutation", 10, np.random.default_rng(3))
    spine_up = [li for li in range(len(f.links)) if f.links[li].tier == "superspine" and f.is_uplink(li)]
    assert len(spine_up) == 2 * 4 * 4
    assert same.ecmp.idle_fraction > per_switch.ecmp.idle_fraction
    assert same.ecmp.max_gbps > per_switch.ecmp.max_gbps
    assert same.ideal.max_gbps == per_switch.ideal.max_gbps <= per_switch.ecmp.max_gbps
    again = analyze(Router(f, hash_seed=7), "permutation", 10, np.random.default_rng(3))
    assert again == same  # same seeds, same answer
