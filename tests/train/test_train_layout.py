"""Rank <-> group arithmetic (pure; no torch needed)."""

from hypothesis import given
from hypothesis import strategies as st

from aifabric.train.layout import Layout, split_evenly, stage_bounds
from aifabric.workload.ranks import RankLayout

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


def _formula_groups(dp, tp, pp):
    """The trainer's groups as the module's formula gives them (rank = dp_index·pp·tp + pp_index·tp + tp_index),
    written out independently (the trainer had its own arithmetic before it used workload/ranks.py)."""

    def rank(d, p, t):
        return d * pp * tp + p * tp + t

    world = dp * tp * pp
    coords = {rank(d, p, t): (d, p, t) for d in range(dp) for p in range(pp) for t in range(tp)}
    tp_g = {r: tuple(rank(d, p, x) for x in range(tp)) for r, (d, p, t) in coords.items()}
    dp_g = {r: tuple(rank(x, p, t) for x in range(dp)) for r, (d, p, t) in coords.items()}
    pp_g = {r: tuple(rank(d, x, t) for x in range(pp)) for r, (d, p, t) in coords.items()}
    nxt = {r: rank(d, p + 1, t) if p + 1 < pp else None for r, (d, p, t) in coords.items()}
    prv = {r: rank(d, p - 1, t) if p > 0 else None for r, (d, p, t) in coords.items()}
    return world, coords, tp_g, dp_g, pp_g, nxt, prv


def _unique(groups):
    return list(dict.fromkeys(groups))


def test_the_trainer_layout_is_the_workload_layout_in_the_seeds_order():
    """One rank arithmetic: the trainer's Layout answers what its formula says, through RankLayout."""
    for dp in range(1, 5):
        for tp in range(1, 5):
            for pp in range(1, 5):
                lay = Layout(dp=dp, tp=tp, pp=pp)
                world, coords, tp_g, dp_g, pp_g, nxt, prv = _formula_groups(dp, tp, pp)
                assert lay.world_size == world
                assert isinstance(lay.ranks, RankLayout) and lay.ranks.world_size == world
                for r in range(world):
                    c = lay.coords(r)
                    assert (c.dp, c.pp, c.tp) == coords[r]
                    assert lay.rank(c.dp, c.pp, c.tp) == r
                    assert (lay.tp_group(r), lay.dp_group(r), lay.pp_group(r)) == (tp_g[r], dp_g[r], pp_g[r])
                    assert (lay.next_stage(r), lay.prev_stage(r)) == (nxt[r], prv[r])
                assert lay.tp_groups() == _unique(tp_g[r] for r in range(world))
                assert lay.dp_groups() == _unique(dp_g[r] for r in range(world))
                assert lay.pp_groups() == _unique(pp_g[r] for r in range(world))


def test_layout_sizes_below_one_leave_the_refusal_to_the_trainer_checks():
    assert Layout(dp=0, tp=2, pp=1).world_size == 0  # check_config names --dp; no ValueError before it
