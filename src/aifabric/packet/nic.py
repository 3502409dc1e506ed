"""NICs and the transport: RoCEv2 RC queue pairs with DCQCN (UC and UD too), and scale-up chunk flows.

A `QpFlow` is one RDMA Write on one QP, both ends (requester state on the sending NIC, responder state
on the receiving NIC):

- the work request of a `Connection` (connection.py: the verbs QPs of both ends, their setup); its
  PSNs continue the QP's sequence from the initial PSN the connection drew from the seeded generator
  (`psn` in the engine is the index in the message, `ipsn + psn` mod 2^24 what the wire carries);
- segmentation by MTU into Write First/Middle/Last (RETH on First only) or Write Only (RETH on every
  packet);
- the responder's checks (Chapter 9, Figure 9-6): the packet's P_Key against the target QP's (a mismatch
  is dropped silently and counted), then the R_Key and address range of the RETH against its registered
  memory (a violation is answered by a NAK remote access error: the requester's QP goes to ERR and the
  work completion says so; the rest of the message is discarded);
- `rc` (RoCEv2 Reliable Connection): the responder accepts only the expected PSN; an out-of-order
  packet is discarded and answered by one NAK (PSN sequence error) per gap; the requester goes back N
  to the NAKed PSN, or to the oldest unacknowledged PSN when it times out (`rto_s`); after `retry_cnt`
  timeouts in a row with no progress the QP goes to ERR (transport retry counter exceeded);
- write-only and `uet` (Ultra Ethernet RUD-like: per-packet entropy, spraying): direct placement, every
  packet is placed on arrival whatever its order (each carries its own address); the responder keeps a
  bitmap of the PSNs received beyond the expected one (its widest span, `window_peak`, is what the bitmap
  costs in NIC memory per QP: one bit per PSN); after a timeout only the missing PSNs are resent (the
  bitmap stands for selective acknowledgements);
- `uc` (Unreliable Connection): UC opcodes, no ACK, no NAK, no retransmission; the work request completes when
  its last packet is sent; the responder takes a message in PSN order and drops the rest of it after a gap (the
  message is lost); `ud` (Unreliable Datagram): one SEND ONLY datagram with a DETH, at most the path MTU, a
  receive completion at the responder; a UC/UD transfer is over when each packet has arrived or been lost;
- ACKs every `ack_every_packets`, on the last packet, or when the previous ACK is older than rto/8;
- DCQCN notification point: a CE-marked packet makes the responder send a CNP (BTH opcode 0x81,
  DSCP 48, priority 7) unless it sent one for this QP within `cnp_interval_s`;
- DCQCN reaction point (dcqcn.py): rate RC, target RT, alpha, rate-increase timer and byte counter.
  The rate limiter spaces packets by size/RC ("increasing inter-packet delay", seeds Figure 11-3).
"""

from __future__ import annotations

from math import inf
from typing import TYPE_CHECKING

from ..fabric.graph import SCALE_UP_TIERS
from ..units import bytes_per_s_to_gbps, gbps_to_bytes_per_s
from .dcqcn import RpState, decay_alpha, increase, on_cnp
from .headers import (
    ACK_BYTES,
    CNP_BYTES,
    DETH_BYTES,
    ECN_CE,
    ECN_ECT0,
    OP_ACK,
    OP_CNP,
    OP_UC_WRITE_FIRST,
    OP_UC_WRITE_ONLY,
    OP_UD_SEND_ONLY,
    OP_WRITE_FIRST,
    OP_WRITE_LAST,
    OP_WRITE_MIDDLE,
    OP_WRITE_ONLY,
    RETH_BYTES,
    ROCE_HEADER_BYTES,
    UC_OPCODE,
    segment_count,
)
from .qp_scheduler import Source
from .sim import ACK, CHUNK, CNP, DATA, MAD, NAK, NAK_ACCESS, Pkt
from .verbs import QpState, WcStatus, WorkCompletion, WorkRequest

if TYPE_CHECKING:
    from .connection import Connection
    from .port import Port

