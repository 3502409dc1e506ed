"""The proof: every (operation, algorithm) schedule, executed on numpy arrays, leaves every rank with
what the operation's definition says (schedule.reference, computed from source/target per chunk only),
for any group, any placement, any buffer size (also sizes not divisible by the rank count), every redop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.collectives import (
    ALGORITHMS,
    Layout,
    build_schedule,
    execute,
    not_applicable,
    reference,
)

PAIRS = [(op, alg) for op, algs in ALGORITHMS.items() for alg in algs]


def _group(rng, n, gpus_per_server, uniform):
    if uniform:  # whole servers: hierarchical algorithms apply
        servers = max(1, n // gpus_per_server)
        first = int(rng.integers(0, 4))
        return [(first + s) * gpus_per_server + g for s in range(servers) for g in range(gpus_per_server)]
    return sorted(int(r) for r in rng.permutation(64)[:n])


@pytest.mark.parametrize("op,algorithm", PAIRS)
@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 13),
    gpus=st.integers(1, 4),
    elements=st.integers(0, 70),
    seed=st.integers(0, 2**31),
    channels=st.integers(1, 3),
    pieces=st.integers(1, 4),
    redop=st.sampled_from(["sum", "avg", "max", "min"]),
    uniform=st.booleans(),
)
def test_schedule_matches_reference_on_every_rank(
    op, algorithm, n, gpus, elements, seed, channels, pieces, redop, uniform
):
    rng = np.random.default_rng(seed)
    layout = Layout(gpus)
    if op == "send-recv":
        n = 2
    ranks = _group(rng, n, gpus, uniform)
    if not_applicable(op, algorithm, ranks, layout):
        return
    root = int(rng.choice(ranks))
    counts = rng.integers(0, 6, size=(len(ranks), len(ranks))) if op == "all-to-allv" else None
    sched = build_schedule(
        op, algorithm, ranks, elements, layout, channels=channels, pieces=pieces, root=root, counts=counts
    )
    size = int(sched.chunk_bounds[-1])
    buffers = {r: rng.integers(-50, 50, size=size).astype(float) for r in ranks}
    out = execute(sched, buffers, redop)
    expected = reference(sched, buffers, redop)
    for r in ranks:
        for lo, hi, value in expected[r]:
            np.testing.assert_allclose(out[r][lo:hi], value, err_msg=f"{op}/{algorithm} rank {r} [{lo}:{hi}]")
    # the data every rank must end with is the whole output: nothing is left undefined
    covered = {r: sum(hi - lo for lo, hi, _ in expected[r]) for r in ranks}
    if op in ("all-reduce", "all-gather", "broadcast"):
        assert all(c == size for c in covered.values())
    if op == "reduce-scatter":
        assert sum(covered.values()) == size


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 70))
def test_dissemination_barrier_lets_every_rank_hear_from_every_rank(n):
    """A barrier has no data: its proof is that, following the moves step by step, every rank has
    (transitively) heard from every rank before it leaves, in ceil(log2 n) rounds."""
    sched = build_schedule("barrier", "dissemination", list(range(n)), 0, Layout(4))
    heard = [{r} for r in range(n)]
    for step in sched.steps():
        before = [set(h) for h in heard]
        for m in step:
            heard[m.dst] |= before[m.src]
    assert all(h == set(range(n)) for h in heard)
    assert sched.n_steps == (n - 1).bit_length()


@settings(max_examples=40, deadline=None)
@given(servers=st.integers(1, 9), gpus=st.integers(1, 8), channels=st.integers(1, 8))
def test_ring_channels_keep_inter_server_hops_on_rails(servers, gpus, channels):
    from aifabric.collectives.topology import channel_rings

    layout = Layout(gpus)
    rings = channel_rings(range(servers * gpus), layout, channels)
    for ring in rings.tolist():
        assert sorted(ring) == list(range(servers * gpus))
        hops = list(zip(ring, ring[1:] + ring[:1]))
        off_rail = [(a, b) for a, b in hops if a // gpus != b // gpus and a % gpus != b % gpus]
        assert len(off_rail) <= (1 if servers % 2 else 0)
