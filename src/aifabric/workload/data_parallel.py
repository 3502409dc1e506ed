"""Data-parallel training: every rank holds the whole model, processes its share of the batch, and the
gradients are summed with one AllReduce per iteration (seeds Ch. 3, 8, 14).

Per iteration and rank: forward, backward, AllReduce of all gradients. Compute time is
FLOPs / (peak FLOP/s of the precision x compute efficiency), with the model's forward FLOPs (feed-forward:
2 x params x samples; CNN: every kernel at every output position; LSTM: every weight at every time step)
and backward = 2 x forward. Models: `layer_widths`, or a zoo name (mnist-784-128-10, ch4-cnn, ch6-lstm).
"""

from __future__ import annotations

from ..catalog import gpu
from ..errors import InputError, Problem
from ..models import FeedForward, Transformer, get_model
from ..scenario.schema import Scenario
from ..units import BYTES_PER_ELEMENT
from .ops import Collective, Compute, Op, Workload


def build_data_parallel(s: Scenario) -> Workload:
    w = s.workload
    if w.model.layer_widths is not None:
        model = FeedForward(tuple(w.model.layer_widths), w.model.bias)
    else:
        model = get_model(w.model.name, "workload.model.name")
        if isinstance(model, Transformer):
            raise InputError(Problem("workload.model.name", f"{w.model.name!r} is a transformer: use "
                                                            "kind: llm-training"))
    world = s.cluster.total_gpus
    samples = w.global_batch_size // world
    flops_per_s = gpu(s.cluster.gpu).peak_flops(w.precision) * w.efficiency
    fwd = model.forward_flops(samples)
    bwd = model.backward_flops(samples)
    group = tuple(range(world))
    ranks: list[list[Op]] = [[] for _ in range(world)]
    for it in range(w.iterations):
        for r in range(world):
            ranks[r] += [
                Compute(f"it{it}/forward", fwd, fwd / flops_per_s),
                Compute(f"it{it}/backward", bwd, bwd / flops_per_s),
            ]
            if world > 1:
                ranks[r].append(Collective(f"it{it}/grad-allreduce", "all-reduce", group, model.params,
                                           BYTES_PER_ELEMENT[w.precision], "gradients", dim="dp"))
    return Workload(
        name=s.name,
        ranks=ranks,
        params=model.params,
        iterations=w.iterations,
        flops_per_iteration=(fwd + bwd) * world,
        description=f"data-parallel {_name(model)}, {model.params:,} parameters, "
        f"{samples} samples per GPU, {w.precision}",
    )


def _name(model) -> str:
    return f"feed-forward {list(model.layer_widths)}" if isinstance(model, FeedForward) else model.name
