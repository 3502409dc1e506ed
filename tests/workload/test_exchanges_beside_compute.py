"""Exchanges that run beside the compute, as Megatron-LM and Transformer Engine run them: the backward's
tensor-parallel exchanges of a column-parallel layer beside its two GEMMs, context parallelism's ring of K and V
beside the attention core; the bytes of each exchange in an FP8 run; and what a folded block charges for them."""

from __future__ import annotations

import pytest

from aifabric.catalog import gpu
from aifabric.engines.fold import ScaleUpFolder
from aifabric.kernels.model import KernelModel
from aifabric.kernels.transformer import PIECES, TransformerKernels
from aifabric.models import Transformer
from aifabric.scenario import load_scenario
from aifabric.simulate import build_fabric
from aifabric.workload.compute import layer_flops
from aifabric.workload.llm import build_llm_training
from aifabric.workload.ops import Block, Collective, Compute, Send, Wait
from aifabric.workload.plan import Plan

LLAMA = Transformer(
    "small-llama",
    layers=2,
    hidden=512,
    heads=8,
    ffn_hidden=1536,
    vocab=1000,
    max_seq_len=1024,
    gated_mlp=True,
    bias=False,
    norm="rmsnorm",
    learned_positions=False,
    tied_embeddings=False,
    kv_heads=4,
)
H100 = gpu("H100")


def _describe(op) -> str:
    if isinstance(op, Compute):
        return op.name
    if isinstance(op, Wait):
        return f"wait {op.stream}"
    if isinstance(op, Collective):
        return f"{op.op} {op.label} {'blocking' if op.blocking else 'on ' + op.stream}"
    return type(op).__name__


def _first_backward(ops, part: str) -> list[str]:
    """The ops of the first block backward's `part` (attn or mlp), from its first compute piece to the next
    exchange of the other part."""
    names = [_describe(op) for op in ops]
    start = next(i for i, n in enumerate(names) if n.startswith(f"bwd/{part}"))
    stop = next(i for i in range(start, len(names)) if names[i] == f"bwd/{part}:post")
    return names[start : stop + 1]


def test_column_layer_backward_exchanges_run_beside_its_two_gemms():
    # Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication: with sequence parallelism the layer's
    # input (kept as its 1/t shard) is gathered again while the input gradient's GEMM runs, then the input
    # gradient is reduce-scattered while the weight gradient's GEMM runs
    plan = Plan(tp=4, global_batch_size=1, seq_len=256, sequence_parallel=True)
    ops = build_llm_training(LLAMA, plan, H100).ranks[0]
    assert _first_backward(ops, "mlp") == [
        "bwd/mlp:pre",
        "all-gather layer input for the weight gradient on tp",
        "bwd/mlp:dgrad",
        "wait tp",
        "reduce-scatter activations on tp",
        "bwd/mlp:wgrad",
        "wait tp",
        "bwd/mlp:post",
    ]
    # without sequence parallelism: nothing to gather, the input gradient all-reduced beside the weight gradient
    plan = Plan(tp=4, global_batch_size=1, seq_len=256)
    ops = build_llm_training(LLAMA, plan, H100).ranks[0]
    assert _first_backward(ops, "attn") == [
        "bwd/attn:pre",
        "bwd/attn:dgrad",
        "all-reduce activations on tp",
        "bwd/attn:wgrad",
        "wait tp",
        "bwd/attn:post",
    ]


def test_megatron_2021_exchanges_after_the_whole_backward():
    # before Megatron-LM overlapped them (late 2021): one op, then its blocking exchange
    plan = Plan(tp=4, global_batch_size=1, seq_len=256, sequence_parallel=True, tp_async_backward=False)
    ops = build_llm_training(LLAMA, plan, H100).ranks[0]
    names = [_describe(op) for op in ops]
    assert not any(":" in n for n in names)
    i = names.index("bwd/mlp")
    assert names[i + 1] == "reduce-scatter activations blocking"
    assert "layer input for the weight gradient" not in " ".join(names)


