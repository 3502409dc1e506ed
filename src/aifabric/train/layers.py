"""Tensor-parallel layers, built by slicing a full layer's initial weights (so every plan starts from the
same model as the single-process run).

Each parameter carries `full_name` (its name in the single-process model) and `shard_dim` (the dim it is
split along across the TP group, or None when replicated) so the launcher can rebuild the full weights.

- ColumnLinear: output neurons split (seeds' Blog D WE-D.3: "GPU0 has neurons n1, n2"); input through
  f (AllReduce of input gradients in backward); output either kept sharded (feeding a RowLinear) or
  AllGathered (seeds' Ch. 8: "All-Gather between A1 and B1").
- RowLinear: input features split; partial outputs summed by AllReduce (g) in forward.
- ColumnConv: output channels split, then AllGather along channels.
- TPLSTM: hidden units split; h AllGathered every time step.
- TPBlock: attention heads split (Q, K, V column-parallel, output projection row-parallel) and the MLP
  column -> row, Megatron style.
- Embed, Head: the token embedding and the LM head split by vocabulary, the loss a vocabulary-parallel
  cross-entropy (Megatron's VocabParallelEmbedding and vocab_parallel_cross_entropy).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .comm import Comm, copy_to_tp, gather_from_tp, reduce_from_tp


@dataclass(frozen=True)
class TP:
    comm: Comm | None
    group: tuple[int, ...] = (0,)
    index: int = 0

    @property
    def size(self) -> int:
        return len(self.group)

    def bounds(self, n: int) -> tuple[int, int]:
        if n % self.size:
            raise ValueError(f"{n} is not divisible by tensor-parallel size {self.size}")
        k = n // self.size
        return self.index * k, (self.index + 1) * k


def param(t: torch.Tensor, full_name: str, shard_dim: int | None) -> nn.Parameter:
    p = nn.Parameter(t.detach().clone().contiguous())
    p.full_name, p.shard_dim = full_name, shard_dim
    return p


def _gather(x, tp: TP, dim: int, tag: str = "tp/fwd/all-gather"):
    if dim == -1 or dim == x.dim() - 1:
        return gather_from_tp(x, tp.comm, tp.group, tag)
    return gather_from_tp(x.movedim(dim, -1), tp.comm, tp.group, tag).movedim(-1, dim)


class ColumnLinear(nn.Module):
    def __init__(self, full: nn.Linear, name: str, tp: TP, gather: bool, act: str = "", tag: str = "tp"):
        super().__init__()
        a, b = tp.bounds(full.out_features)
        self.tp, self.gather, self.act, self.tag = tp, gather, act, tag
        self.weight = param(full.weight[a:b], f"{name}.weight", 0)
        self.bias = param(full.bias[a:b], f"{name}.bias", 0) if full.bias is not None else None

    def forward(self, x):
        y = F.linear(copy_to_tp(x, self.tp.comm, self.tp.group, f"{self.tag}/bwd/all-reduce"), self.weight, self.bias)
        y = activation(y, self.act)
        return _gather(y, self.tp, -1, f"{self.tag}/fwd/all-gather") if self.gather else y


class RowLinear(nn.Module):
    def __init__(self, full: nn.Linear, name: str, tp: TP, act: str = "", tag: str = "tp"):
        super().__init__()
        a, b = tp.bounds(full.in_features)
        self.tp, self.act, self.tag = tp, act, tag
        self.weight = param(full.weight[:, a:b], f"{name}.weight", 1)
        self.bias = param(full.bias, f"{name}.bias", None)

    def forward(self, x):
        y = reduce_from_tp(F.linear(x, self.weight), self.tp.comm, self.tp.group, f"{self.tag}/fwd/all-reduce")
        return activation(y + self.bias, self.act)


def activation(y, act: str):
    if act == "relu":
        return F.relu(y)
    if act == "gelu":
        return F.gelu(y)
    return y


class ColumnConv(nn.Module):
    """Conv -> ReLU -> MaxPool(2) -> flatten, output channels split across the TP group."""

    def __init__(self, full: nn.Conv2d, name: str, tp: TP):
        super().__init__()
        a, b = tp.bounds(full.out_channels)
        self.tp = tp
        self.weight = param(full.weight[a:b], f"{name}.weight", 0)
        self.bias = param(full.bias[a:b], f"{name}.bias", 0)

    def forward(self, x):
        y = F.conv2d(copy_to_tp(x, self.tp.comm, self.tp.group), self.weight, self.bias)
        y = F.max_pool2d(F.relu(y), 2)
        return _gather(y, self.tp, 1).flatten(1)


class TPLSTM(nn.Module):
    """The Chapter 6 LSTM cell over a sequence (B, T, I) -> last hidden state (B, H); gates are four
    (I + H) -> H linear maps whose rows (hidden units) are split across the TP group. `book`: the book's cell
    (Deep Learning for Network Engineers, Chapter 6): ReLU for the input activation and the output
    activation, no biases; otherwise the standard cell (tanh, biases)."""

    GATES = ("i", "f", "g", "o")

    def __init__(self, full: nn.ModuleDict, name: str, tp: TP, book: bool = False):
        super().__init__()
        self.tp, self.book = tp, book
        self.hidden = full["i"].out_features
        a, b = tp.bounds(self.hidden)
        self.w = nn.ParameterDict({k: param(full[k].weight[a:b], f"{name}.{k}.weight", 0) for k in self.GATES})
        self.b = nn.ParameterDict(
            {k: param(full[k].bias[a:b], f"{name}.{k}.bias", 0) for k in self.GATES if full[k].bias is not None}
        )

    def forward(self, x):
        bsz, steps, _ = x.shape
        x = copy_to_tp(x, self.tp.comm, self.tp.group)
        local = self.hidden // self.tp.size
        act = torch.relu if self.book else torch.tanh
        h_full = x.new_zeros(bsz, self.hidden)
        c = x.new_zeros(bsz, local)
        for t in range(steps):
            h_in = h_full if t == 0 else copy_to_tp(h_full, self.tp.comm, self.tp.group)
            xh = torch.cat([x[:, t], h_in], dim=1)
            i, f, g, o = (F.linear(xh, self.w[k], self.b[k] if k in self.b else None) for k in self.GATES)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * act(g)
            h = torch.sigmoid(o) * act(c)
            h_full = _gather(h, self.tp, -1)
        return h_full


class Replicated(nn.Module):
    """A layer every TP rank holds whole (position embedding, layer norms): its gradients are already
    identical."""

    def __init__(self, full: nn.Module, name: str):
        super().__init__()
        full = copy.deepcopy(full)
        self.inner = full
        for pname, p in list(full.named_parameters()):
            owner = full.get_submodule(pname.rsplit(".", 1)[0]) if "." in pname else full
            setattr(owner, pname.rsplit(".", 1)[-1], param(p, f"{name}.{pname}", None))

    def forward(self, *a):
        return self.inner(*a)


class TPBlock(nn.Module):
    """Pre-norm transformer block (seeds' Ch. 7), causal self-attention with heads split across TP ranks."""

    def __init__(self, full: nn.ModuleDict, name: str, tp: TP, heads: int):
        super().__init__()
        if heads % tp.size:
            raise ValueError(f"{heads} heads are not divisible by tensor-parallel size {tp.size}")
        self.tp, self.local_heads = tp, heads // tp.size
        self.ln1 = Replicated(full["ln1"], f"{name}.ln1")
        self.ln2 = Replicated(full["ln2"], f"{name}.ln2")
        self.q = ColumnLinear(full["q"], f"{name}.q", tp, gather=False)
        self.k = ColumnLinear(full["k"], f"{name}.k", tp, gather=False)
        self.v = ColumnLinear(full["v"], f"{name}.v", tp, gather=False)
        self.name = name
        self.proj = RowLinear(full["proj"], f"{name}.proj", tp, tag=f"tp/L{name}/attn-out")
        self.fc = ColumnLinear(full["fc"], f"{name}.fc", tp, gather=False, act="gelu", tag=f"tp/L{name}/mlp-in")
        self.out = RowLinear(full["out"], f"{name}.out", tp, tag=f"tp/L{name}/mlp-out")

    def forward(self, x):
        bsz, steps, _ = x.shape
        h = self.ln1(x)
        # one f for Q, K and V together: their input gradients are summed by a single AllReduce
        h = copy_to_tp(h, self.tp.comm, self.tp.group, f"tp/L{self.name}/attn-in/bwd/all-reduce")
        q, k, v = (
            F.linear(h, m.weight, m.bias).view(bsz, steps, self.local_heads, -1).transpose(1, 2)
            for m in (self.q, self.k, self.v)
        )
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(bsz, steps, -1))
        return x + self.out(self.fc(self.ln2(x)))