MAX_RATE_SAMPLES = 20_000


class Path:
    """How a flow's packets (or its ACKs/CNPs) are forwarded: the static next link at every node (the
    Router's ECMP route), the last switch (where load balancing stops), a hash for fallbacks."""

    __slots__ = ("dst", "hash", "key", "last_sw", "links", "next_at", "port_at", "spray")

    def __init__(
        self,
        links: list[int],
        next_at: dict[int, int],
        last_sw: int,
        dst: int,
        hash_: int,
        key,
        spray: bool = False,
        port_at: dict | None = None,
    ):
        self.links = links
        self.next_at = next_at
        self.port_at = port_at if port_at is not None else {}  # node -> the Port of next_at's link there
        self.last_sw = last_sw
        self.dst = dst
        self.hash = hash_
        self.key = key
        self.spray = spray


class Host:
    """A non-switch node: a NIC (RoCE endpoint), a GPU or an NVSwitch (scale-up chunk forwarding)."""

    kind = "host"
    forwarding_latency_s = 0.0

    def __init__(self, net, idx: int, node_id: str, ip: int | None):
        self.net = net
        self.idx = idx
        self.id = node_id
        self.ip = ip or 0
        self.ports: dict[int, Port] = {}
        self.sources: dict[int, Source] = {}

    def source(self, link: int) -> Source:
        s = self.sources.get(link)
        if s is None:
            port = self.ports[link]
            s = self.sources[link] = Source(port)
            port.source = s
        return s

    def released(self, pkt) -> None:  # hosts have no shared-buffer accounting
        pass

    def send(self, pkt: Pkt) -> None:
        self.ports[pkt.path.next_at[self.idx]].enqueue(pkt, pkt.prio)

    def receive(self, pkt: Pkt) -> None:
        if pkt.path.dst != self.idx:
            self.ports[pkt.path.next_at[self.idx]].enqueue(pkt, pkt.prio)
            return
        k = pkt.kind
        f = pkt.flow
        if k == DATA:
            f.rx_data(pkt)
        elif k == CHUNK:
            f.rx_chunk(pkt)
        elif k == CNP:
            f.rx_cnp(pkt)
        elif k == MAD:
            f.rx_mad(pkt)
        else:
            f.rx_ack(pkt)


def sent_all(flow, now: float, size: int) -> None:
    """`flow`'s last packet (or chunk) goes out now, `size` bytes on the wire, its first time: every byte of the
    transfer has left the sender when the sender's port has serialized it (the port's own arithmetic,
    Port.transmit). `flow.on_sent(flow)` then: the engines' release of a dependent waiting for the bytes to have
    left, not to have arrived (TaskGraph.drain_deps). Resent packets do not move it: the bytes had left once."""
    port = flow.path.port_at[flow.src.idx]
    flow.net.sim.at(now + size * port.s_per_byte, flow.on_sent, flow)


class ChunkFlow:
    """A scale-up (NVLink) transfer: chunks through the NVSwitch, no loss, no congestion control."""

    def __init__(self, net, fid: int, name: str, src: Host, size_bytes: float, path: Path, on_done):
        self.net, self.id, self.name, self.src = net, fid, name, src
        self.size = int(size_bytes)
        c = net.cfg.nvlink_chunk_bytes
        self.chunk = c
        self.n = segment_count(self.size, c)
        self.path = path
        self.snd_nxt = 0
        self.n_got = 0
        self.next_t = 0.0
        self.on_done = on_done
        self.on_sent = None  # called with the flow when its last chunk has left the sender (Network.add_transfer)
        self.start_t = net.sim.now
        self.done_t: float | None = None
        self.traced = False
        self.prio = 0

    def has_data(self) -> bool:
        return self.snd_nxt < self.n

    def next_packet(self, now: float) -> Pkt:
        i = self.snd_nxt
        self.snd_nxt = i + 1
        payload = min(self.chunk, self.size - i * self.chunk) if self.size else 0
        size = max(payload, 64)
        if i == self.n - 1 and self.on_sent is not None:
            sent_all(self, now, size)
        return Pkt(CHUNK, self, i, size, payload, 0, 0, 0, 0, self.path)

    def rx_chunk(self, pkt: Pkt) -> None:
        self.n_got += 1
        if self.n_got == self.n:
            self.done_t = self.net.sim.now
            self.src.sources[self.path.next_at[self.src.idx]].remove(self)
            self.on_done(self)


