"""The seeds' small models (feed-forward, CNN, LSTM) trained in data, tensor and pipeline parallelism, as
`aifabric train` runs them (src/aifabric/train/models.py, layers.py, schedule.py, grad_sync.py) -> every
rank's ordered operations.

A model is a sequence of units: a linear layer, a convolution (with ReLU and max-pool), an LSTM layer
(read over its time steps). A pipeline stage holds a contiguous run of units (`stage_bounds`, the first
stages get the extra). Inside a stage, tensor parallelism splits the units as the trainer does:

- two linear units in a row: column -> row parallel (Megatron): the row-parallel partial outputs summed
  by an AllReduce in forward (b x out); in backward the AllReduce of the column-parallel layer's input
  gradient (b x in);
- a linear unit alone: column parallel with an AllGather of its output (b x out) in forward, the AllReduce
  of its input gradient in backward;
- a convolution: output channels split, an AllGather of the pooled feature maps (b x flatten width), the
  input gradient's AllReduce in backward;
- an LSTM layer: hidden units split, h AllGathered after every time step (b x hidden); in backward the
  AllReduce of h's gradient for every step but the first (h_0 is zero), then the input's.

An input gradient is only computed (and AllReduced) when something needs it: not for the first unit of
the first stage (the data). Parameters held by a GPU: weights and column-parallel biases split by tp,
row-parallel biases whole.

The book's tensor parallelism (`tp_style="book"`, feed-forward networks; Deep Learning for Network
Engineers, Chapter 8 and its Figure 8-18): every linear unit alone, each TP rank holding the whole layer
and computing its share of the neurons; an AllGather of the weighted sums (b x out) in forward, the
activation applied on the gathered vector; in backward each rank computes the gradients of its own neurons'
weights and the AllReduce of the layer's weight gradients (weight and bias, zero outside the rank's
neurons: out x in + out elements) gives every rank all of them; the input gradient needs no collective
(every rank holds the whole weight matrix and the whole output gradient). Parameters held: whole layers.

Pipeline: the schedule's passes in order (workload/pipeline.py `stage_order`, GPipe or 1F1B); a forward
receives the activations (b x the stage's input width) and sends its output on, a backward receives the
output gradient and sends the input gradient back. Data parallelism: gradients of the last micro-batch's
backward are AllReduced in DDP buckets (workload/buckets.py: whole parameters in reverse registration
order, closed once they hold `bucket_mb`), each launched on the "dp" stream the moment its last gradient
is accumulated (before the unit's input-gradient AllReduce: PyTorch's autograd runs gradient
accumulation first), and the optimizer step (SGD, 2 FLOP per parameter) waits for them.

Compute durations: forward FLOPs (2 per multiply-accumulate: linear in x out + out, each kernel at every
output position, each LSTM weight at every time step) / tp, backward twice that, at the plan's
`compute_efficiency` of the GPU's dense peak (SMALL_MODEL_EFFICIENCY when the plan leaves it to the kernel
model: these workloads exist to be compared with traced training op by op, not for their compute time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..catalog import GpuSpec
from ..models.cnn import CNN, Conv, conv_output_side
from ..models.feedforward import FeedForward
from ..models.lstm import GATES, LSTM
from ..units import BYTES_PER_ELEMENT
from .buckets import ddp_buckets
from .compute import duration_s
from .ops import Collective, Compute, Op, Recv, Send, Wait, Workload
from .pipeline import F, stage_bounds, stage_order
from .plan import Plan

SMALL_MODEL_EFFICIENCY = 0.45
MIB = 2**20
SmallModel = FeedForward | CNN | LSTM
TP_STYLES = ("megatron", "book")

# `aifabric train --layers`: what the numbers mean per model, and the defaults (the zoo's digits-* models)
TRAINER_LAYERS = {"fnn": (64, 128, 10), "cnn": (8, 32), "lstm": (32,)}
DIGITS_INPUT, DIGITS_CLASSES = 64, 10


def layers_problem(model: str, layers: tuple[int, ...]) -> str | None:
    """Why `layers` cannot describe the trainer's `model` (None: they can)."""
    if not layers:
        return None
    if model not in TRAINER_LAYERS:
        return f"{model} has fixed sizes (layer sizes are for fnn, cnn and lstm)"
    if any(n < 1 for n in layers):
        return "every size must be at least 1"
    if model == "fnn" and len(layers) < 2:
        return "fnn: the input width, any hidden widths, the output width (e.g. 64,128,10 or 4,3,2,1)"
    if model == "lstm" and len(layers) != 1:
        return "lstm: one number, the hidden units (e.g. 32)"
    return None


