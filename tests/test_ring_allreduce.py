"""Ring AllReduce = ReduceScatter + AllGather, proven by executing the schedule on numpy arrays."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.collectives import execute, ring_all_reduce, ring_reduce_scatter, snake_ring
from aifabric.collectives.explain import explain


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 16), elements=st.integers(0, 300), seed=st.integers(0, 2**32 - 1))
def test_every_rank_ends_with_the_reference_sum(n, elements, seed):
    rng = np.random.default_rng(seed)
    ranks = [int(r) for r in rng.permutation(64)[:n]]  # any ring order, any global rank numbers
    buffers = {r: rng.integers(-1000, 1000, size=elements) for r in ranks}
    out = execute(ring_all_reduce(ranks, elements), buffers)
    reference = sum(buffers.values())
    for r in ranks:
        np.testing.assert_array_equal(out[r], reference)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 16), elements=st.integers(0, 200))
def test_reduce_scatter_leaves_position_i_with_chunk_i_plus_1(n, elements):
    ring = list(range(n))
    sched = ring_reduce_scatter(ring, elements)
    buffers = {r: np.full(elements, float(r + 1)) for r in ring}
    out = execute(sched, buffers)
    total = n * (n + 1) / 2
    b = sched.chunk_bounds
    for i in ring:
        c = (i + 1) % n
        np.testing.assert_array_equal(out[i][b[c] : b[c + 1]], np.full(b[c + 1] - b[c], total))


@given(n=st.integers(2, 32), elements=st.integers(0, 10_000))
def test_step_count_and_bytes_per_rank(n, elements):
    sched = ring_all_reduce(range(n), elements)
    assert sched.n_steps == 2 * (n - 1)
    sent = [0] * n
    for m in sched.moves:
        sent[m.src] += sched.chunk_elements(m.chunk)
    # each rank sends 2(n-1) chunks; chunk sizes differ by at most one element
    for r in range(n):
        assert abs(sent[r] - 2 * (n - 1) * elements / n) <= 2 * (n - 1)
    if elements % n == 0:
        assert set(sent) == {2 * (n - 1) * elements // n}


def test_seeds_chapter_14_example():
    """1024 gradients, 4 ranks: 256 per chunk, 3 + 3 steps; iteration 1 sends A0, B1, C2, D3; after
    ReduceScatter rank 0 holds B, rank 1 C, rank 2 D, rank 3 A (the text's "rank 0 is responsible for
    chunk A" is the nominal owner, not the mechanics: spec errata #24)."""
    sched = ring_all_reduce([0, 1, 2, 3], 1024)
    assert {sched.chunk_elements(c) for c in range(4)} == {256}
    steps = explain(sched)
    assert len(steps) == 6
    assert [(s.src, s.dst, s.value) for s in steps[0].sends] == [(0, 1, "A0"), (1, 2, "B1"), (2, 3, "C2"), (3, 0, "D3")]
    assert [s.value for s in steps[1].sends] == ["D=D3+D0", "A=A0+A1", "B=B1+B2", "C=C2+C3"]
    assert [s.value for s in steps[2].sends] == ["C=C2+C3+C0", "D=D3+D0+D1", "A=A0+A1+A2", "B=B1+B2+B3"]
    after_rs = steps[2].full
    assert after_rs == {0: (1,), 1: (2,), 2: (3,), 3: (0,)}  # B, C, D, A
    # AllGather iteration 1: R0 sends B, R1 C, R2 D, R3 A; after 3 AllGather steps every rank has all four
    assert [s.value.split(" ")[0] for s in steps[3].sends] == ["B", "C", "D", "A"]
    assert all(steps[5].full[r] == (0, 1, 2, 3) for r in range(4))
    # the values: sum then divide by 4 (the averaging is local)
    grads = {r: np.arange(1024, dtype=float) * (r + 1) for r in range(4)}
    out = execute(sched, grads)
    np.testing.assert_allclose(out[2] / 4, np.arange(1024) * 2.5)


@settings(max_examples=80, deadline=None)
@given(servers=st.integers(1, 12), gpus=st.integers(1, 8))
def test_snake_ring_keeps_inter_server_hops_on_one_rail(servers, gpus):
    ranks = range(servers * gpus)
    ring = snake_ring(ranks, lambda r: r // gpus, lambda r: r % gpus)
    assert sorted(ring) == list(ranks)
    hops = list(zip(ring, ring[1:] + ring[:1]))
    cross = [(a, b) for a, b in hops if a // gpus != b // gpus]
    off_rail = [(a, b) for a, b in cross if a % gpus != b % gpus]
    if servers % 2 == 0 or servers == 1:
        assert off_rail == []
    else:  # the closing hop of an odd number of servers is the only one that may change rail
        assert len(off_rail) <= 1
