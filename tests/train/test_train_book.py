"""The book's variants in training (Deep Learning for Network Engineers): layer sizes for the small models (the
model-parallel 4-3-2-1 network and the 4 x 8 tensor-parallel split of the book's blog post "Parallelization
Strategies in Neural Networks"), the book's LSTM cell (Chapter 6) and the book's tensor parallelism (Chapter
8) beside Megatron's.

Each trains to the single-process result within 1e-5 (losses and every weight), and its traced operations
equal, rank by rank and in order, what the workload layer predicts (small models:
aifabric.workload.small_models.build_small_training with the trainer's model and `tp_style`; the GPT in the
book's style: aifabric.workload.book_gpt.build_book_gpt_training). The GPT's trace is also checked against the
rule `book_gpt_ops` below states from the book's description, op for op.
"""

from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")

from agreement import predicted_ops, traced_ops

from aifabric.catalog import gpu
from aifabric.train.summary import assemble_weights
from aifabric.train.tracer import read_trace
from aifabric.workload.plan import Plan
from aifabric.workload.small_models import build_small_training, module_params, stage_modules, trainer_model, units_of


def plan_of(cfg) -> Plan:
    return Plan(
        tp=cfg.tp,
        pp=cfg.pp,
        dp=cfg.dp,
        schedule=cfg.schedule,
        micro_batch_size=cfg.global_batch // cfg.dp // cfg.n_micro,
        global_batch_size=cfg.global_batch,
        precision="fp32",
        order="tp-cp-pp-dp",
        bucket_mb=cfg.bucket_bytes / 2**20,
    )


def predicted(run):
    cfg = run.config
    if cfg.model == "gpt":
        from aifabric.models.transformer import Transformer
        from aifabric.train.models import GPT_CONTEXT, GPT_HEADS, GPT_LAYERS, GPT_WIDTH, dataset
        from aifabric.workload.book_gpt import build_book_gpt_training

        gpt = Transformer(
            "toy-gpt",
            GPT_LAYERS,
            GPT_WIDTH,
            GPT_HEADS,
            4 * GPT_WIDTH,
            dataset("gpt", 0).vocab_size,
            max_seq_len=GPT_CONTEXT,
            tied_embeddings=False,
        )
        plan = replace(plan_of(cfg), seq_len=GPT_CONTEXT)
        return build_book_gpt_training(gpt, plan, gpu("H100"), iterations=cfg.steps)
    model = trainer_model(cfg.model, cfg.layer_widths, cfg.cell)
    return build_small_training(model, plan_of(cfg), gpu("H100"), iterations=cfg.steps, tp_style=cfg.tp_style)


def _same_as_one_process(par, ref):
    assert par.losses == pytest.approx(ref.losses, abs=1e-5)
    w_par, w_ref = assemble_weights(par.out_dir, par), assemble_weights(ref.out_dir, ref)
    assert w_par.keys() == w_ref.keys()
    for name in w_ref:
        assert torch.allclose(w_par[name], w_ref[name], atol=1e-5, rtol=0), name


SMALL = [
    ("fnn", dict(tp=2, tp_style="book")),  # 64-128-10: AllGather per layer, weight-gradient AllReduce
    ("fnn", dict(dp=2, tp=2, pp=2, tp_style="book", bucket_bytes=4096)),  # with pipeline and gradient buckets
    ("fnn", dict(layers="8,4", tp=2, tp_style="book")),  # the blog post's 4 x 8 matrix split in half
    ("fnn", dict(layers="8,4", tp=2)),  # the same split, Megatron's column-parallel layer
    ("fnn", dict(layers="4,3,2,1", pp=3, batch_size=24)),  # model parallelism: 3 x 4, 2 x 3, 1 x 2 on 3 GPUs
    ("fnn", dict(layers="4,6,4,2", tp=2, pp=3, tp_style="book", batch_size=24)),  # Chapter 8, Figure 8-18
    ("lstm", dict(cell="book", dp=2, tp=2, bucket_bytes=2048)),  # the book's cell: ReLU, no biases
    ("lstm", dict(cell="book", layers="16", pp=2, schedule="gpipe")),
    ("cnn", dict(layers="4,16,8", tp=2)),  # 4 kernels, dense 36-16-8-10
]