@pytest.mark.parametrize("cp,sp", [(1, True), (1, False), (2, True)])
def test_the_pieces_are_the_whole_ops_kernels_and_flops(cp, sp):
    # cutting an op where exchanges run beside it loses and adds nothing: the pieces' kernels, in order, are the
    # whole op's, and the pieces' FLOPs add up to the block's
    km = KernelModel(H100, "bf16")
    tk = TransformerKernels(km, LLAMA, tp=2, cp=cp, micro_batch=1, seq_len=512, sequence_parallel=sp)
    for whole, pieces in PIECES.items():
        kernels = tk.op(whole).kernels
        if whole == "bwd/attn":
            for cut in (("pre", "dgrad", "wgrad", "post"), ("head", "core", "tail", "dgrad", "wgrad", "post")):
                assert sum((tk.op(f"{whole}:{p}").kernels for p in cut), ()) == kernels
            assert tk.op(f"{whole}:rest").kernels == kernels[len(tk.op(f"{whole}:head").kernels) + 1 :]
        else:
            assert sum((tk.op(f"{whole}:{p}").kernels for p in pieces), ()) == kernels
    plan = Plan(tp=2, cp=cp, global_batch_size=1, seq_len=512, sequence_parallel=sp)
    w = build_llm_training(LLAMA, plan, H100)
    lf = layer_flops(LLAMA, 512, 512, False, 2, cp)
    computes = [op for op in w.ranks[0] if isinstance(op, Compute)]
    for part, fwd in (("attn", lf.attention), ("mlp", lf.mlp)):
        bwd = [op for op in computes if op.name.startswith(f"bwd/{part}")]
        assert sum(op.flops for op in bwd) == pytest.approx(LLAMA.layers * 2 * fwd, rel=1e-12)
    # the column layer's GEMMs are what the kernel model times: their FLOPs are the kernels'
    (dgrad,) = {op.flops for op in computes if op.name == "bwd/mlp:dgrad"}
    assert dgrad == tk.op("bwd/mlp:dgrad").flops


def test_context_parallel_ring_runs_beside_the_attention_core():
    # Transformer Engine's ring: each step's attention runs while the next chunk of K and V arrives; in the
    # backward K and V go round again (only the rank's own chunk is kept) with their gradients
    plan = Plan(tp=2, cp=2, global_batch_size=1, seq_len=512, sequence_parallel=True)
    names = [_describe(op) for op in build_llm_training(LLAMA, plan, H100).ranks[0]]
    i = names.index("fwd/attn:pre")
    assert names[i : i + 5] == ["fwd/attn:pre", "all-gather K,V on cp", "fwd/attn:core", "wait cp", "fwd/attn:post"]
    i = names.index("bwd/attn:head")
    assert names[i : i + 6] == [
        "bwd/attn:head",
        "all-gather K,V on cp",
        "reduce-scatter dK,dV on cp",
        "bwd/attn:core",
        "wait cp",
        "bwd/attn:tail",
    ]


def test_fp8_run_gathers_fp8_and_reduces_16_bit():
    # Transformer Engine casts a linear layer's input (and its output's gradient) to FP8 before it gathers it;
    # a row-parallel layer's output, an input gradient, K and V, and the pipeline's activations stay 16-bit
    plan = Plan(tp=2, pp=2, cp=2, global_batch_size=1, seq_len=512, sequence_parallel=True, precision="fp8")
    w = build_llm_training(LLAMA, plan, H100)
    ops = w.ranks[0]
    bpe = {
        (op.op, op.label): op.bytes_per_element for op in ops if isinstance(op, Collective) and op.dim in ("tp", "cp")
    }
    assert bpe[("all-gather", "activations")] == 1
    assert bpe[("all-gather", "layer input for the weight gradient")] == 1
    assert bpe[("reduce-scatter", "activations")] == 2
    assert bpe[("all-gather", "K,V")] == bpe[("reduce-scatter", "dK,dV")] == 2
    (send,) = {op.size_bytes for op in ops if isinstance(op, Send)}
    assert send == 512 // 2 * LLAMA.hidden * 2 // 2  # the rank's 1/cp of the tokens, 1/tp under sp, 16-bit
    bf16 = build_llm_training(LLAMA, Plan(**{**plan.__dict__, "precision": "bf16"}), H100).ranks[0]
    assert {op.bytes_per_element for op in bf16 if isinstance(op, Collective) and op.dim in ("tp", "cp")} == {2}


