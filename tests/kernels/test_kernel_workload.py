"""The kernel model inside the workloads: LLM training ops timed kernel by kernel, the `compute_efficiency`
override, hardware vs model FLOPs, Megatron's pipeline scatter/gather, the data-parallel optimizer step."""

from __future__ import annotations

import copy

import pytest

from aifabric.catalog import gpu
from aifabric.kernels.model import KINDS
from aifabric.models.transformer import Transformer
from aifabric.scenario.load import parse_scenario
from aifabric.simulate import build_workload, simulate
from aifabric.workload.compute import iteration_flops
from aifabric.workload.from_spec import resolve_plan
from aifabric.workload.llm import build_llm_training
from aifabric.workload.ops import Collective, Compute, Recv, Send
from aifabric.workload.plan import Plan

H100 = gpu("H100")
# a small GPT (learned positions, tied embeddings, GeLU MLP) so that every plan builds in milliseconds
GPT = Transformer("tiny-gpt", 4, 512, 8, 2048, 4096, max_seq_len=1024)
SEQ, BATCH = 512, 4


def plan(**kw) -> Plan:
    base = {"tp": 2, "pp": 2, "dp": 1, "micro_batch_size": 1, "global_batch_size": BATCH, "seq_len": SEQ}
    return Plan(**{**base, **kw})


def build(**kw):
    return build_llm_training(GPT, plan(**kw), H100)


def computes(ops):
    return [op for op in ops if isinstance(op, Compute)]


PLANS = [
    {},
    {"tp": 1, "pp": 1, "dp": 4},
    {"tp": 1, "pp": 1, "dp": 2, "zero": 1},
    {"sequence_parallel": True, "recompute": "selective"},
    {"recompute": "full", "attention": "unfused"},
    {"pp": 1, "dp": 2, "schedule": "gpipe"},
]


@pytest.mark.parametrize("kw", PLANS)
def test_each_compute_ops_kernels_sum_to_its_duration(kw):
    w = build(**kw)
    for ops in w.ranks:
        for op in computes(ops):
            assert op.kernels, op.name
            assert {kind for kind, _ in op.kernels} <= set(KINDS), op.name
            assert sum(s for _, s in op.kernels) == pytest.approx(op.duration_s, rel=1e-12), op.name
    # the report's compute time by kind is that of the rank that computes longest, per iteration
    longest = max(sum(op.duration_s for op in computes(ops)) for ops in w.ranks) / w.iterations
    assert sum(s for _, s in w.compute_by_kind_s) == pytest.approx(longest, rel=1e-12)


@pytest.mark.parametrize("kw", PLANS)
def test_compute_efficiency_reproduces_flops_over_peak(kw):
    # the override: every op takes its FLOPs at 45 % of the dense bf16 peak, as before the kernel model
    eff = 0.45
    w = build(compute_efficiency=eff, **kw)
    peak = H100.peak_flops("bf16")
    for ops in w.ranks:
        for op in computes(ops):
            assert op.duration_s == op.flops / (peak * eff), op.name
            assert op.kernels == (("all", op.duration_s),)
            assert "embedding" not in op.name  # no FLOPs, so no op, as before
    # the same ops with the same FLOPs as the kernel model's, less its embedding ops
    kernels = build(**kw)
    for a, b in zip(w.ranks, kernels.ranks, strict=True):
        assert [(op.name, op.flops) for op in computes(a)] == [
            (op.name, op.flops) for op in computes(b) if "embedding" not in op.name
        ]


@pytest.mark.parametrize("zero,shard", [(0, 1), (1, 2)])
def test_compute_efficiency_optimizer_is_12_flop_per_parameter(zero, shard):
    # Adam, ~12 FLOP per parameter it updates (ZeRO paper's convention): on one GPU holding the whole
    # model (tp = pp = 1) all of it, or with ZeRO-1 over dp = 2 half of it
    eff = 0.45
    w = build(tp=1, pp=1, dp=2, zero=zero, compute_efficiency=eff)
    for ops in w.ranks:
        (opt,) = [op for op in computes(ops) if op.name == "optimizer"]
        assert opt.flops == pytest.approx(12.0 * GPT.params / shard, rel=1e-12)
        assert opt.duration_s == pytest.approx(12.0 * GPT.params / shard / (H100.peak_flops("bf16") * eff), rel=1e-12)


