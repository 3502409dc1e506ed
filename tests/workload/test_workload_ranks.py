"""Rank <-> (tp, cp, dp, pp) mapping: bijection, group sizes, Megatron's order, the blog's 3D example."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.workload.ranks import DIMS, RankLayout

sizes = st.sampled_from([1, 2, 3, 4])
orders = st.permutations(list(DIMS)).map("-".join)


@st.composite
def layouts(draw):
    tp, pp, cp, dp = draw(sizes), draw(sizes), draw(sizes), draw(sizes)
    ep = draw(st.sampled_from([e for e in (1, 2, 3, 4) if dp % e == 0]))
    return RankLayout(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, order=draw(orders))


@settings(max_examples=60, deadline=None)
@given(layouts())
def test_rank_coords_bijection(lay):
    seen = set()
    for r in range(lay.world_size):
        c = lay.coords(r)
        assert lay.rank(**c) == r
        seen.add(tuple(c[d] for d in DIMS))
    assert len(seen) == lay.world_size


@settings(max_examples=60, deadline=None)
@given(layouts())
def test_groups_partition_the_world(lay):
    for dim, size in [
        ("tp", lay.tp),
        ("pp", lay.pp),
        ("dp", lay.dp),
        ("cp", lay.cp),
        ("ep", lay.ep),
        ("edp", lay.dp // lay.ep),
        ("dp-cp", lay.dp * lay.cp),
    ]:
        groups = lay.groups(dim)
        assert all(len(g) == size for g in groups)
        members = [r for g in groups for r in g]
        assert sorted(members) == list(range(lay.world_size))  # every rank in exactly one group
        for g in groups:
            assert all(lay.group(r, dim) == g for r in g)


@settings(max_examples=40, deadline=None)
@given(layouts())
def test_group_members_differ_only_in_their_dimension(lay):
    for r in range(lay.world_size):
        c = lay.coords(r)
        for dim in DIMS:
            for m in lay.group(r, dim):
                cm = lay.coords(m)
                assert all(cm[d] == c[d] for d in DIMS if d != dim)


def test_megatron_default_keeps_tensor_parallel_inside_a_server():
    lay = RankLayout(tp=8, pp=16, dp=64)
    assert lay.world_size == 8192
    gps = 8
    for g in lay.groups("tp")[:50]:
        assert len({r // gps for r in g}) == 1  # one server: NVLink
    assert lay.group(0, "dp")[:3] == (0, 8, 16)
    assert lay.group(0, "pp")[:2] == (0, 512)


def test_blog_3d_example_with_a_configurable_order():
    # Blog "Parallelization Strategies" Figs 1-12/1-13: TP=2 x PP=2 x DP=2 on GPUs 0-7. "GPU0 and GPU2 belong to
    # TP Rank 1, GPU1 and GPU3 to TP Rank 2 ... together a DP group" (a model replica): {0-3} and {4-7};
    # micro-batches x1-x8 go to GPU0/GPU1 (first stage of replica 1), x9-x16 to GPU4/GPU5.
    lay = RankLayout(tp=2, pp=2, dp=2, order="tp-pp-dp-cp")
    replicas = sorted({tuple(r for r in range(8) if lay.coords(r)["dp"] == d) for d in range(2)})
    assert replicas == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert [r for r in range(4) if lay.coords(r)["tp"] == 0] == [0, 2]  # "TP rank 1"
    assert [r for r in range(4) if lay.coords(r)["tp"] == 1] == [1, 3]  # "TP rank 2"
    assert lay.stage_ranks(0) == [0, 1, 4, 5]
    assert lay.group(0, "tp") == (0, 1)  # GPU0's tensor-parallel peer is GPU1 (the blog's "GPU3" is a slip)


def test_bad_layouts_are_refused():
    with pytest.raises(ValueError):
        RankLayout(tp=2, order="tp-dp-pp")
    with pytest.raises(ValueError):
        RankLayout(dp=4, ep=3)
