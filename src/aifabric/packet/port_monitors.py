"""What watches a port without changing what it does, attached from outside (network.py, engines/packet.py), as
htsim hangs loggers on its queues: queue depth sampling, bytes sent per time bin, and the --explain narration.

A port calls its depth watchers (`Port.depth_watchers`) after each change of a queue's depth, its load record
(`Port.load_record`) for each frame it starts, and its narrator (`Port.narrator`) on PFC events.
"""

from __future__ import annotations

from math import inf

from .class_queues import CLASSES
from .headers import pfc_pause_s

MAX_BINS = 4096  # link-load bins per port before they are merged pairwise
MAX_DEPTH_SAMPLES = 20_000  # depth samples per queue before the series is thinned


class DepthSampler:
    """Each queue's maximum depth and its depth over time: a sample at most every `sample_s` as it rises, and
    whenever it falls (every `sample_s`, and on emptying); long runs keep every other sample and halve the rate."""

    __slots__ = ("max_depth", "sample_s", "sample_t", "series")

    def __init__(self, sample_s: float):
        self.sample_s = sample_s
        self.sample_t = [-inf] * CLASSES
        self.series: list[list[tuple[float, int]]] = [[] for _ in range(CLASSES)]
        self.max_depth = [0] * CLASSES

    def rose(self, q: int, depth: int, size: int, now: float) -> None:
        """Queue `q` grew by `size` to `depth` bytes."""
        if depth > self.max_depth[q]:
            self.max_depth[q] = depth
        if now - self.sample_t[q] >= self.sample_s:
            self._sample(q, depth, now)

    def fell(self, q: int, depth: int, size: int, now: float) -> None:
        """Queue `q` shrank by `size` to `depth` bytes."""
        if depth == 0 or now - self.sample_t[q] >= self.sample_s:
            self._sample(q, depth, now)

    def _sample(self, q: int, depth: int, now: float) -> None:
        self.sample_t[q] = now
        self.series[q].append((now, depth))
        if len(self.series[q]) > MAX_DEPTH_SAMPLES:
            self.series = [s[::2] for s in self.series]
            self.sample_s *= 2


class LinkLoad:
    """Bytes a port sent per time bin of `bin_s` (by serialization time, a frame split over the bins it spans);
    past `MAX_BINS` bins, pairs merge and the width doubles (memory stays bounded)."""

    __slots__ = ("bin_s", "bins")

    def __init__(self, bins: dict[int, float], bin_s: float):
        self.bins = bins
        self.bin_s = bin_s

    def sent(self, now: float, end: float, size: int) -> None:
        """A frame of `size` bytes on the wire from `now` to `end`."""
        bins, w = self.bins, self.bin_s
        b = int(now / w)
        if end <= (b + 1) * w:
            bins[b] = bins.get(b, 0) + size
        else:  # the frame's serialization crosses into the next bin: each bin gets its share
            self._split(b, now, end, size)
        if len(bins) > MAX_BINS:
            self._coarsen()

    def _split(self, b: int, now: float, end: float, size: int) -> None:
        """A frame's bytes over the bins its serialization [now, end) spans, by time: a bin never holds more than
        the line rate's worth (a frame counted whole where it starts would overfill its bin)."""
        bins, w, dur = self.bins, self.bin_s, end - now
        t = now
        while True:
            e = min(end, (b + 1) * w)
            if e > t:
                bins[b] = bins.get(b, 0) + size * (e - t) / dur
            if e >= end:
                return
            t, b = e, b + 1

    def _coarsen(self) -> None:
        merged: dict[int, float] = {}
        for b, v in self.bins.items():
            merged[b >> 1] = merged.get(b >> 1, 0) + v
        self.bins = merged
        self.bin_s *= 2


class PortNarrator:
    """--explain: a port's story in the run's event log (`Network.log`): its queues crossing WRED min (`kmin`: WRED
    min per queue, None where no WRED or not a switch port), PFC pauses and resumes received, the watchdog."""

    __slots__ = ("kmin", "name", "net")

    def __init__(self, net, name: str, kmin: list[int | None] | None):
        self.net = net
        self.name = name
        self.kmin = kmin

    def rose(self, q: int, depth: int, size: int, now: float) -> None:
        k = self.kmin[q] if self.kmin is not None else None
        if k is not None and depth - size <= k < depth:
            self.net.log(now, f"{self.name}: egress queue {q} rises above WRED min ({k / 1e3:.0f} KB)", "ecn")

    def fell(self, q: int, depth: int, size: int, now: float) -> None:
        k = self.kmin[q] if self.kmin is not None else None
        if k is not None and depth < k <= depth + size:
            self.net.log(
                now, f"{self.name}: egress queue {q} falls below WRED min ({k / 1e3:.0f} KB): ECN marking stops", "ecn"
            )

    def pfc_paused(self, prio: int, quanta: int, rate_bytes_per_s: float, sender: str, now: float) -> None:
        self.net.log(
            now,
            f"{self.name}: PFC pause received for priority {prio} ({quanta} quanta = "
            f"{pfc_pause_s(quanta, rate_bytes_per_s) * 1e6:.2f} us) from {sender}; other priorities keep "
            "flowing",
            "pfc",
        )

    def pfc_resumed(self, prio: int, sender: str, now: float) -> None:
        self.net.log(
            now,
            f"{self.name}: PFC resume (quanta 0) for priority {prio} from {sender}; queue {prio} transmits again",
            "pfc",
        )

    def watchdog(self, prio: int, dropped: int, watchdog_s: float, now: float) -> None:
        self.net.log(
            now,
            f"{self.name}: PFC watchdog: priority {prio} paused longer than {watchdog_s * 1e3:g} ms; "
            f"{dropped} queued packets discarded, pauses ignored for one interval",
            "pfc",
        )