class VocabEmbedding(nn.Module):
    """Megatron's VocabParallelEmbedding: each TP rank holds rows [a, b) of the token table; a token
    outside them looks up zeros, and the partial outputs are summed by an AllReduce (g) in forward. The
    backward needs no collective: the output gradient is the same on every TP rank, and each rank's rows
    receive the gradient of its own tokens."""

    def __init__(self, full: nn.Embedding, name: str, tp: TP, tag: str = "tp/embed"):
        super().__init__()
        self.lo, self.hi = tp.bounds(full.num_embeddings)
        self.tp, self.tag = tp, tag
        self.weight = param(full.weight[self.lo : self.hi], f"{name}.weight", 0)

    def forward(self, idx):
        if self.tp.comm is None or self.tp.size == 1:
            return F.embedding(idx, self.weight)
        outside = (idx < self.lo) | (idx >= self.hi)
        y = F.embedding((idx - self.lo).masked_fill(outside, 0), self.weight).masked_fill(outside.unsqueeze(-1), 0.0)
        return reduce_from_tp(y, self.tp.comm, self.tp.group, f"{self.tag}/fwd/all-reduce")


class Embed(nn.Module):
    """Token embedding split by vocabulary across the TP group (Megatron), learned positions replicated."""

    def __init__(self, full: nn.ModuleDict, name: str, tp: TP):
        super().__init__()
        self.tok = VocabEmbedding(full["tok"], f"{name}.tok", tp)
        self.pos = Replicated(full["pos"], f"{name}.pos")

    def forward(self, idx):
        return self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))


