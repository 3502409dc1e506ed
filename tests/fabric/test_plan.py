"""Bill of materials, capacity, failure domains, cabling and addressing against hand-computed cases."""

from __future__ import annotations

import ipaddress
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.fabric import build
from aifabric.fabric.addressing import AddressPlan, covering_aggregate, prefix_for_hosts
from aifabric.fabric.cabling import HEADER, cabling_rows
from aifabric.fabric.graph import NIC
from aifabric.fabric.plan import make_plan
from aifabric.scenario.fabric_spec import ClusterSpec, FabricSpec

CLUSTER = ClusterSpec(servers=8, gpus_per_server=8, nic_speed_gbps=400)


def test_bom_two_segments_four_spines_by_hand():
    # 2 segments x 8 single-rail switches = 16 rail switches, each 4 host + 4 uplink ports of 64;
    # 4 spines, each 16 down ports; cables: 64 host (400G) + 16 x 4 = 64 fabric (400G)
    plan = make_plan(build(CLUSTER, FabricSpec(servers_per_segment=4, spines=4)))
    rail, spine = plan.bom.switch_tiers
    assert (rail.switches, rail.ports_used, rail.ports_free, rail.fullest_ports_used) == (16, 128, 16 * 56, 8)
    assert (spine.switches, spine.ports_used, spine.ports_free) == (4, 64, 4 * 48)
    cables = {(c.tier, c.speed_gbps): (c.cables, c.transceivers) for c in plan.bom.cables}
    assert cables == {("host", 400.0): (64, 128), ("spine", 400.0): (64, 128)}
    assert (plan.bom.nics, plan.bom.nic_ports, plan.bom.switches) == (64, 64, 20)
    rail_cap = plan.capacity.tiers[0]
    assert (rail_cap.down_gbps, rail_cap.up_gbps, rail_cap.oversubscription) == (1600, 1600, 1.0)
    assert plan.capacity.non_blocking


def test_oversubscribed_two_to_one_by_hand():
    plan = make_plan(build(CLUSTER, FabricSpec(servers_per_segment=4, spines=2)))
    cap = plan.capacity
    assert cap.tiers[0].oversubscription == pytest.approx(2.0)
    # host total 64 x 400 = 25.6 Tb/s; rail-switch uplinks 16 x 2 x 400 = 12.8 Tb/s; bisection = 12.8 / 2
    assert cap.host_total_gbps == 25600
    assert cap.bisection_gbps == 6400 and cap.full_bisection_gbps == 12800
    assert not cap.non_blocking and "2.00:1" in cap.verdict


def test_leaf_oversubscription_derives_the_spine_count():
    # 4 hosts x 400G = 1.6 Tb/s down per rail switch; 3:1 -> 533 Gb/s up -> 2 uplinks of 400G -> 2 spines
    f = build(CLUSTER, FabricSpec(servers_per_segment=4, leaf_oversubscription=3.0))
    assert f.design.spines_per_pod == 2


def test_failure_domains_single_homed():
    plan = make_plan(build(CLUSTER, FabricSpec(servers_per_segment=4, spines=1)))
    by = {x.element: x for x in plan.failures}
    assert by["NIC"].gpus_cut_off == 1
    assert by["NIC port / host cable"].gpus_cut_off == 1
    assert by["rail (leaf)"].gpus_cut_off == 4  # its rail's GPUs in its segment (Figure 10-3)
    # the only spine: every rail switch is cut from the others (cross-rail / inter-segment traffic)
    assert by["spine"].gpus_partitioned == 64 and by["spine"].gpus_cut_off == 0


def test_failure_domains_dual_homed_and_two_spines():
    cluster = CLUSTER.model_copy(update={"nic_ports": 2})
    plan = make_plan(build(cluster, FabricSpec(servers_per_segment=4, rails_per_switch=8, spines=2)))
    by = {x.element: x for x in plan.failures}
    assert by["NIC"].gpus_cut_off == 1  # both ports are on the one NIC
    assert by["NIC port / host cable"].gpus_degraded == 1 and by["NIC port / host cable"].capacity_left == 0.5
    assert by["rail (leaf)"].gpus_cut_off == 0 and by["rail (leaf)"].gpus_degraded == 32
    assert by["spine"].gpus_partitioned == 0 and by["spine"].capacity_left == 0.5


