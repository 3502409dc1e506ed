"""The book's tensor parallelism (Deep Learning for Network Engineers, Chapter 8, Figures 8-15 ... 8-18, and the
4 x 8 split of its blog post "Parallelization Strategies in Neural Networks"), beside Megatron's (layers.py).

Every tensor-parallel rank holds whole layers (the book splits the work, not the memory) and computes its
share of each layer's neurons:

- BookLinear: the rank's rows of the weight matrix give its part of the weighted sums; an AllGather makes the
  whole vector on every rank ("partial output vectors synchronized with AllGather"), the activation follows.
  Backward: the rank computes the gradients of its own neurons' weights; the AllReduce of the layer's weight
  gradients (zero outside the rank's rows) gives every rank all of them, before the update (the book's
  "AllReduce across the TP GPUs"). The input gradient needs no collective: every rank holds the whole weight
  matrix and the whole output gradient.
- BookEmbed: the embedding lives on the first rank of the group, which looks the tokens up and Broadcasts the
  word vectors (with positions) to the others ("embeddings computed on A1, broadcast to A2").
- BookBlock: Q, K, V computed per rank for its columns (its heads); AllGather of Q and of K ("only the Q and K
  matrices are synchronized; the V matrix remains local"); Q·Kᵀ and SoftMax for every head, times the local
  V: the rank's part of the context vectors, AllGathered for the residual and the layer norm. Backward:
  AllGather of Q and K again (only the fragments are kept), the local gradients of Q, K, V, the AllReduce of
  their weight gradients, and the AllReduce of the attention input's gradient (each rank's part of the error
  sent back covers only its heads). The output projection and the FFN are BookLinear layers.
- BookHead: final norm (whole) and the output layer as a BookLinear over the vocabulary; the cross-entropy on
  the gathered logits, on every rank.

Every layer computes what the single-process model computes (tests/train/test_train_book.py: equal to one
process within 1e-5), and the workload layer predicts its traffic op for op (workload/small_models.py with
tp_style "book", workload/book_gpt.py for the GPT). Megatron's style moves far fewer bytes and holds 1/tp of
the weights: that is the one used in practice (docs/train.md).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .comm import gather_from_tp
from .layers import TP, Replicated, activation, param


def _parallel(tp: TP) -> bool:
    return tp.comm is not None and tp.size > 1


class _Whole(nn.Module):
    """A linear layer every TP rank holds whole (weight and bias not split)."""

    def __init__(self, full: nn.Linear, name: str):
        super().__init__()
        self.weight = param(full.weight, f"{name}.weight", None)
        self.bias = param(full.bias, f"{name}.bias", None) if full.bias is not None else None


class _BookLinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, tp: TP, tag: str):
        a, b = tp.bounds(weight.shape[0])
        z = F.linear(x, weight[a:b], None if bias is None else bias[a:b])
        ctx.save_for_backward(x, weight)
        ctx.tp, ctx.tag, ctx.rows, ctx.has_bias = tp, tag, (a, b), bias is not None
        assert tp.comm is not None  # tensor parallelism: several processes
        return tp.comm.all_gather(z, tp.group, f"{tag}/fwd/all-gather")

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        a, b = ctx.rows
        own = g[..., a:b].reshape(-1, b - a)
        gw = torch.zeros_like(weight)
        gw[a:b] = own.T @ x.reshape(-1, x.shape[-1])
        parts = [gw.reshape(-1)]
        if ctx.has_bias:
            gb = weight.new_zeros(weight.shape[0])
            gb[a:b] = own.sum(0)
            parts.append(gb)
        flat = torch.cat(parts)
        ctx.tp.comm.all_reduce(flat, ctx.tp.group, f"{ctx.tag}/bwd/weight-grad")
        gw = flat[: weight.numel()].view_as(weight)
        gb = flat[weight.numel() :] if ctx.has_bias else None
        gx = g @ weight if ctx.needs_input_grad[0] else None
        return gx, gw, gb, None, None


class BookLinear(nn.Module):
    """A linear layer, whole on every rank, each computing its rows' neurons; AllGather of the weighted sums,
    then the activation; AllReduce of the weight gradients in backward."""

    def __init__(self, full: nn.Linear, name: str, tp: TP, act: str = "", tag: str = "tp"):
        super().__init__()
        tp.bounds(full.out_features)  # the neurons must split evenly
        self.tp, self.act, self.tag = tp, act, tag
        self.weight = param(full.weight, f"{name}.weight", None)
        self.bias = param(full.bias, f"{name}.bias", None) if full.bias is not None else None

    def forward(self, x):
        if _parallel(self.tp):
            z = _BookLinearFn.apply(x, self.weight, self.bias, self.tp, self.tag)
        else:
            z = F.linear(x, self.weight, self.bias)
        return activation(z, self.act)


class _BroadcastFn(torch.autograd.Function):
    """The root's tensor to every rank of the group; backward: the root's own gradient is already the whole
    one (everything after the Broadcast runs on every rank and sends back complete gradients)."""

    @staticmethod
    def forward(ctx, x, tp: TP, tag: str):
        y = x.contiguous().clone()
        assert tp.comm is not None  # tensor parallelism: several processes
        tp.comm.broadcast(y, tp.group[0], tp.group, tag)
        return y

    @staticmethod
    def backward(ctx, g):
        return g, None, None


class BookEmbed(nn.Module):
    """Token and position embedding on the group's first rank, Broadcast to the others."""

    def __init__(self, full: nn.ModuleDict, name: str, tp: TP):
        super().__init__()
        self.tp, self.width = tp, full["tok"].embedding_dim
        self.root = tp.index == 0
        if self.root:
            self.tok = Replicated(full["tok"], f"{name}.tok")
            self.pos = Replicated(full["pos"], f"{name}.pos")

    def forward(self, idx):
        tag = "tp/embed/fwd/broadcast"
        if self.root:
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            return _BroadcastFn.apply(x, self.tp, tag) if _parallel(self.tp) else x
        x = torch.empty(*idx.shape, self.width, device=idx.device)
        self.tp.comm.broadcast(x, self.tp.group[0], self.tp.group, tag)
        return x


