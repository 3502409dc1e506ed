"""Link load over time keeps every byte when it switches to a time grid (bounded memory on long runs)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.compiled import compiled
from aifabric.engines.linkload import LinkLoad


def _record(load: LinkLoad, events) -> tuple[np.ndarray, float]:
    n_links = 50
    expected = np.zeros(n_links)
    now = 0.0
    for dt, links, rate in events:
        links = np.array(sorted(set(links)), dtype=np.int64)
        rates = np.full(len(links), rate)
        load.set_sparse(now, links, rates)
        expected[links] += rates * dt
        now += dt
    load.close(now)
    return expected, now


def _bytes(load: LinkLoad, n_links: int = 50) -> np.ndarray:
    out = np.zeros(n_links)
    for a, b, links, rates in zip(*load.segments()):
        np.add.at(out, links, rates * (b - a))
    return out


events = st.lists(
    st.tuples(st.floats(1e-6, 1e-2), st.lists(st.integers(0, 49), min_size=1, max_size=10), st.floats(1.0, 1e9)),
    min_size=1,
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(events)
def test_bytes_per_link_survive_binning(evs):
    exact, binned = LinkLoad(), LinkLoad(max_entries=20, max_bins=8)
    expected, t_end = _record(exact, evs)
    _record(binned, evs)
    np.testing.assert_allclose(_bytes(exact), expected, rtol=1e-9, atol=1e-6)
    np.testing.assert_allclose(_bytes(binned), expected, rtol=1e-9, atol=1e-6)
    _, grid = binned.binned(50, t_end, 4)
    np.testing.assert_allclose(grid.sum(axis=1), expected, rtol=1e-9, atol=1e-6)
    if binned.bin_s is not None:
        starts, ends, _, _ = binned.segments()
        assert len(starts) <= 8 + 1
        assert all(b > a for a, b in zip(starts, ends))


def test_small_runs_keep_exact_segments():
    load = LinkLoad()
    load.set_sparse(0.0, np.array([1, 2]), np.array([5.0, 7.0]))
    load.set_sparse(1.0, np.array([2]), np.array([3.0]))
    load.close(3.0)
    assert load.bin_s is None
    assert load.t_start == [0.0, 1.0] and load.t_end == [1.0, 3.0]
    assert load.links[1].tolist() == [2] and load.rates_bytes_per_s[1].tolist() == [3.0]


def _grid(load: LinkLoad, n_links: int = 50) -> dict[int, np.ndarray]:
    """Bytes per link in each bin of the load's grid."""
    out = {}
    for a, b, links, rates in zip(*load.segments()):
        row = np.zeros(n_links)
        np.add.at(row, links, rates * (b - a))
        out[int(round(a / load.bin_s))] = row
    return out


spreads = st.lists(
    st.tuples(
        st.floats(0, 0.05),
        st.floats(1e-7, 0.05),
        st.lists(st.integers(0, 49), min_size=1, max_size=12, unique=True),
        st.floats(1.0, 1e9),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=80, deadline=None)
@given(events, spreads, st.sampled_from([3, 10**9]))
def test_spread_intervals_land_in_their_bins(evs, items, chunk):
    """add_spread (vectorized, in chunks) puts into each bin and link the bytes of every interval's overlap
    with the bin: compared with the interval-by-interval, bin-by-bin sum."""
    load = LinkLoad(max_entries=20, max_bins=16)
    expected_total, _ = _record(load, evs)
    spread = [(a, a + d, np.array(links), np.full(len(links), size)) for a, d, links, size in items]
    t_end = max(load._t_last, max(b for _, b, _, _ in spread))
    before = LinkLoad(max_entries=20, max_bins=16)
    _record(before, evs)
    before.add_spread([(0.0, t_end, np.array([0]), np.array([0.0]))])  # the same grid and widening
    load.add_spread(spread, chunk_entries=chunk)
    assert load.bin_s == before.bin_s
    w = load.bin_s
    want = _grid(before)
    for a, b, links, values in spread:
        for k in range(int(a // w), int(b // w) + 1):
            overlap = min(b, (k + 1) * w) - max(a, k * w)
            if overlap > 0:
                want.setdefault(k, np.zeros(50))[links] += values * overlap / (b - a)
    got = _grid(load)
    assert sorted(k for k in want if want[k].any()) == sorted(k for k in got if got[k].any())
    for k, row in want.items():
        np.testing.assert_allclose(got.get(k, np.zeros(50)), row, rtol=1e-9, atol=1e-6)
    spread_total = sum(float(v.sum()) for _, _, _, v in spread)
    np.testing.assert_allclose(_bytes(load).sum(), expected_total.sum() + spread_total, rtol=1e-9)


def _exact_grid(load: LinkLoad) -> list[tuple[int, list[int], list[float]]]:
    """The time grid exactly: per bin its links and their bytes after merging its arrays."""
    from aifabric.engines.linkload import _merge

    return [(k, *(x.tolist() for x in _merge(*load._bins[k]))) for k in sorted(load._bins)]


spread_items = st.lists(
    st.tuples(
        st.floats(0.0, 5e-2),
        st.floats(1e-7, 2e-2),
        st.lists(st.integers(0, 49), min_size=1, max_size=8),
        st.floats(1.0, 1e9),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(events, spread_items)
def test_compiled_grid_equals_the_python_one_bit_for_bit(evs, items):
    """The compiled pass that puts a run's segments on the grid and spreads folded bytes over it
    (`_bin_sums`) gives the grid the interval-by-interval Python path gives, to the last bit."""
    import aifabric.engines.linkload as linkload

    if compiled(linkload._bin_sums) is None:  # pragma: no cover - numba is a dependency
        return
    spread = [(a, a + d, np.array(sorted(set(ls)), dtype=np.int32), np.full(len(set(ls)), v)) for a, d, ls, v in items]
    grids = []
    for compiled_min in (0, 10**9):
        old = linkload.COMPILED_MIN
        linkload.COMPILED_MIN = compiled_min
        try:
            load = LinkLoad()
            _record(load, evs)
            load.add_spread(spread)
        finally:
            linkload.COMPILED_MIN = old
        grids.append((load.bin_s, _exact_grid(load)))
    assert grids[0] == grids[1]
