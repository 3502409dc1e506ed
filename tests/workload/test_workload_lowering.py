"""Lowering of the new op kinds: pipeline Send/Recv as one transfer, non-blocking collectives and Wait."""

import pytest

from aifabric.engines import lower, run
from aifabric.engines.taskgraph import COMPUTE, TRANSFER
from aifabric.scenario import ch14_scenario
from aifabric.simulate import build_fabric
from aifabric.workload.ops import Collective, Compute, Recv, Send, Wait, Workload


@pytest.fixture(scope="module")
def fabric_router():
    return build_fabric(ch14_scenario())  # 2 servers x 4 H100, rail-optimized


def _workload(ranks):
    return Workload("t", ranks + [[] for _ in range(8 - len(ranks))], params=0, iterations=1, flops_per_iteration=0)


def test_send_recv_is_one_transfer_on_the_routed_path(fabric_router):
    fabric, router = fabric_router
    size = 50_000_000
    ops = [[] for _ in range(8)]
    ops[1] = [Compute("fwd", 0, 1e-3), Send("act", 1, 5, size)]  # server 0 -> server 1, same rail
    ops[5] = [Recv("act", 1, 5, size), Compute("fwd", 0, 1e-3)]
    g = lower(_workload(ops), fabric, router)
    transfers = [t for t in range(len(g)) if g.kind[t] == TRANSFER]
    assert len(transfers) == 1
    t = transfers[0]
    assert (g.rank[t], g.dst[t], g.size_bytes[t]) == (1, 5, size)
    assert g.route[t] == router.route(1, 5).links
    tl = run(g, fabric, "flow")
    recv_compute = next(i for i in range(len(g)) if g.kind[i] == COMPUTE and g.rank[i] == 5)
    assert tl.start_s[t] == pytest.approx(1e-3)  # sent when the sender's forward ends
    assert tl.start_s[recv_compute] == pytest.approx(tl.end_s[t])  # the receiver waits for the data
    rate = min(fabric.links[li].rate_bytes_per_s for li in g.route[t])  # the achievable payload rate
    assert tl.end_s[t] - tl.start_s[t] == pytest.approx(size / rate + router.route(1, 5).latency_s, rel=1e-6)


def test_recv_before_send_in_program_order_does_not_deadlock(fabric_router):
    fabric, router = fabric_router
    ops = [[] for _ in range(8)]
    ops[0] = [Recv("b", 1, 0, 1000), Send("a", 0, 1, 1000)]
    ops[1] = [Send("b", 1, 0, 1000), Recv("a", 0, 1, 1000)]
    g = lower(_workload(ops), fabric, router)
    assert sum(1 for k in g.kind if k == TRANSFER) == 2


def test_non_blocking_collective_overlaps_compute_until_wait(fabric_router):
    fabric, router = fabric_router
    group = tuple(range(8))
    ar = Collective("bucket0", "all-reduce", group, 100_000_000, 2, "gradients", blocking=False, stream="dp", dim="dp")
    ops = [
        [Compute("bwd-a", 0, 1e-3), ar, Compute("bwd-b", 0, 1e-3), Wait("dp"), Compute("optimizer", 0, 1e-4)]
        for _ in range(8)
    ]
    g = lower(_workload(ops), fabric, router)
    tl = run(g, fabric, "flow")
    by_name = {(g.rank[i], g.name[i]): i for i in range(len(g)) if g.kind[i] == COMPUTE}
    coll = [i for i in range(len(g)) if g.kind[i] == TRANSFER]
    coll_start, coll_end = min(tl.start_s[coll]), max(tl.end_s[coll])
    assert coll_start == pytest.approx(1e-3)
    assert tl.start_s[by_name[(0, "bwd-b")]] == pytest.approx(1e-3)  # runs while the AllReduce is in flight
    assert coll_end > 2e-3  # 100 MB over 400 Gb/s takes longer than the 1 ms of compute it overlaps
    assert tl.start_s[by_name[(0, "optimizer")]] == pytest.approx(coll_end)


def test_collectives_of_one_stream_run_one_after_another(fabric_router):
    fabric, router = fabric_router
    group = tuple(range(8))
    a = Collective("b0", "all-reduce", group, 10_000_000, 2, blocking=False, stream="dp")
    b = Collective("b1", "all-reduce", group, 10_000_000, 2, blocking=False, stream="dp")
    ops = [[a, b, Wait("dp")] for _ in range(8)]
    g = lower(_workload(ops), fabric, router)
    tl = run(g, fabric, "flow")
    # as a CUDA stream: on each rank, the second collective's kernel starts when its first one has finished
    for r in range(8):
        first = [t for t in g.collectives[0].tasks if r in (g.rank[t], g.dst[t])]
        second = [t for t in g.collectives[1].tasks if g.rank[t] == r]
        assert min(tl.start_s[second]) >= max(tl.end_s[first]) - 1e-12


@pytest.mark.parametrize("plan", [(2, 2, 2, "1f1b", 1), (2, 4, 1, "interleaved", 2)])
def test_the_blocked_forms_shared_pipeline_ops_are_each_ranks_own_sends_and_receives(plan):
    """`Workload.blocked` keeps a stage's pipeline sends and receives once (StageTransfer) and the lowering aims
    them with `pipeline_peers`; `Workload.ranks` spells them out per rank. Both say the same: at every position, the
    same key, sender, receiver and bytes; and the task graphs lowered from the two forms move the same transfers."""
    from aifabric.scenario.load import load_scenario
    from aifabric.simulate import build_workload
    from aifabric.workload.ops import Block, StageTransfer

    tp, pp, dp, schedule, chunks = plan
    s = load_scenario(
        {
            "name": "stage-transfers",
            "cluster": {"gpu": "H100", "servers": tp * pp * dp // 4, "gpus_per_server": 4},
            "fabric": {"topology": "rail-optimized", "servers_per_segment": 2},
            "workload": {
                "kind": "llm-training",
                "model": {"kind": "transformer", "layers": 8, "hidden": 256, "heads": 4, "vocab": 1024},
                "parallelism": {"tp": tp, "pp": pp, "dp": dp, "schedule": schedule, "chunks": chunks},
                "global_batch_size": 8 * dp,
                "seq_len": 128,
            },
        }
    )
    w = build_workload(s)
    assert w.blocked is not None and w.pipeline_peers is not None
    seen = 0
    for r in range(w.world_size):
        own = [op for op in w.ranks[r] if isinstance(op, (Send, Recv))]
        shared = [op for op in w.blocked[r] if isinstance(op, StageTransfer)]
        assert not any(isinstance(op, Block) for op in own)
        peers = w.pipeline_peers[r]
        spelled = []
        for op in shared:
            peer = peers[op.vstage % len(peers)]
            src, dst = (r, peer) if op.kind == "send" else (peer, r)
            spelled.append((type(op).__name__, f"{op.key}@{src}", src, dst, op.size_bytes))
        assert [(k, key, a, b, n) for k, key, a, b, n in spelled] == [
            ("StageTransfer", op.key, op.src, op.dst, op.size_bytes) for op in own
        ]
        seen += len(own)
    assert seen > 0
    fabric, router = build_fabric(s)
    from_blocked = lower(w, fabric, router, **s.lowering_options())
    transfers = sorted(
        (from_blocked.name[t], from_blocked.rank[t], from_blocked.dst[t], from_blocked.size_bytes[t])
        for t in range(len(from_blocked))
        if from_blocked.dim[t] == "pp"
    )
    assert len(transfers) == seen // 2  # each send once, its receive waits for it
    assert all(name.count("@") == 1 for name, *_ in transfers)
