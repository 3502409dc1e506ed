"""An egress port: eight priority queues on one directed link, a scheduler, PFC pause state.

Scheduling (seeds Example 11-3): the strict-priority queues first (queue 7, `priority level 1`), then
deficit round robin over the other queues weighted by `bandwidth remaining percent`; a queue with 0 %
is served only when no weighted queue has traffic. A queue paused by PFC is skipped until its pause
timer expires or a quanta-0 frame resumes it. A port may have a `source` (a NIC's QP scheduler) that
supplies lossless data packets when the queues have nothing to send.

A packet leaving at time t arrives at the far end at t + size/rate + cable latency + the far device's
forwarding latency (cut into one event).
"""

from __future__ import annotations

from collections import deque
from math import inf

from .headers import pfc_pause_s
from .sim import Pkt


class Port:
    __slots__ = ("net", "link", "name", "owner", "peer", "s_per_byte", "bps", "delay", "latency_s", "queues",
                 "qbytes", "backlog", "busy_until", "wake_t", "paused_until", "pause_start", "paused_total",
                 "ignore_pause_until", "source", "source_prio", "strict", "weighted", "quantum", "deficit", "rr",
                 "tx_bytes", "tx_packets", "sample_t", "depth_series", "max_depth", "pfc_rx", "is_switch_port")

    def __init__(self, net, link, owner, peer, strict: tuple[int, ...], weights: tuple[int, ...], mtu_bytes: int):
        self.net = net
        self.link = link.index
        self.name = link.id
        self.owner = owner
        self.peer = peer
        self.bps = link.capacity_bytes_per_s * 8
        self.s_per_byte = 1.0 / link.capacity_bytes_per_s
        self.latency_s = link.latency_s
        self.delay = link.latency_s + peer.forwarding_latency_s
        self.queues = [deque() for _ in range(8)]
        self.qbytes = [0] * 8
        self.backlog = 0
        self.busy_until = 0.0
        self.wake_t = inf
        self.paused_until = [0.0] * 8
        self.pause_start: list[float | None] = [None] * 8
        self.paused_total = [0.0] * 8
        self.ignore_pause_until = [0.0] * 8
        self.source = None
        self.source_prio = 3
        self.strict = sorted(strict, reverse=True)
        self.weighted = [q for q in range(8) if q not in strict]
        self.quantum = [w * mtu_bytes // 10 for w in weights]  # 50 % -> 5 MTUs per round
        self.deficit = [0] * 8
        self.rr = 0
        self.tx_bytes = 0
        self.tx_packets = 0
        self.sample_t = [-inf] * 8
        self.depth_series: list[list] = [[] for _ in range(8)]
        self.max_depth = [0] * 8
        self.pfc_rx = [0] * 8
        self.is_switch_port = False

    # -- queueing -------------------------------------------------------------------------------
    def enqueue(self, pkt: Pkt, q: int) -> None:
        self.queues[q].append(pkt)
        d = self.qbytes[q] + pkt.size
        self.qbytes[q] = d
        self.backlog += pkt.size
        if self.is_switch_port:
            if d > self.max_depth[q]:
                self.max_depth[q] = d
            now = self.net.sim.now
            if now - self.sample_t[q] >= self.net.depth_sample_s:
                self.sample_t[q] = now
                self.depth_series[q].append((now, d))
        self.kick()

    def _dequeue(self, q: int) -> Pkt:
        pkt = self.queues[q].popleft()
        d = self.qbytes[q] - pkt.size
        self.qbytes[q] = d
        self.backlog -= pkt.size
        if self.is_switch_port:
            now = self.net.sim.now
            if now - self.sample_t[q] >= self.net.depth_sample_s or d == 0:
                self.sample_t[q] = now
                self.depth_series[q].append((now, d))
            self.owner.released(pkt)
        return pkt

    def _pick(self, now: float) -> Pkt | None:
        queues, paused = self.queues, self.paused_until
        for q in self.strict:
            if queues[q] and paused[q] <= now:
                return self._dequeue(q)
        active = [q for q in self.weighted if queues[q] and paused[q] <= now]
        if active:
            if len(active) == 1:
                return self._dequeue(active[0])
            quantum, deficit, order = self.quantum, self.deficit, self.weighted
            if not any(quantum[q] for q in active):
                return self._dequeue(active[0])
            served = [q for q in active if quantum[q]]
            for _ in range(64 * len(order)):
                q = order[self.rr]
                if q in served:
                    size = queues[q][0].size
                    if deficit[q] >= size:
                        deficit[q] -= size
                        return self._dequeue(q)
                    deficit[q] += quantum[q]
                else:
                    deficit[q] = 0
                self.rr = (self.rr + 1) % len(order)
            return self._dequeue(served[0])
        if self.source is not None and paused[self.source_prio] <= now:
            return self.source.pull(now)
        return None

    # -- transmission ---------------------------------------------------------------------------
    def wake_at(self, t: float) -> None:
        if t < self.wake_t or self.wake_t <= self.net.sim.now:
            self.wake_t = t
            self.net.sim.at(t, self._wake)

    def _wake(self, _=None) -> None:
        if self.wake_t <= self.net.sim.now:
            self.wake_t = inf
        self.kick()

    def kick(self) -> None:
        net = self.net
        now = net.sim.now
        if self.busy_until > now:
            self.wake_at(self.busy_until)
            return
        pkt = self._pick(now)
        if pkt is None:
            self._wake_for_blocked(now)
            return
        end = now + pkt.size * self.s_per_byte
        self.busy_until = end
        self.tx_bytes += pkt.size
        self.tx_packets += 1
        pkt.in_link = self.link
        net.sim.at(end + self.delay, self.peer.receive, pkt)
        if self.backlog or self.source is not None:
            self.wake_at(end)

    def _wake_for_blocked(self, now: float) -> None:
        """Nothing sendable now: wake when a pause expires or the source's rate limiter allows."""
        t = inf
        for q in range(8):
            if self.queues[q] and self.paused_until[q] > now:
                t = min(t, self.paused_until[q])
        if self.source is not None:
            if self.paused_until[self.source_prio] > now:
                if self.source.has_data():
                    t = min(t, self.paused_until[self.source_prio])
            else:
                t = min(t, self.source.next_ready())
        if t < inf:
            self.wake_at(max(t, now))

    # -- PFC, receiving side of a pause frame ---------------------------------------------------
    def on_pfc(self, arg) -> None:
        prio, quanta, sender = arg
        net = self.net
        now = net.sim.now
        self.pfc_rx[prio] += 1
        wd = net.cfg.switch.pfc_watchdog_s
        if quanta and self.ignore_pause_until[prio] > now:
            return  # the watchdog disabled PFC on this queue for a while
        if quanta == 0:
            self._settle_pause(prio, now)
            self.paused_until[prio] = now
            net.log(now, f"{self.name}: PFC resume (quanta 0) for priority {prio} from {sender}; "
                         f"queue {prio} transmits again", "pfc")
            self.kick()
            return
        if self.pause_start[prio] is not None and self.paused_until[prio] < now:
            self._settle_pause(prio, now)  # the previous pause had expired
        if self.pause_start[prio] is None:
            self.pause_start[prio] = now
            net.log(now, f"{self.name}: PFC pause received for priority {prio} ({quanta} quanta = "
                         f"{pfc_pause_s(quanta, self.bps) * 1e6:.2f} us) from {sender}; other priorities keep "
                         "flowing", "pfc")
        elif wd is not None and now - self.pause_start[prio] > wd:
            self._watchdog(prio, now)
            return
        self.paused_until[prio] = now + pfc_pause_s(quanta, self.bps)

    def _settle_pause(self, prio: int, now: float) -> None:
        start = self.pause_start[prio]
        if start is not None:
            self.paused_total[prio] += min(now, self.paused_until[prio]) - start
            self.pause_start[prio] = None

    def _watchdog(self, prio: int, now: float) -> None:
        net = self.net
        dropped = 0
        while self.queues[prio]:
            pkt = self._dequeue(prio)
            net.drop(self, pkt, "pfc-watchdog")
            dropped += 1
        self._settle_pause(prio, now)
        self.paused_until[prio] = now
        self.ignore_pause_until[prio] = now + net.cfg.switch.pfc_watchdog_s
        net.stats_watchdog(self, prio)
        net.log(now, f"{self.name}: PFC watchdog: priority {prio} paused longer than "
                     f"{net.cfg.switch.pfc_watchdog_s * 1e3:g} ms; {dropped} queued packets discarded, "
                     "pauses ignored for one interval", "pfc")
        self.kick()

    def finish(self, now: float) -> None:
        for p in range(8):
            self._settle_pause(p, now)
