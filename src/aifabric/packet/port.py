"""An egress port: one directed link's sender, composed of parts that each do one thing.

- `queue` (class_queues.py): eight per-class FIFO queues with their depths;
- `scheduler` (egress_scheduler.py): strict priority, then DWRR, skipping paused queues;
- `pfc` (pfc_state.py): the pause frames received, pause timers, the watchdog;
- `source` (qp_scheduler.py): on a NIC's port, its queue pairs, which supply lossless data packets in turns with
  what is queued (relayed data, ACKs, CNPs);
- attached from outside, none by default: `depth_watchers` and `narrator` (port_monitors.py: depth sampling, the
  --explain story), `load_record` (port_monitors.LinkLoad: bytes per time bin), `dre` (load_estimator.py: what
  flowlet and adaptive routing compare).

The port itself moves frames: when the link is free it takes the next one (from its QPs or its queues) and
schedules, through the simulator, its arrival at the far end at t + size/rate + cable latency + the far device's
forwarding latency (cut into one event) and its own wake-up when the frame is out.
"""

from __future__ import annotations

from math import inf
from typing import TYPE_CHECKING

from ..fabric.graph import TIER_NVLINK, TIER_PCIE
from .class_queues import CLASSES, ClassQueues
from .egress_scheduler import EgressScheduler
from .headers import pfc_pause_s
from .pfc_state import PAUSED, RESUMED, WATCHDOG, PfcState
from .port_monitors import LinkLoad
from .sim import DATA, Pkt

if TYPE_CHECKING:
    from .load_estimator import LoadEstimator
    from .port_monitors import DepthSampler, PortNarrator
    from .qp_scheduler import Source

NO_DEPTHS = (0,) * CLASSES  # a port without a depth sampler (a host's)
NO_SERIES: tuple[tuple, ...] = ((),) * CLASSES


def serialization_rate_bytes_per_s(link) -> float:
    """The rate a port sends at: the line rate for network links, whose packets carry their real headers
    here; NVLink and PCIe at their achievable payload rate (fabric/achievable.py: NCCL's NVLink rate, PCIe
    at 75 % of x16), whose own framing the packet engine does not simulate."""
    if link.tier in (TIER_NVLINK, TIER_PCIE):
        return link.rate_bytes_per_s
    return link.capacity_bytes_per_s


