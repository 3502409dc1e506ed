"""CM retries (IBTA Vol. 1 Ch. 12; Deep Learning for Network Engineers, Chapter 9): a REQ or REP that gets no
answer within the CM response timeout (4.096 us x 2^t) is sent again, up to the retry count; then the connection
fails with a clear error and the QP stays where it was."""

from __future__ import annotations

from dataclasses import replace

import pytest

from aifabric.packet.cm import REP, REQ, RTU, parse_mad
from aifabric.packet.config import PacketConfig
from aifabric.packet.connection import Connection
from aifabric.packet.scenarios import run_scenario
from aifabric.packet.verbs import QpState, WcStatus


@pytest.fixture
def lose(monkeypatch):
    """lose(kind, n): the first n CM messages of that kind vanish on the wire (never reach the other CM)."""
    lost: dict[int, int] = {}

    def arm(kind: int, n: int) -> dict[int, int]:
        lost[kind] = n
        real = Connection.rx_mad

        def rx_mad(self, pkt):
            if lost.get(pkt.psn, 0) > 0:
                lost[pkt.psn] -= 1
                return
            real(self, pkt)

        monkeypatch.setattr(Connection, "rx_mad", rx_mad)
        return lost

    return arm


def _cfg(timeout: int = 20, retries: int = 15) -> PacketConfig:
    base = PacketConfig()
    return replace(base, nic=replace(base.nic, cm_response_timeout=timeout, max_cm_retries=retries))


def test_a_lost_req_is_sent_again_after_the_cm_timeout_and_the_write_completes(lose):
    lose(REQ, 2)
    r = run_scenario("connect", _cfg())
    conn = r.net.flows[0].conn
    timeout_s = 4.096e-6 * 2**20  # rdma_cm's CM response timeout: 4.29 s
    reqs = [t for t, _, m in conn.cm_log if m == "REQ"]
    assert len(reqs) == 3
    assert reqs[1] - reqs[0] == pytest.approx(timeout_s) and reqs[2] - reqs[1] == pytest.approx(timeout_s)
    assert [m for _, _, m in conn.cm_log] == ["REQ", "REQ", "REQ", "REP", "RTU"]
    assert conn.cm_error is None and conn.req.state is QpState.RTS and conn.resp.state is QpState.RTS
    wc = r.net.rnic(r.net.flows[0].src).cq.entries
    assert [w.status for w in wc] == [WcStatus.SUCCESS] and wc[0].t_s > 2 * timeout_s
    assert any("retry 2 of 15" in row["event"] for row in r.table)


def test_a_lost_rep_is_answered_by_the_repeated_req_and_the_passive_side_does_not_redo_its_transitions(lose):
    lose(REP, 1)
    r = run_scenario("connect", _cfg(timeout=10))  # 4.19 ms
    conn = r.net.flows[0].conn
    assert [m for _, _, m in conn.cm_log][:4] == ["REQ", "REP", "REQ", "REP"]
    assert conn.cm_log[2][0] - conn.cm_log[0][0] == pytest.approx(4.096e-6 * 2**10)
    assert [b.value for _, b, _ in conn.resp.history] == ["INIT", "RTR", "RTS"]  # once each, duplicates or not
    assert conn.req.state is QpState.RTS and conn.cm_error is None
    assert [w.status for w in r.net.rnic(r.net.flows[0].src).cq.entries] == [WcStatus.SUCCESS]


def test_every_req_lost_fails_the_connection_after_the_retry_count_and_the_qp_stays_in_init(lose):
    lose(REQ, 100)
    r = run_scenario("connect", _cfg(timeout=8, retries=3))  # 1.05 ms per try, 1 + 3 REQs
    flow = r.net.flows[0]
    conn = flow.conn
    reqs = [t for t, _, m in conn.cm_log if m == "REQ"]
    assert len(reqs) == 4 and [m for _, _, m in conn.cm_log] == ["REQ"] * 4
    assert conn.req.state is QpState.INIT and conn.resp.state is QpState.RESET  # where they were
    assert conn.cm_error is not None
    assert "no REP for QP 0x123456 after 4 REQs" in conn.cm_error and "3 retries" in conn.cm_error
    assert "ETIMEDOUT" in conn.cm_error and "stays in INIT" in conn.cm_error
    assert flow.wr is not None and not conn.req.outstanding and r.net.rnic(flow.src).cq.entries == []
    assert flow.done_t is None and r.net.sim.now == pytest.approx(reqs[-1] + 4.096e-6 * 2**8)
    assert any("connection failed" in f for f in r.findings)


def test_the_req_carries_the_cm_response_timeout_and_retry_count_it_runs_with():
    r = run_scenario("connect", _cfg(timeout=12, retries=5))
    from aifabric.packet.cm import mad_bytes

    conn = r.net.flows[0].conn
    req = parse_mad(mad_bytes(conn.message(REQ)))
    assert (req["local_cm_response_timeout"], req["max_cm_retries"]) == (12, 5)
    assert conn.cm_timeout_s == pytest.approx(4.096e-6 * 4096)


def test_cm_knobs_are_checked():
    from aifabric.errors import InputError
    from aifabric.packet.config import validate

    with pytest.raises(InputError, match="nic.max_cm_retries"):
        validate(_cfg(retries=16))
    with pytest.raises(InputError, match="nic.cm_response_timeout"):
        validate(_cfg(timeout=32))


def test_a_lost_rtu_the_first_write_establishes_the_passive_side(lose):
    lose(RTU, 1)
    r = run_scenario("connect", _cfg())
    conn = r.net.flows[0].conn
    assert [m for _, _, m in conn.cm_log] == ["REQ", "REP", "RTU"]  # no REP again: the data came first
    assert conn.resp.state is QpState.RTS and [b.value for _, b, _ in conn.resp.history] == ["INIT", "RTR", "RTS"]
    assert any("communication established" in row["event"] for row in r.table)
    assert [w.status for w in r.net.rnic(r.net.flows[0].src).cq.entries] == [WcStatus.SUCCESS]
    assert conn.cm_sent == {REQ: 1, REP: 1, RTU: 1}  # the REP's 4.29 s timer found the QP in RTS: no REP again


def test_the_pcap_shows_the_retried_req_one_cm_timeout_later(lose):
    """Captured where received (packet/pcap.py): the lost REQ is not there, its retry is, one timeout later."""
    from scapy.contrib.roce import BTH

    from aifabric.packet.pcap import to_scapy

    def mads(net):  # (arrival s, CM attribute ID) of each MAD to QP1: after the 8-byte DETH, at MAD offset 16
        return [
            (rec[0], int.from_bytes(bytes(fr[BTH].payload)[24:26], "big"))
            for fr, rec in zip(to_scapy(net.captured, net), net.captured)
            if BTH in fr and fr[BTH].dqpn == 1
        ]

    clean = mads(run_scenario("connect", _cfg(timeout=10)).net)
    lose(REQ, 1)
    retried = mads(run_scenario("connect", _cfg(timeout=10)).net)
    assert [a for _, a in clean] == [a for _, a in retried] == [0x10, 0x13, 0x14]  # REQ, REP, RTU
    assert retried[0][0] - clean[0][0] == pytest.approx(4.096e-6 * 2**10)
