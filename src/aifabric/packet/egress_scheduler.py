"""Which egress queue of a port sends next (seeds Example 11-3).

The strict-priority queues first (queue 7, `priority level 1`), highest first; then deficit round robin over the
other queues weighted by `bandwidth remaining percent` (a queue's quantum is its percent of ten MTUs per round); a
queue with 0 % is served only when no weighted queue has traffic. A queue paused by PFC is skipped. (A port whose
only busy queue is one class serves it without asking: port.py's kick, from `ClassQueues.nonempty`.)
"""

from __future__ import annotations

from collections import deque

from .class_queues import CLASSES

ROUNDS = 64  # DWRR rounds tried before serving the first weighted queue anyway (a frame larger than the quanta)


class EgressScheduler:
    """Strict priority, then DWRR on bandwidth-remaining weights, over a port's per-class queues."""

    __slots__ = ("deficit_bytes", "quantum_bytes", "rr", "strict", "weighted")

    def __init__(self, strict: tuple[int, ...], weights: tuple[int, ...], mtu_bytes: int):
        self.strict = sorted(strict, reverse=True)
        self.weighted = [q for q in range(CLASSES) if q not in strict]
        self.quantum_bytes = [w * mtu_bytes // 10 for w in weights]  # 50 % -> 5 MTUs per round
        self.deficit_bytes = [0] * CLASSES
        self.rr = 0

    def pick(self, fifos: list[deque], paused_until: list[float], now: float) -> int:
        """The queue to send from now, or -1 when every queue with traffic is paused (or none has any)."""
        for q in self.strict:
            if fifos[q] and paused_until[q] <= now:
                return q
        first = -1
        several = False
        for q in self.weighted:
            if fifos[q] and paused_until[q] <= now:
                if first < 0:
                    first = q
                else:
                    several = True
                    break
        if first < 0 or not several:
            return first
        active = [q for q in self.weighted if fifos[q] and paused_until[q] <= now]
        quantum, deficit, order = self.quantum_bytes, self.deficit_bytes, self.weighted
        served = [q for q in active if quantum[q]]
        if not served:  # only 0 % queues have traffic: serve them in order
            return active[0]
        for _ in range(ROUNDS * len(order)):
            q = order[self.rr]
            if q in served:
                size = fifos[q][0].size
                if deficit[q] >= size:
                    deficit[q] -= size
                    return q
                deficit[q] += quantum[q]
            else:
                deficit[q] = 0
            self.rr = (self.rr + 1) % len(order)
        return served[0]
