"""ECMP picks a path from the 5-tuple; colliding flows share a link's bandwidth, separated flows do not."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from aifabric.engines import run
from aifabric.engines.taskgraph import TRANSFER, TaskGraph
from aifabric.fabric import Router, build_rail_optimized
from aifabric.fabric.ecmp import FiveTuple, ecmp_hash, fmix32, roce_udp_source_port
from aifabric.scenario.schema import ClusterSpec, FabricSpec

CLUSTER = ClusterSpec(gpu="H100", servers=2, gpus_per_server=2, nic_speed_gbps=400)
FABRIC = FabricSpec(spines=2, link_speed_gbps=400)
SIZE_BYTES = 1e9
LINK_BYTES_PER_S = 400e9 / 8


def test_hash_is_the_documented_function_of_the_packed_five_tuple():
    flow = FiveTuple(src_ip=0x0A000001, dst_ip=0x0A010002, src_port=0xC123)
    key = bytes.fromhex("0a0000010a01000211c12312b7")  # 4791 = 0x12b7, UDP = 17
    assert flow.key() == key
    assert ecmp_hash(flow, 7) == fmix32(zlib.crc32(key) ^ 7)


def test_seed_changes_which_flows_share_a_path():
    """With a plain seeded CRC the relative choice of two flows among 2 paths never changes (CRC is
    affine over GF(2)); the finalizer makes the seed matter."""
    a = FiveTuple(0x0A000001, 0x0A010002, 0xC001)
    b = FiveTuple(0x0A000003, 0x0A010004, 0xC0F0)
    plain = {(zlib.crc32(a.key(), s) ^ zlib.crc32(b.key(), s)) & 1 for s in range(64)}
    assert len(plain) == 1
    mixed = {(ecmp_hash(a, s) ^ ecmp_hash(b, s)) & 1 for s in range(64)}
    assert mixed == {0, 1}


def test_roce_source_ports_are_in_the_rocev2_range_and_deterministic():
    ports = {roce_udp_source_port(q, 0x1234) for q in range(0x100, 0x1100)}
    assert min(ports) >= 0xC000 and max(ports) <= 0xFFFF
    assert len(ports) > 2000  # 4096 QPs spread over the 16,384 ports: QPs give entropy
    assert roce_udp_source_port(0x12, 0x34) == roce_udp_source_port(0x12, 0x34)


def _cross_rail_pair(hash_seed: int):
    """Two flows from rail 0 to rail 1 (Figure 10-5 shape): rank 0 -> rank 3 and rank 2 -> rank 1."""
    fabric = build_rail_optimized(CLUSTER, FABRIC)
    router = Router(fabric, hash_seed=hash_seed, seed=1)
    return fabric, router.route(0, 3), router.route(2, 1)


def _uplink(fabric, route) -> str:
    return next(fabric.links[li].dst for li in route.links if fabric.links[li].tier == "spine")


def _find_seeds():
    same = separate = None
    for seed in range(200):
        fabric, a, b = _cross_rail_pair(seed)
        if _uplink(fabric, a) == _uplink(fabric, b):
            same = same if same is not None else seed
        else:
            separate = separate if separate is not None else seed
    return same, separate


def _run_pair(hash_seed: int) -> tuple[float, float]:
    fabric, a, b = _cross_rail_pair(hash_seed)
    g = TaskGraph()
    for src, dst, route in ((0, 3, a), (2, 1, b)):
        g.add(TRANSFER, src, dst, "flow", [], size_bytes=SIZE_BYTES, route=route.links, latency_s=route.latency_s)
    tl = run(g, fabric, "flow")
    return tl.end_s[0] - a.latency_s, tl.end_s[1] - b.latency_s


def test_same_inputs_same_paths():
    f1, a1, b1 = _cross_rail_pair(3)
    f2, a2, b2 = _cross_rail_pair(3)
    assert (a1.links, b1.links) == (a2.links, b2.links)


def test_two_flows_forced_onto_one_uplink_get_half_each():
    same, _ = _find_seeds()
    assert same is not None
    t_a, t_b = _run_pair(same)
    half = SIZE_BYTES / (LINK_BYTES_PER_S / 2)
    assert t_a == pytest.approx(half, rel=1e-6)
    assert t_b == pytest.approx(half, rel=1e-6)


def test_a_seed_that_separates_them_gives_each_the_full_link():
    _, separate = _find_seeds()
    assert separate is not None
    t_a, t_b = _run_pair(separate)
    full = SIZE_BYTES / LINK_BYTES_PER_S
    assert t_a == pytest.approx(full, rel=1e-6)
    assert t_b == pytest.approx(full, rel=1e-6)


def test_same_rail_traffic_never_crosses_a_spine():
    fabric = build_rail_optimized(CLUSTER, FABRIC)
    route = Router(fabric).route(0, 2)  # s0/gpu0 -> s1/gpu0, both on rail 0
    tiers = [fabric.links[li].tier for li in route.links]
    assert tiers == ["pcie", "host", "host", "pcie"]
    nodes = [fabric.links[li].dst for li in route.links]
    assert nodes == ["s0/nic0", "rail0", "s1/nic0", "s1/gpu0"]


def test_intra_server_traffic_uses_nvlink_only():
    fabric = build_rail_optimized(CLUSTER, FABRIC)
    route = Router(fabric).route(0, 1)
    assert route.scale_up
    assert [fabric.links[li].tier for li in route.links] == ["nvlink", "nvlink"]
    np.testing.assert_allclose(fabric.links[route.links[0]].capacity_bytes_per_s, 450e9)  # 900 GB/s / 2


def test_spraying_splits_colliding_flows_over_both_spines():
    """The flow engine's spraying (fluid per-packet spray): the two flows ECMP put on one uplink now
    spread over both spines, each at the full NIC rate; every link's bytes are the split shares."""
    from aifabric.engines.tasks import spread_over_paths

    same, _ = _find_seeds()
    fabric, a, b = _cross_rail_pair(same)
    router = Router(fabric, hash_seed=same, seed=1)
    g = TaskGraph()
    for src, dst, route in ((0, 3, a), (2, 1, b)):
        g.add(TRANSFER, src, dst, "flow", [], size_bytes=SIZE_BYTES, route=route.links, latency_s=route.latency_s)
    spread_over_paths(g, fabric, router)
    assert g.route_weight and all(len(g.route[t]) > len(r.links) for t, r in ((0, a), (1, b)))
    tl = run(g, fabric, "flow")
    full = SIZE_BYTES / LINK_BYTES_PER_S
    assert tl.end_s[0] - a.latency_s == pytest.approx(full, rel=1e-6)
    assert tl.end_s[1] - b.latency_s == pytest.approx(full, rel=1e-6)
    spine_up = [li for li, link in enumerate(fabric.links) if link.tier == "spine" and link.src.startswith("rail")]
    loaded = [tl.link_bytes[li] for li in spine_up if tl.link_bytes[li] > 0]
    assert len(loaded) == 2 and loaded == pytest.approx([SIZE_BYTES, SIZE_BYTES])  # half of each flow per spine
    analytic = run(g, fabric, "analytic")
    assert analytic.end_s[0] - a.latency_s == pytest.approx(full, rel=1e-6)


def test_weighted_max_min_matches_a_hand_computed_split():
    """A flow with half its rate on each of two links next to a full-path flow on one of them."""
    from aifabric.engines.maxmin import max_min_pairs

    cap = np.array([10.0, 10.0])
    rates = max_min_pairs(np.array([0, 0, 1]), np.array([0, 1, 0]), 2, cap, np.array([0.5, 0.5, 1.0]))
    # link 0: 0.5 r0 + r1 <= 10 with r0 = r1 at the first level -> 6.67 each; link 1 has room left
    assert rates == pytest.approx([20 / 3, 20 / 3])
