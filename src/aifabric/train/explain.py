"""`aifabric train --explain-step`: one training step on one rank, in the vocabulary of the book Deep Learning
for Network Engineers: the forward values layer by layer (Chapters 1, 3: z = W·x + b, the activation, SoftMax and
the loss), the local gradients (Chapter 2: input × error term, here from autograd), the collectives that carry
them (the data-parallel averaging of Chapter 2, the AllReduce of Chapter 14, the tensor- and pipeline-parallel
exchanges of Chapter 8), the averaged gradients and the update w <- w - η·∇w.

`StepRecorder` runs inside the worker (it needs the tensors); `describe` and the record's JSON need no PyTorch.
"""

from __future__ import annotations

import re
from typing import Any

SHOW = 4  # values shown per tensor


def describe(tag: str, op: str, group: list[int]) -> str:
    """What a traced operation carries, in the book's words."""
    n = len(group)
    if tag == "init/broadcast":
        return "Broadcast of the initial weights from the first replica (Chapter 14), before the first step"
    m = re.fullmatch(r"grad-bucket(\d+)", tag)
    if m:
        return (
            f"AllReduce of gradient bucket {m.group(1)} over the {n} replicas: each gets the sum and divides "
            f"it by {n}, the averaging of Chapter 2 (Chapter 14: ReduceScatter + AllGather)"
        )
    if tag == "pp/act":
        return ("activations to the next pipeline stage" if op == "send" else "activations from the previous stage") + (
            " (Chapter 8; NVLink inside a server, RDMA between servers)"
        )
    if tag == "pp/grad":
        return (
            "the error (activation gradient) back to the previous stage"
            if op == "send"
            else "the error (activation gradient) from the next stage"
        ) + " (Chapter 8)"
    parts = tag.split("/")
    what = "/".join(parts[2:] if len(parts) > 1 and re.fullmatch(r"L\d+", parts[1]) else parts[1:])
    table = {
        "fwd/all-gather": "AllGather of the partial output vectors of the tensor-parallel GPUs (Chapter 8)",
        "fwd/all-reduce": "AllReduce summing the row-parallel partial outputs (Megatron-LM's tensor parallelism)",
        "bwd/all-reduce": "AllReduce of the input gradient, the error sent to the layer below (Megatron-LM)",
        "bwd/weight-grad": "AllReduce of the weight gradients across the tensor-parallel GPUs (the book's Chapter 8)",
        "embed/fwd/broadcast": "Broadcast of the word vectors from the GPU holding the embedding (Chapter 8)",
        "embed/fwd/all-reduce": "AllReduce of the vocabulary-parallel embedding's partial lookups (Megatron-LM)",
        "attn-q/fwd/all-gather": "AllGather of Q (Chapter 8: only Q and K are synchronized, V stays local)",
        "attn-k/fwd/all-gather": "AllGather of K (Chapter 8)",
        "attn-q/bwd/all-gather": "AllGather of Q again for the backward pass (Chapter 8)",
        "attn-k/bwd/all-gather": "AllGather of K again for the backward pass (Chapter 8)",
        "attn-ctx/fwd/all-gather": "AllGather of the context vectors' parts (each GPU's heads)",
        "attn-qkv/bwd/weight-grad": "AllReduce of the Q, K, V weight gradients (Chapter 8)",
        "attn-in/bwd/all-reduce": "AllReduce of the attention input's gradient: each GPU's heads give a share",
        "attn-out/fwd/all-reduce": "AllReduce of the attention output projection's partial sums (Megatron-LM)",
        "mlp-out/fwd/all-reduce": "AllReduce of the FFN's partial outputs (Megatron-LM)",
        "mlp-in/bwd/all-reduce": "AllReduce of the FFN input's gradient (Megatron-LM)",
        "xent/max-logit": "AllReduce (max) of each token's largest logit: the vocabulary-parallel cross-entropy",
        "xent/target-logit": "AllReduce of each token's target logit (vocabulary-parallel cross-entropy)",
        "xent/sum-exp": "AllReduce of each token's sum of exponentials, SoftMax's denominator (Chapter 3)",
        "head/bwd/all-reduce": "AllReduce of the LM head input's gradient (Megatron-LM)",
        "head/fwd/all-gather": "AllGather of the logits over the vocabulary (Chapter 7's next-word probabilities)",
        "head/bwd/weight-grad": "AllReduce of the output layer's weight gradients (the book's Chapter 8)",
    }
    block = f", block {parts[1][1:]}" if len(parts) > 2 and re.fullmatch(r"L\d+", parts[1]) else ""
    layer = LAYERS.get(what.split("/")[0])
    where = f": {layer}{block}" if layer else (f": {block[2:]}" if block else "")
    for key in (what, "/".join(what.split("/")[-2:])):
        if table.get(key):
            return table[key] + where
    if what.endswith("bwd/all-reduce"):
        return "AllReduce of an input gradient across the tensor-parallel GPUs (Megatron-LM)" + where
    if what.endswith("weight-grad"):
        return "AllReduce of weight gradients across the tensor-parallel GPUs (the book's Chapter 8)" + where
    if what.endswith("all-gather"):
        return "AllGather of partial outputs across the tensor-parallel GPUs (Chapter 8)" + where
    return f"{op} over ranks {', '.join(map(str, group))}"


