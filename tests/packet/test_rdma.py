"""The packet engine's transfers on verbs objects: a QP per queue pair, PSNs from the seeded generator, the
configured P_Key, R_Keys, completions; the responder's P_Key and R_Key checks; the CM exchange on the wire
(Deep Learning for Network Engineers, Chapter 9)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.contrib.roce import AETH, BTH
from scapy.layers.inet import UDP
from scapy.packet import Raw
from scapy.utils import rdpcap

from aifabric.packet.cm import REP, REQ, RTU, parse_mad
from aifabric.packet.config import NicConfig, PacketConfig
from aifabric.packet.network import Network
from aifabric.packet.pcap import RETH, write_pcap
from aifabric.packet.topo import leaf_spine, link_between
from aifabric.packet.verbs import QpState, WcStatus


def _net(nic: NicConfig | None = None, seed: int = 0, **cfg):
    f = leaf_spine([["a", "b", "c"]], ["sw"], [], 100)
    net = Network(f, PacketConfig(nic=nic or NicConfig(), seed=seed, trace_flows=(0,), **cfg))
    route = (link_between(f, "a", "sw"), link_between(f, "sw", "b"))
    return net, route


def _pcap(net, tmp_path):
    path = tmp_path / "x.pcap"
    write_pcap(path, net.captured, net, lldp=False)
    return list(rdpcap(str(path)))


def test_every_transfer_is_a_work_request_on_a_qp_in_rts_and_completes_in_its_cq():
    net, route = _net()
    flows = [net.add_transfer(route, 50e3, name=f"w{i}", qpn=0x200) for i in range(3)]
    other = net.add_transfer(route, 50e3, name="other qp", qpn=0x201)
    net.run()
    assert len(net.connections) == 2
    conn = flows[0].conn
    assert all(f.conn is conn for f in flows) and other.conn is not conn
    assert conn.req.state is QpState.RTS and conn.resp.state is QpState.RTS
    assert conn.req.dest_qpn == conn.resp.qpn == 0x200 and conn.resp.dest_qpn == conn.req.qpn
    assert conn.resp.rq_psn == conn.req.sq_psn == conn.ipsn
    # one message after the other on the QP: the PSNs continue
    assert [f.ipsn for f in flows] == [(conn.ipsn + sum(g.n for g in flows[:i])) % (1 << 24) for i in range(3)]
    wcs = net.rnic(flows[0].src).cq.poll(100)
    assert sorted(w.wr_id for w in wcs) == sorted(f.id for f in [*flows, other])
    assert all(w.status is WcStatus.SUCCESS and w.byte_len == 50_000 for w in wcs)
    assert {w.qp_num for w in wcs} == {0x200, 0x201}


def test_initial_psn_comes_from_the_seed_not_zero_and_is_reproducible():
    def psns(seed):
        net, route = _net(seed=seed)
        return [net.add_transfer(route, 10e3, qpn=q).ipsn for q in (0x300, 0x301, 0x302)]

    assert psns(0) == psns(0)
    assert psns(0) != psns(1)
    assert any(p != 0 for p in psns(0) + psns(1))


def test_initial_psns_do_not_change_the_switches_random_draws():
    """PSNs come from a stream of their own: the run's WRED marks and timing are those of any other PSN."""
    ends = []
    for seed in (3, 3):
        net, route = _net(seed=seed)
        f = net.add_transfer(route, 400e3)
        net.add_transfer((link_between(net.fabric, "c", "sw"), route[1]), 400e3)
        st = net.run()
        ends.append((f.done_t, st.total_ecn_marks()))
    assert ends[0] == ends[1]


