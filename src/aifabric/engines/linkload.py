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

    def set(self, now: float, load: np.ndarray) -> None:
        """From `now` on, every link carries `load` (a dense vector over all links)."""
        self.close(now)
        nz = np.flatnonzero(load)
        if len(nz):
            self.t_start.append(now)
            self.t_end.append(now)
            self.links.append(nz.astype(np.int32))
            self.rates_bytes_per_s.append(load[nz].astype(np.float64))
            self._open = True

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
