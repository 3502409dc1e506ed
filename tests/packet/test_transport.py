"""RoCEv2 RC transport on the packet engine: PSN order, NAK + go-back-N, timeouts, CNP pacing, UET."""

from __future__ import annotations

import pytest

from aifabric.packet.config import DcqcnConfig, NicConfig, PacketConfig, SwitchConfig
from aifabric.packet.network import Network
from aifabric.packet.topo import leaf_spine, link_between


def _incast(cfg: PacketConfig, senders: int = 3, size: float = 1e6, dscp: int | None = None):
    hosts = [f"s{i}" for i in range(senders)] + ["dst"]
    f = leaf_spine([hosts], ["sw"], [], 100)
    net = Network(f, cfg)
    flows = [
        net.add_transfer((link_between(f, h, "sw"), link_between(f, "sw", "dst")), size, name=h, dscp=dscp)
        for h in hosts[:-1]
    ]
    return net, flows


def test_lossy_class_drops_and_go_back_n_recovers_every_byte():
    """DSCP 0 (queue 0, no PFC) into a 60 KB queue: drops, NAKs, go-back-N; every flow still completes."""
    cfg = PacketConfig(switch=SwitchConfig(queue_limit_bytes=60_000), dcqcn=DcqcnConfig(enabled=False))
    net, flows = _incast(cfg, dscp=0)
    st = net.run()
    assert st.total_drops() > 0
    assert all(f.done_t is not None and f.n_got == f.n for f in flows)
    assert sum(f.retx for f in flows) >= st.total_drops()
    assert sum(f.naks for f in flows) > 0
    assert all(f.acked_t is not None for f in flows)


def test_lossless_class_does_not_drop_under_the_same_incast():
    sw = SwitchConfig(pfc_xon_bytes=20_000, wred_min_bytes=30_000, wred_max_bytes=50_000, pfc_xoff_bytes=60_000)
    net, flows = _incast(PacketConfig(switch=sw, dcqcn=DcqcnConfig(enabled=False)))
    st = net.run()
    assert st.total_drops() == 0 and st.total_pauses() > 0
    assert all(f.retx == 0 for f in flows)


def test_timeout_resends_when_the_tail_is_lost():
    """Drop-tail loses the last packets with nothing behind them to trigger a NAK: the RTO recovers."""
    cfg = PacketConfig(
        switch=SwitchConfig(queue_limit_bytes=30_000), dcqcn=DcqcnConfig(enabled=False), nic=NicConfig(rto_s=100e-6)
    )
    net, flows = _incast(cfg, senders=4, size=300e3, dscp=0)
    net.run()
    assert all(f.done_t is not None for f in flows)
    assert sum(f.timeouts for f in flows) > 0


def test_cnps_respect_the_minimum_interval():
    net, flows = _incast(PacketConfig(), senders=3, size=4e6)
    st = net.run()
    end = max(f.done_t for f in flows)
    for f in flows:
        assert 0 < f.cnp_tx <= end / 50e-6 + 1
        assert f.ce_rx >= f.cnp_tx  # one CNP stands for many CE-marked packets
    assert st.total_ecn_marks() >= sum(f.ce_rx for f in flows)


def test_psns_arrive_in_order_without_contention():
    net, flows = _incast(PacketConfig(), senders=1, size=2e6)
    net.run()
    f = flows[0]
    assert f.ooo == 0 and f.retx == 0 and f.epsn == f.n == 489  # ceil(2e6 / 4096)


def test_uet_mode_sprays_and_tolerates_reordering():
    f = leaf_spine([["a", "b"], ["c", "d"]], ["l0", "l1"], ["s0", "s1", "s2", "s3"], 100)
    cfg = PacketConfig(nic=NicConfig(transport="uet"))
    net = Network(f, cfg)
    route = (
        link_between(f, "a", "l0"),
        link_between(f, "l0", "s0"),
        link_between(f, "s0", "l1"),
        link_between(f, "l1", "c"),
    )
    flow = net.add_transfer(route, 4e6)
    net.run()
    used = [net.ports[link_between(f, "l0", s)].tx_packets for s in ("s0", "s1", "s2", "s3")]
    assert min(used) > 0.15 * flow.n  # per-packet entropy spreads over all four spines
    assert flow.done_t is not None and flow.retx == 0
    assert flow.write_only  # every UET packet is self-contained


def test_unknown_transport_and_lb_are_input_errors():
    from aifabric.errors import InputError
    from aifabric.packet.config import LbConfig, validate

    with pytest.raises(InputError):
        validate(PacketConfig(nic=NicConfig(transport="tcp")))
    with pytest.raises(InputError):
        validate(PacketConfig(lb=LbConfig(mode="random")))


def test_a_pxn_relay_route_runs_hop_by_hop():
    """GPU0 -NVLink-> GPU1 -PCIe-> NIC1 -> rail -> remote NIC1 -> GPU1 (seeds §6.5 cross-rail relay): the
    middle PCIe hop is a port like any other; ACKs come back the same way."""
    from aifabric.fabric.graph import GPU, NIC, NVSWITCH, RAIL, TIER_HOST, TIER_NVLINK, TIER_PCIE, Fabric, Node

    f = Fabric("pxn", 2)
    f.add_node(Node("rail", RAIL, index=0))
    for s in range(2):
        f.add_node(Node(f"s{s}/nvs", NVSWITCH, server=s))
        for g in range(2):
            f.add_node(Node(f"s{s}/g{g}", GPU, server=s, index=g))
            f.add_node(Node(f"s{s}/n{g}", NIC, server=s, index=g, ip=(10 << 24) | (s << 8) | g))
            f.add_cable(f"s{s}/g{g}", f"s{s}/nvs", 450e9, 250e-9, TIER_NVLINK)
            f.add_cable(f"s{s}/g{g}", f"s{s}/n{g}", 64e9, 300e-9, TIER_PCIE)
            f.add_cable(f"s{s}/n{g}", "rail", 50e9, 100e-9, TIER_HOST)
    hops = [
        ("s0/g0", "s0/nvs"),
        ("s0/nvs", "s0/g1"),
        ("s0/g1", "s0/n1"),
        ("s0/n1", "rail"),
        ("rail", "s1/n1"),
        ("s1/n1", "s1/g1"),
    ]
    net = Network(f)
    flow = net.add_transfer(tuple(link_between(f, a, b) for a, b in hops), 1e6)
    net.run()
    assert flow.done_t is not None and flow.acked_t is not None and flow.retx == 0
    assert flow.line_bytes_per_s == 50e9  # 400 Gb/s: the NIC link is the slowest hop
    assert net.ports[link_between(f, "s0/g1", "s0/n1")].tx_packets == flow.n
