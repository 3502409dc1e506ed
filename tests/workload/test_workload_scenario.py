"""llm-training scenarios: validation names the field; the demo's data-parallel form stays valid."""

import copy

import pytest

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.errors import InputError
from aifabric.scenario.load import parse_scenario
from aifabric.simulate import build_workload, simulate

LLM = {
    "name": "llm",
    "seed": 1,
    "cluster": {"gpu": "H100", "servers": 4, "gpus_per_server": 4, "nic_speed_gbps": 400},
    "fabric": {"topology": "rail-optimized", "spines": 2, "link_speed_gbps": 400, "switch_radix": 64},
    "workload": {
        "kind": "llm-training",
        "model": "gpt3-1.3b",
        "parallelism": {"tp": 4, "pp": 2, "dp": 2, "schedule": "1f1b"},
        "global_batch_size": 8,
        "seq_len": 1024,
    },
}


def problems(data):
    with pytest.raises(InputError) as e:
        parse_scenario(data)
    return {p.path: p.message for p in e.value.problems}


def with_workload(**changes):
    d = copy.deepcopy(LLM)
    for k, v in changes.items():
        if k in ("tp", "pp", "dp", "cp", "ep", "schedule", "micro_batch_size", "micro_batches", "zero", "chunks"):
            d["workload"]["parallelism"][k] = v
        else:
            d["workload"][k] = v
    return d


def test_llm_scenario_is_valid_and_builds():
    s = parse_scenario(LLM)
    w = build_workload(s)
    assert w.world_size == 16
    assert "gpt3-1.3b" in w.description and "tp4 pp2 dp2" in w.description


def test_gpu_count_must_match_the_plan():
    p = problems(with_workload(dp=4))
    assert "4 x 2 x 4 x 1 = 32 must equal the cluster's 16 GPUs" in p["workload.parallelism"]


def test_tensor_parallel_must_stay_in_a_server():
    p = problems(with_workload(tp=8, pp=1, dp=2))
    assert "must divide the 4 GPUs per server" in p["workload.parallelism.tp"]


def test_batch_must_divide():
    p = problems(with_workload(global_batch_size=7))
    assert "dp x micro_batch_size = 2 x 1" in p["workload.global_batch_size"]
    p = problems(with_workload(micro_batches=3))
    assert "gives 4 micro-batches, not 3" in p["workload.parallelism.micro_batches"]


def test_layers_must_divide_over_stages():
    p = problems(with_workload(pp=4, dp=1, schedule="interleaved", chunks=4))  # 24 layers / 16 virtual stages
    assert "must divide the model's 24 layers" in p["workload.parallelism.pp"]


def test_sequence_longer_than_learned_positions():
    assert "learned positions for 2048 tokens" in problems(with_workload(seq_len=4096))["workload.seq_len"]


def test_unknown_model_and_dense_model_with_experts():
    d = with_workload()
    d["workload"]["model"] = "gpt-9"
    assert "unknown model 'gpt-9'" in problems(d)["workload.model.name"]
    assert "needs a mixture-of-experts model" in problems(with_workload(ep=2))["workload.parallelism.ep"]


def test_a_plan_that_does_not_fit_is_refused_with_the_numbers():
    d = copy.deepcopy(LLM)
    d["cluster"] = {"gpu": "H100", "servers": 2, "gpus_per_server": 8, "nic_speed_gbps": 400}
    d["workload"].update(model="llama3-70b", parallelism={"tp": 8, "pp": 1, "dp": 2}, global_batch_size=2, seq_len=4096)
    msg = problems(d)["workload.parallelism"]
    assert "does not fit GPU memory" in msg and "but a H100 has 80 GB" in msg
    assert "optimizer states" in msg
    d["workload"]["parallelism"] = {
        "tp": 8,
        "pp": 1,
        "dp": 2,
        "zero": 3,
        "recompute": "full",
        "sequence_parallel": True,
    }
    d["workload"]["global_batch_size"] = 2
    parse_scenario(d)  # fits with FSDP and full recomputation: 70.6 B x 16 bytes / 16 GPUs = 70.6 GB


