"""Link load over time: piecewise-constant segments, recorded sparsely (only loaded links), binned on demand.

Small runs keep every segment exactly (one per rate recomputation). Past `max_entries` stored
(link, rate) pairs, the record switches to a time grid: every segment so far and from then on is
spread over bins of equal width (bytes per link and bin are exact; the rate inside a bin becomes its
average), and the width doubles whenever the run outgrows `max_bins` bins. Memory stays bounded
however long and large the run (8,192 GPUs: ~10^5 segments of ~5,000 links each would be GBs).
"""

from __future__ import annotations

import numpy as np

from ..compiled import compiled

COMPILED_MIN = 2_000
"""Intervals from which the time grid is filled by the compiled pass (`_bin_sums`, numba unless
AIFABRIC_PURE_PYTHON=1); below, interval by interval in Python (the reference the tests compare it with)."""


def _merge(links: list[np.ndarray], values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Sum values per link over several sparse (links, values) arrays."""
    if len(links) == 1:
        return links[0], values[0]
    u, sums = _sum_by_key(np.concatenate(links), np.concatenate(values))
    return u.astype(np.int32), sums


def _sum_by_key(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct keys ascending, the values summed per key in the order given), as np.unique's inverse with
    np.bincount gives them, bit for bit; by counting over the keys' range instead of sorting when that range is
    not much larger than the keys themselves."""
    lo, hi = int(keys.min()), int(keys.max())
    if hi - lo > 8 * len(keys) + (1 << 20):
        u, inv = np.unique(keys, return_inverse=True)
        return u, np.bincount(inv, weights=values, minlength=len(u))
    shifted = keys - lo
    present = np.flatnonzero(np.bincount(shifted))
    return present + lo, np.bincount(shifted, weights=values)[present]


def _bin_sums(
    a: np.ndarray,
    b: np.ndarray,
    first: np.ndarray,
    last: np.ndarray,
    ptr: np.ndarray,
    links: np.ndarray,
    values: np.ndarray,
    w: float,
    n_links: int,
    share: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Intervals [a, b) in order of their first bin (`first` = a // w, `last` = b // w), each with its links
    ptr[i]:ptr[i + 1] and their values, spread over bins of width w: per bin, each link's sum of value x
    overlap (`share`: x overlap / (b - a)), added interval by interval in their order (as `np.bincount`
    sums, so bit for bit what merging the per-interval arrays gives). Returns (bins, offsets, links,
    sums): bin bins[j] holds links[offsets[j]:offsets[j + 1]] ascending and their sums. Plain loops:
    compiled (aifabric.compiled)."""
    n = len(a)
    acc = np.zeros(n_links)
    seen = np.zeros(n_links, dtype=np.bool_)
    touched = np.empty(n_links, dtype=np.int64)
    active = np.empty(n, dtype=np.int64)
    cap = 1024
    out_links = np.empty(cap, dtype=np.int64)
    out_sums = np.empty(cap)
    out_bins = np.empty(16, dtype=np.int64)
    out_ptr = np.zeros(17, dtype=np.int64)
    n_out, n_bins, n_act, nxt = 0, 0, 0, 0
    k = first[0] if n else 0
    while nxt < n or n_act > 0:
        if n_act == 0 and first[nxt] > k:
            k = first[nxt]
        while nxt < n and first[nxt] <= k:
            active[n_act] = nxt
            n_act += 1
            nxt += 1
        n_touched = 0
        for j in range(n_act):
            i = active[j]
            overlap = min(b[i], (k + 1) * w) - max(a[i], k * w)
            if share:
                c = overlap / (b[i] - a[i])
                if not c > 0:
                    continue
            else:
                if overlap <= 0:
                    continue
                c = overlap
            for q in range(ptr[i], ptr[i + 1]):
                li = links[q]
                if not seen[li]:
                    seen[li] = True
                    touched[n_touched] = li
                    n_touched += 1
                acc[li] += values[q] * c
        if n_touched:
            order = np.sort(touched[:n_touched])
            if n_out + n_touched > cap:
                while n_out + n_touched > cap:
                    cap *= 2
                grown_links = np.empty(cap, dtype=np.int64)
                grown_links[:n_out] = out_links[:n_out]
                out_links = grown_links
                grown_sums = np.empty(cap)
                grown_sums[:n_out] = out_sums[:n_out]
                out_sums = grown_sums
            if n_bins + 1 >= len(out_bins):
                grown_bins = np.empty(2 * len(out_bins), dtype=np.int64)
                grown_bins[:n_bins] = out_bins[:n_bins]
                out_bins = grown_bins
                grown_ptr = np.zeros(2 * len(out_bins) + 1, dtype=np.int64)
                grown_ptr[: n_bins + 1] = out_ptr[: n_bins + 1]
                out_ptr = grown_ptr
            for j in range(n_touched):
                li = order[j]
                out_links[n_out] = li
                out_sums[n_out] = acc[li]
                n_out += 1
                acc[li] = 0.0
                seen[li] = False
            out_bins[n_bins] = k
            n_bins += 1
            out_ptr[n_bins] = n_out
        kept = 0
        for j in range(n_act):
            i = active[j]
            if last[i] > k:
                active[kept] = i
                kept += 1
        n_act = kept
        k += 1
    return out_bins[:n_bins], out_ptr[: n_bins + 1], out_links[:n_out], out_sums[:n_out]


class LinkLoad:
    """Segments [t_start, t_end) during which `links` carried `rates_bytes_per_s`."""

    def __init__(self, max_entries: int = 8_000_000, max_bins: int = 2048):
        self.max_entries = max_entries  # (link, rate) pairs kept exactly (~100 MB) before binning
        self.max_bins = max_bins
        self._start: list[float] = []
        self._end: list[float] = []
        self._links_list: list[np.ndarray] = []
        self._rates_list: list[np.ndarray] = []
        # the segments' links and rates as one array each, not yet split per segment (ptr, links, rates): how the
        # compiled event loop leaves them (`set_flat`); split on first read, or binned as they are (`_to_bins`)
        self._flat: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._entries = 0
        self._open: tuple[float, np.ndarray, np.ndarray] | None = None
        self.bin_s: float | None = None  # set once binned
        self._bins: dict[int, list[list[np.ndarray]]] = {}  # bin -> [[links...], [bytes...]]
        self._dirty: set[int] = set()  # bins holding more than one array
        self._t_last = 0.0

    # the segments' links and rates, one array per segment (from the flat arrays on first read)
    @property
    def _links(self) -> list[np.ndarray]:
        self._unflatten()
        return self._links_list

    @_links.setter
    def _links(self, value: list[np.ndarray]) -> None:
        self._unflatten()
        self._links_list = value

    @property
    def _rates(self) -> list[np.ndarray]:
        self._unflatten()
        return self._rates_list

    @_rates.setter
    def _rates(self, value: list[np.ndarray]) -> None:
        self._unflatten()
        self._rates_list = value

    def _unflatten(self) -> None:
        if self._flat is not None:
            ptr, links, rates = self._flat
            self._flat = None
            self._links_list = np.split(links, ptr[1:-1]) if len(ptr) > 1 else []
            self._rates_list = np.split(rates, ptr[1:-1]) if len(ptr) > 1 else []

    def set_flat(
        self, start: list[float], end: list[float], ptr: np.ndarray, links: np.ndarray, rates: np.ndarray
    ) -> None:
        """The exact segments as flat arrays: segment i carried links[ptr[i]:ptr[i + 1]] at those rates (what the
        compiled event loop records); the same record as a list of arrays per segment, split only when read."""
        self._start, self._end = start, end
        self._flat = (ptr, links, rates)
        self._links_list, self._rates_list = [], []

    # -- recording --------------------------------------------------------------------------------
    def set(self, now: float, load: np.ndarray) -> None:
        """From `now` on, every link carries `load` (a dense vector over all links)."""
        nz = np.flatnonzero(load)
        self.set_sparse(now, nz, load[nz])

    def set_sparse(self, now: float, links: np.ndarray, rates: np.ndarray) -> None:
        """From `now` on, `links` carry `rates` (bytes/s) and every other link nothing."""
        self.close(now)
        nz = rates > 0
        if nz.any():
            self._open = (now, links[nz].astype(np.int32), rates[nz].astype(np.float64))

    def close(self, now: float) -> None:
        if self._open is None:
            return
        a, links, rates = self._open
        self._open = None
        if now <= a:
            return
        self._t_last = max(self._t_last, now)
        if self.bin_s is None:
            self._start.append(a)
            self._end.append(now)
            self._links.append(links)
            self._rates.append(rates)
            self._entries += len(links)
            if self._entries > self.max_entries:
                self._to_bins(now)
        else:
            self._add_to_bins(a, now, links, rates)

    def _to_bins(self, now: float) -> None:
        width = 1e-9
        while now / width > self.max_bins:
            width *= 2
        self.bin_s = width
        if self._flat is not None and len(self._start) >= COMPILED_MIN:  # the arrays as they are, not split
            ptr, links, rates = self._flat
            starts, ends = np.array(self._start, dtype=float), np.array(self._end, dtype=float)
            if self._bins_arrays(starts, ends, np.asarray(ptr, dtype=np.int64), links, rates, width, share=False):
                self._flat = None
                self._start, self._end, self._links, self._rates, self._entries = [], [], [], [], 0
                return
        segments = list(zip(self._start, self._end, self._links, self._rates))
        self._start, self._end, self._links, self._rates, self._entries = [], [], [], [], 0
        if len(segments) >= COMPILED_MIN and self._bins_compiled(segments, width, share=False):
            return
        for a, b, links, rates in segments:
            self._add_to_bins(a, b, links, rates)

    def _bins_compiled(self, items: list, w: float, share: bool) -> bool:
        """`items` (start, end, links, values) onto the grid in one compiled pass, each bin receiving one array
        (per link, the values times the overlap, or times the share of the interval with `share`, summed in
        the items' order): what `_add_to_bins` or `_spread_chunk` give, bit for bit. False (nothing done)
        without the compiled pass or when the items do not come in time order."""
        if compiled(_bin_sums) is None or not items:
            return False
        a = np.fromiter((x[0] for x in items), dtype=float, count=len(items))
        b = np.fromiter((x[1] for x in items), dtype=float, count=len(items))
        lens = np.fromiter((len(x[2]) for x in items), dtype=np.int64, count=len(items))
        ptr = np.concatenate(([0], np.cumsum(lens)))
        links = np.concatenate([x[2] for x in items])
        values = np.concatenate([x[3] for x in items])
        return self._bins_arrays(a, b, ptr, links, values, w, share)

    def _bins_arrays(
        self,
        a: np.ndarray,
        b: np.ndarray,
        ptr: np.ndarray,
        links: np.ndarray,
        values: np.ndarray,
        w: float,
        share: bool,
    ) -> bool:
        """`_bins_compiled` on the items as arrays: interval i is [a[i], b[i]) with links[ptr[i]:ptr[i + 1]] and
        their values."""
        fn = compiled(_bin_sums)
        if fn is None or not len(a):
            return False
        first = (a // w).astype(np.int64)
        if np.any(first[1:] < first[:-1]):
            return False
        last = (b // w).astype(np.int64)
        links = links.astype(np.int64, copy=False)
        values = values.astype(np.float64, copy=False)
        n_links = int(links.max()) + 1 if len(links) else 1
        bins, offsets, out_links, sums = fn(a, b, first, last, ptr, links, values, w, n_links, share)
        out_links = out_links.astype(np.int32)
        for j, k in enumerate(bins.tolist()):
            lo, hi = offsets[j], offsets[j + 1]
            acc = self._bins.setdefault(k, [[], []])
            acc[0].append(out_links[lo:hi])
            acc[1].append(sums[lo:hi])
            self._dirty.add(k)
            if len(acc[0]) >= 16:
                self._consolidate(k)
        return True

    def _add_to_bins(self, a: float, b: float, links: np.ndarray, rates: np.ndarray) -> None:
        while b / self._width() > self.max_bins:
            self._widen()
        w = self._width()
        first = int(a // w)
        for k in [k for k in self._dirty if k < first]:  # bins time has left behind: one array each
            self._consolidate(k)
        for k in range(first, int(b // w) + 1):
            overlap = min(b, (k + 1) * w) - max(a, k * w)
            if overlap <= 0:
                continue
            acc = self._bins.setdefault(k, [[], []])
            acc[0].append(links)
            acc[1].append(rates * overlap)
            self._dirty.add(k)
            if len(acc[0]) >= 16:
                self._consolidate(k)

    def _consolidate(self, k: int) -> None:
        acc = self._bins[k]
        if len(acc[0]) > 1:
            u, v = _merge(acc[0], acc[1])
            acc[0], acc[1] = [u], [v]
        self._dirty.discard(k)

    def _widen(self) -> None:
        """Double the bin width: neighbouring bins merge."""
        merged: dict[int, list[list[np.ndarray]]] = {}
        for k, (links, values) in self._bins.items():
            acc = merged.setdefault(k // 2, [[], []])
            acc[0] += links
            acc[1] += values
        self._bins = {}
        self._dirty = set()
        for k, (ls, vs) in merged.items():
            u, v = _merge(ls, vs)
            self._bins[k] = [[u], [v]]
        self.bin_s = self._width() * 2

    def _width(self) -> float:
        """The bin width, once the record is on the grid."""
        assert self.bin_s is not None
        return self.bin_s

    def add_spread(
        self, items: list[tuple[float, float, np.ndarray, np.ndarray]], chunk_entries: int = 4_000_000
    ) -> None:
        """Add (start, end, links, bytes) intervals, each link's bytes spread evenly over the interval, on
        top of what was recorded (folded collectives inside merged tasks). Moves the record to the grid.
        Vectorized: every (interval, bin, link) share at once, at most `chunk_entries` of them at a time,
        summed per bin and link, each bin receiving one array per chunk."""
        if not items:
            return
        t_end = max(b for _, b, _, _ in items)
        self._t_last = max(self._t_last, t_end)
        if self.bin_s is None:
            self._to_bins(self._t_last)
        while t_end / self._width() > self.max_bins:
            self._widen()
        items = sorted((x for x in items if x[1] > x[0] and len(x[2])), key=lambda x: x[0])
        if not items:
            return
        w = self._width()
        a = np.array([x[0] for x in items])
        b = np.array([x[1] for x in items])
        n_bins = (b // w).astype(np.int64) - (a // w).astype(np.int64) + 1
        cost = np.cumsum(n_bins * np.array([len(x[2]) for x in items]))
        lo = 0
        while lo < len(items):
            hi = max(lo + 1, int(np.searchsorted(cost, (cost[lo - 1] if lo else 0) + chunk_entries, "right")))
            self._spread_chunk(items[lo:hi], w)
            lo = hi

    def _spread_chunk(self, items: list, w: float) -> None:
        if len(items) >= COMPILED_MIN and self._bins_compiled(items, w, share=True):
            return
        a = np.array([x[0] for x in items])
        b = np.array([x[1] for x in items])
        first = (a // w).astype(np.int64)
        n_bins = (b // w).astype(np.int64) - first + 1
        # every (interval, bin) pair and the share of the interval inside the bin
        item = np.repeat(np.arange(len(items)), n_bins)
        k = first[item] + np.arange(len(item)) - np.repeat(np.cumsum(n_bins) - n_bins, n_bins)
        share = (np.minimum(b[item], (k + 1) * w) - np.maximum(a[item], k * w)) / (b[item] - a[item])
        ok = share > 0
        item, k, share = item[ok], k[ok], share[ok]
        # ... times every link of the interval
        n_links = np.array([len(x[2]) for x in items], dtype=np.int64)
        ptr = np.concatenate(([0], np.cumsum(n_links)))
        links = np.concatenate([np.asarray(x[2], dtype=np.int64) for x in items])
        values = np.concatenate([np.asarray(x[3], dtype=np.float64) for x in items])
        cnt = n_links[item]
        row = np.repeat(np.arange(len(item)), cnt)
        pos = ptr[item][row] + np.arange(len(row)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        span = int(links.max()) + 1
        key, total = _sum_by_key(k[row] * span + links[pos], values[pos] * share[row])
        bin_of = key // span
        cuts = np.flatnonzero(np.diff(bin_of)) + 1
        for lo, hi in zip(np.concatenate(([0], cuts)), np.concatenate((cuts, [len(key)]))):
            kk = int(bin_of[lo])
            acc = self._bins.setdefault(kk, [[], []])
            acc[0].append((key[lo:hi] % span).astype(np.int32))
            acc[1].append(total[lo:hi])
            self._dirty.add(kk)
            if len(acc[0]) >= 16:
                self._consolidate(kk)

    # -- reading ----------------------------------------------------------------------------------
    def segments(self) -> tuple[list[float], list[float], list[np.ndarray], list[np.ndarray]]:
        """(t_start, t_end, links, rates) of every recorded segment (bins once binned), in time order."""
        if self.bin_s is None:
            return self._start, self._end, self._links, self._rates
        starts, ends, links, rates = [], [], [], []
        w = self.bin_s
        for k in sorted(self._bins):
            ls, vs = _merge(*self._bins[k])
            a, b = k * w, min((k + 1) * w, self._t_last)  # the last bin ends where the record ends
            if b <= a:
                continue
            starts.append(a)
            ends.append(b)
            links.append(ls)
            rates.append(vs / (b - a))
        return starts, ends, links, rates

    @property
    def t_start(self) -> list[float]:
        return self.segments()[0]

    @property
    def t_end(self) -> list[float]:
        return self.segments()[1]

    @property
    def links(self) -> list[np.ndarray]:
        return self.segments()[2]

    @property
    def rates_bytes_per_s(self) -> list[np.ndarray]:
        return self.segments()[3]

    def binned(self, n_links: int, t_end: float, bins: int) -> tuple[np.ndarray, np.ndarray]:
        """Bytes each link carried in each of `bins` equal time bins over [0, t_end]: (edges, bytes[link, bin])."""
        edges = np.linspace(0.0, t_end, bins + 1)
        out = np.zeros((n_links, bins))
        if t_end <= 0:
            return edges, out
        width = t_end / bins
        for a, b, links, rates in zip(*self.segments()):
            if b <= a:
                continue
            first, last = int(a // width), min(int(b // width), bins - 1)
            for k in range(first, last + 1):
                overlap = min(b, edges[k + 1]) - max(a, edges[k])
                if overlap > 0:
                    out[links, k] += rates * overlap
        return edges, out
