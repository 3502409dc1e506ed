"""A queue pair between two NICs as the packet engine runs it: both ends' verbs objects, the connection
setup, and the work requests posted on it (Deep Learning for Network Engineers, Chapter 9).

Each NIC has one verbs `Device` (its port's P_Key table), one protection domain, one memory region
registered for Local Write and Remote Write over the GPU memory the transfers use (its L_Key doubles as
the R_Key, as mlx5 NICs do), and one completion queue. A `Connection` is one RC queue pair (RUD when the
transport is Ultra Ethernet): the requester's QP on the sending NIC, the responder's on the receiving one.

Setup, either
- out of band (the default, `nic.cm_setup = False`): both QPs are moved RESET -> INIT -> RTR -> RTS when
  the connection is created, as if connected before the run; or
- on the wire (`nic.cm_setup = True`): the requester's CM sends a REQ to the responder's QP1, which moves
  its QP to INIT and RTR and answers REP; the requester moves its QP to RTR and RTS, sends RTU and only then
  its first Write; the responder's QP reaches RTS on the RTU. Each message costs `cm_processing_s` of
  software at the NIC that sends it (the CM runs on the host CPU), plus its time on the wire.

Initial PSNs are drawn from the run's seeded generator (a stream of its own, so the switches' random
draws are the same as without it), one per direction; every message on the QP continues the sequence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError, Problem
from .cm import CM_FRAME_BYTES, CM_TIMEOUT_UNIT_S, OP_UD_SEND_ONLY, REP, REQ, RTU, SERVICE_RC, SERVICE_UC, CmMessage
from .headers import PSN_MODULUS
from .sim import MAD, Pkt
from .verbs import (
    LOCAL_WRITE,
    RELIABLE,
    REMOTE_WRITE,
    CompletionQueue,
    Device,
    MemoryRegion,
    ProtectionDomain,
    QpState,
    WcStatus,
    WorkRequest,
    ack_timeout_exponent,
    pkeys_match,
)

if TYPE_CHECKING:
    from .nic import Host, Path, QpFlow

BASE_VA = 0x7F00_0000_0000  # where the registered GPU memory starts in every NIC's virtual address space
REGION_BYTES = 1 << 40
PSN_STREAM = 0x505E  # the seeded generator's stream for initial PSNs
CM_QPN = 1  # the general services QP: CM messages go to QP1
QP_TYPE_OF = {"rc": "RC", "uc": "UC", "ud": "UD", "uet": "RUD"}  # nic.transport -> the QPs' service type
UD_QKEY = 0x11111111  # the Q_Key both ends of a UD queue pair agree on (a DETH carries it; QP1's is 0x80010000)


def psn_generator(seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, PSN_STREAM])


class Rnic:
    """A NIC's verbs state: device, PD, the registered region, the completion queue."""

    def __init__(self, host: Host, pkey_table: tuple[int, ...]):
        tag = sum(host.id.encode()) & 0xFF
        self.device = Device(host.id, (0x0200 << 48) | host.ip, pkey_table, key_tag=tag)
        self.pd: ProtectionDomain = self.device.alloc_pd()
        self.mr: MemoryRegion = self.pd.reg_mr(BASE_VA, REGION_BYTES, LOCAL_WRITE | REMOTE_WRITE)
        self.cq: CompletionQueue = self.device.create_cq(depth=1 << 20)