def test_kernel_model_optimizer_is_memory_bound():
    # optimizer_kernels: 38 B per updated parameter + 4 B per held one, over the achievable HBM bandwidth
    w = build(tp=1, pp=1, dp=2, zero=1)
    hbm = H100.hbm_bandwidth_gBps * 1e9 * H100.hbm_efficiency
    (opt,) = [op for op in computes(w.ranks[0]) if op.name == "optimizer"]
    assert dict(opt.kernels)["optimizer"] == pytest.approx((38 * GPT.params / 2 + 4 * GPT.params) / hbm, rel=1e-12)


@pytest.mark.parametrize("extra", [{}, {"sequence_parallel": True}, {"attention": "unfused"}])
def test_hardware_flops_include_recomputation_model_flops_do_not(extra):
    # Korthikanti et al. 2022, Appendix A: hardware FLOPs count what the GPUs execute, recomputation
    # included (full: the block's forward again; selective: the attention core Q·K^T and P·V); model FLOPs
    # (MFU's numerator) do not
    w = {mode: build(recompute=mode, **extra) for mode in ("none", "selective", "full")}
    tokens = BATCH * SEQ
    forward = (
        GPT.layers
        * (GPT.attention_matmul_flops_per_token() + GPT.attention_core_flops_per_token(SEQ) + GPT.mlp_flops_per_token())
        * tokens
    )
    core = GPT.layers * GPT.attention_core_flops_per_token(SEQ) * tokens
    hw = {mode: wl.hardware_flops_per_iteration for mode, wl in w.items()}
    assert hw["full"] > hw["selective"] > hw["none"]
    assert hw["full"] - hw["none"] == pytest.approx(forward, rel=1e-9)
    assert hw["selective"] - hw["none"] == pytest.approx(core, rel=1e-9)
    for wl in w.values():
        assert wl.flops_per_iteration == pytest.approx(iteration_flops(GPT, BATCH, SEQ), rel=1e-12)


SCENARIO = {
    "name": "tiny",
    "seed": 1,
    "cluster": {"gpu": "H100", "servers": 1, "gpus_per_server": 4, "nic_speed_gbps": 400},
    "fabric": {"topology": "single-switch", "link_speed_gbps": 400, "switch_radix": 64},
    "workload": {
        "kind": "llm-training",
        "model": {"kind": "transformer", "layers": 4, "hidden": 512, "heads": 8, "vocab": 4096},
        "parallelism": {"tp": 2, "pp": 2, "dp": 1},
        "global_batch_size": BATCH,
        "seq_len": SEQ,
    },
}


def scenario(**parallelism):
    d = copy.deepcopy(SCENARIO)
    d["workload"]["parallelism"].update(parallelism)
    return parse_scenario(d)


def test_mfu_is_unchanged_by_recomputation_flops():
    # MFU = model FLOPs / (time x GPUs x peak): full recomputation makes the step longer but adds nothing to
    # the numerator; HFU's numerator grows by the recomputed forward
    runs = {mode: simulate(scenario(recompute=mode)) for mode in ("none", "full")}
    peak, world = H100.peak_flops("bf16"), 4
    for run in runs.values():
        r, w = run.results, run.workload
        assert r.mfu * r.iteration_time_s * world * peak == pytest.approx(w.flops_per_iteration, rel=1e-9)
        assert r.hfu * r.iteration_time_s * world * peak == pytest.approx(w.hardware_flops_per_iteration, rel=1e-9)
        assert r.model_flops_per_gpu_s == pytest.approx(r.mfu * peak, rel=1e-9)
        assert r.hardware_flops_per_gpu_s == pytest.approx(r.hfu * peak, rel=1e-9)
    none, full = runs["none"].results, runs["full"].results
    assert runs["none"].workload.flops_per_iteration == runs["full"].workload.flops_per_iteration
    assert full.iteration_time_s > none.iteration_time_s and full.mfu < none.mfu
    assert full.hfu / full.mfu > none.hfu / none.mfu


# ---- Megatron's pipeline scatter/gather -----------------------------------------------------------


def p2p(ops):
    return [op for op in ops if isinstance(op, (Send, Recv))]


