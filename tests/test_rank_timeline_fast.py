"""The rank timeline's fast paths (analysis.py, issue 13: 14 million rows at the 1T plan) give what the reference
paths give: the compiled sort by rank then time against `_order`, the helpers against the numpy calls and the regex
they stand for, and whole timelines with every compiled path forced against AIFABRIC_PURE_PYTHON=1."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_report_scale import PP, _no_pipeline

from aifabric import analysis
from aifabric.compiled import compiled as compile_numba
from aifabric.scenario import embedded_scenario
from aifabric.scenario.load import parse_scenario
from aifabric.simulate import simulate

rows = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 8)), max_size=80)


@given(rows)
@settings(max_examples=300, deadline=None)
def test_sort_by_rank_then_time_is_the_stable_order(draw):
    """`_by_rank_then_time` (Python and compiled) and `_order_ranks` order rows as `_order` does: by rank, then time,
    ties in row order (eighths of a unit: many ties)."""
    rank = np.array([r for r, _ in draw], dtype=np.int64)
    t = np.array([x / 8 for _, x in draw])
    want = analysis._order(rank, t).tolist()
    assert analysis._by_rank_then_time(rank, t, 6).tolist() == want
    fast = compile_numba(analysis._by_rank_then_time)
    if fast is not None:
        assert fast(rank, t, 6).tolist() == want
    old = analysis.COMPILED_MIN
    analysis.COMPILED_MIN = 0
    try:
        assert analysis._order_ranks(rank, t, 6).tolist() == want
        assert analysis._order_ranks(rank, t, 3).tolist() == want  # ranks beyond the world: the reference
    finally:
        analysis.COMPILED_MIN = old


def test_compiled_sort_on_a_large_draw():
    fast = compile_numba(analysis._by_rank_then_time)
    if fast is None:
        pytest.skip("numba not installed or AIFABRIC_PURE_PYTHON set")
    rng = np.random.default_rng(3)
    n = 200_000
    rank = rng.integers(0, 300, n)
    t = np.round(rng.random(n) * 50, 1)
    assert np.array_equal(fast(rank, t, 300), analysis._order(rank, t))


@given(st.lists(st.integers(0, 6), max_size=40))
@settings(max_examples=200, deadline=None)
def test_runs_is_unique_of_a_sorted_array(values):
    x = np.sort(np.array(values, dtype=np.int64))
    u, inv = analysis._runs(x)
    want_u, want_inv = np.unique(x, return_inverse=True)
    assert u.tolist() == want_u.tolist() and inv.tolist() == want_inv.tolist()


@given(st.lists(st.integers(-3, 12), max_size=40), st.lists(st.integers(0, 10), max_size=20))
@settings(max_examples=200, deadline=None)
def test_member_is_isin(x, keys):
    xs = np.array(x, dtype=float) / 2
    uniq = np.unique(np.array(keys, dtype=float) / 2)
    assert analysis._member(xs, uniq).tolist() == np.isin(xs, uniq).tolist()


intervals = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 12), st.integers(-2, 6)), max_size=60)


def _kernels(fn):
    """`fn` in Python, and compiled when numba is there (and AIFABRIC_PURE_PYTHON not set)."""
    return [fn] + [f for f in (compile_numba(fn),) if f is not None]


@given(intervals)
@settings(max_examples=300, deadline=None)
def test_union_through_the_order_is_the_union_of_sorted_rows(draw):
    """`_union_in_order` (Python and compiled) gives what `_union_sorted` gives of the rows sorted and filtered."""
    r = np.array([x for x, _, _ in draw], dtype=np.int64)
    a = np.array([y for _, y, _ in draw], dtype=float) / 4  # quarters: ties and touching intervals
    b = a + np.array([d for _, _, d in draw], dtype=float) / 4  # some empty or reversed: left out
    order = analysis._order(r, a)
    keep = b[order] > a[order]
    want = analysis._union_sorted(r[order][keep], a[order][keep], b[order][keep])
    for fn in _kernels(analysis._union_in_order):
        got = fn(order, r, a, b)
        assert [x.tolist() for x in got] == [x.tolist() for x in want]
        assert [x.dtype for x in got] == [x.dtype for x in want]


rows_of = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6)), max_size=12)
transfers = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 6)), max_size=12)
gap_rows = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6), st.booleans()), max_size=20)


@given(rows_of, rows_of, rows_of, transfers, rows_of, gap_rows, st.integers(1, 3), st.integers(0, 2**32 - 1))
@settings(max_examples=300, deadline=None)
def test_timeline_rows_are_the_stable_sort_of_busy_rows_idle_and_bubble(
    comp, fold, beside, p2p, spans, gaps, n_coll, seed
):
    """`_timeline_rows` (Python and compiled) against what the timeline did before it: the busy rows (compute,
    folded, folded beside the compute, pipeline sends, pipeline receives, collective spans), then the idle gaps,
    then the bubble gaps, each row with its kind and codes, stably sorted by (rank, start)."""
    rng = np.random.default_rng(seed)
    sends = [(x, t) for x, _, t in p2p]
    recvs = [(y, t) for _, y, t in p2p]
    parts = [comp, fold, beside, sends, recvs, spans]
    sizes = [len(p) for p in parts]
    r = np.array([x for p in parts for x, _ in p], dtype=np.int64)
    a = np.array([float(y) for p in parts for _, y in p])
    b = a + rng.integers(0, 3, len(a))
    bounds = np.cumsum([0] + sizes).astype(np.int64)
    c_name = rng.integers(0, 50, sizes[0])
    f_name = rng.integers(100, 110, sizes[1])
    h_name = rng.integers(110, 120, sizes[2])
    p_name = rng.integers(0, 50, sizes[3])
    s_coll = rng.integers(0, n_coll, sizes[5])
    g = sorted({(x, y): z for x, y, z in gaps}.items())  # distinct (rank, start), in that order
    gr = np.array([x for (x, _), _ in g], dtype=np.int64)
    ga = np.array([float(y) for (_, y), _ in g])
    gb = ga + 0.5
    bubble = np.array([z for _, z in g], dtype=bool)
    n_idle, n_bubble = int((~bubble).sum()), int(bubble.sum())
    full = np.full
    kind = np.concatenate(
        [full(sizes[0], analysis.COMPUTE_K), full(sum(sizes[1:]), analysis.COMM_K)]
        + [full(n_idle, analysis.IDLE_K), full(n_bubble, analysis.BUBBLE_K)]
    )
    cat = np.concatenate(
        [full(sizes[0], analysis._CAT_COMPUTE), full(sizes[1], analysis._CAT_FOLDED)]
        + [full(sizes[2], analysis._CAT_BESIDE), full(2 * sizes[3], analysis._CAT_P2P), analysis._CAT_COLL + s_coll]
        + [full(n_idle, analysis._CAT_IDLE), full(n_bubble, analysis._CAT_BUBBLE)]
    )
    name = np.concatenate([c_name, f_name, h_name, p_name, p_name, 200 + s_coll, full(len(gr), -1)])
    rank = np.concatenate((r, gr[~bubble], gr[bubble]))
    start = np.concatenate((a, ga[~bubble], ga[bubble]))
    end = np.concatenate((b, gb[~bubble], gb[bubble]))
    o = analysis._order(rank, start)
    want = [rank[o], kind[o], cat[o], name[o], start[o], end[o]]
    busy_order = analysis._order(r, a)
    for fn in _kernels(analysis._timeline_rows):
        got = fn(busy_order, r, a, b, bounds, c_name, f_name, h_name, p_name, s_coll, 200, gr, ga, gb, bubble)
        assert [x.tolist() for x in got] == [x.tolist() for x in want]
        assert got[0].dtype == np.int64 and got[1].dtype == np.int8


NAMES = [
    "it0/mb0/fwd/embedding@0+9 (+9 ops)",
    "it12/mb3/bwd",
    "it12/mb4/bwd",
    "it/mb0/fwd",
    "it3x/mb0",
    "it٣/mb0",  # an Arabic-Indic digit: \d matches it, int() reads it
    "optimizer",
    "it7",
    "xit1/a",
    "it1//",
    "",
]


def test_iteration_is_the_regex():
    iteration = analysis._iteration()
    for name in NAMES * 2:  # the second time from the memo
        m = analysis._ITERATION.match(name)
        assert iteration(name) == (int(m.group(1)) if m else -1), name


@pytest.fixture(scope="module", params=["pp", "nopp", "ch14"])
def run(request):
    if request.param == "pp":
        return simulate(parse_scenario(PP))
    if request.param == "nopp":
        return simulate(parse_scenario(_no_pipeline()))
    return simulate(embedded_scenario("ch14"))


def _fields(rt: analysis.RankTimeline) -> dict:
    out = {}
    for f in dataclasses.fields(rt):
        v = getattr(rt, f.name)
        out[f.name] = (v.dtype.str, v.tolist()) if isinstance(v, np.ndarray) else v
    return out


def test_compiled_timeline_equals_pure_python(run, monkeypatch):
    args = (run.graph, run.timeline, run.fabric.world_size, run.workload.iterations)
    monkeypatch.setenv("AIFABRIC_PURE_PYTHON", "1")
    ref = _fields(analysis.rank_timeline(*args))
    monkeypatch.delenv("AIFABRIC_PURE_PYTHON")
    monkeypatch.setattr(analysis, "COMPILED_MIN", 0)
    fast = _fields(analysis.rank_timeline(*args))
    assert fast == ref
    assert ref["category"][1] and all(isinstance(x, str) for x in ref["category"][1] + ref["name"][1])
