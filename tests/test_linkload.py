"""Link load over time keeps every byte when it switches to a time grid (bounded memory on long runs)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

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


events = st.lists(st.tuples(st.floats(1e-6, 1e-2), st.lists(st.integers(0, 49), min_size=1, max_size=10),
                            st.floats(1.0, 1e9)), min_size=1, max_size=60)


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
