"""The workload layer's predicted operations equal the traced ones, for the same model and plan.

The GPT here is a tiny Megatron-style decoder, so aifabric.workload.llm.build_llm_training can describe it
(Transformer with 2 layers, hidden 32, 4 heads, FFN 128, learned positions, untied output). Compared
exactly, per rank and in order, every operation of the training steps, as (op, group, bytes), and for
collectives whether the rank waited for it: the vocabulary-parallel embedding's AllReduce, the
tensor-parallel AllReduces of every block (forward after attention and MLP, backward before them), the
vocabulary-parallel cross-entropy's three AllReduces and the LM head's backward AllReduce, the pipeline's
sends and receives, and the data-parallel gradient buckets (with and without TP). Rank order: the
trainer's tp-pp-dp (the seeds' Blog D) given to the builder.

The one traced operation the builder does not predict is the initial Broadcast of the weights to the
replicas (once, before the training iterations the workload layer models); it is checked separately.
"""

import pytest

pytest.importorskip("torch")

from agreement import predicted_ops, traced_ops

from aifabric.catalog import gpu
from aifabric.models.transformer import Transformer
from aifabric.train.models import GPT_CONTEXT, GPT_HEADS, GPT_LAYERS, GPT_WIDTH, dataset
from aifabric.train.tracer import read_trace
from aifabric.workload.llm import build_llm_training
from aifabric.workload.memory import stage_params
from aifabric.workload.plan import Plan


def _model_and_plan(cfg):
    model = Transformer(
        "toy-gpt",
        GPT_LAYERS,
        GPT_WIDTH,
        GPT_HEADS,
        4 * GPT_WIDTH,
        dataset("gpt", 0).vocab_size,
        max_seq_len=GPT_CONTEXT,
        tied_embeddings=False,
    )
    plan = Plan(
        tp=cfg.tp,
        pp=cfg.pp,
        dp=cfg.dp,
        schedule=cfg.schedule,
        micro_batch_size=cfg.global_batch // cfg.dp // cfg.n_micro,
        global_batch_size=cfg.global_batch,
        seq_len=GPT_CONTEXT,
        precision="fp32",
        order="tp-cp-pp-dp",
        bucket_mb=cfg.bucket_bytes / 2**20,
        tp_async_backward=False,  # the trainer's autograd functions exchange one after the other, blocking
    )
    return model, plan


def predicted(run):
    model, plan = _model_and_plan(run.config)
    return build_llm_training(model, plan, gpu("H100"), iterations=run.config.steps)


PLANS = [dict(tp=2, pp=2, schedule="gpipe"), dict(dp=2, tp=2, pp=2, schedule="1f1b"), dict(dp=2, tp=2), dict(dp=2)]
# small DDP buckets: several per block, launched between the block's exchanges (see SMALL_BUCKETS' test)
SMALL_BUCKETS = [dict(dp=2, tp=2, pp=2, schedule="1f1b", bucket_bytes=4096), dict(dp=2, bucket_bytes=1024)]


def _ids(plans):
    return ["-".join(str(v) if k == "schedule" else f"{k}{v}" for k, v in p.items()) for p in plans]


@pytest.mark.parametrize("plan", PLANS + SMALL_BUCKETS, ids=_ids(PLANS + SMALL_BUCKETS))
def test_gpt_traced_operations_equal_the_llm_workload(trained, plan):
    run, _ = trained("gpt", **plan)
    cfg = run.config
    work, trace = predicted(run), read_trace(run.trace_path)
    for r in range(cfg.layout.world_size):
        want = predicted_ops(work, r)
        assert want, "the builder predicts operations"
        assert traced_ops(trace, r) == want, f"rank {r}"
    # every kind the plan implies is in the comparison
    tags = {"/".join(e["tag"].split("/")[:2]) for ev in trace.comms.values() for e in ev}
    if cfg.tp > 1:
        assert {"tp/embed", "tp/xent", "tp/head"} <= tags
    if cfg.pp > 1:
        assert {"pp/act", "pp/grad"} <= tags
    if cfg.dp > 1:
        assert "grad-bucket0" in tags
    if plan in SMALL_BUCKETS:  # several buckets, some launched between a block's tensor-parallel exchanges
        ops = [e["tag"] for e in trace.comms[0] if e["step"] == 0]
        buckets = [i for i, t in enumerate(ops) if t.startswith("grad-bucket")]
        assert len(buckets) > 3
        if cfg.tp > 1:
            assert any(ops[i + 1].startswith("tp/") for i in buckets), "a bucket launched before a TP exchange"


@pytest.mark.parametrize("plan", PLANS[1:], ids=_ids(PLANS[1:]))
def test_gradient_buckets_hold_the_parameters_of_one_gpu(trained, plan):
    """Bucket bytes = the parameters a GPU of the stage holds (stage_params): weight matrices, column-parallel
    biases, the token embedding and the LM head split by tp; row-parallel biases, norms and positions
    replicated. The only traced operation left out above is the initial Broadcast of those same
    parameters, once, before the first step."""
    run, _ = trained("gpt", **plan)
    cfg = run.config
    model, p = _model_and_plan(cfg)
    trace = read_trace(run.trace_path)
    for r in range(cfg.layout.world_size):
        stage = cfg.layout.coords(r).pp
        dense, _ = stage_params(model, p, stage)
        buckets = [e["bytes"] for e in trace.comms[r] if e["tag"].startswith("grad-bucket")]
        assert buckets == [dense * 4] * cfg.steps, f"rank {r}"
        bcast = [e for e in trace.comms[r] if e["tag"] == "init/broadcast"]
        assert [(e["bytes"], e["step"], e["seq"]) for e in bcast] == [(dense * 4, 0, 1)], f"rank {r}"
