"""union_runs (analysis.py): the per-rank union of intervals, Python and compiled passes, against a plain
per-rank merge written here."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric import analysis
from aifabric.compiled import compiled as compile_numba


def reference(rank, a, b):
    out = []
    for r in sorted(set(rank.tolist())):
        spans = sorted((x, y) for rr, x, y in zip(rank.tolist(), a.tolist(), b.tolist()) if rr == r and y > x)
        for x, y in spans:
            if out and out[-1][0] == r and x <= out[-1][2]:  # touching or overlapping: one run
                out[-1][2] = max(out[-1][2], y)
            else:
                out.append([r, x, y])
    return out


intervals = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 12), st.integers(-2, 6)), max_size=60)


@given(intervals)
@settings(max_examples=300, deadline=None)
def test_union_runs_is_the_per_rank_merge(rows):
    rank = np.array([r for r, _, _ in rows], dtype=np.int64)
    a = np.array([x for _, x, _ in rows], dtype=float) / 4  # quarters: many ties and touching intervals
    b = a + np.array([d for _, _, d in rows], dtype=float) / 4  # some empty or reversed: left out
    want = reference(rank, a, b)
    for compiled in (False, True):
        if compiled and compile_numba(analysis._merge_sorted) is None:
            continue
        old = analysis.COMPILED_MIN
        analysis.COMPILED_MIN = 0 if compiled else 10**12
        try:
            r, s, e = analysis.union_runs(rank, a, b)
        finally:
            analysis.COMPILED_MIN = old
        assert [[int(x), float(y), float(z)] for x, y, z in zip(r, s, e)] == want


def test_compiled_pass_equals_python_pass_on_a_large_draw():
    compiled = compile_numba(analysis._merge_sorted)
    if compiled is None:
        pytest.skip("numba not installed")
    rng = np.random.default_rng(7)
    n = 20_000
    r = np.sort(rng.integers(0, 50, n))
    s = np.round(rng.random(n) * 100, 2)
    order = np.lexsort((s, r))
    r, s = r[order], s[order]
    e = s + np.round(rng.random(n) * 3, 2)
    f1, e1 = analysis._merge_sorted(r, s, e)
    f2, e2 = compiled(r, s, e)
    assert np.array_equal(f1, f2) and np.array_equal(e1[f1], e2[f2])
    assert f1.sum() < n  # runs did merge: the draw overlaps
