"""The seeds' worked examples (Ch. 10 and 13; spec network.md §12.2 tests 7, 8, 13, 14, 15), reproduced.

Where the book's arithmetic is wrong the test says so and checks the correct value.
"""

from __future__ import annotations

import ipaddress

import numpy as np
import pytest

from aifabric.catalog import (
    H100_NVLINKS_PER_NVSWITCH_CHIP,
    gpu,
    min_gpus_for_weights,
    nvlink_bandwidth_per_link_gBps,
)
from aifabric.fabric import Router, build
from aifabric.fabric.addressing import covering_aggregate
from aifabric.fabric.cabling import rail_interface_blocks, single_switch_port
from aifabric.fabric.ecmp import FiveTuple
from aifabric.fabric.plan import make_plan
from aifabric.fabric.polarization import offered_load_gbps, uplinks
from aifabric.scenario.fabric_spec import ClusterSpec, FabricSpec


# -- Figure 13-6: interface -> rail on a 48-port Cisco Nexus 9348D-GX2A (test 13) ------------------------------
def test_figure_13_6_rail_interface_map():
    blocks = rail_interface_blocks(ports=48, hosts=4, rails=8)
    rail_of = {i: r + 1 for r, ifs in blocks.items() for i in ifs}
    assert rail_of[25] == 3 and rail_of[14] == 6 and rail_of[47] == 8
    assert blocks[0] == [1, 4, 7, 10] and blocks[4] == [2, 5, 8, 11] and blocks[7] == [38, 41, 44, 47]
    assert all(len(ifs) == 4 for ifs in blocks.values())
    # the closed form of the spec: rails 1-4 at 1 + 12(r-1) + 3k, rails 5-8 at 2 + 12(r-5) + 3k
    for r in range(1, 9):
        first = 1 + 12 * (r - 1) if r <= 4 else 2 + 12 * (r - 5)
        assert blocks[r - 1] == [first + 3 * k for k in range(4)]
    # the figure leaves the multiples of 3 unassigned (our reading: the 16 uplinks)
    assert set(range(1, 49)) - set(rail_of) == set(range(3, 49, 3))


def test_figure_13_4_single_switch_port_groups():
    # three groups of eight 200 Gb/s ports: port p -> host ceil(p/8), rail ((p-1) mod 8) + 1
    assert single_switch_port(1, 8) == (1, 1)
    assert single_switch_port(8, 8) == (1, 8)
    assert single_switch_port(9, 8) == (2, 1)
    assert single_switch_port(24, 8) == (3, 8)
    f = build(ClusterSpec(servers=3, gpus_per_server=8, nic_speed_gbps=200), FabricSpec(topology="single-switch"))
    assert [n for n in f.nodes if f.is_switch(n)] == ["switch0"]
    assert make_plan(f).bom.switch_tiers[0].ports_used == 24


# -- Figures 13-7 / 13-8: the 64-GPU Pod (test 14) --------------------------------------------------------------
POD_CLUSTER = ClusterSpec(servers=8, gpus_per_server=8, nic_ports=2, nic_speed_gbps=100)
POD_FABRIC = FabricSpec(
    topology="rail-optimized", servers_per_segment=4, rails_per_switch=8, leaf_oversubscription=1.0, link_speed_gbps=800
)


def test_figure_13_8_pod_of_64_gpus_is_non_blocking_with_4_spines():
    # Host-Segment: 4 hosts x 8 GPUs, dual-port NICs, 8 rails on 2 switches; Pod = 2 segments = 4 rail switches.
    # The book's 3.2 Tb/s holds for 100 Gb/s host ports (errata #2: at 200 Gb/s it would be 6.4 Tb/s).
    f = build(POD_CLUSTER, POD_FABRIC)
    plan = make_plan(f)
    assert f.world_size == 64
    rail, spine = plan.capacity.tiers
    assert (rail.switches, spine.switches) == (4, 4)  # 4 spines derived from 3.2 Tb/s / 800 Gb/s
    assert rail.down_gbps == 32 * 100 == 3200
    assert rail.up_gbps == 4 * 800 == 3200
    assert rail.oversubscription == pytest.approx(1.0)
    assert plan.capacity.non_blocking
    assert "NON-BLOCKING" in plan.capacity.verdict
    # each GPU: a 2 x 100 Gb/s LAG in this configuration (Figure 13-7 says 2 x 200 = 400 at 200 Gb/s)
    assert plan.capacity.per_gpu_scale_out_gbps == 200