def _id(model, plan):
    return model + "-" + "-".join(f"{k.split('_')[0]}{v}" for k, v in plan.items())


@pytest.mark.parametrize(("model", "plan"), SMALL, ids=[_id(m, p) for m, p in SMALL])
def test_book_variants_train_as_one_process_and_as_the_workload_predicts(trained, model, plan):
    run, ref = trained(model, **plan)
    _same_as_one_process(run, ref)
    cfg = run.config
    work, trace = predicted(run), read_trace(run.trace_path)
    for r in range(cfg.layout.world_size):
        want = predicted_ops(work, r)
        assert want, "the builder predicts operations"
        assert traced_ops(trace, r) == want, f"rank {r}"
    tags = {e["tag"] for ev in trace.comms.values() for e in ev}
    if cfg.tp_style == "book" and cfg.tp > 1:
        assert "tp/bwd/weight-grad" in tags and "tp/fwd/all-gather" in tags
        assert not any(t.startswith("tp/") and "all-reduce" in t for t in tags), "no input-gradient AllReduce"


def test_the_chapter_8_ffn_runs_as_figure_8_18(trained):
    """Chapter 8's FFN in tensor and pipeline parallelism: hidden layers of 6 and 4 neurons and an output layer of
    2, each split over two GPUs of one server (A1|B1: 3 + 3, A2|B2: 2 + 2, A3|B3: 1 + 1) whose partial outputs
    are AllGathered (NVLink), each stage's whole output sent on to the next stage's GPU on the same rail
    (A1 -> A2 -> A3, B1 -> B2 -> B3), and in backward the AllReduce of the weight gradients."""
    run, _ = trained("fnn", layers="4,6,4,2", tp=2, pp=3, tp_style="book", batch_size=24)
    trace = read_trace(run.trace_path)
    b = 24 // 3  # samples per micro-batch
    names = {0: "A1", 1: "B1", 2: "A2", 3: "B2", 4: "A3", 5: "B3"}
    for r, neurons in ((0, 6), (2, 4), (4, 2)):
        gathers = {(e["bytes"], tuple(e["group"])) for e in trace.comms[r] if e["op"] == "all-gather"}
        assert gathers == {(b * neurons * 4, (r, r + 1))}, names[r]  # this GPU's half + its peer's
        sends = {tuple(e["group"]) for e in trace.comms[r] if e["op"] == "send" and e["tag"] == "pp/act"}
        assert sends == ({(r, r + 2)} if r < 4 else set()), names[r]  # along the rail
        reduces = {e["bytes"] for e in trace.comms[r] if e["tag"] == "tp/bwd/weight-grad"}
        fan_in = {0: 4, 2: 6, 4: 4}[r]
        assert reduces == {(neurons * fan_in + neurons) * 4}


def test_the_model_parallel_example_holds_the_books_matrices():
    """The blog post's Figure 1-9: hidden layer 1 (3 x 4) on GPU 1, hidden layer 2 (2 x 3) on GPU 2, the
    output (1 x 2) on GPU 3; the activations each sends per sample: 3 values, then 2."""
    from aifabric.train.layers import TP
    from aifabric.train.models import build_stage, full_units

    units = full_units("fnn", 0, layers=(4, 3, 2, 1))
    shapes = [
        [tuple(p.shape) for p in build_stage(units, s, s + 1, TP(None)).parameters() if p.dim() == 2] for s in range(3)
    ]
    assert shapes == [[(3, 4)], [(2, 3)], [(1, 2)]]
    units = units_of(trainer_model("fnn", (4, 3, 2, 1)))
    assert [u.out_width for u in units[:2]] == [3, 2]


