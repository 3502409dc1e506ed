"""The trace: every collective and send/recv of every rank, consistent across ranks, with the sizes the
model implies; and for data-parallel FNN, exactly the operations the workload layer predicts."""

from collections import defaultdict

import pytest

pytest.importorskip("torch")

from aifabric.scenario.load import parse_scenario
from aifabric.simulate import build_workload
from aifabric.train.tracer import read_trace
from aifabric.workload.ops import Collective

FIELDS = {
    "rank": int,
    "seq": int,
    "op": str,
    "group": list,
    "dtype": str,
    "elements": int,
    "bytes": int,
    "tag": str,
    "step": int,
    "start_s": float,
    "end_s": float,
}


def test_3d_trace_is_complete_and_consistent(trained):
    par, _ = trained("fnn", dp=2, tp=2, pp=2, schedule="1f1b")
    t = read_trace(par.trace_path)
    assert t.world_size == 8 and sorted(t.comms) == list(range(8))
    for events in t.comms.values():
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        for e in events:
            assert all(isinstance(e[k], v) for k, v in FIELDS.items()), e
            assert e["end_s"] >= e["start_s"] and e["bytes"] == e["elements"] * 4
    # every member of a group sees the same sequence of collectives on it
    per_group = defaultdict(dict)
    for r, events in t.comms.items():
        per_group_r = defaultdict(list)
        for e in events:
            if e["op"] not in ("send", "recv"):
                per_group_r[tuple(e["group"])].append((e["op"], e["bytes"], e["tag"]))
        for g, seq in per_group_r.items():
            assert r in g
            per_group[g][r] = seq
    for g, by_rank in per_group.items():
        assert sorted(by_rank) == list(g)
        assert len({tuple(s) for s in by_rank.values()}) == 1, g
    # every send has its receive, same size, same order
    sent, received = defaultdict(list), defaultdict(list)
    for events in t.comms.values():
        for e in events:
            if e["op"] == "send":
                sent[tuple(e["group"])].append(e["bytes"])
            elif e["op"] == "recv":
                received[tuple(e["group"])].append(e["bytes"])
    assert sent == received and set(sent) == {(0, 2), (2, 0), (1, 3), (3, 1), (4, 6), (6, 4), (5, 7), (7, 5)}
    # sizes from the model: stage 0 holds half of Linear(64, 128) per TP rank (4160 floats), Broadcast once
    # to its replica; a micro-batch is 32 / dp 2 / 2 micro-batches = 8 samples of 128 activations
    bcast = [e for e in t.comms[0] if e["op"] == "broadcast"]
    assert [(tuple(e["group"]), e["bytes"]) for e in bcast] == [((0, 4), (64 * 128 + 128) // 2 * 4)]
    acts = {e["bytes"] for e in t.comms[0] if e["tag"] == "pp/act"}
    assert acts == {8 * 128 * 4}
    ops = {e["op"] for ev in t.comms.values() for e in ev}
    assert ops == {"broadcast", "all-gather", "all-reduce", "send", "recv"}


def _dp_scenario(ch14_data, world, steps):
    d = dict(ch14_data)
    d["cluster"] = {**d["cluster"], "servers": 1, "gpus_per_server": world}
    d["workload"] = {
        **d["workload"],
        "model": {"kind": "feed-forward", "layer_widths": [64, 128, 10]},
        "global_batch_size": 32,
        "precision": "fp32",
        "iterations": steps,
    }
    return parse_scenario(d)


def test_data_parallel_fnn_trace_equals_the_workload_model(trained, ch14_data):
    steps = 2
    par, _ = trained("fnn", steps=steps, dp=2)
    predicted = build_workload(_dp_scenario(ch14_data, 2, steps))
    t = read_trace(par.trace_path)
    for r in range(2):
        want = [(op.op, op.group, op.size_bytes) for op in predicted.ranks[r] if isinstance(op, Collective)]
        # the workload layer models training iterations; the one-time Broadcast of the initial weights
        # (Ch. 14) happens before them and is left out of the comparison
        got = [(e["op"], tuple(e["group"]), e["bytes"]) for e in t.comms[r] if e["tag"] != "init/broadcast"]
        assert got == want and len(got) == steps


def test_small_buckets_split_the_same_bytes(trained):
    big, _ = trained("fnn", steps=1, dp=2)
    small, _ = trained("fnn", steps=1, dp=2, bucket_bytes=4096)

    def buckets(run):
        return [e["bytes"] for e in read_trace(run.trace_path).comms[0] if e["tag"].startswith("grad-bucket")]

    assert len(buckets(big)) == 1
    assert sum(buckets(small)) == sum(buckets(big)) == (64 * 128 + 128 + 128 * 10 + 10) * 4
    # DDP's rule (reducer.cpp): whole parameters in reverse order, a bucket closed once it holds >= the cap:
    # [bias 10 + weight 128 x 10] reaches 4 KiB, then [bias 128 + weight 64 x 128]
    assert buckets(small) == [(10 + 1280) * 4, (128 + 8192) * 4]
    # bucketing changes nothing in the result
    assert small.losses == pytest.approx(big.losses, abs=1e-6)


def test_overhead_run_traces_every_other_step(trained):
    from aifabric.train.summary import tracing_overhead

    run, _ = trained("fnn", steps=5, dp=2, alternate_trace=True)
    t = read_trace(run.trace_path)
    assert {e["step"] for ev in t.comms.values() for e in ev if e["tag"] != "init/broadcast"} == {0, 2, 4}
    ov = tracing_overhead(run)
    assert ov["steps_each"] == 2 and ov["untraced_step_s"] > 0 and ov["tracer_cost_per_op_s"] > 0
    assert ov["ops_per_step"] == pytest.approx((1 + 5) / 5)  # the Broadcast + one bucket per step
