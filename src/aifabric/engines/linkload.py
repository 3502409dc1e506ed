"""Link load over time: piecewise-constant segments, recorded sparsely (only loaded links), binned on demand."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class LinkLoad:
    """Segments [t_start, t_end) during which `links` carried `rates_bytes_per_s`."""

    t_start: list[float] = field(default_factory=list)
    t_end: list[float] = field(default_factory=list)
    links: list[np.ndarray] = field(default_factory=list)
    rates_bytes_per_s: list[np.ndarray] = field(default_factory=list)
    _open: bool = False
    max_entries: int = 4_000_000  # (link, rate) pairs kept; beyond, neighbouring segments merge (~50 MB)
    _entries: int = 0
    coarsened: int = 0  # times the segments were halved

    def set(self, now: float, load: np.ndarray) -> None:
        """From `now` on, every link carries `load` (a dense vector over all links)."""
        nz = np.flatnonzero(load)
        self.set_sparse(now, nz, load[nz])

    def set_sparse(self, now: float, links: np.ndarray, rates: np.ndarray) -> None:
        """From `now` on, `links` carry `rates` (bytes/s) and every other link nothing."""
        self.close(now)
        if len(links) and self.t_start and self.t_start[-1] == now:  # replaced at the same instant
            self.t_start.pop(), self.t_end.pop(), self.links.pop()
            self._entries -= len(self.rates_bytes_per_s.pop())
        nz = rates > 0
        if nz.any():
            self.t_start.append(now)
            self.t_end.append(now)
            self.links.append(links[nz].astype(np.int32))
            self.rates_bytes_per_s.append(rates[nz].astype(np.float64))
            self._entries += int(nz.sum())
            self._open = True
            if self._entries > self.max_entries:
                self._coarsen()

    def _coarsen(self) -> None:
        """Halve the stored segments: each pair of neighbours becomes one segment with, per link, the
        time-averaged rate (bytes per link are kept exactly). Bounds memory on long, large runs."""
        keep_open = self._open
        starts, ends, links, rates = self.t_start, self.t_end, self.links, self.rates_bytes_per_s
        n = len(starts) - (1 if keep_open else 0)  # the open segment stays as it is
        out_s, out_e, out_l, out_r = [], [], [], []
        for k in range(0, n - 1, 2):
            a, b = starts[k], ends[k + 1]
            span = b - a
            if span <= 0:
                out_s.append(a), out_e.append(b), out_l.append(links[k + 1]), out_r.append(rates[k + 1])
                continue
            w0, w1 = (ends[k] - starts[k]) / span, (ends[k + 1] - starts[k + 1]) / span
            both = np.concatenate((links[k], links[k + 1]))
            u, inv = np.unique(both, return_inverse=True)
            r = np.bincount(inv, weights=np.concatenate((rates[k] * w0, rates[k + 1] * w1)), minlength=len(u))
            out_s.append(a), out_e.append(b), out_l.append(u.astype(np.int32)), out_r.append(r)
        if n % 2:
            out_s.append(starts[n - 1]), out_e.append(ends[n - 1]), out_l.append(links[n - 1]), out_r.append(rates[n - 1])
        if keep_open:
            out_s.append(starts[-1]), out_e.append(ends[-1]), out_l.append(links[-1]), out_r.append(rates[-1])
        self.t_start, self.t_end, self.links, self.rates_bytes_per_s = out_s, out_e, out_l, out_r
        self._entries = sum(len(x) for x in out_r)
        self.coarsened += 1

    def close(self, now: float) -> None:
        if self._open:
            self.t_end[-1] = now
            self._open = False

    def binned(self, n_links: int, t_end: float, bins: int) -> tuple[np.ndarray, np.ndarray]:
        """Bytes each link carried in each of `bins` equal time bins over [0, t_end]: (edges, bytes[link, bin])."""
        edges = np.linspace(0.0, t_end, bins + 1)
        out = np.zeros((n_links, bins))
        if t_end <= 0:
            return edges, out
        width = t_end / bins
        for a, b, links, rates in zip(self.t_start, self.t_end, self.links, self.rates_bytes_per_s):
            if b <= a:
                continue
            first, last = int(a // width), min(int(b // width), bins - 1)
            for k in range(first, last + 1):
                overlap = min(b, edges[k + 1]) - max(a, edges[k])
                if overlap > 0:
                    out[links, k] += rates * overlap
        return edges, out
