"""Without overlap_grad_reduce, Megatron-LM reduces the gradient buckets after the whole pipeline schedule
(finish_grad_sync): a stage sends its last activation gradients upstream before any bucket's all-reduce.
With overlap, buckets are launched during the backward pass, on their own stream."""

from __future__ import annotations

import pytest

from aifabric import load_scenario
from aifabric.scenario import ch14_scenario
from aifabric.simulate import build_workload
from aifabric.workload.ops import Collective, Compute, Send


def _workload(overlap: bool, schedule: str = "1f1b"):
    s = ch14_scenario().model_dump(mode="json", exclude_unset=True)
    s["cluster"].update(servers=4, gpus_per_server=8)
    par = {
        "tp": 4,
        "pp": 4,
        "dp": 2,
        "micro_batch_size": 1,
        "overlap_grad_reduce": overlap,
        "bucket_mb": 8,
        "schedule": schedule,
    }
    if schedule == "interleaved":
        par["chunks"] = 2
    s["workload"] = {
        "kind": "llm-training",
        "model": "gpt3-1.3b",
        "global_batch_size": 16,
        "seq_len": 512,
        "parallelism": par,
        "precision": "bf16",
    }
    return build_workload(load_scenario(s))


def _positions(ops):
    buckets = [i for i, op in enumerate(ops) if isinstance(op, Collective) and "-bucket" in op.key]
    backward = [
        i for i, op in enumerate(ops) if (isinstance(op, Compute) and op.name.startswith("bwd")) or isinstance(op, Send)
    ]
    return buckets, backward


@pytest.mark.parametrize("schedule", ["1f1b", "interleaved"])
def test_without_overlap_buckets_follow_the_whole_schedule(schedule):
    w = _workload(False, schedule)
    for r in range(w.world_size):
        buckets, backward = _positions(w.ranks[r])
        assert buckets, r
        assert min(buckets) > max(backward), f"rank {r}: a bucket's all-reduce inside the schedule"
        assert all(w.ranks[r][i].blocking for i in buckets)


def test_with_overlap_buckets_start_during_the_backward():
    w = _workload(True)
    inside = 0
    for r in range(w.world_size):
        buckets, backward = _positions(w.ranks[r])
        assert all(not w.ranks[r][i].blocking for i in buckets)
        inside += any(i < max(backward) for i in buckets)
    assert inside > 0