@pytest.fixture(scope="module")
def folder():
    s = load_scenario(
        {
            "name": "one-server",
            "cluster": {"gpu": "H100", "servers": 1, "gpus_per_server": 8},
            "fabric": {"topology": "rail-optimized"},
            "workload": {"kind": "data-parallel", "model": "mnist-784-128-10", "global_batch_size": 64},
        }
    )
    return ScaleUpFolder(*build_fabric(s))


@pytest.mark.parametrize("compute_us", [10.0, 50.0, 400.0])
def test_a_folded_block_charges_what_outlasts_the_compute_beside_it(folder, compute_us):
    group = tuple(range(4))
    side = Collective("k@0", "reduce-scatter", group, 2**22, 2, "activations", False, "tp", "tp")
    alone = folder.fold(Collective("k@0", "reduce-scatter", group, 2**22, 2, "activations", dim="tp"))
    gemm = Compute("bwd/mlp:wgrad", 1e9, compute_us * 1e-6)
    block = Block("b@0", group, (side, gemm, Wait("tp")), shape=int(compute_us), compute_s=gemm.duration_s)
    added = folder.fold_block(block, {})
    assert added == pytest.approx(max(0.0, alone - gemm.duration_s))
    assert folder.last_hidden_s == pytest.approx(min(alone, gemm.duration_s))
    # a blocking collective adds its whole time
    blocking = Block(
        "c@0", group, (gemm, side.__class__(**{**side.__dict__, "blocking": True, "stream": "comm"})), 999, 0.0
    )
    assert folder.fold_block(blocking, {}) == pytest.approx(alone)


def test_the_timeline_draws_the_exchanges_beside_the_compute_under_its_end():
    # what results.py counts as communication under the compute (TaskGraph.hidden_s) is what the rank timeline
    # draws: per merged task and member, a row of the task's hidden seconds ending where its compute ends
    import numpy as np

    from aifabric.analysis import BESIDE, COMM_K
    from aifabric.engines.taskgraph import TaskGraph
    from aifabric.scenario.load import demo_scenario
    from aifabric.simulate import simulate

    run = simulate(demo_scenario())
    g, rt = run.graph, run.rank_timeline
    hidden = TaskGraph.per_task(g.hidden_s, len(g))
    assert hidden.sum() > 0  # the demo's tensor parallelism overlaps its backward exchanges
    beside = rt.category == BESIDE
    assert (rt.kind[beside] == COMM_K).all()
    expected = sum(hidden[t] * len(g.members.get(t, (g.rank[t],))) for t in np.flatnonzero(hidden))
    assert (rt.end_s[beside] - rt.start_s[beside]).sum() == pytest.approx(expected, rel=1e-9)
    # each lies within a compute row of its rank and ends where it ends, so it adds no busy time (idle is as before)
    compute = rt.kind == 0
    starts = {
        (r, b): a
        for r, a, b in zip(
            rt.rank[compute].tolist(), rt.start_s[compute].tolist(), rt.end_s[compute].tolist(), strict=True
        )
    }
    for r, a, b in zip(rt.rank[beside].tolist(), rt.start_s[beside].tolist(), rt.end_s[beside].tolist(), strict=True):
        assert (r, b) in starts and starts[(r, b)] <= a < b
