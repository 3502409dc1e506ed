"""The small models of Deep Learning for Network Engineers as sequences of units (a pipeline stage holds a
contiguous run of units):

- fnn: the Ch. 3 network on the 8x8 digits: 64 -> 128 ReLU -> 10 (softmax in the loss); `layers` gives other
  widths (input first, output last; inputs other than 64 or outputs other than 10 train on generated data,
  one output with the Ch. 2 loss 0.5·(ŷ - y)², e.g. the model-parallel 4-3-2-1 network of the book's blog
  post "Parallelization Strategies in Neural Networks").
- cnn: a Ch. 4-style CNN: conv 3x3 (8 kernels) -> ReLU -> max-pool 2 -> 72 -> 32 ReLU -> 10 (`layers`:
  kernels, then dense hidden widths).
- lstm: the Ch. 6 LSTM reading each digit row by row (8 steps of 8 pixels), hidden 32 -> 10 (`layers`: the
  hidden units); cell "book": the book's cell (ReLU input and output activations, no biases, nor in the
  output layer).
- gpt: a Ch. 7-style decoder: token + position embedding, 2 pre-norm blocks (4 heads, width 32,
  MLP 128), final norm and LM head (no bias, untied, as GPT-2's), on generated text (16 characters of
  context). Under TP the token embedding and the LM head are split by vocabulary and the loss is a
  vocabulary-parallel cross-entropy (Megatron).

`full_units` builds the single-process model from a seed (PyTorch's default initialisation, in a fixed
order); `build_stage` slices it for one (pipeline stage, tensor-parallel rank).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..workload.small_models import DIGITS_CLASSES, DIGITS_INPUT, TRAINER_LAYERS
from . import data as data_mod
from .book_tp import BookBlock, BookEmbed, BookHead, BookLinear
from .layers import (
    TP,
    TPLSTM,
    ColumnConv,
    ColumnLinear,
    Embed,
    Head,
    RowLinear,
    TPBlock,
)
from .names import MODELS  # noqa: F401  (re-exported: the names the command line checks)

GPT_WIDTH, GPT_HEADS, GPT_LAYERS, GPT_CONTEXT = 32, 4, 2, 16


@dataclass(frozen=True)
class Unit:
    kind: str  # linear | conv | lstm | embed | block | head
    module: nn.Module
    act: str = ""


def full_units(
    model: str, seed: int, vocab_size: int = 0, layers: tuple[int, ...] = (), cell: str = "standard"
) -> list[Unit]:
    torch.manual_seed(seed)
    if model == "fnn":
        w = tuple(layers) or TRAINER_LAYERS["fnn"]
        return [
            Unit("linear", nn.Linear(a, b), "relu" if i < len(w) - 2 else "") for i, (a, b) in enumerate(zip(w, w[1:]))
        ]
    if model == "cnn":
        kernels, *hidden = tuple(layers) or TRAINER_LAYERS["cnn"]
        widths = (kernels * 3 * 3, *hidden, DIGITS_CLASSES)  # 8x8 -> conv 3 -> 6x6 -> pool 2 -> 3x3
        return [Unit("conv", nn.Conv2d(1, kernels, 3))] + [
            Unit("linear", nn.Linear(a, b), "relu" if i < len(widths) - 2 else "")
            for i, (a, b) in enumerate(zip(widths, widths[1:]))
        ]
    if model == "lstm":
        (width,) = tuple(layers) or TRAINER_LAYERS["lstm"]
        gates = nn.ModuleDict({k: nn.Linear(8 + width, width, bias=cell != "book") for k in TPLSTM.GATES})
        # the book's cell writes no biases (nor does its SoftMax layer here: the zoo's LSTM has one bias switch)
        return [
            Unit("lstm", gates, "book" if cell == "book" else ""),
            Unit("linear", nn.Linear(width, 10, bias=cell != "book")),
        ]
    if model == "gpt":
        d = GPT_WIDTH
        units = [
            Unit("embed", nn.ModuleDict({"tok": nn.Embedding(vocab_size, d), "pos": nn.Embedding(GPT_CONTEXT, d)}))
        ]
        for _ in range(GPT_LAYERS):
            units.append(
                Unit(
                    "block",
                    nn.ModuleDict(
                        {
                            "ln1": nn.LayerNorm(d),
                            "q": nn.Linear(d, d),
                            "k": nn.Linear(d, d),
                            "v": nn.Linear(d, d),
                            "proj": nn.Linear(d, d),
                            "ln2": nn.LayerNorm(d),
                            "fc": nn.Linear(d, 4 * d),
                            "out": nn.Linear(4 * d, d),
                        }
                    ),
                )
            )
        units.append(Unit("head", nn.ModuleDict({"ln": nn.LayerNorm(d), "lm": nn.Linear(d, vocab_size, bias=False)})))
        return units
    raise ValueError(f"unknown model {model!r}")


def build_stage(units: list[Unit], start: int, stop: int, tp: TP, style: str = "megatron") -> nn.Sequential:
    """Units [start, stop) for one TP rank. Two linear units in a row become column -> row parallel (one
    AllReduce); a linear unit alone is column parallel with an AllGather of its output. style "book": the
    book's tensor parallelism (train/book_tp.py)."""
    if style == "book":
        return _build_book_stage(units, start, stop, tp)
    mods: list[nn.Module] = []
    i = start
    while i < stop:
        u, name = units[i], str(i)
        if u.kind == "linear" and i + 1 < stop and units[i + 1].kind == "linear":
            mods.append(ColumnLinear(u.module, name, tp, gather=False, act=u.act))
            mods.append(RowLinear(units[i + 1].module, str(i + 1), tp, act=units[i + 1].act))
            i += 2
            continue
        if u.kind == "linear":
            mods.append(ColumnLinear(u.module, name, tp, gather=True, act=u.act))
        elif u.kind == "conv":
            mods.append(ColumnConv(u.module, name, tp))
        elif u.kind == "lstm":
            mods.append(TPLSTM(u.module, name, tp, book=u.act == "book"))
        elif u.kind == "embed":
            mods.append(Embed(u.module, name, tp))
        elif u.kind == "block":
            mods.append(TPBlock(u.module, name, tp, GPT_HEADS))
        elif u.kind == "head":
            mods.append(Head(u.module, name, tp))
        i += 1
    return nn.Sequential(*mods)


