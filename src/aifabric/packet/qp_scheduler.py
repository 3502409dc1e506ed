"""A NIC port's queue pairs as its scheduler serves them: round robin over the QPs that may send, found by index.

The flows that start on a port (RDMA QPs, scale-up chunk flows) take turns in the order they were added, from the
one after the last served (`rr`, an index into `active`); a flow may send when its rate limiter allows
(`next_t <= now`), its priority is not paused and it has data. The next `SCAN_FLOWS` flows in turn are tested
directly (the next one usually may send); past them, rather than test every flow, the scheduler keeps bit sets
over slots (a flow's slot: the order it was added in, kept until it leaves): those whose rate limiter may allow
(`timely`; the others wait in a heap per priority by their next send time), those that may have data (`loaded`:
cleared when a flow is found to have none, set again when it goes back to resend) and those of each priority. The
next flow is the first candidate at or after the turn's slot (a bit scan of a Python integer, done in C), checked
with the exact test; the bit sets only ever hold more flows than may send, never fewer, so the flow served is the
one testing every flow in turn would serve, packet for packet.
"""

from __future__ import annotations

from heapq import heappop, heappush
from math import inf
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .port import Port

SCAN_FLOWS = 16  # flows tested in turn before the bit sets are consulted (about what the index costs)


def _lowest(bits: int) -> int:
    """The position of the lowest set bit."""
    return (bits & -bits).bit_length() - 1