def trainer_model(model: str, layers: tuple[int, ...] = (), cell: str = "standard") -> SmallModel:
    """The model `aifabric train --model M --layers ... --cell ...` trains (train/models.py `full_units`):
    fnn layers = widths from input to output (inputs other than 64 or outputs other than 10 train on
    generated data); cnn layers = conv kernels, then the dense hidden widths (8x8 digits in, 10 classes out);
    lstm layers = hidden units; cell "book": the book's LSTM cell (no biases)."""
    layers = tuple(layers) or TRAINER_LAYERS[model]
    if model == "fnn":
        return FeedForward(tuple(layers))
    if model == "cnn":
        return CNN("digits-cnn", 8, 1, (Conv(layers[0], 3, 1, pool=2),), (*layers[1:], DIGITS_CLASSES), bias=True)
    if model == "lstm":
        return LSTM(
            "digits-lstm", input_size=8, hidden=layers[0], output_size=DIGITS_CLASSES, time_steps=8, bias=cell != "book"
        )
    raise ValueError(f"no small model {model!r}")


@dataclass(frozen=True)
class Unit:
    """One layer of a small model, as the trainer holds it; `split`: the dimension tensor parallelism
    divides (output features, kernels, hidden units)."""

    kind: str  # linear | conv | lstm
    in_width: int  # elements per sample entering the unit
    out_width: int  # elements per sample leaving it (the full width, after any AllGather)
    flops: float  # forward FLOPs per sample, whole unit
    split: int
    weight: int  # elements of the full weight(s)
    bias: int  # elements of the full bias(es)
    steps: int = 1  # LSTM time steps
    hidden: int = 0  # LSTM hidden units


def units_of(model: SmallModel) -> list[Unit]:
    """The trainer's units of a zoo model (train/models.py `full_units`)."""
    if isinstance(model, FeedForward):
        w = model.layer_widths
        return [_linear(a, b, model.bias) for a, b in zip(w, w[1:])]
    if isinstance(model, CNN):
        out: list[Unit] = []
        side, ch = model.input_side, model.input_channels
        for c in model.convs:
            o = conv_output_side(side, c.size, c.stride)
            pooled = o // c.pool if c.pool else o
            out.append(
                Unit(
                    "conv",
                    side * side * ch,
                    pooled * pooled * c.kernels,
                    2.0 * o * o * c.kernels * c.size * c.size * ch,
                    c.kernels,
                    c.kernels * c.size * c.size * ch,
                    c.kernels if model.bias else 0,
                )
            )
            side, ch = pooled, c.kernels
        widths = (model.flatten_width, *model.dense)
        return out + [_linear(a, b, model.bias) for a, b in zip(widths, widths[1:])]
    if isinstance(model, LSTM):
        out, width = [], model.input_size
        for _ in range(model.layers):
            h = model.hidden
            params = model.layer_params(width)
            out.append(
                Unit(
                    "lstm",
                    model.time_steps * width,
                    h,
                    2.0 * params * model.time_steps,
                    h,
                    GATES * h * (width + h),
                    params - GATES * h * (width + h),
                    steps=model.time_steps,
                    hidden=h,
                )
            )
            width = h
        if model.output_size:
            out.append(_linear(model.hidden, model.output_size, model.bias))
        return out
    raise TypeError(f"not a small model: {type(model).__name__}")


def _linear(a: int, b: int, bias: bool) -> Unit:
    return Unit("linear", a, b, 2.0 * (a * b + (b if bias else 0)), b, a * b, b if bias else 0)


@dataclass(frozen=True)
class _Module:
    """What one TP rank runs: `units` (one, or a column -> row pair of linear units)."""

    kind: str  # column | pair | conv | lstm | book
    units: tuple[int, ...]


def stage_modules(units: list[Unit], start: int, stop: int, tp_style: str = "megatron") -> list[_Module]:
    """train/models.py `build_stage`: two linear units in a row become column -> row parallel; in the book's
    style every linear unit stands alone."""
    mods, i = [], start
    while i < stop:
        u = units[i]
        if tp_style == "book":
            if u.kind != "linear":
                raise ValueError(f"the book's tensor parallelism is for linear layers (layer {i} is {u.kind})")
            mods.append(_Module("book", (i,)))
            i += 1
            continue
        if u.kind == "linear" and i + 1 < stop and units[i + 1].kind == "linear":
            mods.append(_Module("pair", (i, i + 1)))
            i += 2
            continue
        mods.append(_Module("column" if u.kind == "linear" else u.kind, (i,)))
        i += 1
    return mods


