"""The verbs objects (Deep Learning for Network Engineers, Chapter 9): PD, memory regions and their keys, the
queue pair's state machine and the attributes each transition takes, completion queues."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aifabric.packet.verbs import (
    LOCAL_WRITE,
    REMOTE_READ,
    REMOTE_WRITE,
    Device,
    QpState,
    VerbsError,
    WcStatus,
    WorkRequest,
    access_names,
    ack_timeout_exponent,
    pkeys_match,
)

INIT = {"pkey_index": 0, "access_flags": LOCAL_WRITE | REMOTE_WRITE}
RTR = {"path_mtu": 1024, "dest_qpn": 0x99, "rq_psn": 0xABC}
RTS = {"sq_psn": 0xABC, "timeout": 14, "retry_cnt": 7}


def _qp(qp_type: str = "RC"):
    dev = Device("ccn", 1, (0xFFFF, 0x8012))
    pd = dev.alloc_pd()
    return pd, pd.create_qp(qp_type, dev.create_cq(), qpn=0x123456)


def test_rc_qp_goes_reset_init_rtr_rts_with_the_attributes_of_each_step():
    """WE-02: QP 0x123456 (the book's 0x12345678 does not fit 24 bits), P_Key 0x8012, RC, PSN 0x000abc, MTU 1024."""
    _, qp = _qp()
    assert qp.state is QpState.RESET
    qp.modify(QpState.INIT, pkey_index=1, access_flags=LOCAL_WRITE | REMOTE_WRITE)
    assert qp.pkey == 0x8012
    qp.modify(QpState.RTR, **RTR)
    qp.modify(QpState.RTS, **RTS)
    assert qp.state is QpState.RTS
    assert (qp.path_mtu, qp.dest_qpn, qp.rq_psn, qp.sq_psn, qp.timeout, qp.retry_cnt) == (
        1024,
        0x99,
        0xABC,
        0xABC,
        14,
        7,
    )
    assert [(a.value, b.value) for a, b, _ in qp.history] == [("RESET", "INIT"), ("INIT", "RTR"), ("RTR", "RTS")]


@pytest.mark.parametrize(
    "frm, to", [("RESET", "RTR"), ("RESET", "RTS"), ("INIT", "RTS"), ("RTS", "RTR"), ("RTR", "INIT"), ("ERR", "RTS")]
)
def test_illegal_transitions_are_refused_with_the_order_in_the_message(frm, to):
    _, qp = _qp()
    steps = {
        "INIT": [("INIT", INIT)],
        "RTR": [("INIT", INIT), ("RTR", RTR)],
        "RTS": [("INIT", INIT), ("RTR", RTR), ("RTS", RTS)],
        "ERR": [("ERR", {})],
        "RESET": [],
    }
    for state, attrs in steps[frm]:
        qp.modify(QpState(state), **attrs)
    attrs = {"RTR": RTR, "RTS": RTS, "INIT": INIT}[to]
    with pytest.raises(VerbsError, match=f"illegal transition {frm} -> {to}.*RESET -> INIT -> RTR -> RTS"):
        qp.modify(QpState(to), **attrs)
    assert qp.state is QpState(frm)


def test_a_transition_needs_its_attributes_and_refuses_others():
    _, qp = _qp()
    with pytest.raises(VerbsError, match="needs access_flags"):
        qp.modify(QpState.INIT, pkey_index=0)
    qp.modify(QpState.INIT, **INIT)
    with pytest.raises(VerbsError, match="needs dest_qpn, rq_psn"):
        qp.modify(QpState.RTR, path_mtu=1024)
    with pytest.raises(VerbsError, match="does not set sq_psn"):
        qp.modify(QpState.RTR, **RTR, sq_psn=1)
    with pytest.raises(VerbsError, match="path MTU must be one of"):
        qp.modify(QpState.RTR, **{**RTR, "path_mtu": 1500})
    qp.modify(QpState.RTR, **RTR)
    with pytest.raises(VerbsError, match="retry count is 3 bits"):
        qp.modify(QpState.RTS, **{**RTS, "retry_cnt": 8})
    with pytest.raises(VerbsError, match="P_Key index 5"):
        _qp()[1].modify(QpState.INIT, pkey_index=5, access_flags=0)


def test_ud_and_uc_take_their_own_attributes():
    _, ud = _qp("UD")
    ud.modify(QpState.INIT, pkey_index=0, qkey=0x80010000).modify(QpState.RTR).modify(QpState.RTS, sq_psn=0)
    assert ud.state is QpState.RTS
    _, uc = _qp("UC")
    uc.modify(QpState.INIT, **INIT).modify(QpState.RTR, **RTR)
    with pytest.raises(VerbsError, match="does not set retry_cnt, timeout"):
        uc.modify(QpState.RTS, **RTS)
    uc.modify(QpState.RTS, sq_psn=5)


def test_qpn_must_fit_the_24_bit_bth_field():
    """Spec erratum: the book's CCN QP 0x12345678 cannot be carried in BTH DestQP."""
    dev = Device("ccn", 1)
    with pytest.raises(VerbsError, match="24-bit"):
        dev.alloc_pd().create_qp("RC", dev.create_cq(), qpn=0x12345678)


MOVES = st.lists(st.tuples(st.sampled_from(list(QpState)), st.booleans()), max_size=12)


@given(MOVES)
def test_rts_is_reached_only_through_init_and_rtr(moves):
    """Whatever is attempted, a QP's history is a walk of legal edges, and RTS only after RESET, INIT, RTR."""
    _, qp = _qp()
    attrs = {QpState.INIT: INIT, QpState.RTR: RTR, QpState.RTS: RTS, QpState.ERR: {}, QpState.RESET: {}}
    for to, with_attrs in moves:
        try:
            qp.modify(to, **(attrs[to] if with_attrs else {}))
        except VerbsError:
            pass
    legal = {("RESET", "INIT"), ("INIT", "RTR"), ("RTR", "RTS")}
    for a, b, _ in qp.history:
        assert (a.value, b.value) in legal or b in (QpState.ERR, QpState.RESET)
    walk = [QpState.RESET] + [b for _, b, _ in qp.history]
    for i, s in enumerate(walk):
        if s is QpState.RTS:
            assert walk[i - 2 : i] == [QpState.INIT, QpState.RTR]


def test_memory_regions_keys_and_remote_checks():
    """Chapter 9: every registration gets an L_Key; one with remote access an R_Key too; the responder checks it."""
    dev = Device("scn", 2, key_tag=0x5A)
    pd = dev.alloc_pd()
    local = pd.reg_mr(0x1000, 4096, 0)  # the client's buffer: Local Read
    remote = pd.reg_mr(0x10000, 65536, LOCAL_WRITE | REMOTE_WRITE)  # the server's: Remote Write
    assert local.rkey is None and remote.rkey is not None and local.lkey != remote.lkey
    assert local.lkey & 0xFF == remote.lkey & 0xFF == 0x5A
    assert access_names(remote.access) == "Local Read, Local Write, Remote Write"
    assert pd.check_remote(remote.rkey, 0x10000, 65536) is None
    assert "outside the region" in pd.check_remote(remote.rkey, 0x10000 + 1, 65536)
    assert "not a key" in pd.check_remote(local.lkey, 0x1000, 16)
    assert "not a key" in pd.check_remote(0xDEAD, 0x10000, 16)
    ro = pd.reg_mr(0x40000, 4096, REMOTE_READ)
    assert "does not grant Remote Write" in pd.check_remote(ro.rkey, 0x40000, 16)
    other = dev.alloc_pd()
    assert "not a key of this protection domain" in other.check_remote(remote.rkey, 0x10000, 16)
    with pytest.raises(VerbsError, match="needs local write"):
        pd.reg_mr(0, 16, REMOTE_WRITE)


def test_completions_for_signalled_requests_and_always_for_errors():
    pd, qp = _qp()
    mr = pd.reg_mr(0, 1 << 20, LOCAL_WRITE)
    with pytest.raises(VerbsError, match="post a send only in RTS"):
        qp.post_send(WorkRequest(1, 100, 0, mr.lkey, 0, 0))
    qp.modify(QpState.INIT, **INIT).modify(QpState.RTR, **RTR).modify(QpState.RTS, **RTS)
    wrs = [WorkRequest(i, 100, 0, mr.lkey, 0, 0x77, signaled=i != 1) for i in range(4)]
    for wr in wrs:
        qp.post_send(wr)
    with pytest.raises(VerbsError, match="does not cover"):
        qp.post_send(WorkRequest(9, 2 << 20, 0, mr.lkey, 0, 0))
    qp.complete(wrs[0], WcStatus.SUCCESS, 1e-6)
    qp.complete(wrs[1], WcStatus.SUCCESS, 2e-6)  # unsignalled: no completion
    qp.fail(wrs[2], WcStatus.REM_ACCESS_ERR, 3e-6)
    got = qp.send_cq.poll(10)
    assert [(w.wr_id, w.status) for w in got] == [
        (0, WcStatus.SUCCESS),
        (2, WcStatus.REM_ACCESS_ERR),
        (3, WcStatus.WR_FLUSH_ERR),
    ]
    assert got[0].byte_len == 100 and got[1].byte_len == 0 and qp.state is QpState.ERR
    assert qp.send_cq.poll() == []


@given(st.integers(1, 0xFFFF), st.integers(1, 0xFFFF))
def test_pkeys_match_when_partitions_agree_and_one_is_a_full_member(a, b):
    assert pkeys_match(a, b) == ((a & 0x7FFF) == (b & 0x7FFF) and (a >= 0x8000 or b >= 0x8000))
    assert pkeys_match(a, b) == pkeys_match(b, a)


def test_ack_timeout_exponent():
    assert ack_timeout_exponent(1e-3) == 8  # 4.096 us x 2^8 = 1.05 ms
    assert 4.096e-6 * 2 ** ack_timeout_exponent(0.5) >= 0.5
    assert 4.096e-6 * 2 ** (ack_timeout_exponent(0.5) - 1) < 0.5
