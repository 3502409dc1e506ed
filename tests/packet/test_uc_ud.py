"""UC and UD queue pairs in the packet engine (Deep Learning for Network Engineers, Chapter 9; IBTA Vol. 1 Ch. 9):
UC has no ACK and no retransmission (a lost packet loses its message; the sender's work request completes once
sent), UD sends datagrams of at most the path MTU, SEND only."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace

import pytest
from scapy.contrib.roce import AETH, BTH
from scapy.utils import rdpcap
from typer.testing import CliRunner

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.packet.cm import REQ, SERVICE_UC, mad_bytes, parse_mad
from aifabric.packet.config import PacketConfig
from aifabric.packet.connection import UD_QKEY
from aifabric.packet.nic import QpFlow
from aifabric.packet.pcap import RETH
from aifabric.packet.scenarios import run_scenario
from aifabric.packet.verbs import (
    LOCAL_WRITE,
    CompletionQueue,
    Device,
    QpState,
    VerbsError,
    WcStatus,
    WorkRequest,
)

runner = CliRunner()


def _cfg(transport: str, lossy: bool = False) -> PacketConfig:
    base = PacketConfig()
    cfg = replace(base, nic=replace(base.nic, transport=transport))
    if lossy:  # no PFC, and the lossless queue drops above 400 KB: the incast loses packets
        cfg = replace(
            cfg,
            switch=replace(base.switch, pfc_enabled=False, drop_threshold_bytes=400_000),
            dcqcn=replace(base.dcqcn, enabled=False),
        )
    return cfg


def test_uc_loses_messages_where_rc_retransmits():
    uc = run_scenario("incast", _cfg("uc", lossy=True), size_mb=0.4).runs[0][2]
    rc = run_scenario("incast", _cfg("rc", lossy=True), size_mb=0.4).runs[0][2]
    assert uc.total_drops() > 0 and rc.total_drops() > 0
    # RC: every message arrives, by retransmission
    assert sum(f["retransmissions"] for f in rc.flows) > 0 and all(f["status"] == "success" for f in rc.flows)
    assert "delivered" not in rc.flows[0]
    # UC: nothing is resent, nothing acknowledged or NAKed; a flow that lost a packet lost its message, yet its
    # sender's work completion says success (it was sent)
    assert all(f["retransmissions"] == 0 and f["naks"] == 0 and f["timeouts"] == 0 for f in uc.flows)
    assert all(f["qp_type"] == "UC" and f["status"] == "success" for f in uc.flows)
    lost = [f for f in uc.flows if f["packets_lost"]]
    assert lost and all(not f["delivered"] and f["messages_lost"] == 1 for f in lost)
    assert sum(f["packets_lost"] for f in uc.flows) == uc.total_drops()
    assert all(f["delivered"] for f in uc.flows if not f["packets_lost"] and not f["packets_discarded"])
    # and it is over sooner: no timeout to wait for
    assert max(f["done_s"] for f in uc.flows) < max(f["done_s"] for f in rc.flows)


def test_uc_discards_the_rest_of_a_message_after_a_gap(monkeypatch):
    real = QpFlow.rx_data

    def lose_psn_1(self, pkt):  # the network loses the Write's second packet
        if pkt.psn == 1 and not getattr(self, "_lost_one", False):
            self._lost_one = True
            self.dropped(pkt)
            return
        real(self, pkt)

    monkeypatch.setattr(QpFlow, "rx_data", lose_psn_1)
    r = run_scenario("connect", _cfg("uc"))
    flow = r.net.flows[0]
    assert (flow.n, flow.n_got, flow.lost_packets, flow.discarded) == (4, 1, 1, 2)  # PSN 0 placed, 2 and 3 dropped
    assert flow.delivered is False and flow.messages_lost == 1 and flow.done_t is not None
    assert flow.retx == 0 and flow.naks == 0
    wc = r.net.rnic(flow.src).cq.entries
    assert [(w.status, w.byte_len) for w in wc] == [(WcStatus.SUCCESS, 4096)]  # the sender only knows it sent
    assert any("UC drops the message" in row["event"] for row in r.table)


def test_uc_connect_story_pcap_no_ack_uc_opcodes_and_the_cm_says_uc(tmp_path):
    pcap = tmp_path / "uc.pcap"
    r = run_scenario("connect", _cfg("uc"))
    conn = r.net.flows[0].conn
    assert (conn.req.type, conn.req.state, conn.resp.state) == ("UC", QpState.RTS, QpState.RTS)
    assert conn.req.timeout is None and conn.req.retry_cnt is None  # no ACK: neither is set at RTR -> RTS
    assert parse_mad(mad_bytes(conn.message(REQ)))["service_type"] == SERVICE_UC
    res = runner.invoke(
        app, ["packet", "incast", "--transport", "uc", "--size-mb", "0.02", "--pcap", str(pcap), "--flow", "0"]
    )
    assert res.exit_code == 0, res.output
    pkts = [p for p in rdpcap(str(pcap)) if BTH in p]
    assert [p[BTH].opcode for p in pkts] == [0x26, 0x27, 0x27, 0x27, 0x28]  # UC Write First, Middle x3, Last
    assert all(p[BTH].ackreq == 0 for p in pkts) and not any(AETH in p for p in pkts)
    assert RETH in pkts[0] and pkts[0][RETH].dlen == 20_000 and RETH not in pkts[1]


def test_ud_sends_datagrams_with_a_deth_and_the_receiver_gets_a_receive_completion(tmp_path):
    pcap = tmp_path / "ud.pcap"
    r = run_scenario("incast", _cfg("ud"), size_mb=0.004)
    st = r.runs[0][2]
    assert all(f["packets"] == 1 and f["delivered"] and f["qp_type"] == "UD" for f in st.flows)
    net = r.net if hasattr(r, "net") else r.runs[0][1]
    dst = net.flows[0].dst
    recv = [w for w in net.rnic(dst).cq.entries if w.opcode == "RECV"]
    assert len(recv) == 4 and all(w.byte_len == 4000 and w.status is WcStatus.SUCCESS for w in recv)
    res = runner.invoke(
        app, ["packet", "incast", "--transport", "ud", "--size-mb", "0.004", "--pcap", str(pcap), "--flow", "0"]
    )
    assert res.exit_code == 0, res.output
    pkts = [p for p in rdpcap(str(pcap)) if BTH in p]
    assert len(pkts) == 1 and pkts[0][BTH].opcode == 0x64 and pkts[0][BTH].ackreq == 0
    deth = bytes(pkts[0][BTH].payload)
    flow = net.flows[0]
    assert int.from_bytes(deth[:4], "big") == UD_QKEY and int.from_bytes(deth[4:8], "big") == flow.conn.req.qpn
    assert len(deth) == 8 + 4000  # DETH, the datagram (scapy keeps the ICRC in BTH)


def test_ud_refuses_a_message_larger_than_the_path_mtu_and_rdma_write():
    assert run_app(app, ["packet", "incast", "--transport", "ud"]) == 2  # 4 MB transfers
    res = runner.invoke(app, ["packet", "incast", "--transport", "ud"])
    assert "at most the path MTU (4,096 B)" in str(res.exception) and "SEND only" in str(res.exception)
    dev = Device("nic", 1)
    pd = dev.alloc_pd()
    mr = pd.reg_mr(0x1000, 1 << 20, LOCAL_WRITE)
    qp = pd.create_qp("UD", CompletionQueue())
    qp.modify(QpState.INIT, pkey_index=0, qkey=UD_QKEY).modify(QpState.RTR).modify(QpState.RTS, sq_psn=0)
    with pytest.raises(VerbsError, match="SEND only"):
        qp.post_send(WorkRequest(1, 100, 0x1000, mr.lkey, 0, 0, remote_qpn=0x200))
    with pytest.raises(VerbsError, match="at most the MTU"):
        qp.post_send(WorkRequest(2, 5000, 0x1000, mr.lkey, 0, 0, opcode="SEND", remote_qpn=0x200))
    with pytest.raises(VerbsError, match="names its destination QP"):
        qp.post_send(WorkRequest(3, 100, 0x1000, mr.lkey, 0, 0, opcode="SEND"))
    qp.post_send(WorkRequest(4, 4096, 0x1000, mr.lkey, 0, 0, opcode="SEND", remote_qpn=0x200, remote_qkey=UD_QKEY))
    with pytest.raises(VerbsError, match="INIT -> RTR needs path_mtu"):  # a UC QP is connected: RTR names its peer
        pd.create_qp("UC", CompletionQueue()).modify(QpState.INIT, pkey_index=0, access_flags=LOCAL_WRITE).modify(
            QpState.RTR
        )


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark (Wireshark) not installed")
def test_wireshark_decodes_uc_writes_and_ud_datagrams(tmp_path):
    uc, ud = tmp_path / "uc.pcap", tmp_path / "ud.pcap"
    for path, transport, size in ((uc, "uc", "0.02"), (ud, "ud", "0.004")):
        res = runner.invoke(
            app, ["packet", "incast", "--transport", transport, "--size-mb", size, "--pcap", str(path), "--flow", "0"]
        )
        assert res.exit_code == 0, res.output
    text = subprocess.run(
        ["tshark", "-r", str(uc), "-V", "-Y", "infiniband"], capture_output=True, text=True, timeout=120
    ).stdout
    assert "Unreliable Connection (UC) - RDMA WRITE First (38)" in text and "RDMA WRITE Last (40)" in text
    assert "DMA Length: 20000" in text and "Acknowledge Request: True" not in text
    text = subprocess.run(
        ["tshark", "-r", str(ud), "-V", "-Y", "infiniband"], capture_output=True, text=True, timeout=120
    ).stdout
    assert "Unreliable Datagram (UD) - SEND only (100)" in text
    assert "DETH - Datagram Extended Transport Header" in text and f"Queue Key: 0x00000000{UD_QKEY:08x}" in text


def test_uc_write_only_every_packet_is_a_message_so_a_loss_loses_one_packet_only():
    cfg = _cfg("uc", lossy=True)
    cfg = replace(cfg, nic=replace(cfg.nic, write_only=True))
    st = run_scenario("incast", cfg, size_mb=0.4).runs[0][2]
    lost = [f for f in st.flows if f["packets_lost"]]
    assert lost and all(f["messages_lost"] == f["packets_lost"] and f["packets_discarded"] == 0 for f in lost)
    assert all(f["placement"] == "direct, per-packet messages" and f["retransmissions"] == 0 for f in st.flows)


def test_the_connect_story_on_ud_says_there_is_no_connection_and_shows_the_receive_completion():
    r = run_scenario("connect", _cfg("ud"), size_mb=0.001)
    text = "\n".join(r.findings)
    assert "(c) no connection: a UD QP is not connected (no CM exchange)" in text and "REQ -> REP" not in text
    assert "(d) the datagram: 1 packet of at most 1024 B" in text and "BTH opcode 0x64" in text
    assert "(e) the SCN's CQ has a receive completion: success, 1,000 B" in text
    assert not r.net.flows[0].conn.cm_log  # nothing went to QP1
