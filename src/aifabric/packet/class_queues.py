"""A port's eight per-class egress queues, and what WRED/ECN decides from their depth.

Each traffic class (queue 0-7) is a FIFO of packets with its depth in bytes; `backlog` is their sum. WRED (Deep
Learning for Network Engineers, Ch. 11) compares a queue's depth with its min and max thresholds: the
instantaneous depth (`weight 0`, the book's) or RED's exponentially weighted average (`average`: avg <- avg +
(depth - avg) 2^-n at each arrival, Cisco's exponential weighting constant n; Floyd and Jacobson 1993).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .sim import Pkt

CLASSES = 8
FORWARD, MARK, DROP = 0, 1, 2


def wred_decision(
    depth_bytes: float, kmin: float, kmax: float, pmax: float, drop_threshold: float | None, u: float
) -> int:
    """The marking regimes of Deep Learning for Network Engineers, Ch. 11, at the depth WRED compares: below min
    forward; between min and max mark with probability rising linearly 0 -> pmax; above max mark all; above the
    drop threshold drop."""
    if drop_threshold is not None and depth_bytes > drop_threshold:
        return DROP
    if depth_bytes > kmax:
        return MARK
    if depth_bytes > kmin:
        return MARK if u < pmax * (depth_bytes - kmin) / (kmax - kmin) else FORWARD
    return FORWARD


class ClassQueues:
    """Eight FIFO queues, one per traffic class: the packets (`fifos`), each queue's depth (`depth_bytes`), their
    sum (`backlog`, bytes), the queues holding packets (`nonempty`, bit q for queue q) and WRED's average depth per
    queue (`red_avg_bytes`). A port's hot path (port.py: enqueue, kick) does push and pop itself, keeping the same
    fields."""

    __slots__ = ("backlog", "depth_bytes", "fifos", "nonempty", "red_avg_bytes")

    def __init__(self) -> None:
        self.fifos: list[deque[Pkt]] = [deque() for _ in range(CLASSES)]
        self.depth_bytes = [0] * CLASSES
        self.red_avg_bytes = [0.0] * CLASSES
        self.backlog = 0
        self.nonempty = 0

    def push(self, pkt: Pkt, q: int) -> int:
        """Append `pkt` to queue `q`; its depth after, bytes."""
        self.fifos[q].append(pkt)
        self.nonempty |= 1 << q
        size = pkt.size
        d = self.depth_bytes[q] + size
        self.depth_bytes[q] = d
        self.backlog += size
        return d

    def pop(self, q: int) -> Pkt:
        """The head of queue `q`, taken off it."""
        fifo = self.fifos[q]
        pkt = fifo.popleft()
        if not fifo:
            self.nonempty &= ~(1 << q)
        self.depth_bytes[q] -= pkt.size
        self.backlog -= pkt.size
        return pkt

    def average(self, q: int, gain: float) -> float:
        """WRED's average depth of queue `q` updated at an arrival (before it is queued), bytes."""
        avg = self.red_avg_bytes
        level = avg[q] = avg[q] + (self.depth_bytes[q] - avg[q]) * gain
        return level