class Port:
    """The sender of one directed link: its queues, scheduler, PFC state and QPs, and what watches it."""

    __slots__ = (
        "_at",
        "_at2",
        "_wake_cb",
        "rate_bytes_per_s",
        "busy_until",
        "delay",
        "depth_watchers",
        "dre",
        "is_switch_port",
        "latency_s",
        "link",
        "load_record",
        "name",
        "narrator",
        "net",
        "owner",
        "paused_until",
        "peer",
        "peer_receive",
        "pfc",
        "qbytes",
        "queue",
        "queues",
        "s_per_byte",
        "sampler",
        "scheduler",
        "sim",
        "source",
        "src_turn",
        "tx_bytes",
        "tx_packets",
        "wake_t",
    )

    def __init__(self, net, link, owner, peer, strict: tuple[int, ...], weights: tuple[int, ...], mtu_bytes: int):
        self.net = net
        self.sim = net.sim
        self._at = net.sim.at
        self._at2 = net.sim.at2
        self.peer_receive = peer.receive
        self._wake_cb = self.kick
        self.link = link.index
        self.name = link.id
        self.owner = owner
        self.peer = peer
        rate = serialization_rate_bytes_per_s(link)
        self.rate_bytes_per_s = rate
        self.s_per_byte = 1.0 / rate
        self.latency_s = link.latency_s
        self.delay = link.latency_s + peer.forwarding_latency_s
        self.queue = ClassQueues()
        self.queues = self.queue.fifos  # the queues' packets and depths under the names callers read
        self.qbytes = self.queue.depth_bytes
        self.scheduler = EgressScheduler(strict, weights, mtu_bytes)
        self.pfc = PfcState()
        self.paused_until = self.pfc.paused_until
        self.busy_until = 0.0
        self.wake_t = inf
        self.source: Source | None = None
        self.src_turn = False  # a host port: its own QPs' turn after a forwarded (relayed) data packet
        self.tx_bytes = 0
        self.tx_packets = 0
        self.is_switch_port = False
        self.depth_watchers: tuple[DepthSampler | PortNarrator, ...] = ()
        self.sampler: DepthSampler | None = None
        self.narrator: PortNarrator | None = None
        self.load_record: LinkLoad | None = None
        self.dre: LoadEstimator | None = None

    # -- monitors attached from outside -------------------------------------------------------------
    def watch_depth(self, watcher: DepthSampler | PortNarrator) -> None:
        """Call `watcher.rose` / `fell` after each change of a queue's depth."""
        self.depth_watchers = (*self.depth_watchers, watcher)

    def sample_depth(self, sampler: DepthSampler) -> None:
        """Record each queue's depth over time and its maximum with `sampler` (a switch port's statistics)."""
        self.sampler = sampler
        self.watch_depth(sampler)

    @property
    def backlog(self) -> int:
        return self.queue.backlog

    @property
    def pfc_rx(self) -> list[int]:
        return self.pfc.frames_rx

    @property
    def paused_total(self) -> list[float]:
        return self.pfc.paused_total_s

    @property
    def max_depth(self) -> list[int] | tuple[int, ...]:
        return self.sampler.max_depth if self.sampler is not None else NO_DEPTHS

    @property
    def depth_series(self) -> list[list[tuple[float, int]]] | tuple[tuple, ...]:
        return self.sampler.series if self.sampler is not None else NO_SERIES

    @property
    def bins(self) -> dict[int, float] | None:
        """Bytes sent per `bin_s` bin, if recorded (assign a dict to start recording into it)."""
        return self.load_record.bins if self.load_record is not None else None

    @bins.setter
    def bins(self, bins: dict[int, float]) -> None:
        self.load_record = LinkLoad(bins, self.net.link_bin_s)

    @property
    def bin_s(self) -> float:
        return self.load_record.bin_s if self.load_record is not None else self.net.link_bin_s

    def load(self, now: float) -> float:
        """Queued bytes plus recently sent bytes, decaying (set on the ports flowlet and adaptive routing compare)."""
        assert self.dre is not None
        return self.dre.load(now, self.queue.backlog)

    # -- queueing -------------------------------------------------------------------------------
    def enqueue(self, pkt: Pkt, q: int) -> None:
        d = self.queue.push(pkt, q)
        now = self.sim.now
        if self.depth_watchers:
            for w in self.depth_watchers:
                w.rose(q, d, pkt.size, now)
        busy = self.busy_until
        if busy <= now:
            self.kick()
        elif self.wake_t > busy or self.wake_t <= now:  # wake_at(busy), which would schedule it
            self.wake_t = busy
            self._at(busy, self._wake_cb)

    def _dequeue(self, q: int) -> Pkt:
        """The head of queue `q`, taken off it: depth monitors told, the switch's buffer accounting released."""
        pkt = self.queue.pop(q)
        if self.is_switch_port:
            if self.depth_watchers:
                now = self.sim.now
                d = self.queue.depth_bytes[q]
                for w in self.depth_watchers:
                    w.fell(q, d, pkt.size, now)
            self.owner.released(pkt)
        return pkt

    # -- transmission ---------------------------------------------------------------------------
    def wake_at(self, t: float) -> None:
        if t < self.wake_t or self.wake_t <= self.sim.now:
            self.wake_t = t
            self._at(t, self._wake_cb)

    def kick(self, _=None) -> None:
        """Start the next frame if the port is free (also the wake-up callback): the next frame by the scheduler (or
        the NIC's own QPs), taken off its queue by `_dequeue`, goes out through `transmit`."""
        now = self.sim.now
        wake = self.wake_t
        if wake <= now:
            self.wake_t = wake = inf
        busy = self.busy_until
        if busy > now:
            if busy < wake:  # wake_at(busy)
                self.wake_t = busy
                self._at(busy, self._wake_cb)
            return
        pkt = None
        source = self.source
        if source is not None and self.src_turn:  # a NIC sends its own QPs and relayed data (PXN) in turns
            self.src_turn = False
            pkt = source.pull(now, self.paused_until)
        queue = self.queue
        if queue.backlog and pkt is None:
            bits = queue.nonempty
            if bits & (bits - 1) == 0:  # one queue holds packets: the scheduler's choice, unless it is paused
                q = bits.bit_length() - 1
                if self.paused_until[q] > now:
                    q = -1
            else:
                q = self.scheduler.pick(queue.fifos, self.paused_until, now)
            if q >= 0:
                pkt = self._dequeue(q)
                if not self.is_switch_port and pkt.kind == DATA and source is not None:
                    self.src_turn = True
        if pkt is None:
            if source is not None:
                pkt = source.pull(now, self.paused_until)
            if pkt is None:
                self._wake_for_blocked(now)
                return
        self.transmit(pkt, now)

    def transmit(self, pkt: Pkt, now: float) -> None:
        """Put `pkt` on the wire now: count it, schedule its arrival and, while more may follow (frames queued, a NIC's
        own QPs), the port's wake-up when it is free again (one `Sim.at2`). The one transmit path: `kick` after it
        dequeued, and a switch straight through when the port is idle with empty queues."""
        size = pkt.size
        end = now + size * self.s_per_byte
        self.busy_until = end
        self.tx_bytes += size
        self.tx_packets += 1
        if self.load_record is not None:
            self.load_record.sent(now, end, size)
        if self.dre is not None:
            self.dre.sent(now, self.queue.backlog, size)
        pkt.in_link = self.link
        if self.queue.backlog or self.source is not None:
            self.wake_t = end
            self._at2(end + self.delay, self.peer_receive, pkt, end, self._wake_cb)
        else:
            self._at(end + self.delay, self.peer_receive, pkt)

    def _wake_for_blocked(self, now: float) -> None:
        """Nothing sendable now: wake when a pause expires or the source's rate limiter allows."""
        t = inf
        paused = self.paused_until
        for q in range(CLASSES):
            if self.queues[q] and paused[q] > now:
                t = min(t, paused[q])
        if self.source is not None:
            t = min(t, self.source.next_ready(paused))
        if t < inf:
            self.wake_at(max(t, now))

    # -- PFC, receiving side of a pause frame ---------------------------------------------------
    def on_pfc(self, arg) -> None:
        prio, quanta, sender = arg
        net = self.net
        now = self.sim.now
        wd = net.cfg.switch.pfc_watchdog_s
        what = self.pfc.receive(prio, quanta, now, pfc_pause_s(quanta, self.rate_bytes_per_s) if quanta else 0.0, wd)
        if what == RESUMED:
            if self.narrator is not None:
                self.narrator.pfc_resumed(prio, sender, now)
            self.kick()
        elif what == PAUSED:
            if self.narrator is not None:
                self.narrator.pfc_paused(prio, quanta, self.rate_bytes_per_s, sender, now)
        elif what == WATCHDOG:
            assert wd is not None  # only a port with a watchdog fires it
            self._watchdog(prio, now, wd)

    def _watchdog(self, prio: int, now: float, watchdog_s: float) -> None:
        """Paused past the watchdog's interval: discard the priority's queue, ignore its pauses for one interval."""
        net = self.net
        dropped = 0
        while self.queues[prio]:
            pkt = self._dequeue(prio)
            net.drop(self, pkt, "pfc-watchdog")
            dropped += 1
        self.pfc.disable(prio, now, watchdog_s)
        net.stats_watchdog(self, prio)
        if self.narrator is not None:
            self.narrator.watchdog(prio, dropped, watchdog_s, now)
        if net.deadlock_open is not None:
            from .deadlock import watchdog_fired

            watchdog_fired(net, self)
        self.kick()

    def finish(self, now: float) -> None:
        self.pfc.finish(now)
