"""A port's PFC state, the receiving side of pause frames: per priority, paused until when, since when, for how
long in all, the frames received, and the watchdog (IEEE 802.1Qbb; Deep Learning for Network Engineers, Ch. 11).

A pause (quanta > 0) stops the priority for quanta x 512 bit times at the port's rate, and a later pause extends
it; quanta 0 resumes it at once. A pause outliving the watchdog interval makes the port discard the priority's
queue and ignore pauses for one interval (the port does the discarding: `Port`).
"""

from __future__ import annotations

from .class_queues import CLASSES

IGNORED, RESUMED, PAUSED, EXTENDED, WATCHDOG = 0, 1, 2, 3, 4  # what a received frame did


class PfcState:
    """Per priority: `paused_until` (s), the start of the pause in progress (`pause_start`), the time paused in all
    (`paused_total_s`), pause frames received (`frames_rx`), pauses ignored until (`ignore_until`, the watchdog)."""

    __slots__ = ("frames_rx", "ignore_until", "pause_start", "paused_total_s", "paused_until")

    def __init__(self) -> None:
        self.paused_until = [0.0] * CLASSES
        self.pause_start: list[float | None] = [None] * CLASSES
        self.paused_total_s = [0.0] * CLASSES
        self.ignore_until = [0.0] * CLASSES
        self.frames_rx = [0] * CLASSES

    def receive(self, prio: int, quanta: int, now: float, pause_s: float, watchdog_s: float | None) -> int:
        """A frame for `prio` arrives: quanta 0 resumes, else pause for `pause_s`. What it did: IGNORED (the watchdog
        disabled pauses), RESUMED, PAUSED (a new pause), EXTENDED, or WATCHDOG (paused past `watchdog_s`: the
        caller discards the queue and calls `disable`)."""
        self.frames_rx[prio] += 1
        if quanta and self.ignore_until[prio] > now:
            return IGNORED
        if quanta == 0:
            self.settle(prio, now)
            self.paused_until[prio] = now
            return RESUMED
        start = self.pause_start[prio]
        if start is not None and self.paused_until[prio] < now:
            self.settle(prio, now)  # the previous pause had expired
            start = None
        if start is None:
            self.pause_start[prio] = now
            what = PAUSED
        elif watchdog_s is not None and now - start > watchdog_s:
            return WATCHDOG
        else:
            what = EXTENDED
        self.paused_until[prio] = now + pause_s
        return what

    def settle(self, prio: int, now: float) -> None:
        """Close the pause in progress (if any) into the total."""
        start = self.pause_start[prio]
        if start is not None:
            self.paused_total_s[prio] += min(now, self.paused_until[prio]) - start
            self.pause_start[prio] = None

    def disable(self, prio: int, now: float, watchdog_s: float) -> None:
        """The watchdog fired: `prio` transmits again and ignores pauses for one interval."""
        self.settle(prio, now)
        self.paused_until[prio] = now
        self.ignore_until[prio] = now + watchdog_s

    def finish(self, now: float) -> None:
        for p in range(CLASSES):
            self.settle(p, now)