class Connection:
    """One queue pair between a requester NIC and a responder NIC."""

    def __init__(
        self,
        net,
        src: Host,
        dst: Host,
        qpn: int,
        local_qpn: int,
        path: Path,
        rpath: Path,
        sport: int,
        dscp: int,
        prio: int,
        pkey: int | None = None,
        ipsn: int | None = None,
    ):
        cfg = net.cfg.nic
        self.net, self.src, self.dst = net, src, dst
        self.path, self.rpath, self.sport, self.dscp, self.prio = path, rpath, sport, dscp, prio
        qp_type = QP_TYPE_OF[cfg.transport]
        rs, rd = net.rnic(src), net.rnic(dst)
        self.req = rs.pd.create_qp(qp_type, rs.cq, qpn=local_qpn)
        self.resp = rd.pd.create_qp(qp_type, rd.cq, qpn=qpn)
        self.req.max_send_wr = 1 << 30
        self.path_pkey = cfg.pkey  # the partition both ends agree on (the CM REQ carries it)
        pkey = cfg.pkey if pkey is None else pkey  # the requester QP's own: another one is a misconfiguration
        if pkey not in rs.device.pkey_table:  # a QP set to a P_Key its port was given for it
            rs.device.pkey_table.append(pkey)
        self.req_pkey_index = rs.device.pkey_index(pkey)
        self.resp_pkey_index = rd.device.pkey_index(cfg.pkey)
        drawn = int(net.psn_rng.integers(0, PSN_MODULUS))
        self.ipsn = drawn if ipsn is None else ipsn % PSN_MODULUS  # requester -> responder
        self.resp_ipsn = int(net.psn_rng.integers(0, PSN_MODULUS))  # responder -> requester (its own sends)
        self.next_psn = self.ipsn
        self.timeout = ack_timeout_exponent(cfg.rto_s)
        self.retry_cnt = cfg.retry_cnt
        self.mtu = cfg.mtu_bytes
        self.pending: list[QpFlow] = []
        self.flows: list[QpFlow] = []
        self.setup_start_t = net.sim.now
        self.ready_t: float | None = None
        self.cm_log: list[tuple[float, str, str]] = []  # (t, sender, message)
        self.cm_sent: dict[int, int] = {}  # times each CM message was sent (retries after a CM timeout)
        self.cm_error: str | None = None  # why the CM exchange failed (no answer after every retry)
        self.local_comm_id = (0x1000 + len(net.connections)) & 0xFFFFFFFF
        self.remote_comm_id = 0
        self.tid = (0xA1F0 << 48) | len(net.connections)
        self.req.port_mtu = self.resp.port_mtu = self.mtu
        self._init(self.req, self.req_pkey_index)
        if cfg.cm_setup and qp_type != "UD":  # UD has no connection: nothing to exchange (SIDR not modelled)
            net.sim.at(net.sim.now + cfg.cm_processing_s, self._send_mad, REQ)
        else:
            self._init(self.resp, self.resp_pkey_index)
            self._rtr(self.resp, self.req.qpn, self.ipsn)
            self._rts(self.resp, self.resp_ipsn)
            self._rtr(self.req, self.resp.qpn, self.resp_ipsn)
            self._rts(self.req, self.ipsn)
            self.ready_t = net.sim.now

    # -- state transitions --------------------------------------------------------------------------------
    def _host(self, qp) -> Host:
        return self.src if qp is self.req else self.dst

    def _log(self, text: str) -> None:
        """State transitions are narrated when they happen on the wire's schedule (CM), not before the run."""
        if self.net.cfg.nic.cm_setup:
            self.net.log(self.net.sim.now, text, "qp")

    def _init(self, qp, pkey_index: int) -> None:
        if qp.type == "UD":
            qp.modify(QpState.INIT, pkey_index=pkey_index, qkey=UD_QKEY)
            what = f"Q_Key {UD_QKEY:#010x}"
        else:
            qp.modify(QpState.INIT, pkey_index=pkey_index, access_flags=LOCAL_WRITE | REMOTE_WRITE)
            what = "access Local Write, Remote Write"
        self._log(
            f"{self._host(qp).id}: QP {qp.qpn:#x} ({qp.type}) RESET -> INIT: P_Key index {pkey_index} "
            f"({qp.pkey:#06x}), {what}"
        )

    def _rtr(self, qp, dest_qpn: int, rq_psn: int) -> None:
        if qp.type == "UD":  # a datagram QP has no peer: each work request names its destination
            qp.modify(QpState.RTR)
            self._log(f"{self._host(qp).id}: QP {qp.qpn:#x} INIT -> RTR")
            return
        qp.modify(
            QpState.RTR,
            path_mtu=self.mtu if self.mtu in (256, 512, 1024, 2048, 4096) else 4096,
            dest_qpn=dest_qpn,
            rq_psn=rq_psn,
        )
        self._log(
            f"{self._host(qp).id}: QP {qp.qpn:#x} INIT -> RTR: path MTU {qp.path_mtu}, destination QP "
            f"{dest_qpn:#x}, expected PSN {rq_psn:#08x}"
        )

    def _rts(self, qp, sq_psn: int) -> None:
        if qp.type not in RELIABLE:  # UC, UD: no ACK, so no ACK timeout and no retry count
            qp.modify(QpState.RTS, sq_psn=sq_psn)
            self._log(
                f"{self._host(qp).id}: QP {qp.qpn:#x} RTR -> RTS: first PSN {sq_psn:#08x} (unreliable: no ACK "
                "timeout, no retry count)"
            )
            return
        qp.modify(QpState.RTS, sq_psn=sq_psn, timeout=self.timeout, retry_cnt=self.retry_cnt)
        self._log(
            f"{self._host(qp).id}: QP {qp.qpn:#x} RTR -> RTS: first PSN {sq_psn:#08x}, ACK timeout "
            f"{self.timeout} (4.096 us x 2^{self.timeout}), retry count {self.retry_cnt}"
        )

    @property
    def ready(self) -> bool:
        return self.req.state is QpState.RTS

    # -- the CM exchange on the wire ----------------------------------------------------------------------
    def message(self, kind: int) -> CmMessage:
        cfg = self.net.cfg.nic
        return CmMessage(
            kind,
            self.tid,
            self.local_comm_id,
            self.remote_comm_id,
            self.src.ip,
            self.dst.ip,
            self.req.qpn,
            self.resp.qpn,
            self.ipsn,
            self.resp_ipsn,
            self.path_pkey,
            self.mtu,
            self.timeout,
            self.retry_cnt,
            service=SERVICE_UC if self.req.type == "UC" else SERVICE_RC,
            cm_response_timeout=cfg.cm_response_timeout,
            max_cm_retries=cfg.max_cm_retries,
        )

    @property
    def cm_timeout_s(self) -> float:
        """How long a CM waits for the answer to its REQ (a REP) or its REP (an RTU) before sending it again: the
        REQ's CM Response Timeout, 4.096 us x 2^t (IBTA Vol. 1 Ch. 12; rdma_cm's 20: 4.29 s)."""
        return CM_TIMEOUT_UNIT_S * 2**self.net.cfg.nic.cm_response_timeout

    def _send_mad(self, kind: int) -> None:
        net = self.net
        now = net.sim.now
        if self.cm_error is not None:
            return
        fwd = kind != REP
        sender = self.src if fwd else self.dst
        self.cm_log.append((now, sender.id, {REQ: "REQ", REP: "REP", RTU: "RTU"}[kind]))
        names = {REQ: "REQ (ConnectRequest)", REP: "REP (ConnectReply)", RTU: "RTU (ReadyToUse)"}
        sent = self.cm_sent[kind] = self.cm_sent.get(kind, 0) + 1
        again = f", retry {sent - 1} of {net.cfg.nic.max_cm_retries}" if sent > 1 and kind != RTU else ""
        net.log(
            now,
            f"{sender.id}: CM {names[kind]} to QP1 of {(self.dst if fwd else self.src).id} for QP "
            f"{self.req.qpn:#x} (P_Key {self.path_pkey:#06x}, start PSN {self.ipsn:#08x}{again})",
            "cm",
        )
        pkt = Pkt(
            MAD,
            self,
            kind,
            CM_FRAME_BYTES,
            0,
            self.dscp,
            self.prio,
            0,
            OP_UD_SEND_ONLY,
            self.path if fwd else self.rpath,
            self.sport,
            now,
        )
        sender.send(pkt)
        if kind in (REQ, REP):  # the sender waits for the answer (REP, RTU), then sends again
            net.sim.at(now + self.cm_timeout_s, self._cm_timeout, (kind, sent))

    def _cm_timeout(self, arg: tuple[int, int]) -> None:
        """No answer to the `n`-th sending of a REQ or REP within the CM response timeout: send it again, up to
        `max_cm_retries` times; then the connection fails and the QP stays where it is."""
        kind, n = arg
        waiting = self.req.state is QpState.INIT if kind == REQ else self.resp.state is QpState.RTR
        if not waiting or self.cm_sent.get(kind) != n or self.cm_error is not None:
            return  # answered meanwhile, or a later sending has its own timer
        net = self.net
        cfg = net.cfg.nic
        if n <= cfg.max_cm_retries:
            self._send_mad(kind)
            return
        sender, qp, answer = (self.src, self.req, "REP") if kind == REQ else (self.dst, self.resp, "RTU")
        self.cm_error = (
            f"{sender.id}: CM: no {answer} for QP {qp.qpn:#x} after {n} "
            f"{'REQ' if kind == REQ else 'REP'}s ({self.cm_timeout_s:.3g} s each: 4.096 us x "
            f"2^{cfg.cm_response_timeout}, {cfg.max_cm_retries} retries): connection failed (rdma_cm: "
            f"{'RDMA_CM_EVENT_UNREACHABLE' if kind == REQ else 'RDMA_CM_EVENT_CONNECT_ERROR'}, "
            f"ETIMEDOUT); QP {qp.qpn:#x} stays in {qp.state.value}"
        )
        net.log(net.sim.now, self.cm_error, "cm")
        if kind == REQ:  # the application never gets ESTABLISHED: its work requests are never posted
            self.pending = []

    def rx_mad(self, pkt: Pkt) -> None:
        net = self.net
        now = net.sim.now
        delay = net.cfg.nic.cm_processing_s
        if any(f.traced for f in self.pending + self.flows):  # the CM messages of a traced flow's connection
            net.capture(pkt, None)
        if self.cm_error is not None:
            return
        if pkt.psn == REQ:  # passive side: INIT, RTR, then REP
            if self.resp.state is not QpState.RESET:  # a duplicate REQ: our REP was lost or is late; send it again
                if self.resp.state is QpState.RTR:
                    net.sim.at(now + delay, self._send_mad, REP)
                return
            self.remote_comm_id = (0x2000 + len(net.connections)) & 0xFFFFFFFF
            self._init(self.resp, self.resp_pkey_index)
            self._rtr(self.resp, self.req.qpn, self.ipsn)
            net.sim.at(now + delay, self._send_mad, REP)
        elif pkt.psn == REP:  # active side: RTR, RTS, RTU, then the Writes
            if self.req.state is not QpState.INIT:  # a duplicate REP: our RTU was lost; send it again
                net.sim.at(now + delay, self._send_mad, RTU)
                return
            self._rtr(self.req, self.resp.qpn, self.resp_ipsn)
            self._rts(self.req, self.ipsn)
            net.sim.at(now + delay, self._send_mad, RTU)
            net.sim.at(now + delay, self._start_pending)
        elif self.resp.state is QpState.RTR:  # RTU: the passive side's QP to RTS
            self._rts(self.resp, self.resp_ipsn)

    def established_by_data(self) -> None:
        """A packet arrives on the passive side's QP while it waits in RTR for the RTU (lost): the NIC's
        Communication Established event stands for the RTU (IBTA Vol. 1 Ch. 12; Linux ib_cm_notify), so the QP
        goes to RTS."""
        if self.resp.state is QpState.RTR and self.cm_error is None:
            self.net.log(
                self.net.sim.now,
                f"{self.dst.id}: data on QP {self.resp.qpn:#x} before the RTU: "
                "communication established, as if the RTU had arrived",
                "cm",
            )
            self._rts(self.resp, self.resp_ipsn)

    def _start_pending(self, _=None) -> None:
        self.ready_t = self.net.sim.now
        net = self.net
        net.log(
            self.ready_t,
            f"{self.src.id}: QP {self.req.qpn:#x} in RTS after "
            f"{(self.ready_t - self.setup_start_t) * 1e6:.2f} us of connection setup: "
            f"{len(self.pending)} Write(s) start",
            "cm",
        )
        pending, self.pending = self.pending, []
        for flow in pending:
            self._go(flow)

    # -- work requests -------------------------------------------------------------------------------------
    def post(
        self, flow: QpFlow, remote_addr: int | None = None, rkey: int | None = None, local: MemoryRegion | None = None
    ) -> WorkRequest:
        """The work request of `flow` (one RDMA Write from `local`, by default the NIC's registered memory), its
        PSNs; sent now if the QP is in RTS."""
        ls, rd = self.net.rnic(self.src), self.net.rnic(self.dst)
        lmr = ls.mr if local is None else local
        ud = self.req.type == "UD"
        wr = WorkRequest(
            flow.id,
            flow.size,
            lmr.addr,
            lmr.lkey,
            rd.mr.addr if remote_addr is None else int(remote_addr),
            (rd.mr.rkey or 0) if rkey is None else rkey,
            opcode="SEND" if ud else "RDMA_WRITE",
            remote_qpn=self.resp.qpn if ud else None,
            remote_qkey=UD_QKEY if ud else None,
        )
        if ud and flow.size > self.mtu:
            raise InputError(
                Problem(
                    "nic.transport",
                    (
                        f"ud: a UD queue pair sends datagrams of at most the path MTU ({self.mtu:,} B), SEND only (no RDMA "
                        f"Write); transfer {flow.name} is {flow.size:,} B. Use rc or uc, or messages of at most "
                        f"{self.mtu:,} B (Deep Learning for Network Engineers, Chapter 9)"
                    ),
                )
            )
        flow.ipsn = self.next_psn
        self.next_psn = (self.next_psn + flow.n) % PSN_MODULUS
        flow.wr = wr
        if self.ready:
            self._go(flow)
        else:
            self.pending.append(flow)
        return wr

    def _go(self, flow: QpFlow) -> None:
        if self.req.state is not QpState.RTS or flow.wr is None:  # the QP went to ERR meanwhile: flushed
            flow.error = WcStatus.WR_FLUSH_ERR
            return
        self.req.post_send(flow.wr)
        flow.pkey_ok = pkeys_match(self.req.pkey, self.resp.pkey)  # what the responder will find
        self.flows.append(flow)
        flow.next_t = self.net.sim.now
        flow.src.source(flow.path.next_at[flow.src.idx]).add(flow)

    def fail(self, flow: QpFlow, status: WcStatus) -> None:
        """A fatal error on `flow`'s work request: its completion, the QP to ERR, the others flushed."""
        now = self.net.sim.now
        if flow.wr is not None:
            self.req.fail(flow.wr, status, now)
        for f in self.flows + self.pending:
            if f.error is None:
                f.error = status if f is flow else WcStatus.WR_FLUSH_ERR
                f.stop()
                self.net.log(
                    now,
                    f"{self.src.id}: work completion in the CQ: work request {f.id}, RDMA Write, "
                    f"status '{f.error.value}'",
                    "completion",
                )
        self.pending = []
        if self.net.on_qp_failed is not None:
            self.net.on_qp_failed(flow, status)