class QpFlow:
    def __init__(
        self,
        net,
        fid: int,
        name: str,
        src: Host,
        dst: Host,
        size_bytes: float,
        path: Path,
        rpath: Path,
        line_bytes_per_s: float,
        qpn: int,
        sport: int,
        on_done,
        dscp: int | None = None,
    ):
        # set by Connection.post: the work request, the first PSN on the wire; by Connection._go: the P_Key check
        self.wr: WorkRequest | None = None
        self.ipsn = 0
        self.pkey_ok = True
        self.cm_wait = net.cfg.nic.cm_setup  # the responder's QP may still wait for its RTU
        self.conn: Connection | None = None
        self.error: WcStatus | None = None
        self.net = net
        cfg = net.cfg
        self.id, self.name, self.src, self.dst = fid, name, src, dst
        self.size = int(size_bytes)
        self.mtu = cfg.nic.mtu_bytes
        self.n = segment_count(self.size, self.mtu)
        self.path, self.rpath = path, rpath
        self.qpn, self.sport = qpn, sport
        self.uet = cfg.nic.transport == "uet"
        self.uc, self.ud = cfg.nic.transport == "uc", cfg.nic.transport == "ud"
        self.reliable = not (self.uc or self.ud)  # UC, UD: no ACK, no retransmission
        self.write_only = cfg.nic.write_only or self.uet
        self.in_order = not self.write_only
        self.line_bytes_per_s = line_bytes_per_s
        self.rto_s = cfg.nic.rto_s
        self.ack_every = cfg.nic.ack_every_packets  # an ACK every so many packets, or when the last is this old:
        self.ack_after_s = cfg.nic.rto_s / 8
        # a QP that starts before its NIC (a PXN relay: NVLink to the relaying GPU, then its NIC) is paced at its
        # line rate, as the NIC's QP scheduler sends it, rather than at the NVLink's speed
        self.paced = net.fabric.links[path.links[0]].tier in SCALE_UP_TIERS

        self.on_done = on_done
        self.on_sent = None  # called with the flow when its last packet has left the sender (Network.add_transfer)
        if cfg.trace_by == "rdma":  # the k-th RDMA transfer of the run (NVLink transfers not counted)
            self.traced = net.rdma_flows in cfg.trace_flows
            net.rdma_flows += 1
        else:
            self.traced = fid in cfg.trace_flows
        self.dscp = cfg.nic.data_dscp if dscp is None else dscp
        self.prio = cfg.queue_of(self.dscp)
        self.ecn_capable = True
        now = net.sim.now
        self.start_t = now
        self.done_t: float | None = None
        self.acked_t: float | None = None
        # requester
        self.snd_nxt = 0
        self.snd_una = 0
        self.max_sent = 0
        self.next_t = now
        self.sent_t = [0.0] * self.n
        self.rto_armed = False
        d = cfg.dcqcn
        self.dc = d
        self.rp = RpState(line_bytes_per_s, line_bytes_per_s, d.alpha_init)
        self.last_dec = -inf
        self.alpha_ref_t = now
        self.inc_gen = 0
        self.bytes_ctr = 0
        self.rate_log: list[tuple[float, float]] = [(now, bytes_per_s_to_gbps(line_bytes_per_s))]
        self.decreases_logged = 0
        # responder
        self.epsn = 0
        self.n_got = 0
        self.got = None if self.in_order else bytearray(self.n)
        self.nak_sent = False
        self.last_ack_psn = 0
        self.last_ack_t = now
        self.last_cnp_tx = -inf
        self.access_failed = False
        if self.ud:
            self.placement = "datagram"
        elif self.uc:
            self.placement = "in order, a gap loses the message" if self.in_order else "direct, per-packet messages"
        else:
            self.placement = "go-back-N" if self.in_order else "direct"
        self.window_peak = 0  # direct placement: the widest span of the received-PSN bitmap (packets)
        # counters
        self.retx = self.timeouts = self.naks = self.ooo = self.dup = 0
        self.retries = 0  # timeouts in a row without progress (the QP's retry count bounds them)
        self.stalled_at: float | None = None  # faults: a cable under it failed (until a packet sent since arrives)
        self.pkey_drops = 0
        self.cnp_tx = self.cnp_rx = self.ce_rx = 0
        # unreliable transports (UC, UD): packets lost in the network, discarded by the responder (the rest of a
        # message after a gap), messages lost; the transfer is over when every packet arrived or was lost
        self.lost_packets = self.discarded = self.messages_lost = 0
        self.network_drops = 0  # its data packets the network dropped (any transport; RC resends them)
        self.msg_broken = False
        self.delivered: bool | None = None

    # -- requester --------------------------------------------------------------------------------
    def has_data(self) -> bool:
        if self.snd_nxt < self.n and self.got is not None:
            got = self.got
            while self.snd_nxt < self.n and got[self.snd_nxt]:
                self.snd_nxt += 1
        return self.snd_nxt < self.n

    def next_packet(self, now: float) -> Pkt:
        psn = self.snd_nxt
        self.snd_nxt = psn + 1
        n, mtu = self.n, self.mtu
        payload = min(mtu, self.size - psn * mtu) if self.size else 0
        if self.ud:  # one SEND ONLY datagram: BTH / DETH / payload (no RETH: no remote address)
            op, reth = OP_UD_SEND_ONLY, False
        elif self.write_only or n == 1:
            op, reth = OP_WRITE_ONLY, True
        elif psn == 0:
            op, reth = OP_WRITE_FIRST, True
        else:
            op, reth = (OP_WRITE_LAST if psn == n - 1 else OP_WRITE_MIDDLE), False
        if self.uc:
            op = UC_OPCODE[op]
        size = payload + ROCE_HEADER_BYTES + (RETH_BYTES if reth else 0) + (DETH_BYTES if self.ud else 0)
        pkt = Pkt(
            DATA,
            self,
            psn,
            size,
            payload,
            self.dscp,
            self.prio,
            ECN_ECT0,
            op,
            self.path,
            (self.sport + psn) if self.uet else self.sport,
            now,
        )
        if psn < self.max_sent:
            self.retx += 1
        else:
            self.max_sent = psn + 1
            if psn == n - 1 and self.on_sent is not None:
                sent_all(self, now, size)
        self.sent_t[psn] = now
        rp = self.rp
        if rp.rc_bytes_per_s < self.line_bytes_per_s:
            self.next_t = now + size / rp.rc_bytes_per_s
            if self.dc.enabled:
                self.bytes_ctr += size
                if self.bytes_ctr >= self.dc.byte_counter_bytes:
                    self.bytes_ctr -= self.dc.byte_counter_bytes
                    rp.i_b += 1
                    self._increase(now, "byte counter")
        elif self.paced:
            self.next_t = now + size / self.line_bytes_per_s
        else:
            self.next_t = now
        if not self.reliable:
            if psn == n - 1:
                self._sent_all(now)
        elif not self.rto_armed:
            self.rto_armed = True
            self.net.sim.at(now + self.rto_s, self._rto)
        return pkt

    def _sent_all(self, now: float) -> None:
        """UC, UD: the last packet is on the wire; nothing will acknowledge it, so the work request completes now
        (IBTA Vol. 1 Ch. 9: an unreliable send completes once the NIC has sent it)."""
        self.acked_t = now
        self.src.sources[self.path.next_at[self.src.idx]].remove(self)
        if self.conn is not None and self.wr is not None:
            self.conn.req.complete(self.wr, WcStatus.SUCCESS, now)
            if self.traced:
                self.net.log(
                    now,
                    f"{self.src.id}: work completion in the CQ: work request {self.wr.wr_id}, "
                    f"{'SEND' if self.ud else 'RDMA Write'}, {self.size:,} bytes, success (sent; "
                    f"{self.conn.req.type} has no acknowledgement)",
                    "completion",
                )

    def dropped(self, pkt: Pkt) -> None:
        """The network dropped one of this flow's data packets. A reliable QP resends it (timeout or NAK); on UC
        and UD it is gone, and its message with it."""
        self.network_drops += 1
        if self.reliable:
            return
        self.lost_packets += 1
        self._account(self.net.sim.now)

    def _account(self, now: float) -> None:
        """UC, UD: the transfer is over once every packet has arrived or been lost."""
        if self.done_t is None and self.n_got + self.discarded + self.lost_packets >= self.n:
            self.done_t = now
            self.delivered = self.n_got == self.n and not self.msg_broken
            if not self.delivered:
                self.messages_lost = max(self.messages_lost, 1) if self.in_order or self.ud else self.n - self.n_got
                self.net.log(
                    now,
                    f"{self.name}: {self.lost_packets} packet(s) lost in the network, "
                    f"{self.discarded} discarded by {self.dst.id}: "
                    f"{self.messages_lost} message(s) lost ({self.conn.req.type if self.conn else ''}: "
                    "no acknowledgement, no retransmission)",
                    "transport",
                )
            self.on_done(self)

    def _kick(self) -> None:
        self.src.ports[self.path.next_at[self.src.idx]].kick()

    def _go_back(self, psn: int) -> None:
        """Resend from message packet `psn` (a NAK, a timeout): the QP has data again for its port's scheduler."""
        self.snd_nxt = psn
        link = self.path.next_at[self.src.idx]
        source = self.src.sources.get(link)
        if source is not None:
            source.resend(self)
        self.src.ports[link].kick()

    def _rto(self, _=None) -> None:
        net = self.net
        now = net.sim.now
        if self.acked_t is not None or self.snd_una >= self.n or self.error is not None:
            self.rto_armed = False
            return
        rto = net.cfg.nic.rto_s
        if self.snd_una >= self.snd_nxt:  # nothing outstanding: re-arm when something is sent
            self.rto_armed = False
            return
        due = self.sent_t[self.snd_una] + rto
        if now >= due - 1e-12:
            self.timeouts += 1
            self.rto_armed = False
            conn = self.conn
            if conn is not None and self.retries >= conn.retry_cnt:
                net.log(
                    now,
                    f"{self.name}: timeout {self.retries + 1} in a row at PSN {self.psn_text(self.snd_una)}: "
                    f"retry count {conn.retry_cnt} exceeded, QP {conn.req.qpn:#x} to the error state",
                    "transport",
                )
                conn.fail(self, WcStatus.RETRY_EXC_ERR)
                return
            self.retries += 1
            net.log(
                now,
                f"{self.name}: retransmission timeout, go back to PSN {self.psn_text(self.snd_una)} "
                f"(sent up to {self.psn_text(self.snd_nxt - 1)})",
                "transport",
            )
            self._go_back(self.snd_una)
            return
        net.sim.at(due, self._rto)

    def wire_psn(self, i: int) -> int:
        """The PSN the wire carries for the message's packet `i`."""
        return (self.ipsn + i) & 0xFFFFFF

    def psn_text(self, i: int) -> str:
        return f"{(self.ipsn + i) & 0xFFFFFF:#08x}"

    def stop(self) -> None:
        """The QP went to ERR: nothing more is sent for this work request."""
        self.inc_gen += 1
        self.src.sources[self.path.next_at[self.src.idx]].remove(self)

    def rx_ack(self, pkt: Pkt) -> None:
        now = self.net.sim.now
        if self.traced:
            self.net.capture(pkt, self.src)
        if self.error is not None:
            return
        psn = pkt.psn
        if pkt.kind == NAK_ACCESS:
            self.naks += 1
            conn = self.conn
            assert conn is not None
            self.net.log(
                now,
                f"{self.name}: NAK (remote access error) at PSN {self.psn_text(psn)}: QP "
                f"{conn.req.qpn:#x} to the error state, work completion 'remote access error'",
                "transport",
            )
            conn.fail(self, WcStatus.REM_ACCESS_ERR)
            return
        if psn > self.snd_una:
            self.snd_una = psn
            self.retries = 0
            # a stall ends when a packet sent after the cable failed is acknowledged (or the message is): the
            # acknowledgments of packets already past the failed cable when it went down are not progress
            if self.stalled_at is not None and (psn >= self.n or self.sent_t[psn - 1] > self.stalled_at):
                self.net.stalls.append((self.stalled_at, now, self))
                self.stalled_at = None
        if pkt.kind == NAK:
            self.naks += 1
            if psn < self.snd_nxt:
                self.net.log(
                    now,
                    f"{self.name}: NAK (PSN sequence error) at PSN {self.psn_text(psn)}: go back N "
                    f"from {self.psn_text(psn)} (had sent up to {self.psn_text(self.snd_nxt - 1)})",
                    "transport",
                )
                self._go_back(psn)
        if self.snd_una >= self.n and self.acked_t is None:
            self.acked_t = now
            self.inc_gen += 1  # stop DCQCN timers
            self.src.sources[self.path.next_at[self.src.idx]].remove(self)
            if self.conn is not None and self.wr is not None:
                self.conn.req.complete(self.wr, WcStatus.SUCCESS, now)
                if self.traced:
                    self.net.log(
                        now,
                        f"{self.src.id}: work completion in the CQ: work request {self.wr.wr_id}, "
                        f"RDMA Write, {self.size:,} bytes, success",
                        "completion",
                    )

    # -- DCQCN reaction point -----------------------------------------------------------------------
    def rx_cnp(self, pkt: Pkt) -> None:
        net = self.net
        now = net.sim.now
        self.cnp_rx += 1
        if self.traced:
            net.capture(pkt, self.src)
        d = self.dc
        if not d.enabled or self.acked_t is not None or now - self.last_dec < d.rate_decrease_interval_s:
            return
        self.last_dec = now
        rp = self.rp
        before = rp.rc_bytes_per_s
        periods = int((now - self.alpha_ref_t) / d.alpha_update_interval_s)
        if periods > 0:  # alpha decays once per update interval without a CNP
            decay_alpha(rp, d.g, periods)
        self.alpha_ref_t = now
        on_cnp(rp, d.g, gbps_to_bytes_per_s(d.min_rate_gbps), d.clamp_target_rate)
        self.bytes_ctr = 0
        self._log_rate(now)
        if self.decreases_logged < 3:
            self.decreases_logged += 1
            net.log(
                now,
                f"{self.name}: CNP received: DCQCN rate {bytes_per_s_to_gbps(before):.3f} -> "
                f"{bytes_per_s_to_gbps(rp.rc_bytes_per_s):.3f} Gb/s "
                f"(target {bytes_per_s_to_gbps(rp.rt_bytes_per_s):.3f}, alpha {rp.alpha:.4f}); packets now spaced "
                f"{(self.mtu + ROCE_HEADER_BYTES) / rp.rc_bytes_per_s * 1e9:.1f} ns apart",
                "dcqcn",
            )
        self.inc_gen += 1
        net.sim.at(now + d.rate_increase_timer_s, self._inc_timer, self.inc_gen)

    def _inc_timer(self, gen: int) -> None:
        if gen != self.inc_gen:
            return
        self.rp.i_t += 1
        self._increase(self.net.sim.now, "timer")
        if self.rp.rc_bytes_per_s < self.line_bytes_per_s:
            self.net.sim.at(self.net.sim.now + self.dc.rate_increase_timer_s, self._inc_timer, gen)

    def _log_rate(self, now: float) -> None:
        log = self.rate_log
        log.append((now, bytes_per_s_to_gbps(self.rp.rc_bytes_per_s)))
        if len(log) > MAX_RATE_SAMPLES:  # long runs: thin the history, keep the latest
            self.rate_log = log[-1::-2][::-1]

    def _increase(self, now: float, why: str) -> None:
        d = self.dc
        increase(
            self.rp,
            d.fast_recovery_steps,
            gbps_to_bytes_per_s(d.r_ai_gbps),
            gbps_to_bytes_per_s(d.r_hai_gbps),
            self.line_bytes_per_s,
        )
        self._log_rate(now)
        if self.next_t > now:  # the new rate applies to the packet waiting now
            self._kick()

    # -- responder --------------------------------------------------------------------------------
    def rx_data(self, pkt: Pkt) -> None:
        net = self.net
        now = net.sim.now
        if self.traced:
            net.capture(pkt, self.dst)
        if self.cm_wait:  # set up by the CM: the first data may come before the RTU (lost or late)
            self.cm_wait = False
            conn = self.conn
            if conn is not None and conn.resp.state is QpState.RTR:
                conn.established_by_data()
        if not self.pkey_ok:  # Chapter 9: the P_Key first; a mismatch is dropped without a word
            self.pkey_drops += 1
            net.pkey_violation(self)
            if not self.reliable:  # nobody will resend it: the message is lost
                self.msg_broken = True
                self.discarded += 1
                self._account(now)
            return
        if self.access_failed:  # the rest of a message whose R_Key check failed
            return
        if not self.reliable:
            self._rx_unreliable(pkt, now)
            return
        if pkt.opcode == OP_WRITE_FIRST or pkt.opcode == OP_WRITE_ONLY:
            why = self._check_reth(pkt)
            if why is not None:
                self.access_failed = True
                net.log(
                    now,
                    f"{self.name}: {self.dst.id} rejects PSN {self.psn_text(pkt.psn)}: {why}; NAK remote access error",
                    "transport",
                )
                self.dst.send(Pkt(NAK_ACCESS, self, pkt.psn, ACK_BYTES, 0, self.dscp, self.prio, 0, OP_ACK, self.rpath))
                return
        if pkt.ecn == ECN_CE:
            self.ce_rx += 1
            if self.dc.enabled and now - self.last_cnp_tx >= self.dc.cnp_interval_s:
                self.last_cnp_tx = now
                self.cnp_tx += 1
                if self.cnp_tx == 1:
                    net.log(
                        now,
                        f"{self.name}: receiving NIC {self.dst.id} sees ECN 11 (CE): CNP (opcode 0x81, "
                        f"DSCP {net.cnp_dscp} -> queue {net.cnp_queue}) to {self.src.id} for QP {self.qpn:#x}",
                        "dcqcn",
                    )
                self.dst.send(Pkt(CNP, self, 0, CNP_BYTES, 0, net.cnp_dscp, net.cnp_queue, 0, OP_CNP, self.rpath))
        psn = pkt.psn
        if self.in_order:
            if psn == self.epsn:
                self.epsn = psn + 1
                self.n_got += 1
                self.nak_sent = False
            elif psn > self.epsn:
                self.ooo += 1
                if not self.nak_sent:
                    self.nak_sent = True
                    if self.ooo == 1:
                        net.log(
                            now,
                            f"{self.name}: PSN {self.psn_text(psn)} arrived while "
                            f"{self.psn_text(self.epsn)} was expected: "
                            f"{'Middle/Last packets carry no RETH, so it' if self.n > 1 else 'it'} cannot "
                            "be placed; discarded, NAK sent",
                            "transport",
                        )
                    self._ack(now, NAK)
                return
            else:
                self.dup += 1
                if psn % self.net.cfg.nic.ack_every_packets == 0:
                    self._ack(now, ACK)
                return
        else:
            got = self.got
            assert got is not None  # write-only and UET place out of order: a bitmap of what arrived
            if got[psn]:
                self.dup += 1
                return
            got[psn] = 1
            self.n_got += 1
            if psn != self.epsn:
                self.ooo += 1
                if psn - self.epsn >= self.window_peak:  # PSNs the bitmap tracks beyond the expected one
                    self.window_peak = psn - self.epsn + 1
            e = self.epsn
            n = self.n
            while e < n and got[e]:
                e += 1
            self.epsn = e
        if (
            self.epsn - self.last_ack_psn >= self.ack_every
            or self.n_got == self.n
            or now - self.last_ack_t >= self.ack_after_s
        ):
            self._ack(now, ACK)
        if self.n_got == self.n and self.done_t is None:
            self.done_t = now
            self.on_done(self)

    def _rx_unreliable(self, pkt: Pkt, now: float) -> None:
        """The responder of a UC or UD queue pair: no ACK, no NAK, ever. UC (IBTA Vol. 1 Ch. 9) accepts the packets
        of a message in PSN order; a gap means a packet is lost, so the message is dropped (the packets after the
        gap are discarded until the next First or Only). In Write Only mode every packet is a message of its own.
        An R_Key violation is dropped silently too (no one to tell). UD: each datagram is a SEND into a receive
        buffer: a receive completion in the responder's CQ."""
        net = self.net
        if self.ecn_capable and pkt.ecn == ECN_CE:  # congestion notification works as for RC
            self.ce_rx += 1
            if self.dc.enabled and now - self.last_cnp_tx >= self.dc.cnp_interval_s:
                self.last_cnp_tx = now
                self.cnp_tx += 1
                self.dst.send(Pkt(CNP, self, 0, CNP_BYTES, 0, net.cnp_dscp, net.cnp_queue, 0, OP_CNP, self.rpath))
        psn = pkt.psn
        if self.uc and pkt.opcode in (OP_UC_WRITE_FIRST, OP_UC_WRITE_ONLY) and self._check_reth(pkt) is not None:
            self.msg_broken = True
            self.discarded += 1
            net.log(
                now,
                f"{self.name}: {self.dst.id} drops PSN {self.psn_text(psn)}: {self._check_reth(pkt)} (UC: no NAK)",
                "transport",
            )
        elif self.ud or not self.in_order:  # a datagram, or a Write Only message: placed on its own
            self.n_got += 1
            if psn != self.epsn:
                self.ooo += 1
            self.epsn = max(self.epsn, psn + 1)
            if self.ud and self.conn is not None:
                resp = self.conn.resp
                resp.recv_cq.push(WorkCompletion(self.id, WcStatus.SUCCESS, "RECV", pkt.payload, resp.qpn, now))
        elif psn == self.epsn and not self.msg_broken:
            self.epsn = psn + 1
            self.n_got += 1
        else:  # a gap (or after one): the message cannot be completed
            if not self.msg_broken:
                self.msg_broken = True
                net.log(
                    now,
                    f"{self.name}: PSN {self.psn_text(psn)} arrived while {self.psn_text(self.epsn)} was "
                    f"expected: UC drops the message (no NAK, no retransmission); the rest of it is "
                    "discarded",
                    "transport",
                )
            self.ooo += psn != self.epsn
            self.discarded += 1
        self._account(now)

    def _check_reth(self, pkt: Pkt) -> str | None:
        """The responder's R_Key check of a packet that carries a RETH: None, or why it fails."""
        wr, conn = self.wr, self.conn
        if wr is None or conn is None:
            return None
        va = wr.remote_addr + pkt.psn * self.mtu
        length = self.size if pkt.opcode in (OP_WRITE_FIRST, OP_UC_WRITE_FIRST) or self.n == 1 else pkt.payload
        return conn.resp.pd.check_remote(wr.rkey, va, length)

    def _ack(self, now: float, kind: int) -> None:
        self.last_ack_psn = self.epsn
        self.last_ack_t = now
        self.dst.send(Pkt(kind, self, self.epsn, ACK_BYTES, 0, self.dscp, self.prio, 0, OP_ACK, self.rpath))
