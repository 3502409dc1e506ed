"""Data-parallel training: every rank holds the whole model, processes its share of the batch, and the
gradients are summed with one AllReduce per iteration (seeds Ch. 3, 8, 14).

Per iteration and rank: forward, backward, AllReduce of all gradients, optimizer step. Compute time is
kernel by kernel (kernels/small.py: each layer's GEMMs and element-wise kernels; the optimizer step over
HBM), or with a `compute_efficiency` override FLOPs / (peak FLOP/s of the precision x that efficiency),
with the model's forward FLOPs (feed-forward: 2 x params x samples; CNN: every kernel at every output
position; LSTM: every weight at every time step), backward = 2 x forward and no optimizer step (the
form this workload had before the kernel model). Models: `layer_widths`, or a zoo name
(mnist-784-128-10, ch4-cnn, ch6-lstm).
"""

from __future__ import annotations

from ..catalog import gpu
from ..errors import InputError, Problem
from ..kernels.model import KernelModel
from ..kernels.small import network_kernels
from ..kernels.transformer import optimizer_kernels
from ..models import FeedForward, Model, Transformer, get_model
from ..scenario.schema import Scenario
from ..units import BYTES_PER_ELEMENT
from .compute import compute_summary
from .ops import Collective, Compute, Op, Workload


def build_data_parallel(s: Scenario, kernels: KernelModel | None = None) -> Workload:
    w = s.workload
    model: Model
    if w.model.layer_widths is not None:
        model = FeedForward(tuple(w.model.layer_widths), w.model.bias)
    else:
        model = get_model(w.model.name or "", "workload.model.name")  # a name: the checks refuse neither
        if isinstance(model, Transformer):
            raise InputError(
                Problem("workload.model.name", f"{w.model.name!r} is a transformer: use kind: llm-training")
            )
    world = s.cluster.total_gpus
    samples = w.global_batch_size // world
    fwd = model.forward_flops(samples)
    bwd = model.backward_flops(samples)
    spec = gpu(s.cluster.gpu)
    if w.compute_efficiency is not None:
        flops_per_s = spec.peak_flops(w.precision) * w.compute_efficiency
        passes: list[tuple] = [
            ("forward", fwd, fwd / flops_per_s, (("all", fwd / flops_per_s),)),
            ("backward", bwd, bwd / flops_per_s, (("all", bwd / flops_per_s),)),
        ]
        after: list[tuple] = []
    else:
        km = kernels or KernelModel(spec, w.precision)
        f, b = network_kernels(km, model, samples)
        opt = optimizer_kernels(km, model.params, model.params, loss_scaling=w.precision == "fp16")
        passes = [("forward", fwd, f.time_s, f.by_kind()), ("backward", bwd, b.time_s, b.by_kind())]
        after = [("optimizer", 12.0 * model.params, opt.time_s, opt.by_kind())]
    group = tuple(range(world))
    ranks: list[list[Op]] = [[] for _ in range(world)]
    for it in range(w.iterations):
        ops: list[Op] = [Compute(f"it{it}/{name}", fl, t, k) for name, fl, t, k in passes]
        if world > 1:
            ops.append(
                Collective(
                    f"it{it}/grad-allreduce",
                    "all-reduce",
                    group,
                    model.params,
                    BYTES_PER_ELEMENT[w.precision],
                    "gradients",
                    dim="dp",
                )
            )
        ops += [Compute(f"it{it}/{name}", fl, t, k) for name, fl, t, k in after]
        for r in range(world):
            ranks[r] += ops
    hw_flops, by_kind = compute_summary(ranks[0])
    return Workload(
        name=s.name,
        ranks=ranks,
        params=model.params,
        iterations=w.iterations,
        flops_per_iteration=(fwd + bwd) * world,
        description=f"data-parallel {_name(model)}, {model.params:,} parameters, "
        f"{samples} samples per GPU, {w.precision}",
        hardware_flops_per_iteration=hw_flops * world / w.iterations,
        compute_by_kind_s=tuple((k, v / w.iterations) for k, v in by_kind),
    )


def _name(model) -> str:
    return f"feed-forward {list(model.layer_widths)}" if isinstance(model, FeedForward) else model.name