def attention_core(Q, K, v_cols, heads: int, cols: tuple[int, int]):
    """Causal scaled dot-product attention for every head from the whole Q and K (B, T, D), times the value
    columns [a, b) (whole heads): the context vectors' columns [a, b)."""
    bsz, steps, d = Q.shape
    hd = d // heads
    q = Q.view(bsz, steps, heads, hd).transpose(1, 2)
    k = K.view(bsz, steps, heads, hd).transpose(1, 2)
    scores = q @ k.transpose(-1, -2) / math.sqrt(hd)
    mask = torch.ones(steps, steps, dtype=torch.bool, device=Q.device).triu(1)
    p = torch.softmax(scores.masked_fill(mask, float("-inf")), -1)
    a, b = cols
    v = v_cols.reshape(bsz, steps, (b - a) // hd, hd).transpose(1, 2)
    return (p[:, a // hd : b // hd] @ v).transpose(1, 2).reshape(bsz, steps, b - a)


class _BookAttentionFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, wq, bq, wk, bk, wv, bv, spec):
        tp, heads, name = spec
        a, b = tp.bounds(wq.shape[0])
        q, k, v = (F.linear(h, w[a:b], bias[a:b]) for w, bias in ((wq, bq), (wk, bk), (wv, bv)))
        Q = tp.comm.all_gather(q, tp.group, f"tp/L{name}/attn-q/fwd/all-gather")
        K = tp.comm.all_gather(k, tp.group, f"tp/L{name}/attn-k/fwd/all-gather")
        ctx.save_for_backward(h, q, k, v, wq, wk, wv)
        ctx.spec, ctx.cols = spec, (a, b)
        return attention_core(Q, K, v, heads, (a, b))

    @staticmethod
    def backward(ctx, g):
        h, q, k, v, wq, wk, wv = ctx.saved_tensors
        tp, heads, name = ctx.spec
        a, b = ctx.cols
        Q = tp.comm.all_gather(q, tp.group, f"tp/L{name}/attn-q/bwd/all-gather")
        K = tp.comm.all_gather(k, tp.group, f"tp/L{name}/attn-k/bwd/all-gather")
        with torch.enable_grad():
            ql, kl, vl = (t.detach().requires_grad_(True) for t in (q, k, v))
            out = attention_core(
                torch.cat([Q[..., :a], ql, Q[..., b:]], -1),
                torch.cat([K[..., :a], kl, K[..., b:]], -1),
                vl,
                heads,
                (a, b),
            )
            dq, dk, dv = torch.autograd.grad(out, (ql, kl, vl), g)
        hf = h.reshape(-1, h.shape[-1])
        grads = []
        for w, d in ((wq, dq), (wk, dk), (wv, dv)):
            own = d.reshape(-1, b - a)
            gw = torch.zeros_like(w)
            gw[a:b] = own.T @ hf
            gb = w.new_zeros(w.shape[0])
            gb[a:b] = own.sum(0)
            grads += [gw, gb]
        flat = torch.cat([t.reshape(-1) for t in grads])
        tp.comm.all_reduce(flat, tp.group, f"tp/L{name}/attn-qkv/bwd/weight-grad")
        out_grads, offset = [], 0
        for t in grads:
            out_grads.append(flat[offset : offset + t.numel()].view_as(t))
            offset += t.numel()
        dh = (dq @ wq[a:b] + dk @ wk[a:b] + dv @ wv[a:b]).contiguous()
        tp.comm.all_reduce(dh, tp.group, f"tp/L{name}/attn-in/bwd/all-reduce")
        return (dh, *out_grads, None)


class BookBlock(nn.Module):
    """The pre-norm block of the trainer's GPT in the book's tensor parallelism (module docstring)."""

    def __init__(self, full: nn.ModuleDict, name: str, tp: TP, heads: int):
        super().__init__()
        if heads % tp.size:
            raise ValueError(f"{heads} heads are not divisible by tensor-parallel size {tp.size}")
        self.tp, self.heads, self.name = tp, heads, name
        self.ln1 = Replicated(full["ln1"], f"{name}.ln1")
        self.ln2 = Replicated(full["ln2"], f"{name}.ln2")
        self.q, self.k, self.v = (_Whole(full[n], f"{name}.{n}") for n in ("q", "k", "v"))
        self.proj = BookLinear(full["proj"], f"{name}.proj", tp, tag=f"tp/L{name}/proj")
        self.fc = BookLinear(full["fc"], f"{name}.fc", tp, act="gelu", tag=f"tp/L{name}/fc")
        self.out = BookLinear(full["out"], f"{name}.out", tp, tag=f"tp/L{name}/out")

    def forward(self, x):
        h = self.ln1(x)
        ws = (self.q.weight, self.q.bias, self.k.weight, self.k.bias, self.v.weight, self.v.bias)
        if _parallel(self.tp):
            part = _BookAttentionFn.apply(h, *ws, (self.tp, self.heads, self.name))
            ctx = gather_from_tp(part, self.tp.comm, self.tp.group, f"tp/L{self.name}/attn-ctx/fwd/all-gather")
        else:
            q, k, v = (F.linear(h, ws[i], ws[i + 1]) for i in (0, 2, 4))
            ctx = attention_core(q, k, v, self.heads, (0, q.shape[-1]))
        x = x + self.proj(ctx)
        return x + self.out(self.fc(self.ln2(x)))


class BookHead(nn.Module):
    """Final norm (whole) and the output layer split by vocabulary rows, its logits AllGathered."""

    def __init__(self, full: nn.ModuleDict, name: str, tp: TP):
        super().__init__()
        self.ln = Replicated(full["ln"], f"{name}.ln")
        self.lm = BookLinear(full["lm"], f"{name}.lm", tp, tag="tp/head")

    def forward(self, x):
        return self.lm(self.ln(x))