@pytest.mark.parametrize(
    ("model", "layers", "cell", "tp", "style"),
    [
        ("fnn", (8, 4), "standard", 2, "book"),
        ("fnn", (64, 128, 10), "standard", 2, "book"),
        ("fnn", (4, 3, 2, 1), "standard", 1, "megatron"),
        ("lstm", (16,), "book", 2, "megatron"),
        ("cnn", (4, 16, 8), "standard", 2, "megatron"),
    ],
)
def test_the_trainers_variants_are_the_workload_models_parameter_by_parameter(model, layers, cell, tp, style):
    from aifabric.train.layers import TP
    from aifabric.train.models import build_stage, full_units

    units = full_units(model, 0, 0, layers, cell)
    stage = build_stage(units, 0, len(units), TP(None, tuple(range(tp)), 0), style)
    ours = units_of(trainer_model(model, layers, cell))
    sizes = [n for mod in stage_modules(ours, 0, len(ours), style) for n in module_params(ours, mod, tp)]
    assert sizes == [p.numel() for p in stage.parameters()]
    assert trainer_model(model, layers, cell).params == sum(p.numel() for u in units for p in u.module.parameters())


def test_the_books_lstm_cell_has_no_biases_and_relu():
    from aifabric.train.layers import TP, TPLSTM
    from aifabric.train.models import build_stage, full_units

    units = full_units("lstm", 0, 0, (4,), "book")
    cell = build_stage(units, 0, 1, TP(None))[0]
    assert isinstance(cell, TPLSTM) and cell.book and len(cell.b) == 0
    x = torch.rand(3, 8, 8)
    h = cell(x)
    assert (h >= 0).all(), "o·ReLU(C) is never negative"


# --- the GPT in the book's style ------------------------------------------------------------------------

GPT_BOOK = [
    dict(tp=2, pp=2, schedule="gpipe", tp_style="book"),
    dict(dp=2, tp=2, pp=2, schedule="1f1b", tp_style="book", bucket_bytes=8192),
]  # buckets between exchanges


def book_gpt_ops(cfg, trace_tags_of_rank):
    """The book's tensor parallelism on the trainer's GPT, per micro-batch pass, as train/book_tp.py runs it
    (B = micro-batch, T = context, D = width, V = vocabulary; fp32):

    forward: stage 0: Broadcast of the word vectors (B·T·D) from the group's first rank; per block: AllGather
    of Q, of K, of the context vectors (B·T·D each), of the output projection's, the FFN's first (B·T·4D) and
    second layer's outputs; last stage: AllGather of the logits (B·T·V).
    backward: last stage: AllReduce of the LM head's weight gradients (V·D); per block, last first: AllReduce
    of the FFN's second and first layers' and the projection's weight gradients (with biases), AllGather of Q
    and of K, AllReduce of Q, K and V's weight gradients (3·(D·D + D)), AllReduce of the attention input's
    gradient (B·T·D).

    Returns (op, bytes) per traced TP op of one rank, derived from its tags' layer and kind only."""
    from aifabric.train.models import GPT_CONTEXT, GPT_WIDTH, dataset

    B = cfg.global_batch // cfg.dp // cfg.n_micro
    T, D, V = GPT_CONTEXT, GPT_WIDTH, dataset("gpt", 0).vocab_size
    act = B * T * D * 4
    size = {
        "embed/fwd/broadcast": act,
        "attn-q/fwd/all-gather": act,
        "attn-k/fwd/all-gather": act,
        "attn-ctx/fwd/all-gather": act,
        "proj/fwd/all-gather": act,
        "fc/fwd/all-gather": 4 * act,
        "out/fwd/all-gather": act,
        "head/fwd/all-gather": B * T * V * 4,
        "head/bwd/weight-grad": V * D * 4,
        "out/bwd/weight-grad": (4 * D * D + D) * 4,
        "fc/bwd/weight-grad": (4 * D * D + 4 * D) * 4,
        "proj/bwd/weight-grad": (D * D + D) * 4,
        "attn-q/bwd/all-gather": act,
        "attn-k/bwd/all-gather": act,
        "attn-qkv/bwd/weight-grad": 3 * (D * D + D) * 4,
        "attn-in/bwd/all-reduce": act,
    }
    return [
        size["/".join(t.split("/")[2:] if t.split("/")[1].startswith("L") else t.split("/")[1:])]
        for t in trace_tags_of_rank
    ]


