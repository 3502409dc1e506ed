"""The connect story (Deep Learning for Network Engineers, Chapter 9): WE-02 (QP, P_Key 0x8012, RC, starting PSN
0x000abc, payload size 1024, REQ -> REP -> RTU, INIT -> RTR -> RTS) and WE-03 (Eth / IP / UDP 4791 / BTH / RETH)
reproduced end to end, and the responder's refusals."""

from __future__ import annotations

import shutil
import struct
import subprocess

import pytest
from scapy.contrib.roce import AETH, BTH
from scapy.layers.inet import IP, UDP
from scapy.utils import rdpcap
from typer.testing import CliRunner

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.packet.cm import REQ, parse_mad
from aifabric.packet.pcap import RETH
from aifabric.packet.scenarios import BOOK_PKEY, BOOK_START_PSN, CCN_QPN, SCN_QPN, run_scenario
from aifabric.packet.verbs import QpState, WcStatus

runner = CliRunner()


def test_we02_we03_the_book_example_from_registration_to_completion():
    r = run_scenario("connect")
    net = r.net
    flow = net.flows[0]
    conn = flow.conn
    # WE-02: the QP, its partition, its first PSN, the service type and the MTU, through INIT -> RTR -> RTS
    assert (conn.req.qpn, conn.req.type, conn.req.pkey, conn.req.sq_psn, conn.req.path_mtu) == (
        CCN_QPN,
        "RC",
        BOOK_PKEY,
        BOOK_START_PSN,
        1024,
    )
    assert [b.value for _, b, _ in conn.req.history] == ["INIT", "RTR", "RTS"]
    assert [b.value for _, b, _ in conn.resp.history] == ["INIT", "RTR", "RTS"]
    assert [m for _, _, m in conn.cm_log] == ["REQ", "REP", "RTU"]
    events = [row["event"] for row in r.table]
    order = [
        next(i for i, e in enumerate(events) if key in e)
        for key in (
            "ccn: QP 0x123456 (RC) RESET -> INIT",
            "CM REQ",
            "scn: QP 0xabcd INIT -> RTR",
            "CM REP",
            "ccn: QP 0x123456 RTR -> RTS",
            "CM RTU",
            "work completion",
        )
    ]
    assert order == sorted(order)
    # WE-03 and the completion
    wc = net.rnic(flow.src).cq.entries
    assert [(w.status, w.byte_len) for w in wc] == [(WcStatus.SUCCESS, 4096)]
    text = " ".join(r.findings)
    assert "DSCP 24 ECN 10 (ToS 0x62)" in text and "> 4791" in text and "P_Key 0x8012" in text
    assert "0x12345678 has 32 bits" in text and "PSN 0x000abc..0x000abf" in text


def test_connect_pcap_decodes_with_the_book_values(tmp_path):
    pcap = tmp_path / "c.pcap"
    res = runner.invoke(app, ["packet", "connect", "--pcap", str(pcap)])
    assert res.exit_code == 0, res.output
    pkts = [p for p in rdpcap(str(pcap)) if BTH in p]
    mads = [p for p in pkts if p[BTH].opcode == 0x64]
    assert len(mads) == 3 and all(p[BTH].dqpn == 1 and p[UDP].dport == 4791 for p in mads)
    req = parse_mad(bytes(mads[0][BTH].payload)[8:])
    assert (
        req["attribute_id"],
        req["mgmt_class"],
        req["local_qpn"],
        req["service_type"],
        req["starting_psn"],
        req["pkey"],
        req["path_mtu"],
    ) == (REQ, 0x07, CCN_QPN, 0, BOOK_START_PSN, BOOK_PKEY, 3)
    data = [p for p in pkts if p[BTH].opcode in (0x06, 0x07, 0x08)]
    assert [p[BTH].opcode for p in data] == [0x06, 0x07, 0x07, 0x08]
    first = data[0]
    assert first[IP].tos == 0x62 and first[BTH].pkey == BOOK_PKEY and first[BTH].dqpn == SCN_QPN
    assert first[BTH].ackreq == 1 and first[BTH].psn == BOOK_START_PSN and first[RETH].dlen == 4096
    assert max(float(p.time) for p in mads) <= float(first.time)