def test_custom_transformer_dimensions():
    d = with_workload()
    d["workload"]["model"] = {"kind": "transformer", "layers": 4, "hidden": 512, "heads": 8, "vocab": 1000}
    s = parse_scenario(d)
    assert build_workload(s).params == 4 * (12 * 512**2 + 13 * 512) + 1000 * 512 + 2048 * 512 + 2 * 512
    d["workload"]["model"] = {"kind": "transformer", "layers": 4}
    assert "needs hidden, heads, vocab" in problems(d)["workload.model"]


def test_a_custom_transformer_describes_a_llama_or_a_long_learned_table():
    """A custom model states its norm, positions and output layer: described as Llama 2 7B is (RMSNorm, rotary, no
    biases, SwiGLU 11,008 wide, an output layer of its own) it has the zoo model's 6,738,415,616 parameters and
    runs rotary kernels; with learned positions a longer sequence needs a longer table, which the message says."""
    from aifabric.models.zoo import MODELS

    d = with_workload()
    llama = {"kind": "transformer", "layers": 32, "hidden": 4096, "heads": 32, "ffn_hidden": 11008, "vocab": 32000}
    llama.update(gated_mlp=True, bias=False, norm="rmsnorm", positions="rotary", tied_embeddings=False)
    d["workload"]["model"] = llama
    d["workload"]["memory_check"] = False
    w = build_workload(parse_scenario(d))
    assert w.params == MODELS["llama2-7b"].params == 6_738_415_616
    d["workload"]["model"] = {**llama, "positions": "learned", "max_seq_len": 1024}
    learned = build_workload(parse_scenario(d))
    assert learned.params == w.params + 1024 * 4096  # the table, and nothing else, differs
    # rotary embeddings of Q and K in every block, forward and backward, against one table add per micro-batch
    assert dict(w.compute_by_kind_s)["memory"] > dict(learned.compute_by_kind_s)["memory"]
    assert dict(w.compute_by_kind_s)["gemm"] == pytest.approx(dict(learned.compute_by_kind_s)["gemm"])
    gpt = {"kind": "transformer", "layers": 4, "hidden": 512, "heads": 8, "vocab": 1000}
    d["workload"].update(model=gpt, seq_len=4096)
    msg = problems(d)["workload.seq_len"]
    assert "learned positions for 2048 tokens" in msg and "max_seq_len" in msg and "rotary" in msg
    d["workload"]["model"] = {**gpt, "max_seq_len": 4096}
    assert build_workload(parse_scenario(d)).params == 4 * (12 * 512**2 + 13 * 512) + 1000 * 512 + 4096 * 512 + 1024
    d["workload"]["model"] = {**gpt, "positions": "rotary"}
    assert build_workload(parse_scenario(d)).params == 4 * (12 * 512**2 + 13 * 512) + 1000 * 512 + 1024
    d["workload"]["model"] = "gpt3-1.3b"  # a zoo model's table is its own: no field to raise
    assert "max_seq_len" not in problems(d)["workload.seq_len"]