def test_pcap_carries_the_pkey_qpns_initial_psn_and_rkey(tmp_path):
    net, route = _net(NicConfig(pkey=0x8012, mtu_bytes=1024))
    flow = net.add_transfer(route, 5000, qpn=0x123456, local_qpn=0x654321)
    net.run()
    pkts = _pcap(net, tmp_path)
    data = [p for p in pkts if BTH in p and p[BTH].opcode < 0x11]
    acks = [p for p in pkts if BTH in p and p[BTH].opcode == 0x11]
    assert len(data) == 5 and acks
    assert {p[BTH].pkey for p in data + acks} == {0x8012}
    assert {p[BTH].dqpn for p in data} == {0x123456} and {p[BTH].dqpn for p in acks} == {0x654321}
    assert [p[BTH].psn for p in data] == [(flow.ipsn + i) % (1 << 24) for i in range(5)]
    first = data[0]
    mr = net.rnic(flow.dst).mr
    assert first[RETH].rkey == mr.rkey == flow.wr.rkey and first[RETH].va == mr.addr and first[RETH].dlen == 5000
    assert acks[-1][BTH].psn == (flow.ipsn + 4) % (1 << 24)  # the last PSN acknowledged


def test_bad_rkey_is_a_nak_remote_access_error_and_an_error_completion(tmp_path):
    net, route = _net()
    bad = net.add_transfer(route, 40e3, rkey=0xBAD00, qpn=0x400)
    queued = net.add_transfer(route, 40e3, qpn=0x400)  # the next work request on the same QP
    st = net.run()
    conn = bad.conn
    assert bad.error is WcStatus.REM_ACCESS_ERR and bad.done_t is None and bad.n_got == 0
    assert conn.req.state is QpState.ERR and queued.error is WcStatus.WR_FLUSH_ERR
    wcs = net.rnic(bad.src).cq.poll()
    assert [(w.wr_id, w.status) for w in wcs] == [(bad.id, WcStatus.REM_ACCESS_ERR), (queued.id, WcStatus.WR_FLUSH_ERR)]
    assert st.flows[0]["status"] == "remote access error" and st.flows[0]["local_qpn"] == conn.req.qpn
    naks = [p for p in _pcap(net, tmp_path) if AETH in p and p[AETH].syndrome == 0x62]
    assert len(naks) == 1 and naks[0][BTH].psn == bad.ipsn


def test_a_write_beyond_the_registered_region_is_refused():
    net, route = _net()
    mr = net.rnic(net.devices[net.node_index["b"]]).mr
    flow = net.add_transfer(route, 40e3, remote_addr=mr.addr + mr.length - 20_000)
    net.run()
    assert flow.error is WcStatus.REM_ACCESS_ERR and flow.n_got == 0


def test_write_only_packets_are_checked_one_by_one():
    """Every Write Only packet carries its own RETH: those inside the region are placed, the first outside is
    NAKed and the QP goes to ERR."""
    net, route = _net(NicConfig(write_only=True, mtu_bytes=1024))
    mr = net.rnic(net.devices[net.node_index["b"]]).mr
    flow = net.add_transfer(route, 10 * 1024, remote_addr=mr.addr + mr.length - 4 * 1024)
    net.run()
    assert flow.error is WcStatus.REM_ACCESS_ERR and flow.n_got == 4


def test_pkey_mismatch_is_dropped_counted_and_the_qp_fails_after_its_retries():
    net, route = _net(NicConfig(pkey=0x8012, rto_s=20e-6, retry_cnt=3))
    flow = net.add_transfer(route, 20e3, pkey=0x8013)
    st = net.run()
    assert flow.n_got == 0 and flow.naks == 0  # dropped without a word
    assert st.pkey_violations[("b",)] == flow.pkey_drops > 0
    assert flow.timeouts == 4 and flow.error is WcStatus.RETRY_EXC_ERR
    assert flow.conn.req.state is QpState.ERR
    assert st.to_dict()["pkey_violations"] == [{"nic": "b", "count": flow.pkey_drops}]


def test_a_limited_member_pkey_matches_the_full_member_of_its_partition():
    net, route = _net(NicConfig(pkey=0x8012))
    flow = net.add_transfer(route, 20e3, pkey=0x0012)
    st = net.run()
    assert flow.error is None and flow.done_t is not None and not st.pkey_violations