def test_bad_rkey_naks_and_the_completion_says_so(tmp_path):
    pcap = tmp_path / "c.pcap"
    res = runner.invoke(app, ["packet", "connect", "--bad-rkey", "--pcap", str(pcap)])
    assert res.exit_code == 0, res.output
    assert "remote access error" in res.output and "QP is ERR" in res.output
    naks = [p for p in rdpcap(str(pcap)) if AETH in p and p[AETH].syndrome == 0x62]
    assert len(naks) == 1 and naks[0][BTH].dqpn == CCN_QPN
    r = run_scenario("connect", bad_rkey=True)
    assert r.net.flows[0].conn.req.state is QpState.ERR


def test_bad_pkey_is_dropped_counted_and_retried_to_failure():
    r = run_scenario("connect", bad_pkey=True)
    flow = r.net.flows[0]
    assert flow.n_got == 0 and r.stats.pkey_violations[("scn",)] == flow.pkey_drops > 0
    assert flow.error is WcStatus.RETRY_EXC_ERR and flow.timeouts == flow.conn.retry_cnt + 1
    assert any("P_Key violation" in row["event"] for row in r.table)


def test_flags_of_the_connect_story_are_refused_elsewhere(capsys):
    assert run_app(app, ["packet", "incast", "--bad-rkey"]) == 2
    assert "--bad-rkey" in capsys.readouterr().err
    assert run_app(app, ["packet", "connect", "--cm"]) == 2
    assert "--cm" in capsys.readouterr().err


def test_cm_flag_sets_every_story_qp_up_on_the_wire(tmp_path):
    pcap = tmp_path / "i.pcap"
    res = runner.invoke(app, ["packet", "incast", "--cm", "--size-mb", "0.2", "--pcap", str(pcap)])
    assert res.exit_code == 0, res.output
    mads = [p for p in rdpcap(str(pcap)) if BTH in p and p[BTH].opcode == 0x64]
    attrs = [struct.unpack("!H", bytes(p[BTH].payload)[8 + 16 : 8 + 18])[0] for p in mads]
    assert attrs == [0x10, 0x13, 0x14]  # the traced flow's QP: REQ, REP, RTU


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark (Wireshark) not installed")
def test_wireshark_decodes_the_cm_exchange_and_the_write(tmp_path):
    pcap = tmp_path / "c.pcap"
    assert runner.invoke(app, ["packet", "connect", "--pcap", str(pcap)]).exit_code == 0
    summary = subprocess.run(["tshark", "-r", str(pcap)], capture_output=True, text=True, timeout=120).stdout
    order = [
        summary.index(s)
        for s in ("CM: ConnectRequest", "CM: ConnectReply", "CM: ReadyToUse", "RC RDMA Write First", "RC Acknowledge")
    ]
    assert order == sorted(order) and "Malformed" not in summary
    detail = subprocess.run(["tshark", "-r", str(pcap), "-V"], capture_output=True, text=True, timeout=120).stdout
    for field in (
        "Management Class: 0x07",
        "Local QPN: 0x123456",
        "Starting PSN: 0x000abc",
        "Partition Key: 0x8012",
        "Path Packet Payload MTU: 0x3",
        "Transport Service Type: 0x0",
        "Primary Local Port GID: 10.0.0.1",
        "IP CM Destination IP: 10.0.0.2",
        "Local QPN: 0x00abcd",
        "Remote Communication ID: 0x00001000",
    ):
        assert field in detail, field
    assert "Malformed" not in detail


def test_pkey_flag_sets_every_qp_partition_and_is_checked(tmp_path, capsys):
    pcap = tmp_path / "i.pcap"
    res = runner.invoke(app, ["packet", "incast", "--pkey", "0x8012", "--size-mb", "0.05", "--pcap", str(pcap)])
    assert res.exit_code == 0, res.output
    assert {p[BTH].pkey for p in rdpcap(str(pcap)) if BTH in p and p[BTH].opcode != 0x81} == {0x8012}
    for bad in ("0x0000", "0x8000", "70000", "abc"):
        assert run_app(app, ["packet", "incast", "--pkey", bad]) == 2
        assert "--pkey" in capsys.readouterr().err
    assert run_app(app, ["packet", "connect", "--pkey", "0x8013"]) == 2