def module_params(units: list[Unit], mod: _Module, tp: int) -> list[int]:
    """Elements of the parameters one GPU holds, in the trainer's registration order."""
    if mod.kind == "pair":
        col, row = units[mod.units[0]], units[mod.units[1]]
        return [p for p in (col.weight // tp, col.bias // tp, row.weight // tp, row.bias) if p]
    u = units[mod.units[0]]
    if mod.kind == "book":  # every TP rank holds the whole layer
        return [p for p in (u.weight, u.bias) if p]
    if mod.kind == "lstm":  # TPLSTM: the four gates' weights, then their biases
        return [u.weight // GATES // tp] * GATES + ([u.bias // GATES // tp] * GATES if u.bias else [])
    return [p for p in (u.weight // tp, u.bias // tp) if p]


def check_plan(model: SmallModel, plan: Plan, tp_style: str = "megatron") -> list[str]:
    """What makes the plan impossible for the model (empty: none)."""
    units = units_of(model)
    out = []
    if tp_style not in TP_STYLES:
        out.append(f"tp_style {tp_style!r}: one of {', '.join(TP_STYLES)}")
    elif tp_style == "book" and any(u.kind != "linear" for u in units):
        out.append("the book's tensor parallelism (Chapter 8) is for feed-forward networks")
    if plan.cp > 1 or plan.ep > 1 or plan.zero or plan.sequence_parallel:
        out.append("the small models' trainer has data, tensor and pipeline parallelism only")
    if plan.schedule not in ("gpipe", "1f1b"):
        out.append(f"schedule {plan.schedule!r}: gpipe or 1f1b")
    if plan.pp > len(units):
        out.append(f"pp={plan.pp} exceeds the model's {len(units)} layers")
    for stage in range(min(plan.pp, len(units))):
        for mod in stage_modules(
            units,
            *stage_bounds(len(units), plan.pp, stage),
            tp_style if tp_style in TP_STYLES and not out else "megatron",
        ):
            u = units[mod.units[0]]  # the column-parallel part (a pair's row-parallel part splits its input)
            if u.split % plan.tp:
                out.append(
                    f"tp={plan.tp} must divide layer {mod.units[0]}'s {u.split} "
                    f"{'channels' if u.kind == 'conv' else 'outputs'}"
                )
    if plan.global_batch_size % (plan.dp * plan.micro_batch_size):
        out.append(f"global batch {plan.global_batch_size} must be divisible by dp x micro-batch size")
    return out


class StageRank:
    """One rank of a small model's or the book GPT's training (workload/book_gpt.py): its place in the plan (pipeline
    stage, tensor- and data-parallel groups, the same position on the other stages), the ops it emits (compute,
    tensor-parallel collectives, pipeline sends and receives) and an iteration: the schedule's passes, each
    forward receiving from the previous stage and sending to the next, each backward the other way, the DDP
    buckets launched during the last backward, then the wait for them and the optimizer step (SGD, 2 FLOP per
    parameter). A model's builder gives `params` (per part of its stage, elements per tensor in registration
    order), `forward`, `backward`, `buckets` and `boundary_bytes`."""

    def __init__(self, plan: Plan, gpu: GpuSpec, rank: int):
        self.p, self.gpu, self.rank = plan, gpu, rank
        lay = plan.layout
        self.c = lay.coords(rank)
        self.stage = self.c["pp"]
        self.tp_group = lay.group(rank, "tp")
        self.dp_group = lay.group(rank, "dp")
        self.peers = [lay.rank(tp=self.c["tp"], dp=self.c["dp"], pp=s) for s in range(plan.pp)]
        self.bpe = BYTES_PER_ELEMENT[plan.precision]
        self.params: list[list[int]] = []
        self.ops: list[Op] = []

    # ---- emitters ---------------------------------------------------------------------------------
    def compute(self, name: str, flops: float) -> None:
        self.ops.append(
            Compute(
                name,
                flops,
                duration_s(flops, self.gpu, self.p.precision, self.p.compute_efficiency or SMALL_MODEL_EFFICIENCY),
            )
        )

    def tp(self, key: str, op: str, elements: int, label: str) -> None:
        if self.p.tp > 1:
            self.ops.append(
                Collective(f"{key}@{self.tp_group[0]}", op, self.tp_group, int(elements), self.bpe, label, dim="tp")
            )

    def send(self, key: str, stage: int, size: int, label: str) -> None:
        self.ops.append(Send(f"{key}@{self.rank}", self.rank, self.peers[stage], size, label))

    def recv(self, key: str, stage: int, size: int, label: str) -> None:
        peer = self.peers[stage]
        self.ops.append(Recv(f"{key}@{peer}", peer, self.rank, size, label))

    # ---- what a model's builder gives ---------------------------------------------------------------
    def boundary_bytes(self) -> tuple[int, int]:
        """Bytes of a micro-batch's activations into the stage and out of it (their gradients the same)."""
        raise NotImplementedError

    def forward(self, pre: str) -> None:
        raise NotImplementedError

    def backward(self, pre: str, buckets: Any) -> None:
        raise NotImplementedError

    def buckets(self, it: int) -> Any:
        """The DDP buckets of iteration `it`'s last backward."""
        raise NotImplementedError

    # ---- one iteration ----------------------------------------------------------------------------
    def iteration(self, it: int) -> None:
        p, s = self.p, self.stage
        size_in, size_out = self.boundary_bytes()
        order = stage_order(p.schedule, p.pp, p.micro_batches, s)
        last_b = max(i for i, ref in enumerate(order) if ref.kind != F)
        for i, ref in enumerate(order):
            pre = f"it{it}/mb{ref.micro_batch}"
            if ref.kind == F:
                if s > 0:
                    self.recv(f"{pre}/act{s - 1}to{s}", s - 1, size_in, "activations")
                self.forward(pre)
                if s < p.pp - 1:
                    self.send(f"{pre}/act{s}to{s + 1}", s + 1, size_out, "activations")
                continue
            if s < p.pp - 1:
                self.recv(f"{pre}/grad{s + 1}to{s}", s + 1, size_out, "activation gradients")
            self.backward(pre, self.buckets(it) if i == last_b and p.dp > 1 else None)
            if s > 0:
                self.send(f"{pre}/grad{s}to{s - 1}", s - 1, size_in, "activation gradients")
        if p.dp > 1:
            self.ops.append(Wait("dp"))
        self.compute("optimizer", 2.0 * sum(map(sum, self.params)))


class DdpBuckets:
    """A stage's DDP buckets over its parameters in reverse registration order (parts last to first, each part's
    tensors last to first); `launch_ready` launches, in bucket order, every bucket whose gradients are all ready
    (the first `done` tensors of that order), on the "dp" stream without blocking."""

    def __init__(self, r: StageRank, it: int):
        self.r, self.it = r, it
        self.order = [(j, q) for j in reversed(range(len(r.params))) for q in reversed(range(len(r.params[j])))]
        self.sizes = [r.params[j][q] for j, q in self.order]
        self.buckets = ddp_buckets(self.sizes, r.p.bucket_mb * MIB / r.bpe)
        self.done = 0  # tensors (in self.order) whose gradients are ready
        self.launched = 0

    def launch_ready(self) -> None:
        while self.launched < len(self.buckets) and self.buckets[self.launched][-1] < self.done:
            idx, r = self.buckets[self.launched], self.r
            r.ops.append(
                Collective(
                    f"it{self.it}/dp-bucket{self.launched}@{r.dp_group[0]}",
                    "all-reduce",
                    r.dp_group,
                    int(sum(self.sizes[i] for i in idx)),
                    r.bpe,
                    "gradients",
                    blocking=False,
                    stream="dp",
                    dim="dp",
                )
            )
            self.launched += 1


class _Rank(StageRank):
    def __init__(self, model: SmallModel, plan: Plan, gpu: GpuSpec, rank: int, tp_style: str = "megatron"):
        super().__init__(plan, gpu, rank)
        self.b = plan.micro_batch_size
        self.units = units_of(model)
        self.start, self.stop = stage_bounds(len(self.units), plan.pp, self.stage)
        self.mods = stage_modules(self.units, self.start, self.stop, tp_style)
        self.params = [module_params(self.units, m, plan.tp) for m in self.mods]

    def boundary_bytes(self) -> tuple[int, int]:
        return (
            self.units[self.start].in_width * self.b * self.bpe,
            self.units[self.stop - 1].out_width * self.b * self.bpe,
        )

    def buckets(self, it: int) -> _Buckets:
        return _Buckets(self, it)

    def forward(self, pre: str) -> None:
        p, b = self.p, self.b
        for mod in self.mods:
            k = mod.units[0]
            u = self.units[k]
            if mod.kind == "pair":
                row = self.units[mod.units[1]]
                self.compute("fwd/linear", b * (u.flops + row.flops) / p.tp)
                self.tp(f"{pre}/u{k}/fwd-ar", "all-reduce", b * row.out_width, "activations")
            elif mod.kind == "lstm":
                for t in range(u.steps):
                    self.compute("fwd/lstm-step", b * u.flops / u.steps / p.tp)
                    self.tp(f"{pre}/u{k}/t{t}/fwd-ag", "all-gather", b * u.hidden, "hidden state")
            elif mod.kind == "book":
                self.compute("fwd/linear", b * u.flops / p.tp)
                self.tp(f"{pre}/u{k}/fwd-ag", "all-gather", b * u.out_width, "weighted sums")
            else:
                self.compute(f"fwd/{u.kind}", b * u.flops / p.tp)
                self.tp(f"{pre}/u{k}/fwd-ag", "all-gather", b * u.out_width, "activations")

    def backward(self, pre: str, buckets: _Buckets | None) -> None:
        p, b = self.p, self.b
        for j in reversed(range(len(self.mods))):
            mod = self.mods[j]
            k = mod.units[0]
            u = self.units[k]
            if mod.kind == "lstm":
                for t in reversed(range(u.steps)):
                    self.compute("bwd/lstm-step", 2 * b * u.flops / u.steps / p.tp)
                    if t > 0:
                        self.tp(f"{pre}/u{k}/t{t}/bwd-ar", "all-reduce", b * u.hidden, "hidden state gradient")
            elif mod.kind == "book":  # own neurons' weight gradients, the whole input gradient
                self.compute("bwd/linear", b * u.flops / p.tp + b * u.flops)
                self.tp(f"{pre}/u{k}/bwd-wgrad-ar", "all-reduce", u.weight + u.bias, "weight gradients")
            else:
                flops = u.flops + (self.units[mod.units[1]].flops if mod.kind == "pair" else 0.0)
                self.compute(f"bwd/{'linear' if mod.kind in ('pair', 'column') else u.kind}", 2 * b * flops / p.tp)
            if buckets is not None:
                buckets.add(j)
            if mod.kind != "book" and (k > self.start or self.stage > 0):  # the input needs its gradient
                self.tp(f"{pre}/u{k}/bwd-ar", "all-reduce", b * u.in_width, "input gradient")


class _Buckets(DdpBuckets):
    """`add(j)`: module j's gradients are accumulated, so every bucket whose last gradient that was is launched."""

    def add(self, module: int) -> None:
        while self.done < len(self.order) and self.order[self.done][0] == module:
            self.done += 1
        self.launch_ready()


def build_small_training(
    model: SmallModel,
    plan: Plan,
    gpu: GpuSpec,
    name: str = "small-training",
    iterations: int = 1,
    tp_style: str = "megatron",
) -> Workload:
    """Every rank's ops for `iterations` training steps of a feed-forward network, CNN or LSTM under the
    plan's data, tensor and pipeline parallelism (rank order: `plan.order`; the trainer's is tp-cp-pp-dp).
    `tp_style`: "megatron" (column -> row pairs) or "book" (Chapter 8: AllGather forward, AllReduce of the
    weight gradients backward; feed-forward networks)."""
    problems = check_plan(model, plan, tp_style)
    if problems:
        raise ValueError("; ".join(problems))
    ranks: list[list[Op]] = []
    for r in range(plan.world_size):
        b = _Rank(model, plan, gpu, r, tp_style)
        for it in range(iterations):
            b.iteration(it)
        ranks.append(b.ops)
    per_sample = sum(u.flops for u in units_of(model))
    style = " (the book's style)" if tp_style == "book" and plan.tp > 1 else ""
    label = model.name if not isinstance(model, FeedForward) else f"feed-forward {list(model.layer_widths)}"
    return Workload(
        name=name,
        ranks=ranks,
        params=model.params,
        iterations=iterations,
        flops_per_iteration=3.0 * per_sample * plan.global_batch_size,
        description=f"{label}, {model.params:,} parameters, tp{plan.tp}{style} pp{plan.pp} dp{plan.dp}, "
        f"{plan.schedule}, "
        f"m={plan.micro_batches}, batch {plan.global_batch_size}, {plan.precision}",
    )


__all__ = [
    "TP_STYLES",
    "TRAINER_LAYERS",
    "DdpBuckets",
    "StageRank",
    "Unit",
    "build_small_training",
    "check_plan",
    "layers_problem",
    "stage_modules",
    "trainer_model",
    "units_of",
]