BLOCK_FWD = [
    "attn-q/fwd/all-gather",
    "attn-k/fwd/all-gather",
    "attn-ctx/fwd/all-gather",
    "proj/fwd/all-gather",
    "fc/fwd/all-gather",
    "out/fwd/all-gather",
]
BLOCK_BWD = [
    "out/bwd/weight-grad",
    "fc/bwd/weight-grad",
    "proj/bwd/weight-grad",
    "attn-q/bwd/all-gather",
    "attn-k/bwd/all-gather",
    "attn-qkv/bwd/weight-grad",
    "attn-in/bwd/all-reduce",
]


@pytest.mark.parametrize("plan", GPT_BOOK, ids=["tp2-pp2-gpipe", "dp2-tp2-pp2-1f1b-bucket8192"])
def test_the_gpt_in_the_books_style_trains_as_one_process_as_the_workload_predicts_and_as_the_book_says(trained, plan):
    run, ref = trained("gpt", **plan)
    _same_as_one_process(run, ref)
    work, trace = predicted(run), read_trace(run.trace_path)
    for r in range(run.config.layout.world_size):
        assert traced_ops(trace, r) == predicted_ops(work, r), f"rank {r}"
    if run.config.dp > 1:  # some gradient buckets are launched between the tensor-parallel exchanges
        ops = [e["tag"] for e in trace.comms[0] if e["step"] == 0]
        buckets = [i for i, t in enumerate(ops) if t.startswith("grad-bucket")]
        assert len(buckets) > 2 and any(ops[i + 1].startswith("tp/") for i in buckets[:-1])
    _, megatron_ref = trained("gpt", tp=2, pp=2, schedule="gpipe")  # one process, Megatron's layers
    assert ref.losses == pytest.approx(megatron_ref.losses, abs=1e-5)
    cfg = run.config
    trace = read_trace(run.trace_path)
    from aifabric.train.layout import stage_bounds
    from aifabric.workload.pipeline import F, stage_order

    for r in range(cfg.layout.world_size):
        c = cfg.layout.coords(r)
        a, b = stage_bounds(4, cfg.pp, c.pp)  # units: embed, block 1, block 2, head
        blocks = [u for u in range(a, b) if u in (1, 2)]
        fwd = (
            (["embed/fwd/broadcast"] if a == 0 else [])
            + [x for _ in blocks for x in BLOCK_FWD]
            + (["head/fwd/all-gather"] if b == 4 else [])
        )
        bwd = (["head/bwd/weight-grad"] if b == 4 else []) + [x for _ in blocks for x in BLOCK_BWD]
        want = []
        for ref_ in stage_order(cfg.schedule, cfg.pp, cfg.n_micro, c.pp):
            want += fwd if ref_.kind == F else bwd
        tp_ops = [e for e in trace.comms[r] if e["tag"].startswith("tp/")]
        got = [
            "/".join(e["tag"].split("/")[2:] if e["tag"].split("/")[1].startswith("L") else e["tag"].split("/")[1:])
            for e in tp_ops
        ]
        assert got == want * cfg.steps, f"rank {r}"
        assert [e["bytes"] for e in tp_ops] == book_gpt_ops(cfg, [e["tag"] for e in tp_ops]), f"rank {r}"
        assert all(tuple(e["group"]) == cfg.layout.tp_group(r) for e in tp_ops)
        # only the first rank of each group holds the embedding (the book keeps it on one GPU)
        if a == 0 and cfg.dp > 1:
            bcast = [e["bytes"] for e in trace.comms[r] if e["tag"] == "init/broadcast"]
            buckets = [e["bytes"] for e in trace.comms[r] if e["tag"].startswith("grad-bucket") and e["step"] == 0]
            assert sum(buckets) == bcast[0]