# -- the CM exchange on the wire -----------------------------------------------------------------------------
def test_cm_req_rep_rtu_go_to_qp1_before_the_first_write_and_cost_time(tmp_path):
    fcts = {}
    for cm in (False, True):
        net, route = _net(NicConfig(cm_setup=cm, pkey=0x8012, mtu_bytes=1024))
        flow = net.add_transfer(route, 20e3, qpn=0x123456)
        again = net.add_transfer(route, 20e3, qpn=0x123456)
        net.run()
        fcts[cm] = flow.done_t - flow.start_t
        conn = flow.conn
    assert [m for _, _, m in conn.cm_log] == ["REQ", "REP", "RTU"]  # once per QP, not per message
    assert again.done_t is not None and conn.resp.state is QpState.RTS
    setup = conn.ready_t - conn.setup_start_t
    assert setup >= 3 * net.cfg.nic.cm_processing_s
    assert fcts[True] == pytest.approx(fcts[False] + setup, rel=0.05)
    pkts = _pcap(net, tmp_path)
    mads = [p for p in pkts if BTH in p and p[BTH].opcode == 0x64]
    assert [p[BTH].dqpn for p in mads] == [1, 1, 1] and {p[BTH].pkey for p in mads} == {0x8012}
    first_write = next(i for i, p in enumerate(pkts) if BTH in p and p[BTH].opcode < 0x11)
    assert first_write > max(pkts.index(p) for p in mads)
    assert mads[0].time < mads[1].time < mads[2].time <= pkts[first_write].time


def _mad(frame) -> bytes:
    raw = bytes(frame[BTH].payload)
    assert struct.unpack("!I", raw[:4])[0] == 0x80010000 and raw[5:8] == b"\x00\x00\x01"  # DETH: Q_Key, source QP 1
    return raw[8 : 8 + 256]


def test_cm_mads_have_the_ibta_layout(tmp_path):
    """Offsets from IBTA Vol. 1 Table 99 (REQ), 103 (REP), 106 (RTU) and §13.4.3 (MAD header)."""
    net, route = _net(NicConfig(cm_setup=True, pkey=0x8012, mtu_bytes=1024))
    flow = net.add_transfer(route, 4096, qpn=0x123456, local_qpn=0x345678)
    net.run()
    conn = flow.conn
    mads = [p for p in _pcap(net, tmp_path) if BTH in p and p[BTH].opcode == 0x64]
    assert all(p[UDP].dport == 4791 and Raw in p for p in mads)
    req, rep, rtu = (_mad(p) for p in mads)
    for m, attr in ((req, 0x0010), (rep, 0x0013), (rtu, 0x0014)):
        assert m[0:4] == bytes([1, 0x07, 2, 0x03])  # base version 1, class CM, class version 2, Send
        assert struct.unpack("!H", m[16:18])[0] == attr
        assert m[8:16] == req[8:16]  # one transaction
    d = req[24:]
    assert struct.unpack("!I", d[32:36])[0] >> 8 == 0x345678  # Local QPN
    assert (d[43] >> 1) & 3 == 0  # Transport Service Type: RC
    assert struct.unpack("!I", d[44:48])[0] >> 8 == conn.ipsn  # Starting PSN
    assert struct.unpack("!H", d[48:50])[0] == 0x8012 and d[50] >> 4 == 3  # P_Key, Path MTU 1024
    assert d[56:72] == b"\x00" * 10 + b"\xff\xff" + bytes([10, 0, 0, 1])  # the client's GID ::ffff:10.0.0.1
    e = rep[24:]
    assert struct.unpack("!I", e[4:8])[0] == struct.unpack("!I", d[0:4])[0]  # Remote Comm ID = the REQ's Local
    assert struct.unpack("!I", e[12:16])[0] >> 8 == 0x123456 and struct.unpack("!I", e[20:24])[0] >> 8 == conn.resp_ipsn
    assert rtu[24:32] == d[0:4] + e[0:4]
    p = parse_mad(req)
    assert (p["attribute_id"], p["local_qpn"], p["starting_psn"], p["pkey"]) == (REQ, 0x345678, conn.ipsn, 0x8012)
    assert parse_mad(rep)["attribute_id"] == REP and parse_mad(rtu)["attribute_id"] == RTU


