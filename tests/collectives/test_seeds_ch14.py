"""The seeds' Chapter 14 worked examples: the ring AllReduce tables, the tree Broadcast from rank 0,
and the torchrun / rendezvous of Figure 14-2."""

from __future__ import annotations

import numpy as np

from aifabric.collectives import (
    Layout,
    build_schedule,
    execute,
    network_of,
    ring_all_reduce,
)
from aifabric.collectives.bootstrap import (
    Launch,
    comm_split,
    global_rank,
    new_group,
    processes,
    rendezvous,
)
from aifabric.collectives.explain import explain


def test_ring_allgather_tables_and_state_after_iteration_2():
    """ReduceScatter iteration 2 state as the text tabulates it, then AllGather: iteration 1 R0 sends B,
    R1 C, R2 D, R3 A; R0 receives A, then D, then C. (The text's "Rank 0 has: A (original), B, and D"
    after AllGather 2 calls A 'original' though rank 0's own reduced chunk is B: spec errata, §13.)"""
    steps = explain(ring_all_reduce([0, 1, 2, 3], 1024))
    after2 = steps[1].holdings
    assert after2[0][2] == "C=C2+C3+C0" and after2[0][:2] == ("A0", "B0")
    assert after2[1][3] == "D=D3+D0+D1" and after2[2][0] == "A=A0+A1+A2" and after2[3][1] == "B=B1+B2+B3"
    received_by_r0 = [next(s.chunk for s in st.sends if s.dst == 0) for st in steps[3:]]
    assert received_by_r0 == [0, 3, 2]  # A, D, C
    assert [s.chunk for s in steps[4].sends] == [0, 1, 2, 3]  # AG 2: R0 sends A, R1 B, R2 C, R3 D
    assert steps[4].full[0] == (0, 1, 3)  # R0 holds A, B, D after AllGather 2: one chunk (C) still missing


def test_ring_average_is_the_sum_divided_by_4():
    sched = ring_all_reduce([0, 1, 2, 3], 1024)
    grads = {r: np.linspace(-1, 1, 1024) * (r + 1) for r in range(4)}
    out = execute(sched, grads, "avg")
    for r in range(4):
        np.testing.assert_allclose(out[r], np.linspace(-1, 1, 1024) * 2.5)
    # 6 steps x 256 gradients = 1,536 values = 6,144 B in FP32 per rank (2(N-1)/N x 1024)
    assert int(sched.move_elements()[sched.src == 0].sum()) * 4 == 6144


def test_tree_broadcast_from_rank_0_uses_nvlink_inside_and_one_rail_across():
    """Figure 14-4: ranks 1-3 get the parameters over NVLink (no QPs), ranks 4-7 over the backend."""
    layout = Layout(4)
    sched = build_schedule("broadcast", "tree", range(8), 1000, layout, root=0)
    nets = {(m.src, m.dst): network_of(m.src, m.dst, layout) for m in sched.moves}
    assert sorted(d for (_, d) in nets) == [1, 2, 3, 4, 5, 6, 7]
    for (s, d), net in nets.items():
        assert net == ("NVLink" if s // 4 == d // 4 else "rail 0")
    assert sum(1 for net in nets.values() if net != "NVLink") == 1  # one QP-carried transfer: 0 -> 4
    buffers = {r: np.full(1000, float(r)) for r in range(8)}
    out = execute(sched, buffers)
    assert all((out[r] == 0).all() for r in range(8))


def test_figure_14_2_ranks_and_rendezvous():
    launch = Launch(nnodes=2, nproc_per_node=4, master_addr="192.168.10.101", master_port=12345)
    procs = processes(launch)
    assert [p.rank for p in procs] == list(range(8))
    assert [(p.node_rank, p.local_rank) for p in procs][5] == (1, 1)  # host B GPU 1: 1*4+1 = 5
    assert global_rank(1, 4, 3) == 7
    rv = rendezvous(launch, np.random.default_rng(0))
    assert rv.listener == ("192.168.10.101", 12345)
    assert rv.expected_connections == 7 == len(rv.connections)
    dst = {rank: (addr, port) for rank, addr, port in rv.connections}
    assert all(dst[r] == ("127.0.0.1", 12345) for r in (1, 2, 3))
    assert all(dst[r] == ("192.168.10.101", 12345) for r in (4, 5, 6, 7))
    ids = [e for e in rv.events if e.kind == "unique-id"]
    assert sorted(e.dst_rank for e in ids) == list(range(1, 8)) and len(rv.unique_id) == 128
    # the ID goes out only after every handshake is complete; remote ranks' messages are frontend traffic
    last_ack = max(e.t_s for e in rv.events if e.kind == "ack")
    assert min(e.t_s for e in ids) > last_ack
    assert {e.network for e in rv.events if e.src_rank >= 4 or e.dst_rank >= 4} == {"frontend"}
    assert {e.network for e in rv.events if e.kind != "listen" and max(e.src_rank, e.dst_rank) <= 3} == {"loopback"}


def test_unique_id_comes_from_the_generator_passed_in():
    launch = Launch(2, 4)
    a = rendezvous(launch, np.random.default_rng(7)).unique_id
    assert a == rendezvous(launch, np.random.default_rng(7)).unique_id
    assert a != rendezvous(launch, np.random.default_rng(8)).unique_id


def test_sub_communicators():
    split = comm_split([r % 2 for r in range(8)], keys=[-r for r in range(8)])
    assert split[0].ranks == (6, 4, 2, 0) and split[1].ranks == (7, 5, 3, 1)
    assert split[1].rank_of(3) == 2
    assert comm_split([0, -1, 0, -1]) == {0: comm_split([0, -1, 0, -1])[0]} and comm_split([0, -1, 0])[0].ranks == (
        0,
        2,
    )
    g = new_group(8, [4, 5, 6, 7])
    assert g.size == 4 and g.rank_of(6) == 2


def test_the_ch14_ring_of_ranks_0_to_3_never_leaves_host_a():
    """Erratum (spec deep-learning.md §13): the text has the 4-rank ring cross nodes ("Green GPU 0",
    "Yellow GPU 1"), but with torchrun's numbering on 2 hosts x 4 GPUs ranks 0-3 are all on host A:
    every hop is NVLink. An 8-rank ring over both hosts crosses on rail 3 and back on rail 0."""
    layout = Layout(4)
    four = ring_all_reduce([0, 1, 2, 3], 1024)
    assert {network_of(m.src, m.dst, layout) for m in four.moves} == {"NVLink"}
    eight = build_schedule("all-reduce", "ring", range(8), 1024, layout)
    cross = {network_of(m.src, m.dst, layout) for m in eight.moves} - {"NVLink"}
    assert cross == {"rail 0", "rail 3"}
