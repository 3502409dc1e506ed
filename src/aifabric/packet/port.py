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
from heapq import heappush
from math import exp, inf
from typing import TYPE_CHECKING

from ..fabric.graph import TIER_NVLINK, TIER_PCIE
from .headers import pfc_pause_s
from .sim import DATA, Pkt

if TYPE_CHECKING:
    from .nic import Source

MAX_BINS = 4096  # link-load bins per port before they are merged pairwise
MAX_DEPTH_SAMPLES = 20_000  # depth samples per queue before the series is thinned


def serialization_rate_bytes_per_s(link) -> float:
    """The rate a port sends at: the line rate for network links, whose packets carry their real headers
    here; NVLink and PCIe at their achievable payload rate (fabric/achievable.py: NCCL's NVLink rate, PCIe
    at 75 % of x16), whose own framing the packet engine does not simulate."""
    if link.tier in (TIER_NVLINK, TIER_PCIE):
        return link.rate_bytes_per_s
    return link.capacity_bytes_per_s


class Port:
    __slots__ = (
        "_wake_cb",
        "backlog",
        "bins",
        "bin_s",
        "bps",
        "busy_until",
        "deficit",
        "delay",
        "depth_series",
        "dre",
        "dre_t",
        "dre_tau",
        "ignore_pause_until",
        "is_switch_port",
        "kmin_watch",
        "latency_s",
        "link",
        "max_depth",
        "name",
        "net",
        "owner",
        "pause_start",
        "paused_total",
        "paused_until",
        "peer",
        "peer_receive",
        "pfc_rx",
        "qbytes",
        "quantum",
        "red_avg",
        "queues",
        "rr",
        "s_per_byte",
        "sample_s",
        "sample_t",
        "src_turn",
        "sim",
        "source",
        "strict",
        "tx_bytes",
        "tx_packets",
        "wake_t",
        "weighted",
    )

    def __init__(self, net, link, owner, peer, strict: tuple[int, ...], weights: tuple[int, ...], mtu_bytes: int):
        self.net = net
        self.sim = net.sim
        self.sample_s = net.depth_sample_s
        self.peer_receive = peer.receive
        self._wake_cb = self.kick
        self.link = link.index
        self.name = link.id
        self.owner = owner
        self.peer = peer
        rate = serialization_rate_bytes_per_s(link)
        self.bps = rate * 8
        self.s_per_byte = 1.0 / rate
        self.latency_s = link.latency_s
        self.delay = link.latency_s + peer.forwarding_latency_s
        self.queues: list[deque[Pkt]] = [deque() for _ in range(8)]
        self.qbytes = [0] * 8
        self.red_avg = [0.0] * 8  # WRED's average queue depth per queue, bytes (weight > 0; switch.py)
        self.backlog = 0
        self.busy_until = 0.0
        self.wake_t = inf
        self.paused_until = [0.0] * 8
        self.pause_start: list[float | None] = [None] * 8
        self.paused_total = [0.0] * 8
        self.ignore_pause_until = [0.0] * 8
        self.source: Source | None = None
        self.src_turn = False  # a host port: its own QPs' turn after a forwarded (relayed) data packet
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
        self.kmin_watch: list[int | None] | None = None  # --explain: WRED min per queue (None: no WRED) to narrate
        self.bins: dict[int, float] | None = None  # bytes sent per `bin_s` bin (by serialization time), if recorded
        self.bin_s = net.link_bin_s
        self.dre_tau: float | None = None  # load estimate for flowlet/adaptive routing (CONGA's DRE)
        self.dre = 0.0
        self.dre_t = 0.0

    # -- queueing -------------------------------------------------------------------------------
    def enqueue(self, pkt: Pkt, q: int) -> None:
        self.queues[q].append(pkt)
        size = pkt.size
        d = self.qbytes[q] + size
        self.qbytes[q] = d
        self.backlog += size
        if self.is_switch_port:
            self.max_depth[q] = max(self.max_depth[q], d)
            now = self.sim.now
            if now - self.sample_t[q] >= self.sample_s:
                self.sample_t[q] = now
                self.depth_series[q].append((now, d))
                if len(self.depth_series[q]) > MAX_DEPTH_SAMPLES:
                    self._coarsen_depth()
            k = None if self.kmin_watch is None else self.kmin_watch[q]
            if k is not None and d - size <= k < d:
                self.net.log(now, f"{self.name}: egress queue {q} rises above WRED min ({k / 1e3:.0f} KB)", "ecn")
        if self.busy_until <= self.sim.now:
            self.kick()
        elif self.wake_t > self.busy_until or self.wake_t <= self.sim.now:
            self.wake_at(self.busy_until)

    def send_direct(self, pkt: Pkt) -> None:
        """Enqueue + dequeue at once: the port is idle with empty queues (the common uncongested hop)."""
        now = self.sim.now
        size = pkt.size
        end = now + size * self.s_per_byte
        self.busy_until = end
        self.tx_bytes += size
        self.tx_packets += 1
        if self.bins is not None:
            bins = self.bins
            b = int(now / self.bin_s)
            if end <= (b + 1) * self.bin_s:
                bins[b] = bins.get(b, 0) + size
            else:  # the frame's serialization crosses into the next bin: each bin gets its share
                self._bin_split(b, now, end, size)
            if len(bins) > MAX_BINS:
                self._coarsen_bins()
        if self.dre_tau is not None:
            self.dre = self.load(now) - self.backlog + size
            self.dre_t = now
        pkt.in_link = self.link
        sim = self.sim
        sim.seq += 1
        heappush(sim.heap, (end + self.delay, sim.seq, self.peer_receive, pkt))
        if self.source is not None:
            self.wake_t = end
            sim.seq += 1
            heappush(sim.heap, (end, sim.seq, self._wake_cb, None))

    def _bin_split(self, b: int, now: float, end: float, size: int) -> None:
        """A frame's bytes over the bins its serialization [now, end) spans, by time: a bin never holds more
        than the line rate's worth (a frame counted whole where it starts would overfill its bin)."""
        bins, w, dur = self.bins, self.bin_s, end - now
        assert bins is not None  # called only while bins are recorded
        t = now
        while True:
            e = min(end, (b + 1) * w)
            if e > t:
                bins[b] = bins.get(b, 0) + size * (e - t) / dur
            if e >= end:
                return
            t, b = e, b + 1

    def _coarsen_bins(self) -> None:
        """Long runs: merge pairs of bins, doubling the bin width (memory stays bounded)."""
        merged: dict[int, float] = {}
        assert self.bins is not None
        for b, v in self.bins.items():
            merged[b >> 1] = merged.get(b >> 1, 0) + v
        self.bins = merged
        self.bin_s *= 2

    def _coarsen_depth(self) -> None:
        """Long runs: keep every other depth sample and halve the sampling rate from now on."""
        self.depth_series = [series[::2] for series in self.depth_series]
        self.sample_s *= 2

    def load(self, now: float) -> float:
        """Queued bytes plus a discounting rate estimator of bytes sent (decays with time constant
        `dre_tau`): what flowlet and adaptive routing compare."""
        tau = self.dre_tau
        assert tau is not None  # set on the ports flowlet and adaptive routing compare
        return self.backlog + self.dre * exp(-(now - self.dre_t) / tau)

    def _dequeue(self, q: int) -> Pkt:
        pkt = self.queues[q].popleft()
        d = self.qbytes[q] - pkt.size
        self.qbytes[q] = d
        self.backlog -= pkt.size
        if self.is_switch_port:
            now = self.sim.now
            if d == 0 or now - self.sample_t[q] >= self.sample_s:
                self.sample_t[q] = now
                self.depth_series[q].append((now, d))
                if len(self.depth_series[q]) > MAX_DEPTH_SAMPLES:
                    self._coarsen_depth()
            k = None if self.kmin_watch is None else self.kmin_watch[q]
            if k is not None and d < k <= d + pkt.size:
                self.net.log(now, f"{self.name}: egress queue {q} falls below WRED min ({k / 1e3:.0f} KB): "
                                  "ECN marking stops", "ecn")
            self.owner.released(pkt)
        return pkt

    def _pick(self, now: float) -> Pkt | None:
        """The next packet from the queues: strict priority, then DWRR on bandwidth-remaining weights."""
        queues, paused = self.queues, self.paused_until
        for q in self.strict:
            if queues[q] and paused[q] <= now:
                return self._dequeue(q)
        first = -1
        several = False
        for q in self.weighted:
            if queues[q] and paused[q] <= now:
                if first < 0:
                    first = q
                else:
                    several = True
                    break
        if first < 0:
            return None
        if not several:
            return self._dequeue(first)
        active = [q for q in self.weighted if queues[q] and paused[q] <= now]
        quantum, deficit, order = self.quantum, self.deficit, self.weighted
        served = [q for q in active if quantum[q]]
        if not served:  # only 0 % queues have traffic: serve them in order
            return self._dequeue(active[0])
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

    # -- transmission ---------------------------------------------------------------------------
    def wake_at(self, t: float) -> None:
        sim = self.sim
        if t < self.wake_t or self.wake_t <= sim.now:
            self.wake_t = t
            sim.seq += 1
            heappush(sim.heap, (t, sim.seq, self._wake_cb, None))

    def _wake(self, _=None) -> None:
        self.kick()

    def kick(self, _=None) -> None:
        """Start the next frame if the port is free (also the wake-up callback)."""
        sim = self.sim
        now = sim.now
        if self.wake_t <= now:
            self.wake_t = inf
        busy = self.busy_until
        if busy > now:
            if busy < self.wake_t or self.wake_t <= now:
                self.wake_at(busy)
            return
        pkt = None
        if self.src_turn and self.source is not None:  # a NIC sends its own QPs and relayed data (PXN) in turns
            self.src_turn = False
            pkt = self.source.pull(now, self.paused_until)
        if pkt is None and self.backlog:
            pkt = self._pick(now)
            if pkt is not None and pkt.kind == DATA and self.source is not None and not self.is_switch_port:
                self.src_turn = True
        if pkt is None:
            src = self.source
            if src is not None:
                pkt = src.pull(now, self.paused_until)
            if pkt is None:
                self._wake_for_blocked(now)
                return
        size = pkt.size
        end = now + size * self.s_per_byte
        self.busy_until = end
        self.tx_bytes += size
        self.tx_packets += 1
        if self.bins is not None:
            bins = self.bins
            b = int(now / self.bin_s)
            if end <= (b + 1) * self.bin_s:
                bins[b] = bins.get(b, 0) + size
            else:  # the frame's serialization crosses into the next bin: each bin gets its share
                self._bin_split(b, now, end, size)
            if len(bins) > MAX_BINS:
                self._coarsen_bins()
        if self.dre_tau is not None:
            self.dre = self.load(now) - self.backlog + size
            self.dre_t = now
        pkt.in_link = self.link
        sim.seq += 1
        heappush(sim.heap, (end + self.delay, sim.seq, self.peer_receive, pkt))
        if self.backlog or self.source is not None:
            self.wake_t = end
            sim.seq += 1
            heappush(sim.heap, (end, sim.seq, self._wake_cb, None))

    def _wake_for_blocked(self, now: float) -> None:
        """Nothing sendable now: wake when a pause expires or the source's rate limiter allows."""
        t = inf
        for q in range(8):
            if self.queues[q] and self.paused_until[q] > now:
                t = min(t, self.paused_until[q])
        if self.source is not None:
            t = min(t, self.source.next_ready(self.paused_until))
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
        if net.deadlock_open is not None:
            from .deadlock import watchdog_fired

            watchdog_fired(net, self)
        self.kick()

    def finish(self, now: float) -> None:
        for p in range(8):
            self._settle_pause(p, now)