class Source:
    """A port's supplier of data packets: round robin over the flows that start on it, found by index."""

    __slots__ = (
        "active",
        "by_prio",
        "lazy",
        "live",
        "loaded",
        "port",
        "rr",
        "seq",
        "slot_of",
        "slots",
        "timely",
        "waiting",
    )

    def __init__(self, port: Port):
        self.port = port
        self.active: list = []  # the flows in turn order
        self.rr = 0  # the index in `active` the next turn starts at (modulo its length)
        self.slots: list = []  # flows by slot; None where one left
        self.slot_of: dict = {}
        self.live = 0  # bit s: slots[s] holds a flow
        self.timely = 0  # bit s: its rate limiter may allow it (the others are in `waiting`)
        self.loaded = 0  # bit s: it may have data
        self.by_prio: dict[int, int] = {}  # priority -> the slots of its flows
        self.waiting: dict[int, list] = {}  # priority -> heap of (next_t, seq, flow) found held by their rate limiter
        self.seq = 0
        self.lazy = 0  # flows placing out of order: their has_data() moves their send pointer, so next_ready scans

    def add(self, flow) -> None:
        s = len(self.slots)
        self.slots.append(flow)
        self.slot_of[flow] = s
        self.active.append(flow)
        bit = 1 << s
        self.live |= bit
        self.timely |= bit
        self.loaded |= bit
        self.by_prio[flow.prio] = self.by_prio.get(flow.prio, 0) | bit
        if getattr(flow, "got", None) is not None:
            self.lazy += 1
        self.port.kick()

    def remove(self, flow) -> None:
        s = self.slot_of.pop(flow, None)
        if s is None:
            return
        self.active.remove(flow)
        self.slots[s] = None
        keep = ~(1 << s)
        self.live &= keep
        self.timely &= keep
        self.loaded &= keep
        bits = self.by_prio[flow.prio] & keep
        if bits:
            self.by_prio[flow.prio] = bits
        else:
            del self.by_prio[flow.prio]
        if getattr(flow, "got", None) is not None:
            self.lazy -= 1
        if len(self.slots) > 2 * len(self.active) + 64:
            self._compact()

    def _compact(self) -> None:
        """Slots renumbered in turn order (the flows that left leave no gaps)."""
        timely = loaded = 0
        by_prio: dict[int, int] = {}
        for i, f in enumerate(self.active):
            s = self.slot_of[f]
            bit = 1 << i
            if self.timely >> s & 1:
                timely |= bit
            if self.loaded >> s & 1:
                loaded |= bit
            by_prio[f.prio] = by_prio.get(f.prio, 0) | bit
            self.slot_of[f] = i
        self.slots = list(self.active)
        self.live = (1 << len(self.active)) - 1
        self.timely, self.loaded, self.by_prio = timely, loaded, by_prio

    def resend(self, flow) -> None:
        """`flow` went back to resend (a NAK, a timeout): it has data again."""
        s = self.slot_of.get(flow)
        if s is not None:
            self.loaded |= 1 << s
            self.timely |= 1 << s

    def _wait(self, f, bit: int) -> None:
        """`f` (bit `bit`) is held by its rate limiter until f.next_t."""
        self.timely &= ~bit
        self.seq += 1
        heappush(self.waiting.setdefault(f.prio, []), (f.next_t, self.seq, f))

    def pull(self, now: float, paused: list[float]):
        """The next data packet, from the next flow in turn that may send now; None when none may."""
        act = self.active
        n = len(act)
        if n == 1:  # one flow: it, if it may send (the loop below, written out)
            f = act[0]
            if f.next_t <= now and paused[f.prio] <= now and f.has_data():
                self.rr = 1
                return f.next_packet(now)
            return None
        rr = self.rr
        tested = n if n < SCAN_FLOWS else SCAN_FLOWS
        for i in range(tested):
            j = (rr + i) % n
            f = act[j]
            if f.next_t <= now and paused[f.prio] <= now and f.has_data():
                self.rr = j + 1
                return f.next_packet(now)
        if tested == n:
            return None
        slot_of = self.slot_of
        for heap in self.waiting.values():
            while heap and heap[0][0] <= now:
                s = slot_of.get(heappop(heap)[2])
                if s is not None:
                    self.timely |= 1 << s
        unpaused = 0
        for prio, of_prio in self.by_prio.items():
            if paused[prio] <= now:
                unpaused |= of_prio
        bits = self.timely & self.loaded & unpaused
        start = slot_of[act[(rr + tested) % n]]  # the flows tested above come last (and fail again)
        slots = self.slots
        while bits:
            above = bits >> start
            s = start + (above & -above).bit_length() - 1 if above else (bits & -bits).bit_length() - 1
            f = slots[s]
            bit = 1 << s
            if f.next_t > now:
                self._wait(f, bit)
            elif f.has_data():
                self.rr = (self.live & (bit - 1)).bit_count() + 1  # its index in `active`, plus one
                return f.next_packet(now)
            else:
                self.loaded &= ~bit
            bits &= ~bit
        return None

    def next_ready(self, paused: list[float]) -> float:
        """When some flow may send next: its rate limiter allows and its priority is not paused. Called when `pull`
        has just found none."""
        if len(self.active) <= SCAN_FLOWS or self.lazy:
            t = inf
            for f in self.active:
                if f.has_data():
                    ready = max(f.next_t, paused[f.prio])
                    t = min(t, ready)
            return t
        now = self.port.sim.now
        return min(
            (self._ready_at(prio, of_prio, paused[prio], now) for prio, of_prio in self.by_prio.items()), default=inf
        )

    def _ready_at(self, prio: int, of_prio: int, paused_until: float, now: float) -> float:
        """When a flow of `prio` may send next (none may now)."""
        bits = self.timely & self.loaded & of_prio
        while bits:  # flows the rate limiter lets go: the priority is paused (or pull would have sent one)
            s = _lowest(bits)
            f = self.slots[s]
            bit = 1 << s
            if f.next_t > now:
                self._wait(f, bit)
            elif f.has_data():
                assert paused_until > now
                return paused_until
            else:
                self.loaded &= ~bit
            bits &= ~bit
        heap = self.waiting.get(prio)
        while heap:  # the others: the earliest next send of one with data
            t, _, f = heap[0]
            slot = self.slot_of.get(f)
            if slot is not None and f.next_t == t:
                if f.has_data():
                    return max(t, paused_until)
                self.loaded &= ~(1 << slot)
            heappop(heap)
        return inf
