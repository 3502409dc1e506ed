"""The discrete-event core: a heap of (time, sequence, callback, argument) tuples, and the packet record.

SimPy-like reading without generators: `sim.at(t, fn, arg)` schedules `fn(arg)` at time t; `run`
pops events in time order (ties in scheduling order, so runs are deterministic).
"""

from __future__ import annotations

from heapq import heappop, heappush
from itertools import count
from math import inf

IP_TTL = 64  # the IPv4 TTL a RoCEv2 packet starts with (Linux's default, net.ipv4.ip_default_ttl); only a switch whose
# forwarding is overridden (a routing loop while routing converges: Switch.fib) decrements it

# packet kinds
DATA, ACK, NAK, CNP, CHUNK, NAK_ACCESS, MAD = 0, 1, 2, 3, 4, 5, 6
KIND_NAMES = ("data", "ack", "nak", "cnp", "chunk", "nak-remote-access", "mad")


class Sim:
    __slots__ = ("_seq", "events", "heap", "now")

    def __init__(self) -> None:
        self.now = 0.0
        self.heap: list = []
        self._seq = count(1).__next__  # the events' sequence numbers: 1, 2, ... in scheduling order
        self.events = 0

    def at(self, t: float, fn, arg=None) -> None:
        heappush(self.heap, (t, self._seq(), fn, arg))

    def at2(self, t: float, fn, arg, t2: float, fn2, arg2=None) -> None:
        """`at(t, fn, arg)` then `at(t2, fn2, arg2)` in one call (a port's frame arriving at the far end and its own
        wake-up when the frame is out)."""
        seq = self._seq
        heap = self.heap
        heappush(heap, (t, seq(), fn, arg))
        heappush(heap, (t2, seq(), fn2, arg2))

    def run(self, until: float = inf) -> None:
        heap = self.heap
        pop = heappop
        n = 0
        if until == inf:
            while heap:
                t, _, fn, arg = pop(heap)
                self.now = t
                fn(arg)
                n += 1
        else:
            while heap:
                if heap[0][0] > until:
                    break
                t, _, fn, arg = pop(heap)
                self.now = t
                fn(arg)
                n += 1
        self.events += n


class Pkt:
    """One frame in flight. `size` is the wire size in bytes (headers included)."""

    __slots__ = (
        "dscp",
        "ecn",
        "entropy",
        "flow",
        "ikey",
        "in_link",
        "kind",
        "opcode",
        "path",
        "payload",
        "prio",
        "psn",
        "size",
        "t_sent",
        "ttl",
    )

    def __init__(
        self,
        kind: int,
        flow,
        psn: int,
        size: int,
        payload: int,
        dscp: int,
        prio: int,
        ecn: int,
        opcode: int,
        path,
        entropy: int = 0,
        t_sent: float = 0.0,
    ):
        self.kind = kind
        self.flow = flow
        self.psn = psn
        self.size = size
        self.payload = payload
        self.dscp = dscp
        self.prio = prio
        self.ecn = ecn
        self.opcode = opcode
        self.path = path
        self.in_link = -1
        self.ikey = -1
        self.entropy = entropy
        self.t_sent = t_sent
        self.ttl = IP_TTL
