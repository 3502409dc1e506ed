"""The workload layer's predicted operations equal the traced ones for the small models (CNN, LSTM, FNN) in
data, tensor and pipeline parallelism, and with gradient buckets cut small.

aifabric.workload.small_models.build_small_training is given the zoo's digits-cnn / digits-lstm /
digits-fnn (the trainer's architectures: checked parameter by parameter below) and the run's plan with the
trainer's rank order tp-pp-dp. Compared exactly, per rank and in order: every collective (op, group,
bytes, whether the rank waited for it) and send/recv of every training step. The initial Broadcast of the
weights, once before the first step, is the one traced operation the builder does not model.
"""

import pytest

pytest.importorskip("torch")

from agreement import predicted_ops, traced_ops

from aifabric.catalog import gpu
from aifabric.models import MODELS
from aifabric.train.tracer import read_trace
from aifabric.workload.plan import Plan
from aifabric.workload.small_models import build_small_training, module_params, stage_modules, units_of

ZOO = {"fnn": "digits-fnn", "cnn": "digits-cnn", "lstm": "digits-lstm"}


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
    return build_small_training(MODELS[ZOO[cfg.model]], plan_of(cfg), gpu("H100"), iterations=cfg.steps)


PLANS = [
    ("cnn", dict(dp=2, bucket_bytes=2048)),  # three buckets
    ("cnn", dict(tp=2)),
    ("cnn", dict(tp=2, pp=3, schedule="gpipe", batch_size=24)),  # conv | linear | linear
    ("cnn", dict(dp=2, tp=2, pp=2, schedule="1f1b", micro_batches=4, bucket_bytes=1024)),
    ("lstm", dict(dp=2, bucket_bytes=4096)),  # buckets cut inside the LSTM's gates
    ("lstm", dict(tp=2)),
    ("lstm", dict(pp=2, schedule="gpipe")),
    ("lstm", dict(dp=2, tp=2, pp=2, schedule="1f1b")),
    ("fnn", dict(dp=2, bucket_bytes=4096)),  # DDP's rule: [40 + 5120], [512 + 32768] bytes
    ("fnn", dict(dp=2, tp=2, pp=2, bucket_bytes=256)),  # stage 0: its bias alone, then its weight
]


def _id(model, plan):
    return model + "-" + "-".join(str(v) if k == "schedule" else f"{k.split('_')[0]}{v}" for k, v in plan.items())


@pytest.mark.parametrize(("model", "plan"), PLANS, ids=[_id(m, p) for m, p in PLANS])
def test_small_model_traced_operations_equal_the_workload(trained, model, plan):
    run, _ = trained(model, **plan)
    cfg = run.config
    work, trace = predicted(run), read_trace(run.trace_path)
    for r in range(cfg.layout.world_size):
        want = predicted_ops(work, r)
        assert want, "the builder predicts operations"
        assert traced_ops(trace, r) == want, f"rank {r}"
    kinds = {e["tag"].split("/")[0].rstrip("0123456789") for ev in trace.comms.values() for e in ev}
    assert ({"tp"} if cfg.tp > 1 else set()) | ({"pp"} if cfg.pp > 1 else set()) <= kinds
    if cfg.dp > 1:
        buckets = {e["tag"] for e in trace.comms[0] if e["tag"].startswith("grad-bucket")}
        assert buckets and ("bucket_bytes" not in plan or len(buckets) > 1)


@pytest.mark.parametrize("model", ["fnn", "cnn", "lstm"])
@pytest.mark.parametrize("tp", [1, 2])
def test_zoo_models_are_the_trainers_parameter_by_parameter(model, tp):
    """The units the builder derives from the zoo model hold the trainer's parameters, in registration
    order (which DDP's buckets follow), per tensor-parallel rank."""
    from aifabric.train.layers import TP
    from aifabric.train.models import build_stage, dataset, full_units

    units = full_units(model, 0, dataset(model, 0).vocab_size)
    stage = build_stage(units, 0, len(units), TP(None, tuple(range(tp)), 0))
    ours = units_of(MODELS[ZOO[model]])
    assert len(ours) == len(units)
    sizes = [n for mod in stage_modules(ours, 0, len(ours)) for n in module_params(ours, mod, tp)]
    assert sizes == [p.numel() for p in stage.parameters()]
    assert MODELS[ZOO[model]].params == sum(p.numel() for u in units for p in u.module.parameters())
