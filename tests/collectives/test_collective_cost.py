"""The α-β cost model and the tuner: what NCCL's users know about their algorithms must come out."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.collectives import ALGORITHMS, Layout, build_schedule
from aifabric.collectives.cost import (
    NVLS_EFFICIENCY,
    PROTOCOLS,
    Paths,
    Shape,
    busbw_factor,
    collective_time_s,
)
from aifabric.collectives.tuning import choose

GiB = 1 << 30


def busbw(op, shape, size, t):
    return size / t * busbw_factor(op, shape.n)


@pytest.mark.parametrize("n,g", [(16, 8), (64, 8), (512, 8), (24, 4)])
def test_ring_busbw_approaches_the_slowest_hop_for_large_buffers(n, g):
    paths = Paths.simple(g, nvlink_gBps=450, nic_gbps=400)  # non-blocking; the NIC (50 GB/s) is the slowest hop
    shape = Shape.full(n, g)
    t = collective_time_s("all-reduce", "ring", shape, 8 * GiB, paths)
    assert busbw("all-reduce", shape, 8 * GiB, t) == pytest.approx(50e9, rel=0.10)
    assert busbw("all-reduce", shape, 8 * GiB, t) <= 50e9


def test_ring_busbw_with_one_channel_per_nic_approaches_all_nics():
    paths = Paths.simple(8, nvlink_gBps=900, nic_gbps=400)
    shape = Shape.full(32, 8)
    t = collective_time_s("all-reduce", "ring", shape, 8 * GiB, paths, channels=8)
    assert busbw("all-reduce", shape, 8 * GiB, t) == pytest.approx(8 * 50e9, rel=0.10)


@pytest.mark.parametrize("n", [256, 1024, 16384])
def test_tree_beats_ring_for_small_buffers_at_large_rank_counts(n):
    paths = Paths.simple(8, 450, 400)
    shape = Shape.full(n, 8)
    for size in (8, 1024, 64 * 1024):
        assert collective_time_s("all-reduce", "tree", shape, size, paths) < collective_time_s(
            "all-reduce", "ring", shape, size, paths
        )


def test_ring_beats_tree_for_large_buffers_on_few_servers():
    """Same NICs in use (two per server: two rings vs one double tree): an interior tree head moves 3
    pieces per piece of buffer, a ring GPU 2(n-1)/n."""
    paths = Paths.simple(8, 450, 400)
    shape = Shape.full(16, 8)
    best_tree = min(collective_time_s("all-reduce", "tree", shape, 4 * GiB, paths, pieces=p) for p in (1, 4, 16))
    assert collective_time_s("all-reduce", "ring", shape, 4 * GiB, paths, channels=2) < best_tree


@pytest.mark.parametrize("size", [1 << 20, 64 << 20, 1 * GiB])
def test_hierarchical_beats_flat_ring_when_nvlink_is_much_faster_than_the_nic(size):
    shape = Shape.full(128, 8)
    fast = Paths.simple(8, nvlink_gBps=900, nic_gbps=100)
    assert collective_time_s("all-reduce", "hierarchical", shape, size, fast) < collective_time_s(
        "all-reduce", "ring", shape, size, fast
    )


def test_protocols_trade_latency_for_bandwidth():
    paths = Paths.simple(8, 450, 400)
    shape = Shape.full(64, 8)
    small = {p: collective_time_s("all-reduce", "ring", shape, 1024, paths, protocol=p) for p in PROTOCOLS}
    large = {p: collective_time_s("all-reduce", "ring", shape, 4 * GiB, paths, protocol=p) for p in PROTOCOLS}
    assert small["ll"] < small["ll128"] < small["simple"]
    assert large["simple"] < large["ll128"] < large["ll"]


def test_in_switch_reduction_moves_the_buffer_about_once():
    """NVLS inside one server: B per link direction (up: (n-1)/n B of contributions + B/n result; down: B/n
    reduced + (n-1)/n B multicast), a two-stage pipeline over P pieces, vs 2(n-1)/n B for the ring."""
    paths = Paths.simple(8, 450, 400)
    shape = Shape.full(8, 8)
    ring = collective_time_s("all-reduce", "ring", shape, 4 * GiB, paths)
    nvls = collective_time_s("all-reduce", "nvls", shape, 4 * GiB, paths, pieces=16)
    # ... at NVLink SHARP's measured rate: 275 GB/s algbw where the ring's busbw is 370 (NVLS_EFFICIENCY)
    assert ring / nvls == pytest.approx(2 * 7 / 8 * 16 / 17 * NVLS_EFFICIENCY, rel=0.02)
    unpiped = collective_time_s("all-reduce", "nvls", shape, 4 * GiB, paths, pieces=1)
    assert unpiped > ring  # reduce, then multicast: 2 B per link direction in sequence


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(2, 4096),
    g=st.sampled_from([1, 2, 4, 8]),
    size=st.integers(1, 1 << 34),
    op=st.sampled_from([op for op in ALGORITHMS if op not in ("all-to-allv", "barrier", "send-recv")]),
)
def test_time_grows_with_size_and_auto_is_never_worse_than_any_algorithm(n, g, size, op):
    paths = Paths.simple(g, 450, 400)
    shape = Shape.full(n, g)
    c = choose(op, shape, size, paths)
    for alg in ALGORITHMS[op]:
        if alg == "nvls":
            continue
        t = collective_time_s(op, alg, shape, size, paths)
        assert c.time_s <= t * (1 + 1e-9)
        assert collective_time_s(op, alg, shape, 2 * size, paths) >= t


def test_auto_avoids_the_flat_ring_at_16k_ranks_until_its_bandwidth_pays_for_its_latency():
    # a flat ring over 16,384 GPUs: 32,766 steps, whose latencies add up along a chunk's path (NVLink on 7 of
    # every 8 hops, the network on the 8th: NCCL's ring latency) to ~65 ms whatever the size; the hierarchical and
    # tree algorithms take a fraction of that up to 1 GiB. At 8 GiB the ring's bandwidth wins: its NICs carry an
    # eighth of its bytes (one channel of eight crosses each server boundary per NIC), the others' carry more
    paths = Paths.simple(8, 450, 400)
    shape = Shape.full(16384, 8)
    for size in (8, 1 << 20, GiB):
        assert choose("all-reduce", shape, size, paths).algorithm != "ring"
    ring = collective_time_s("all-reduce", "ring", shape, 8, paths, protocol="ll128", channels=8)
    assert 50e-3 < ring < 80e-3
    assert choose("all-reduce", shape, 8 * GiB, paths).algorithm == "ring"


def test_16k_rank_allreduce_expands_in_memory_linear_in_its_transfers():
    """The auto choice at 16,384 ranks: a few moves per rank, 24 bytes of arrays per move (5 int32, 2 int8, 1 int16)."""
    c = choose("all-reduce", Shape.full(16384, 8), GiB, Paths.simple(8, 450, 400))
    sched = build_schedule(
        "all-reduce", c.algorithm, range(16384), GiB // 4, Layout(8), channels=c.channels, pieces=c.pieces
    )
    assert sched.n_moves < 64 * 16384
    assert sched.nbytes == 24 * sched.n_moves


def test_busbw_factors_are_nccl_tests():
    assert busbw_factor("all-reduce", 8) == 2 * 7 / 8
    assert busbw_factor("all-gather", 8) == busbw_factor("reduce-scatter", 8) == 7 / 8
    assert busbw_factor("broadcast", 8) == busbw_factor("reduce", 8) == 1.0
    assert busbw_factor("all-to-all", 8) == 7 / 8