def test_scatter_gather_sends_a_tp_slice_and_all_gathers_it():
    # Megatron-LM (p2p_communication with scatter_gather_tensors_in_pipeline): with tp > 1 and no sequence
    # parallelism the tp ranks hold the same activation; each sends 1/tp of it to its peer of the next
    # stage, and the receivers all-gather the slices over their tensor-parallel group
    plain, sg = build(pipeline_scatter_gather=False), build(pipeline_scatter_gather=True)
    activation_bytes = 1 * SEQ * GPT.hidden * 2  # b x s x h, bf16
    layout = plan().layout
    gathers = 0
    for rank, (a, b) in enumerate(zip(plain.ranks, sg.ranks, strict=True)):
        pa, pb = p2p(a), p2p(b)
        assert pa and [type(op) for op in pa] == [type(op) for op in pb]
        for x, y in zip(pa, pb):
            assert x.size_bytes == activation_bytes
            assert y.size_bytes == activation_bytes // 2
        for i, op in enumerate(b):
            if isinstance(op, Recv):
                nxt = b[i + 1]
                assert isinstance(nxt, Collective) and nxt.op == "all-gather" and nxt.dim == "tp"
                assert nxt.group == layout.group(rank, "tp")
                assert nxt.size_bytes == activation_bytes  # the whole activation after the gather
                gathers += 1
        assert not any(isinstance(op, Collective) and op.label.startswith("pipeline") for op in a)
    assert gathers == sum(isinstance(op, Recv) for ops in sg.ranks for op in ops) > 0


def test_scenario_default_scatter_gather_only_without_sequence_parallelism():
    # the scenario's default follows Megatron-LM: on when tp > 1 and no sequence parallelism; with sequence
    # parallelism the activation is already split along the sequence, sent as is, and not gathered
    _, on, _ = resolve_plan(scenario())
    _, off, _ = resolve_plan(scenario(sequence_parallel=True))
    assert on.pipeline_scatter_gather and not off.pipeline_scatter_gather
    w = build_workload(scenario(sequence_parallel=True))
    sliced = 1 * SEQ * GPT.hidden * 2 // 2  # b x s/tp x h, bf16
    assert all(op.size_bytes == sliced for ops in w.ranks for op in p2p(ops))
    assert not any(isinstance(op, Collective) and op.label.startswith("pipeline") for ops in w.ranks for op in ops)


def test_plan_with_sequence_parallelism_never_gathers_pipeline_tensors():
    w = build(sequence_parallel=True, pipeline_scatter_gather=True)
    assert not any(isinstance(op, Collective) and op.label.startswith("pipeline") for ops in w.ranks for op in ops)


# ---- data parallel ---------------------------------------------------------------------------------


def test_data_parallel_optimizer_step_only_with_the_kernel_model(ch14_data):
    # compute_efficiency: forward and backward at that fraction of the peak, no optimizer op (the form this
    # workload had before the kernel model); kernel model: an optimizer step after the AllReduce
    eff = 0.5
    ch14_data["workload"]["compute_efficiency"] = eff
    old = build_workload(parse_scenario(ch14_data))
    peak = H100.peak_flops("bf16")
    ops = computes(old.ranks[0])
    assert [op.name for op in ops] == ["it0/forward", "it0/backward"]
    assert all(op.duration_s == op.flops / (peak * eff) for op in ops)

    del ch14_data["workload"]["compute_efficiency"]
    new = build_workload(parse_scenario(ch14_data))
    steps = [op.name if isinstance(op, Compute) else op.key for op in new.ranks[0]]
    assert steps == ["it0/forward", "it0/backward", "it0/grad-allreduce", "it0/optimizer"]
    opt = new.ranks[0][-1]
    widths = ch14_data["workload"]["model"]["layer_widths"]
    params = sum(a * b + b for a, b in zip(widths[:-1], widths[1:]))
    assert opt.flops == 12.0 * params
    hbm = H100.hbm_bandwidth_gBps * 1e9 * H100.hbm_efficiency
    assert dict(opt.kernels)["optimizer"] == pytest.approx(42.0 * params / hbm, rel=1e-12)
    for op in computes(new.ranks[0]):
        assert sum(s for _, s in op.kernels) == pytest.approx(op.duration_s, rel=1e-12)


def test_fp16_optimizer_unscales_the_gradients_bf16_does_not():
    # fp16 keeps a loss scaler: before Adam each updated fp32 gradient is unscaled and checked for inf/NaN
    # (read + write, 8 B per parameter); bf16 has no scaler (Megatron-LM's optimizer), so no such pass
    hbm = H100.hbm_bandwidth_gBps * 1e9 * H100.hbm_efficiency
    times = {}
    for precision in ("bf16", "fp16"):
        w = build(tp=1, pp=1, dp=2, zero=1, precision=precision)
        (opt,) = [op for op in computes(w.ranks[0]) if op.name == "optimizer"]
        times[precision] = dict(opt.kernels)["optimizer"]
    assert times["fp16"] - times["bf16"] == pytest.approx(8 * GPT.params / 2 / hbm, rel=1e-6)