def test_cabling_interleaved_is_figure_13_6():
    # one 48-port switch per segment: 4 hosts x 8 rails (multi-rail), 16 uplinks (4 spines x 4 links)
    cluster = ClusterSpec(servers=4, gpus_per_server=8, nic_speed_gbps=200)
    f = build(
        cluster, FabricSpec(rails_per_switch=8, spines=4, links_per_spine=4, switch_radix=48, port_layout="interleaved")
    )
    rows = list(cabling_rows(f, "interleaved"))
    assert len(rows[0]) == len(HEADER)
    host = {(r[2], r[4]): r[5] for r in rows if r[1] == "host"}
    assert host["s0/nic2", "leaf0"] == "Ethernet1/25"  # Rail-3, host 1
    assert host["s1/nic5", "leaf0"] == "Ethernet1/17"  # Rail-6, host 2: 14, 17, 20, 23
    assert host["s3/nic7", "leaf0"] == "Ethernet1/47"  # Rail-8, host 4
    uplinks = sorted(int(r[3].split("/")[1]) for r in rows if r[1] == "spine")
    assert uplinks == list(range(3, 49, 3))
    ports_on_leaf = [r[5] for r in rows if r[4] == "leaf0"] + [r[3] for r in rows if r[2] == "leaf0"]
    assert len(ports_on_leaf) == len(set(ports_on_leaf)) == 48


def test_cabling_every_cable_once_and_no_interface_twice():
    f = build(
        CLUSTER.model_copy(update={"nic_ports": 2}),
        FabricSpec(topology="multi-pod", pods=2, servers_per_segment=2, spines=4, superspines=4),
    )
    rows = list(cabling_rows(f))
    # 2 pods x 2 segments x (2 planes x 8 rails) = 64 rail switches x 4 spines; 8 spines x 4 super-spines
    assert Counter(r[1] for r in rows) == {"host": 128, "spine": 64 * 4, "superspine": 8 * 4}
    ends = [(r[2], r[3]) for r in rows if r[1] != "host"] + [(r[4], r[5]) for r in rows]
    assert len(ends) == len(set(ends))


def test_addressing_nic_ips_in_their_rail_subnet_and_aggregate():
    cluster = ClusterSpec(servers=8, gpus_per_server=4, nic_speed_gbps=400)
    fabric = FabricSpec(servers_per_segment=4, rails_per_switch=2, spines=2)
    f = build(cluster, fabric)
    plan = AddressPlan.of(f.design)
    subnets = {(s.switch_group[1], s.rails[0]): (s.network, agg) for s, agg in plan.rows()}
    assert len(subnets) == 2 * 4  # 2 segments x 4 rails
    nets = [n for n, _ in subnets.values()]
    assert all(not a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1 :])
    for node in f.nodes.values():
        if node.kind != NIC:
            continue
        segment = node.server // 4
        net, agg = subnets[segment, node.index]
        ip = ipaddress.IPv4Address(node.ip)
        assert ip in net and ip in agg and ip != net.network_address + 1  # .1 is the gateway
    # the two rails of a dual-rail switch share one aggregate that covers exactly their subnets
    (n0, agg0), (n1, agg1) = subnets[0, 0], subnets[0, 1]
    assert agg0 == agg1 == covering_aggregate([n0, n1]) and agg0.num_addresses == 2 * n0.num_addresses


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**24 - 1), st.integers(20, 30)), min_size=1, max_size=6))
def test_covering_aggregate_is_the_smallest_single_prefix(nets):
    networks = [ipaddress.IPv4Network(((10 << 24) | (a & ~((1 << (32 - p)) - 1) & 0xFFFFFF), p)) for a, p in nets]
    agg = covering_aggregate(networks)
    assert all(n.subnet_of(agg) for n in networks)
    if agg.prefixlen < 32:
        halves = list(agg.subnets(prefixlen_diff=1))
        assert not any(all(n.subnet_of(h) for n in networks) for h in halves)


def test_prefix_for_hosts():
    assert prefix_for_hosts(4) == 29  # 4 hosts + network + gateway + broadcast = 7 -> /29
    assert prefix_for_hosts(5) == 29
    assert prefix_for_hosts(6) == 28
    assert prefix_for_hosts(32) == 26


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from([1, 2, 4]),
    st.sampled_from([2, 4, 8]),
    st.sampled_from([1, 2]),
    st.sampled_from([1, 2]),
    st.sampled_from(["rail", "switch"]),
)
def test_every_nic_has_a_unique_address_inside_its_switch_aggregate(segments, gpus, ports, rps, per):
    cluster = ClusterSpec(servers=2 * segments, gpus_per_server=gpus, nic_ports=ports)
    fabric = FabricSpec(servers_per_segment=2, rails_per_switch=rps, spines=2, subnet_per=per)
    f = build(cluster, fabric)
    plan = AddressPlan.of(f.design, subnet_per=per)
    aggregates = {s.switch_group: agg for s, agg in plan.rows()}
    ips = [n.ip for n in f.nodes.values() if n.kind == NIC]
    assert len(set(ips)) == len(ips)
    for node in f.nodes.values():
        if node.kind == NIC:
            seg = node.server // 2
            agg = aggregates[0, seg, node.index // rps]
            assert ipaddress.IPv4Address(node.ip) in agg
    aggs = list(aggregates.values())
    assert all(not a.overlaps(b) for i, a in enumerate(aggs) for b in aggs[i + 1 :])