def test_a_book_style_trace_replays_on_a_fabric(trained, ch14_data, write_scenario, tmp_path, capsys):
    """Traced and replayable like the others: the Broadcast of the word vectors, the AllGathers of Q and K, the
    weight-gradient AllReduces all enter the simulated iteration, bytes unchanged."""
    import json

    from aifabric.cli import run_app
    from aifabric.cli.app import app

    run, _ = trained("gpt", **GPT_BOOK[1])
    out = tmp_path / "replay"
    code = run_app(
        app,
        [
            "replay",
            str(run.trace_path),
            "--scenario",
            str(write_scenario(ch14_data)),
            "--out",
            str(out),
            "--compute",
            "zero",
            "--placement",
            "spread",
        ],
    )
    capsys.readouterr()
    assert code == 0
    s = json.loads((out / "summary.json").read_text())
    labels = {c["label"] for c in s["collectives"]}
    assert {
        "tp/embed/fwd/broadcast",
        "tp/L1/attn-q/fwd/all-gather",
        "tp/L2/attn-qkv/bwd/weight-grad",
        "grad-bucket0",
    } <= labels
    trace = read_trace(run.trace_path)
    traced = sum(e["bytes"] for ev in trace.comms.values() for e in ev if e["tag"].startswith("tp/"))
    assert traced > 0 and s["complete"]


def test_the_docs_compare_the_two_styles_traffic_as_the_workload_layer_computes_it():
    """docs/train.md's comparison (one rank's tensor-parallel traffic per step, tp 2, the default batches):
    computed here by the workload builders of both styles, and the book's moves more."""
    from pathlib import Path

    from aifabric.models.transformer import Transformer
    from aifabric.train.models import GPT_CONTEXT, GPT_HEADS, GPT_LAYERS, GPT_WIDTH, dataset, default_batch
    from aifabric.workload.book_gpt import build_book_gpt_training
    from aifabric.workload.llm import build_llm_training
    from aifabric.workload.ops import Collective

    gpt = Transformer(
        "toy-gpt",
        GPT_LAYERS,
        GPT_WIDTH,
        GPT_HEADS,
        4 * GPT_WIDTH,
        dataset("gpt", 0).vocab_size,
        max_seq_len=GPT_CONTEXT,
        tied_embeddings=False,
    )

    def tp_traffic(work):
        ops = [o for o in work.ranks[0] if isinstance(o, Collective) and o.dim == "tp"]
        return len(ops), sum(o.size_bytes for o in ops)

    def plan(model):
        b = default_batch(model)
        return Plan(
            tp=2,
            micro_batch_size=b,
            global_batch_size=b,
            seq_len=GPT_CONTEXT if model == "gpt" else 1,
            precision="fp32",
            order="tp-cp-pp-dp",
        )

    h100 = gpu("H100")
    gpt_m, gpt_b = (
        tp_traffic(build_llm_training(gpt, plan("gpt"), h100)),
        tp_traffic(build_book_gpt_training(gpt, plan("gpt"), h100)),
    )
    fnn_m, fnn_b = (
        tp_traffic(build_small_training(trainer_model("fnn"), plan("fnn"), h100, tp_style=s))
        for s in ("megatron", "book")
    )
    assert gpt_b[1] > gpt_m[1] and fnn_b[1] > fnn_m[1]
    doc = " ".join((Path(__file__).parents[2] / "docs" / "train.md").read_text(encoding="utf-8").split())
    said = (
        f"{gpt_m[0]} operations and {gpt_m[1] / 1e3:.0f} kB in Megatron's style, {gpt_b[0]} operations and "
        f"{gpt_b[1] / 1e3:.0f} kB in the book's ({gpt_b[1] / gpt_m[1]:.1f} times the bytes); on the digits FNN "
        f"{fnn_m[0]} operation and {fnn_m[1] / 1e3:.1f} kB against {fnn_b[0]} and {fnn_b[1] / 1e3:.0f} kB"
    )
    assert said in doc