def test_the_documented_custom_transformer_is_llama_3_8b():
    """docs/workload.md's custom-model example, read from the page, has Llama 3 8B's parameters."""
    from pathlib import Path

    import yaml

    from aifabric.models.zoo import MODELS

    page = (Path(__file__).resolve().parents[2] / "docs" / "workload.md").read_text(encoding="utf-8")
    block = page.split("A custom transformer states", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    d = with_workload()
    d["workload"]["model"] = yaml.safe_load(block)["model"]
    d["workload"]["memory_check"] = False
    assert build_workload(parse_scenario(d)).params == MODELS["llama3-8b"].params


def test_data_parallel_form_rejects_parallelism():
    d = copy.deepcopy(LLM)
    d["workload"] = {
        "kind": "data-parallel",
        "model": {"layer_widths": [784, 128, 10]},
        "global_batch_size": 16,
        "parallelism": {"tp": 2},
    }
    assert "only for kind: llm-training" in problems(d)["workload.parallelism"]


def test_validate_cli_exit_2(write_scenario, capsys):
    code = run_app(app, ["validate", str(write_scenario(with_workload(dp=4)))])
    assert code == 2
    assert "workload.parallelism" in capsys.readouterr().err


def test_llm_training_simulates_end_to_end():
    # a small plan through the whole chain: TP AllReduces on NVLink, pipeline sends and DP buckets on the fabric
    d = copy.deepcopy(LLM)
    d["workload"].update(
        model={"kind": "transformer", "layers": 4, "hidden": 512, "heads": 8, "vocab": 1000},
        global_batch_size=4,
        seq_len=256,
    )
    d["workload"]["parallelism"]["tp"] = 2
    d["workload"]["parallelism"]["dp"] = 4
    run = simulate(parse_scenario(d), engine="analytic")
    r = run.results
    assert r.complete and r.iteration_time_s > r.compute_time_s > 0
    assert r.scale_up_bytes > 0 and r.scale_out_bytes > 0
    # the bytes the engine moved, per dimension and network, are those the workload summary predicts
    from aifabric.analysis import bytes_by_dimension, flows
    from aifabric.workload.traffic import traffic_summary

    moved = bytes_by_dimension(flows(run.graph, run.fabric, run.timeline))
    predicted = traffic_summary(run.workload, run.fabric.gpus_per_server)
    assert set(moved) == {"tp", "pp", "dp"}
    for dim, m in moved.items():
        assert m["scale_up_bytes"] == pytest.approx(predicted[dim].scale_up_bytes, rel=1e-6)
        assert m["scale_out_bytes"] == pytest.approx(predicted[dim].scale_out_bytes, rel=1e-6)


def test_default_gradient_bucket_is_megatron_cores(tmp_path):
    """No bucket_mb: Megatron-core's max(40 M, 1 M x dp) parameters of gradients; given: as given (MiB)."""
    from aifabric.scenario import demo_scenario
    from aifabric.workload.from_spec import megatron_bucket_mb, resolve_plan

    s = demo_scenario()
    assert s.workload.parallelism.bucket_mb is None
    _, plan, problems = resolve_plan(s)
    # dp 2: the 40 M floor; bf16 training reduces fp32 gradients (Megatron-LM), 4 B each
    assert not problems and plan.grad_precision == "fp32" and plan.bucket_mb == pytest.approx(40e6 * 4 / 2**20)
    assert megatron_bucket_mb(128, "bf16") == pytest.approx(128e6 * 2 / 2**20)  # 1 M per data-parallel rank
    data = s.model_dump(mode="json", exclude_unset=True)
    data["workload"]["parallelism"]["bucket_mb"] = 25
    _, plan, _ = resolve_plan(type(s).model_validate(data))
    assert plan.bucket_mb == 25


def test_fp8_recipe_is_checked_against_the_precision_and_the_gpu():
    p = problems(with_workload(precision="bf16", fp8_recipe="current"))
    assert "applies to precision: fp8" in p["workload.fp8_recipe"]
    p = problems(with_workload(precision="fp8", fp8_recipe="mxfp8"))  # the H100 has no MXFP8
    assert "Blackwell" in p["workload.fp8_recipe"]
    p = problems(with_workload(precision="fp8", fp8_recipe="hybrid"))
    assert "workload.fp8_recipe" in p
    parse_scenario(with_workload(precision="fp8", fp8_recipe="current"))


def test_current_scaling_all_reduces_each_sequence_parallel_inputs_amax():
    # Transformer Engine: a column-parallel layer's input (forward) and a row-parallel layer's output gradient
    # (backward) are quantized on each shard and gathered in FP8; under current scaling their amax is first
    # all-reduced over the tensor-parallel group: four 4-byte AllReduces per block and micro-batch
    from aifabric.workload.ops import Collective

    def amax_ops(recipe, sp):
        d = with_workload(precision="fp8", fp8_recipe=recipe)
        d["workload"]["parallelism"]["sequence_parallel"] = sp
        w = build_workload(parse_scenario(d))
        ops = [op for op in w.ranks[0] if isinstance(op, Collective) and op.label == "FP8 amax"]
        return ops, w

    ops, w = amax_ops("current", True)
    model_layers = 24  # gpt3-1.3b over pp 2: 12 blocks on rank 0's stage, micro-batches = 8 / (2 x 1)
    micro_batches = 4
    assert len(ops) == 4 * (model_layers // 2) * micro_batches
    assert all(op.op == "all-reduce" and op.size_bytes == 4 and len(op.group) == 4 and op.blocking for op in ops)
    assert amax_ops("delayed", True)[0] == [] and amax_ops("current", False)[0] == []
