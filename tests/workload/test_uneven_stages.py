"""Pipeline stages of unequal depth (Llama 3 405B: 126 blocks on 16 stages, one fewer on the first and the
last): each stage runs its own blocks, every block is on exactly one stage, the memory estimate follows."""

from __future__ import annotations

import pytest

from aifabric.catalog import gpu
from aifabric.models.transformer import Transformer
from aifabric.scenario import parse_scenario
from aifabric.workload import Plan, build_llm_training
from aifabric.workload.memory import memory_per_gpu, stage_layers, stage_params
from aifabric.workload.ops import Compute

MODEL = Transformer("t", 14, 512, 8, 2048, 1000)


def test_each_stage_runs_its_own_blocks():
    counts = (3, 4, 4, 3)
    plan = Plan(pp=4, global_batch_size=4, seq_len=128, layers_per_stage=counts)
    assert [len(stage_layers(MODEL, plan, s)) for s in range(4)] == list(counts)
    assert sorted(sum((stage_layers(MODEL, plan, s) for s in range(4)), [])) == list(range(MODEL.layers))
    w = build_llm_training(MODEL, plan, gpu("H100"))
    m = plan.micro_batches
    for stage, n in enumerate(counts):
        rank = plan.layout.rank(pp=stage)
        blocks = sum(1 for op in w.ranks[rank] if isinstance(op, Compute) and op.name == "fwd/attn")
        assert blocks == n * m
    # every parameter on exactly one stage (the tied embedding on the first and the last)
    total = sum(sum(stage_params(MODEL, plan, s)) for s in range(4))
    assert total == pytest.approx(MODEL.params + MODEL.embedding_params)


def test_the_deeper_stage_needs_more_memory():
    even = Plan(pp=2, global_batch_size=4, seq_len=128, layers_per_stage=(7, 7))
    skewed = Plan(pp=2, global_batch_size=4, seq_len=128, layers_per_stage=(3, 11))
    assert memory_per_gpu(MODEL, skewed, 1).total_bytes > memory_per_gpu(MODEL, even, 1).total_bytes


@pytest.mark.parametrize(
    "counts,message", [([3, 4, 4], "one count per"), ([3, 4, 4, 4], "summing to"), ([0, 7, 4, 3], "at least 1")]
)
def test_bad_stage_depths_are_refused_by_field(counts, message):
    from aifabric.errors import InputError

    d = {
        "name": "x",
        "cluster": {"gpu": "H100", "servers": 4, "gpus_per_server": 8, "nic_speed_gbps": 400},
        "fabric": {"topology": "rail-optimized", "spines": 4, "link_speed_gbps": 400},
        "workload": {
            "kind": "llm-training",
            "model": {"kind": "transformer", "layers": 14, "hidden": 512, "heads": 8, "vocab": 1000},
            "parallelism": {"tp": 8, "pp": 4, "dp": 1, "layers_per_stage": counts},
            "global_batch_size": 8,
            "seq_len": 128,
        },
    }
    with pytest.raises(InputError) as exc:
        parse_scenario(d)
    assert any(p.path == "workload.parallelism.layers_per_stage" and message in p.message for p in exc.value.problems)