def test_figure_13_8_at_200g_host_ports_the_uplinks_double():
    # spec errata #2: "32 x 100 Gbps = 3.2 Tbps" conflicts with 200 Gb/s NIC ports: 32 x 200 = 6.4 Tb/s
    f = build(POD_CLUSTER.model_copy(update={"nic_speed_gbps": 200}), POD_FABRIC)
    rail = make_plan(f).capacity.tiers[0]
    assert rail.down_gbps == 6400 and rail.up_gbps == 6400
    assert f.design.spines_per_pod == 8


def test_figure_13_9_two_pods_four_superspines():
    cluster = POD_CLUSTER.model_copy(update={"servers": 16})
    fabric = POD_FABRIC.model_copy(update={"topology": "multi-pod", "pods": 2})
    f = build(cluster, fabric)
    plan = make_plan(f)
    rail, spine, superspine = plan.capacity.tiers
    assert f.world_size == 128
    assert (rail.switches, spine.switches, superspine.switches) == (8, 8, 4)
    assert spine.down_gbps == 4 * 800 == 3200  # 4 rail switches x 800G into each spine
    assert spine.up_gbps == 4 * 800 == 3200  # 4 super-spines x 800G: "must also be 3.2 Tbps"
    assert plan.capacity.non_blocking
    # stages: same rail switch 1, intra-pod 3 (leaf-spine-leaf), inter-pod 5
    router = Router(f)

    def switches(a, b):
        return sum(1 for li in router.route(a, b).links if f.is_switch(f.links[li].dst))

    assert switches(0, 8) == 1  # s0/gpu0 -> s1/gpu0: same segment, same rail switch plane
    assert switches(0, 32 + 0) == 3  # s0 -> s4: other segment of pod 1
    assert switches(0, 64 + 0) == 5  # s0 -> s8: pod 2


# -- Figure 10-2: incast toward one host (test 7) ----------------------------------------------------------------
def fig10_fabric():
    """Figure 10-1: 3 hosts x 2 GPUs, GPU-0 -> Rail Switch A, GPU-1 -> Rail Switch B, 200 Gb/s, two spines."""
    return build(
        ClusterSpec(servers=3, gpus_per_server=2, nic_speed_gbps=200),
        FabricSpec(topology="rail-optimized", spines=2, link_speed_gbps=400),
    )


def test_figure_10_2_incast_800_gbps_toward_host_2_e1():
    f = fig10_fabric()
    router = Router(f)
    target = 2  # Host-2 GPU-0 (rank = server 1 x 2 + 0)
    senders = [0, 1, 4, 5]  # Host-1 GPU-0/1, Host-3 GPU-0/1; Host-2 GPU-1 uses NVLink
    load = offered_load_gbps(f, [router.route(s, target) for s in senders], 200)
    e1 = f.link_between("rail0", "s1/nic0")
    assert load[e1] == 800  # 4:1 onto one 200 Gb/s link: 600 Gb/s too much
    assert load[e1] - f.links[e1].capacity_bytes_per_s * 8 / 1e9 == 600
    nvlink = router.route(3, target)
    assert nvlink.scale_up


# -- Figure 10-5: two flows polarized onto one uplink (test 8) ---------------------------------------------------
def test_figure_10_5_two_200g_flows_on_one_uplink_400_other_idle():
    f = fig10_fabric()
    router = Router(f)
    a, b = 0, 2  # GPU-0 on Host-1 and GPU-0 on Host-2 ...
    dst = 5  # ... both to GPU-1 (Host-3): Rail A -> spine -> Rail B
    rail_a_up = [li for li in f.out_links["rail0"] if f.links[li].dst.startswith("spine")]
    # find QP source ports that the hash sends the same way (the book forces it; the text gives no hash)
    first = router.route_with_source_port(a, dst, 0xC000)
    sport = next(
        p
        for p in range(0xC000, 0xC100)
        if set(router.route_with_source_port(b, dst, p).links) & set(first.links) & set(rail_a_up)
    )
    load = offered_load_gbps(f, [first, router.route_with_source_port(b, dst, sport)], 200)
    assert sorted(load[rail_a_up]) == [0, 400]
    # the ideal spread (spraying) halves it
    from aifabric.fabric.polarization import ideal_load_gbps

    ideal = ideal_load_gbps(router, [(a, dst), (b, dst)], 200)
    assert list(ideal[rail_a_up]) == [200, 200]
    assert set(uplinks(f)) >= set(rail_a_up)


