"""The flow engine's network links pay the RoCE path MTU's per-packet headers (fabric/achievable.py)."""

from __future__ import annotations

import copy

import pytest

from aifabric.fabric.achievable import ROCE_OVERHEAD_BYTES, header_efficiency
from aifabric.fabric.graph import TIER_HOST, TIER_PCIE, TIER_SPINE
from aifabric.scenario import load_scenario
from aifabric.simulate import build_fabric, simulate


def _scenario(ch14_data, mtu: int):
    ch14_data["workload"]["model"]["layer_widths"] = [2048, 4096, 2048]
    ch14_data["fabric"]["qos"] = {"roce_mtu_bytes": mtu}
    return load_scenario(ch14_data)


def test_header_arithmetic():
    assert ROCE_OVERHEAD_BYTES == 82  # Ethernet 14, IPv4 20, UDP 8, BTH 12, ICRC 4, FCS 4, preamble + IFG 20
    assert header_efficiency("roce") == pytest.approx(4096 / 4178)
    assert header_efficiency("roce", 1024) == pytest.approx(1024 / 1106)
    assert header_efficiency("roce", 256) < header_efficiency("roce", 1024) < header_efficiency("roce", 4096)
    assert header_efficiency("infiniband", 1024) == header_efficiency("infiniband")  # the RoCE profile's alone


def test_a_1024_byte_path_mtu_lowers_the_achievable_rate(ch14_data):
    small, big = (build_fabric(_scenario(copy.deepcopy(ch14_data), mtu))[0] for mtu in (1024, 4096))
    for tier in (TIER_HOST, TIER_SPINE):
        a = next(link for link in small.links if link.tier == tier)
        b = next(link for link in big.links if link.tier == tier)
        assert a.rate_bytes_per_s / b.rate_bytes_per_s == pytest.approx((1024 / 1106) / (4096 / 4178))
    pcie = [(a.rate_bytes_per_s, b.rate_bytes_per_s) for a, b in zip(small.links, big.links) if a.tier == TIER_PCIE]
    assert pcie and all(x == y for x, y in pcie)  # PCIe carries no RoCE headers


def test_the_flow_engine_runs_slower_at_a_1024_byte_path_mtu(ch14_data):
    t = {
        mtu: simulate(_scenario(copy.deepcopy(ch14_data), mtu), engine="flow").results.iteration_time_s
        for mtu in (1024, 4096)
    }
    assert t[1024] > t[4096]


def test_compare_does_not_call_the_path_mtu_or_dlb_the_packet_engines(ch14_data):
    from aifabric.compare import Variant, inert_notes

    s = load_scenario(ch14_data)
    for field, a, b in (
        ("fabric.qos.roce_mtu_bytes", 1024, 4096),
        ("fabric.qos.dlb.mode", "off", "flowlet"),
        ("fabric.qos.wred.max_kb", 2000, 3000),
    ):
        notes = inert_notes([Variant("a", s, ((field, a),)), Variant("b", s, ((field, b),))], [{}, {}], engine="flow")
        assert any("packet engine" in n for n in notes) == (field == "fabric.qos.wred.max_kb")
