"""Rank <-> group arithmetic (pure; no torch needed)."""

from hypothesis import given
from hypothesis import strategies as st

from aifabric.train.layout import Layout, split_evenly, stage_bounds

sizes = st.integers(1, 4)


def test_seeds_3d_example():
    # Blog D, WE-D.4: TP x PP x DP = 2 x 2 x 2. GPU0/GPU1 are the TP ranks of the first stage, GPU2/GPU3
    # the second stage; GPUs 0-3 form one model replica ("DP group" in the text), GPUs 4-7 the other.
    lay = Layout(dp=2, tp=2, pp=2)
    assert lay.tp_groups() == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert lay.pp_groups() == [(0, 2), (1, 3), (4, 6), (5, 7)]
    assert lay.dp_groups() == [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert lay.next_stage(1) == 3 and lay.prev_stage(3) == 1 and lay.next_stage(3) is None


@given(sizes, sizes, sizes)
def test_groups_partition_the_world(dp, tp, pp):
    lay = Layout(dp, tp, pp)
    for groups, size in ((lay.tp_groups(), tp), (lay.dp_groups(), dp), (lay.pp_groups(), pp)):
        members = sorted(r for g in groups for r in g)
        assert members == list(range(lay.world_size))
        assert all(len(g) == size for g in groups)
    for r in range(lay.world_size):
        c = lay.coords(r)
        assert lay.rank(c.dp, c.pp, c.tp) == r
        # a rank's TP, PP and DP groups meet only in the rank itself
        assert set(lay.tp_group(r)) & set(lay.dp_group(r)) == {r}
        assert set(lay.tp_group(r)) & set(lay.pp_group(r)) == {r}


@given(st.integers(1, 12), st.integers(1, 12))
def test_stage_bounds_cover_units_contiguously(n, pp):
    if pp > n:
        return
    bounds = [stage_bounds(n, pp, s) for s in range(pp)]
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    assert all(b - a >= 1 for a, b in bounds)
    assert max(b - a for a, b in bounds) - min(b - a for a, b in bounds) <= 1


def test_split_evenly():
    assert [split_evenly(32, 4, i) for i in range(4)] == [(0, 8), (8, 16), (16, 24), (24, 32)]