# -- §6.5: cross-rail over NVLink in a rail-only fabric ----------------------------------------------------------
def test_pxn_cross_rail_path_of_section_6_5():
    # GPU-2 (Rail 3) on Host-1 -> GPU-3 (Rail 4) on Host-2: NVLink to GPU-3 on Host-1, its NIC, Rail 4, Host-2
    f = build(ClusterSpec(servers=2, gpus_per_server=8, nic_speed_gbps=400), FabricSpec(topology="rail-only"))
    route = Router(f).route(2, 8 + 3)
    hops = [f.links[li].dst for li in route.links]
    assert hops == ["s0/nvswitch", "s0/gpu3", "s0/nic3", "rail3", "s1/nic3", "s1/gpu3"]
    tiers = [f.links[li].tier for li in route.links]
    assert tiers == ["nvlink", "nvlink", "pcie", "host", "host", "pcie"]
    assert route.relay_rank == 3
    assert not any(n.startswith("spine") for n in f.nodes)


# -- Figure 13-3: model size -> GPUs (test 15) ---------------------------------------------------------------------
def test_figure_13_3_gpus_to_hold_the_weights():
    h100 = gpu("H100").hbm_gB
    assert min_gpus_for_weights(8e9, h100) == 1
    assert min_gpus_for_weights(70e9, h100) == 2
    # the book: "at least 10 GPUs"; 10 x 80 GB = 800 GB < 810 GB, so 11 (spec errata #1)
    assert min_gpus_for_weights(405e9, h100) == 11


# -- Figure 13-1: inside the server ----------------------------------------------------------------------------------
def test_figure_13_1_nvlink_and_shared_nic():
    assert sum(H100_NVLINKS_PER_NVSWITCH_CHIP) == 18 == gpu("H100").nvlink_links
    assert nvlink_bandwidth_per_link_gBps("H100") == 50  # 900 GB/s / 18
    # one shared 200 GbE ConnectX-7 behind a PCIe switch for 8 GPUs: the NIC is the bottleneck
    cluster = ClusterSpec(
        servers=2, gpus_per_server=8, nic_layout="shared", nic_speed_gbps=200, pcie_bandwidth_gBps=32
    )  # the book's "32 GB/s in each direction" (errata #6)
    f = build(cluster, FabricSpec(topology="single-switch"))
    cap = make_plan(f).capacity
    assert cap.per_gpu_scale_out_gbps == 25  # 200 / 8 = 25 Gb/s = 3.125 GB/s per GPU
    assert cap.bottleneck == "NIC"
    route = Router(f).route(3, 8 + 5)
    assert [f.links[li].dst for li in route.links][:3] == ["s0/pcie", "s0/nic0", "switch0"]


# -- Figures 13-10 / 13-11: route aggregates (spec errata #3, #4) --------------------------------------------------
def test_book_aggregates_are_wrong_and_ours_cover_the_subnets():
    # Figure 13-10: 10.0.1.0/28 + 10.0.2.0/28 "summarized as 10.0.1.0/24": 10.0.2.0/28 is not inside it
    multi = ["10.0.1.0/28", "10.0.2.0/28"]
    book = ipaddress.IPv4Network("10.0.1.0/24")
    assert not all(ipaddress.IPv4Network(n).subnet_of(book) for n in multi)
    assert covering_aggregate(multi) == ipaddress.IPv4Network("10.0.0.0/22")
    # Figure 13-11: 10.0.1.0/25 + 10.0.128.0/25 -> 10.0.0.0/16 (probably meant 10.0.1.128/25 -> 10.0.1.0/24)
    assert covering_aggregate(["10.0.1.0/25", "10.0.128.0/25"]) == ipaddress.IPv4Network("10.0.0.0/16")
    assert covering_aggregate(["10.0.1.0/25", "10.0.1.128/25"]) == book


def test_flow_key_uses_the_addressing_plan():
    f = fig10_fabric()
    route = Router(f).route(0, 2)
    assert isinstance(route.flow, FiveTuple)
    src = ipaddress.IPv4Address(route.flow.src_ip)
    dst = ipaddress.IPv4Address(route.flow.dst_ip)
    assert src in ipaddress.IPv4Network("10.0.0.0/8") and src != dst
    assert np.isfinite(route.latency_s)