# -- receive-side placement ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "nic, placement",
    [(NicConfig(write_only=True), "direct"), (NicConfig(transport="uet"), "direct"), (NicConfig(), "go-back-N")],
)
def test_placement_by_transport_under_spraying(nic, placement):
    """Sprayed over unequal paths (Chapter 12, Figures 12-6/12-7): direct placement takes every packet as it comes,
    keeping a bitmap of received PSNs; go-back-N discards what overtook and resends it."""
    from aifabric.packet.config import LbConfig
    from aifabric.packet.scenarios import _fig12_fabric, _flow

    f = _fig12_fabric(1000)
    net = Network(f, PacketConfig(nic=nic, lb=LbConfig(mode="spray" if nic.transport == "rc" else "ecmp")))
    flow = _flow(net, f, "host1/GPU1", "host4/GPU2", 1e6, 0x100)
    st = net.run()
    row = st.flows[0]
    assert flow.done_t is not None and flow.n_got == flow.n and row["placement"] == placement
    if placement == "direct":
        assert flow.ooo > 0 and flow.retx == 0 and flow.naks == 0  # every byte, no retransmission
        assert 0 < row["bitmap_peak_psns"] < flow.n and row["bitmap_bytes"] == -(-row["bitmap_peak_psns"] // 8)
    else:
        assert flow.retx > 0 and flow.naks > 0 and row["bitmap_peak_psns"] == 0


def test_out_of_band_setup_is_not_narrated_but_the_cm_exchange_is():
    for cm in (False, True):
        net, route = _net(NicConfig(cm_setup=cm), explain=True)
        net.add_transfer(route, 20e3)
        net.run()
        cats = {c for _, c, _ in net.events_log}
        assert ({"qp", "cm"} <= cats) if cm else not cats & {"qp", "cm"}


# -- properties ------------------------------------------------------------------------------------------------
@settings(max_examples=15, deadline=None)
@given(
    msgs=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 2), st.integers(1, 60_000)),
        min_size=1,
        max_size=8,
    ),
    cm=st.booleans(),
    transport=st.sampled_from(["rc", "uet"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_work_request_completes_once_and_psns_tile_each_qp(msgs, cm, transport, seed):
    """Whatever the messages, QPs, setup and seed: one success completion per work request, the QPs in RTS, and
    on each QP the messages' PSN ranges follow one another from its initial PSN (mod 2^24) without overlap."""
    from aifabric.packet.topo import ecmp_route, fat_tree, five_tuple

    f = fat_tree(4, 2, 2, 100)
    net = Network(f, PacketConfig(nic=NicConfig(cm_setup=cm, transport=transport, mtu_bytes=1024), seed=seed % 7))
    made = []
    for s, d, q, size in msgs:
        if s == d:
            continue
        ft = five_tuple(f, f"h{s}", f"h{d}", 0x100 + q, 0x100 + q)
        made.append(net.add_transfer(ecmp_route(f, f"h{s}", f"h{d}", ft, 0), size, qpn=0x100 + q, sport=ft.src_port))
    net.run()
    wcs = [w for r in net.rnics.values() for w in r.cq.entries]
    assert sorted(w.wr_id for w in wcs) == sorted(fl.id for fl in made)
    assert all(w.status is WcStatus.SUCCESS for w in wcs)
    for conn in net.connections.values():
        assert conn.req.state is QpState.RTS and conn.resp.state is QpState.RTS
        assert conn.req.type == ("RUD" if transport == "uet" else "RC")
        psn = conn.ipsn
        for fl in (m for m in made if m.conn is conn):
            assert fl.ipsn == psn
            psn = (psn + fl.n) % (1 << 24)
        assert psn == conn.next_psn
