"""Trace file -> Workload (no torch needed): keys agree across ranks, sends meet receives, gaps become
compute, and a trace larger than the cluster is refused naming the field."""

import json

import pytest

from aifabric.errors import InputError
from aifabric.train.replay import check_fits, trace_to_workload
from aifabric.train.tracer import read_trace
from aifabric.workload.ops import Collective, Compute, Recv, Send, Wait


def _comm(rank, seq, op, group, nbytes, tag, t0, t1, async_op=False):
    return {
        "kind": "comm",
        "rank": rank,
        "seq": seq,
        "op": op,
        "group": group,
        "dtype": "float32",
        "elements": nbytes // 4,
        "bytes": nbytes,
        "tag": tag,
        "step": 0,
        "start_s": t0,
        "end_s": t1,
        "async_op": async_op,
    }


def _write(tmp_path, records):
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def two_stage_trace(tmp_path):
    meta = {"world_size": 2, "layout": {"dp": 1, "tp": 1, "pp": 2}, "config": {"model": "fnn"}}
    recs = [{"kind": "meta", "rank": r, **meta} for r in (0, 1)]
    recs += [
        {"kind": "step", "rank": 0, "step": 0, "start_s": 10.0, "end_s": 10.010, "loss": None},
        _comm(0, 1, "send", [0, 1], 400, "pp/act", 10.002, 10.003),
        _comm(0, 2, "recv", [1, 0], 400, "pp/grad", 10.006, 10.007),
        _comm(0, 3, "all-reduce", [0, 1], 800, "grad-bucket0", 10.008, 10.009, async_op=True),
        {"kind": "step", "rank": 1, "step": 0, "start_s": 10.0, "end_s": 10.010, "loss": 2.3},
        _comm(1, 1, "recv", [0, 1], 400, "pp/act", 10.001, 10.003),
        _comm(1, 2, "send", [1, 0], 400, "pp/grad", 10.005, 10.006),
        _comm(1, 3, "all-reduce", [0, 1], 800, "grad-bucket0", 10.0085, 10.009, async_op=True),
    ]
    return _write(tmp_path, recs)


def test_sends_meet_receives_and_collectives_share_keys(tmp_path):
    w = trace_to_workload(read_trace(two_stage_trace(tmp_path)))
    assert w.world_size == 2
    sends = {op.key: op for ops in w.ranks for op in ops if isinstance(op, Send)}
    recvs = {op.key: op for ops in w.ranks for op in ops if isinstance(op, Recv)}
    assert sends.keys() == recvs.keys() and len(sends) == 2
    assert all(
        (sends[k].src, sends[k].dst, sends[k].size_bytes) == (recvs[k].src, recvs[k].dst, recvs[k].size_bytes)
        for k in sends
    )
    colls = [[op for op in ops if isinstance(op, Collective)] for ops in w.ranks]
    assert [c.key for c in colls[0]] == [c.key for c in colls[1]]
    assert colls[0][0].size_bytes == 800 and colls[0][0].dim == "dp" and not colls[0][0].blocking
    # the rank waited for its non-blocking AllReduce where it ended
    assert all(any(isinstance(op, Wait) for op in ops) for ops in w.ranks)


def test_measured_gaps_become_compute(tmp_path):
    w = trace_to_workload(read_trace(two_stage_trace(tmp_path)))
    comp0 = [op.duration_s for op in w.ranks[0] if isinstance(op, Compute)]
    # rank 0: 2 ms before its send, 3 ms before the recv, 1 ms before launching the AllReduce, 1 ms of
    # backward overlapping it until the wait, 1 ms from the wait to the end of the step (optimizer)
    assert comp0 == pytest.approx([0.002, 0.003, 0.001, 0.001, 0.001])
    assert not any(
        isinstance(op, Compute) for op in trace_to_workload(read_trace(tmp_path / "trace.jsonl"), "zero").ranks[0]
    )


def test_trace_larger_than_cluster_names_the_field(tmp_path):
    t = read_trace(two_stage_trace(tmp_path))
    check_fits(t, 2)
    with pytest.raises(InputError) as exc:
        check_fits(t, 1)
    assert exc.value.problems[0].path == "cluster"


def test_bad_trace_line_is_an_input_error(tmp_path):
    p = tmp_path / "trace.jsonl"
    p.write_text('{"kind": "comm", "rank": 0, "op": "teleport"}\n')
    with pytest.raises(InputError, match="line 1"):
        read_trace(p)
    with pytest.raises(InputError, match="no such trace"):
        read_trace(tmp_path / "missing.jsonl")
