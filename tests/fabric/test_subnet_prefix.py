"""`fabric.subnet_prefix_length`: the book's /28, /25 and /24 per rail (Deep Learning for Network Engineers,
Chapter 13, Figures 13-10..13-12) and their aggregates; a prefix too long for the hosts is refused."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.fabric import build
from aifabric.fabric.addressing import AddressPlan
from aifabric.scenario.fabric_spec import ClusterSpec, FabricSpec


def _plan(hosts: int, rails_per_switch: int, prefix: int | None, block: str = "10.0.0.0/8"):
    cluster = ClusterSpec(servers=hosts, gpus_per_server=8, nic_speed_gbps=400)
    fab = FabricSpec(
        rails_per_switch=rails_per_switch,
        servers_per_segment=hosts,
        spines=2,
        subnet_prefix_length=prefix,
        address_block=block,
        switch_radix=64,
    )
    f = build(cluster, fab)
    return f, AddressPlan.from_spec(f.design, fab)


@pytest.mark.parametrize(
    "figure, hosts, rails_per_switch, prefix, smallest, aggregate",
    [
        ("13-10 multi-rail", 4, 8, 28, 29, 25),
        ("13-11 dual-rail", 16, 2, 25, 27, 24),
        ("13-12 single-rail", 32, 1, 24, 26, 24),
    ],
)
def test_the_books_prefixes_and_aggregates(figure, hosts, rails_per_switch, prefix, smallest, aggregate):
    _, default = _plan(hosts, rails_per_switch, None)
    assert default.subnet_prefix == smallest  # smallest fit without the option
    _, plan = _plan(hosts, rails_per_switch, prefix, "10.0.1.0/24" if rails_per_switch <= 2 else "10.0.0.0/8")
    rows = list(plan.rows())
    first_switch = [(s, agg) for s, agg in rows if s.switch_group == rows[0][0].switch_group]
    assert len(first_switch) == rails_per_switch
    assert all(s.network.prefixlen == prefix for s, _ in first_switch)
    assert {agg.prefixlen for _, agg in first_switch} == {aggregate}


def test_dual_rail_is_the_books_summary():
    """Figure 13-11: two /25s per switch summarized as 10.0.1.0/24 (contiguous here, unlike the book's
    10.0.128.0/25, an erratum)."""
    _, plan = _plan(16, 2, 25, "10.0.1.0/24")
    (s1, agg), (s2, _) = list(plan.rows())[:2]
    assert (str(s1.network), str(s2.network), str(agg)) == ("10.0.1.0/25", "10.0.1.128/25", "10.0.1.0/24")
    assert (s1.vlan, s2.vlan) == (101, 102)


@settings(max_examples=30, deadline=None)
@given(hosts=st.integers(1, 16), rails_per_switch=st.sampled_from([1, 2, 4, 8]), extra=st.integers(0, 3))
def test_nics_sit_in_their_rail_subnet(hosts, rails_per_switch, extra):
    """Every NIC address is a host address of its rail's subnet, whatever the prefix."""
    _, default = _plan(hosts, rails_per_switch, None)
    prefix = default.smallest_prefix - extra
    f, plan = _plan(hosts, rails_per_switch, prefix)
    nets = [s.network for s, _ in plan.rows()]
    assert all(n.prefixlen == prefix for n in nets)
    for node in f.nodes.values():
        if node.kind == "nic":
            ip = ipaddress.IPv4Address(node.ip)
            net = next(n for n in nets if ip in n)
            assert ip not in (net.network_address, net.broadcast_address, net.network_address + 1)


def test_a_prefix_too_long_for_the_hosts_exits_2(write_scenario, capsys):
    from aifabric.cli import run_app
    from aifabric.cli.app import app

    hw = {
        "name": "x",
        "cluster": {"gpu": "H100", "servers": 16, "gpus_per_server": 8},
        "fabric": {"rails_per_switch": 2, "servers_per_segment": 16, "subnet_prefix_length": 28},
    }
    assert run_app(app, ["fabric", "plan", str(write_scenario(hw))]) == 2
    out = capsys.readouterr()
    text = out.out + out.err
    assert "fabric.subnet_prefix_length" in text and "16" in text
    hw["fabric"]["subnet_prefix_length"] = 25
    assert run_app(app, ["fabric", "plan", str(write_scenario(hw))]) == 0
    assert "/25" in capsys.readouterr().out
