"""The seeds' small models as sequences of units (a pipeline stage holds a contiguous run of units):

- fnn: the Ch. 3 network on the 8x8 digits: 64 -> 128 ReLU -> 10 (softmax in the loss).
- cnn: a Ch. 4-style CNN: conv 3x3 (8 kernels) -> ReLU -> max-pool 2 -> 72 -> 32 ReLU -> 10.
- lstm: the Ch. 6 LSTM reading each digit row by row (8 steps of 8 pixels), hidden 32 -> 10.
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

from . import data as data_mod
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


def full_units(model: str, seed: int, vocab_size: int = 0) -> list[Unit]:
    torch.manual_seed(seed)
    if model == "fnn":
        return [Unit("linear", nn.Linear(64, 128), "relu"), Unit("linear", nn.Linear(128, 10))]
    if model == "cnn":
        return [Unit("conv", nn.Conv2d(1, 8, 3)), Unit("linear", nn.Linear(72, 32), "relu"),
                Unit("linear", nn.Linear(32, 10))]
    if model == "lstm":
        gates = nn.ModuleDict({k: nn.Linear(8 + 32, 32) for k in TPLSTM.GATES})
        return [Unit("lstm", gates), Unit("linear", nn.Linear(32, 10))]
    if model == "gpt":
        d = GPT_WIDTH
        units = [Unit("embed", nn.ModuleDict({"tok": nn.Embedding(vocab_size, d),
                                              "pos": nn.Embedding(GPT_CONTEXT, d)}))]
        for _ in range(GPT_LAYERS):
            units.append(Unit("block", nn.ModuleDict({
                "ln1": nn.LayerNorm(d), "q": nn.Linear(d, d), "k": nn.Linear(d, d), "v": nn.Linear(d, d),
                "proj": nn.Linear(d, d), "ln2": nn.LayerNorm(d), "fc": nn.Linear(d, 4 * d),
                "out": nn.Linear(4 * d, d)})))
        units.append(Unit("head", nn.ModuleDict({"ln": nn.LayerNorm(d), "lm": nn.Linear(d, vocab_size, bias=False)})))
        return units
    raise ValueError(f"unknown model {model!r}")


def build_stage(units: list[Unit], start: int, stop: int, tp: TP) -> nn.Sequential:
    """Units [start, stop) for one TP rank. Two linear units in a row become column -> row parallel (one
    AllReduce); a linear unit alone is column parallel with an AllGather of its output."""
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
            mods.append(TPLSTM(u.module, name, tp))
        elif u.kind == "embed":
            mods.append(Embed(u.module, name, tp))
        elif u.kind == "block":
            mods.append(TPBlock(u.module, name, tp, GPT_HEADS))
        elif u.kind == "head":
            mods.append(Head(u.module, name, tp))
        i += 1
    return nn.Sequential(*mods)


@dataclass(frozen=True)
class Dataset:
    """Inputs and targets for the whole data set (numpy), and how a batch of indices becomes tensors."""

    model: str
    x: np.ndarray
    y: np.ndarray
    vocab_size: int = 0

    def __len__(self) -> int:
        return len(self.x)

    def batch(self, idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = torch.from_numpy(self.x[idx]), torch.from_numpy(self.y[idx])
        if self.model == "cnn":
            x = x.view(-1, 1, 8, 8)
        elif self.model == "lstm":
            x = x.view(-1, 8, 8)
        return x, y


def dataset(model: str, seed: int) -> Dataset:
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


def stage_loss(stage: nn.Sequential):
    """The loss of a stage's output: the GPT head's vocabulary-parallel cross-entropy (its logits stay
    split across the TP group), else the cross-entropy of the full output."""
    last = stage[-1] if len(stage) else None
    return last.loss if isinstance(last, Head) else loss_fn


def default_batch(model: str) -> int:
    return 16 if model == "gpt" else 32