# the trainer's GPT layers named in the book's way (tags tp/L<unit>/<layer>/...)
LAYERS = {"proj": "the attention's output projection", "fc": "the FFN's first layer", "out": "the FFN's second layer"}


def _head(t) -> list[float]:
    return [round(float(x), 6) for x in t.detach().reshape(-1)[:SHOW].tolist()]


def _first(t):
    """The first sample of a batch (tensors and tuples of tensors)."""
    return t[0] if hasattr(t, "dim") and t.dim() > 0 else t


class StepRecorder:
    """Records one step of one rank: forward outputs of the stage's layers and the loss (first micro-batch),
    then local gradients, averaged gradients, and weights before and after the update."""

    def __init__(self, stage, params, loss_fn, data_loss: str):
        self.layers: list[dict[str, Any]] = []
        self.loss: dict[str, Any] | None = None
        self.params = params
        self._hooks = []
        self.data_loss = data_loss
        for i, mod in enumerate(stage):
            self._hooks.append(mod.register_forward_hook(self._hook(i)))
        self._loss_fn = loss_fn

    def _hook(self, i: int):
        def hook(mod, inputs, output):
            if any(rec["index"] == i for rec in self.layers):
                return
            x = inputs[0] if inputs else None
            first = next(iter(mod.parameters()), None)
            unit = first.full_name.split(".")[0] if first is not None and hasattr(first, "full_name") else str(i)
            self.layers.append(
                {
                    "index": i,
                    "unit": unit,
                    "module": type(mod).__name__,
                    "name": _layer_name(mod),
                    "in_shape": list(x.shape) if hasattr(x, "shape") else None,
                    "out_shape": list(output.shape),
                    "sample": _head(_first(output)),
                }
            )

        return hook

    def loss_fn(self, out, target):
        loss = self._loss_fn(out, target)
        if self.loss is None:
            import torch

            rec = {
                "value": float(loss.detach()),
                "kind": "mse" if self.data_loss == "mse" else "cross-entropy",
                "samples": int(target.shape[0]),
            }
            if self.data_loss != "mse" and out.dim() == 2:  # a classifier: the first sample's probabilities
                p = torch.softmax(out[0].detach().float(), -1)
                label = int(target[0])
                rec.update(
                    label=label,
                    p_label=float(p[label]),
                    predicted=int(p.argmax()),
                    probabilities=[round(float(x), 4) for x in p.tolist()][:10],
                )
            self.loss = rec
        return loss

    def detach_hooks(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()

    def snapshot(self, key: str) -> dict[str, Any]:
        """Copies of every gradient (key "grad") or weight ("weights"), by parameter name."""
        out = {}
        for p in self.params:
            g = p.grad if key != "weights" else p
            if g is not None:
                out[p.full_name] = g.detach().clone()
        return out


def _layer_name(mod) -> str:
    w = getattr(mod, "weight", None)
    if w is not None and hasattr(w, "shape") and len(w.shape) == 2:
        return f"weights {w.shape[0]} × {w.shape[1]}"
    if w is not None and hasattr(w, "shape"):
        return f"weights {' × '.join(map(str, w.shape))}"
    if hasattr(mod, "hidden"):
        return f"hidden {mod.hidden}"
    return ""


def gradient_rows(local, averaged, before, after) -> dict[str, dict[str, Any]]:
    """Per parameter: the element with the largest gradient, its local and averaged gradient and its weight
    before and after the update, and the gradient norms."""
    rows = {}
    for name, g in local.items():
        final = averaged.get(name, g) if averaged else g
        flat = final.reshape(-1)
        i = int(flat.abs().argmax())
        idx, rest = [], i
        for d in reversed(final.shape):
            idx.append(rest % d)
            rest //= d
        rows[name] = {
            "shape": list(g.shape),
            "index": list(reversed(idx)),
            "local": float(g.reshape(-1)[i]),
            "averaged": float(flat[i]) if averaged else None,
            "before": float(before[name].reshape(-1)[i]),
            "after": float(after[name].reshape(-1)[i]),
            "local_norm": float(g.norm()),
            "averaged_norm": float(final.norm()),
        }
    return rows


def build_record(
    cfg,
    rank: int,
    coords,
    samples: int,
    recorder: StepRecorder,
    local,
    averaged,
    before,
    after,
    events: list[dict[str, Any]],
    buckets: list[list[str]] | None,
) -> dict[str, Any]:
    return {
        "rank": rank,
        "step": 0,
        "coords": {"dp": coords.dp, "pp": coords.pp, "tp": coords.tp},
        "plan": {"dp": cfg.dp, "tp": cfg.tp, "pp": cfg.pp, "tp_style": cfg.tp_style, "micro_batches": cfg.n_micro},
        "model": cfg.model,
        "lr": cfg.lr,
        "samples": samples,
        "global_batch": cfg.global_batch,
        "layers": sorted(recorder.layers, key=lambda r: r["index"]),
        "loss": recorder.loss,
        "gradients": gradient_rows(local, averaged, before, after),
        "buckets": buckets,
        "communication": [
            {
                "seq": e["seq"],
                "op": e["op"],
                "tag": e["tag"],
                "group": e["group"],
                "bytes": e["bytes"],
                "async_op": e["async_op"],
                "what": describe(e["tag"], e["op"], e["group"]),
            }
            for e in events
            if e.get("kind") == "comm" and e["step"] == 0
        ],
    }