class Head(nn.Module):
    """Final norm (replicated) and the LM head split by vocabulary (column parallel, its output kept
    split: f's AllReduce of the input gradient in backward); `loss` is the vocabulary-parallel
    cross-entropy on the split logits (no AllGather of the logits)."""

    def __init__(self, full: nn.ModuleDict, name: str, tp: TP):
        super().__init__()
        self.tp = tp
        self.ln = Replicated(full["ln"], f"{name}.ln")
        self.lm = ColumnLinear(full["lm"], f"{name}.lm", tp, gather=False, tag="tp/head")

    def forward(self, x):
        return self.lm(self.ln(x))

    def loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy over the tokens, from this rank's slice of the logits."""
        logits, target = logits.reshape(-1, logits.shape[-1]), target.reshape(-1)
        if self.tp.comm is None or self.tp.size == 1:
            return F.cross_entropy(logits, target)
        return VocabParallelCrossEntropy.apply(logits, target, self.tp.comm, self.tp.group, self.tp.index).mean()


class VocabParallelCrossEntropy(torch.autograd.Function):
    """Megatron's vocab_parallel_cross_entropy: per token, the maximum logit (AllReduce MAX), the target's
    logit (AllReduce SUM: only the rank holding the target contributes) and the sum of the exponentials
    (AllReduce SUM), each of one fp32 value per token; loss = log(sum exp) - target logit. The backward
    is local: softmax minus one-hot on this rank's slice of the vocabulary."""

    @staticmethod
    def forward(ctx, logits, target, comm: Comm, group: tuple[int, ...], index: int):
        logits = logits.float()
        width = logits.shape[-1]
        lo = index * width
        top = logits.max(dim=-1)[0].contiguous()
        comm.all_reduce(top, group, "tp/xent/max-logit", op="max")
        shifted = logits - top.unsqueeze(-1)
        outside = (target < lo) | (target >= lo + width)
        local = (target - lo).masked_fill(outside, 0)
        picked = shifted.gather(-1, local.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0.0).contiguous()
        comm.all_reduce(picked, group, "tp/xent/target-logit")
        exp = shifted.exp()
        total = exp.sum(dim=-1).contiguous()
        comm.all_reduce(total, group, "tp/xent/sum-exp")
        ctx.save_for_backward(exp / total.unsqueeze(-1), outside, local)
        return total.log() - picked

    @staticmethod
    def backward(ctx, g):
        softmax, outside, local = ctx.saved_tensors
        grad = softmax.clone()
        grad.scatter_add_(-1, local.unsqueeze(-1), -(~outside).to(grad.dtype).unsqueeze(-1))
        return grad * g.unsqueeze(-1), None, None, None, None