def _build_book_stage(units: list[Unit], start: int, stop: int, tp: TP) -> nn.Sequential:
    mods: list[nn.Module] = []
    for i in range(start, stop):
        u, name = units[i], str(i)
        if u.kind == "linear":
            mods.append(BookLinear(u.module, name, tp, act=u.act))
        elif u.kind == "embed":
            mods.append(BookEmbed(u.module, name, tp))
        elif u.kind == "block":
            mods.append(BookBlock(u.module, name, tp, GPT_HEADS))
        elif u.kind == "head":
            mods.append(BookHead(u.module, name, tp))
        else:
            raise ValueError(f"the book's tensor parallelism (Chapter 8) has no {u.kind} layer: fnn and gpt only")
    return nn.Sequential(*mods)


@dataclass(frozen=True)
class Dataset:
    """Inputs and targets for the whole data set (numpy), and how a batch of indices becomes tensors."""

    model: str
    x: np.ndarray
    y: np.ndarray
    vocab_size: int = 0
    loss: str = "xent"  # xent: cross-entropy of class labels; mse: 0.5·(ŷ - y)² (the book's Ch. 2)

    def __len__(self) -> int:
        return len(self.x)

    def batch(self, idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = torch.from_numpy(self.x[idx]), torch.from_numpy(self.y[idx])
        if self.model == "cnn":
            x = x.view(-1, 1, 8, 8)
        elif self.model == "lstm":
            x = x.view(-1, 8, 8)
        return x, y


def dataset(model: str, seed: int, layers: tuple[int, ...] = ()) -> Dataset:
    if model == "fnn" and layers and (layers[0], layers[-1]) != (DIGITS_INPUT, DIGITS_CLASSES):
        x, y = data_mod.teacher_data(np.random.default_rng(seed), layers[0], layers[-1])
        return Dataset(model, x, y, loss="mse" if layers[-1] == 1 else "xent")
    if model == "gpt":
        text = data_mod.generated_text(np.random.default_rng(seed))
        vocab = data_mod.vocabulary(text)
        ids = np.array([vocab.index(c) for c in text], dtype=np.int64)
        n = (len(ids) - 1) // GPT_CONTEXT
        x = ids[: n * GPT_CONTEXT].reshape(n, GPT_CONTEXT)
        y = ids[1 : n * GPT_CONTEXT + 1].reshape(n, GPT_CONTEXT)
        return Dataset(model, x, y, len(vocab))
    x, y = data_mod.digits()
    return Dataset(model, x, y)


def loss_fn(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def mse_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The book's Chapter 2 loss, 0.5·(ŷ - y)², averaged over the samples."""
    return 0.5 * ((out - y) ** 2).mean()


def stage_loss(stage: nn.Sequential, data: Dataset | None = None):
    """The loss of a stage's output: the GPT head's vocabulary-parallel cross-entropy (its logits stay
    split across the TP group), else the cross-entropy of the full output (0.5·(ŷ - y)² for a data set of
    regression targets)."""
    last = stage[-1] if len(stage) else None
    if isinstance(last, Head):
        return last.loss
    return mse_fn if data is not None and data.loss == "mse" else loss_fn


def default_batch(model: str) -> int:
    return 16 if model == "gpt" else 32
