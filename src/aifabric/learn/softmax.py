"""Chapter 3: multi-class classification on the digits. The output layer's logits, SoftMax's exponentials and
probabilities, the cross-entropy of the label's probability, its gradient p - one-hot (checked against
autograd), and the size of the book's 784-128-10 network."""

from __future__ import annotations

import math
from typing import Any

from .lesson import Lesson, Param, count, num, vec

# The book gives p = 0.244 (neuron 5), p = 0.181 (neuron 9) and the sum of the exponentials 24.813; the other
# eight exponentials share the rest evenly here (the book draws them in Figure 3-2 only).
_SUM = 24.813
_REST = math.log((_SUM - 0.244 * _SUM - 0.181 * _SUM) / 8)
BOOK_LOGITS = [
    round(x, 6) for x in [_REST] * 4 + [math.log(0.244 * _SUM)] + [_REST] * 3 + [math.log(0.181 * _SUM)] + [_REST]
]

PARAMS = {
    "logits": Param(BOOK_LOGITS, "the 10 output neurons' weighted sums (neuron k is digit k - 1)", "floats"),
    "label": Param(8, "the image's digit (the one-hot vector has its 1 at this index)", "int", low=0),
    "inputs": Param(784, "input features (28 × 28 pixels)", "int", positive=True),
    "hidden": Param(128, "hidden-layer neurons", "int", positive=True),
    "dp_side": Param(32, "the data-parallel example's image side (Figure 3-7: 32 × 32)", "int", positive=True),
    "dp_batch": Param(64, "the data-parallel example's mini-batch (images)", "int", positive=True),
}


def run(v: dict[str, Any]) -> Lesson:
    import torch
    import torch.nn.functional as F

    from ..errors import InputError, Problem

    n = len(v["logits"])
    if not 0 <= v["label"] < n:
        raise InputError(
            Problem("--values", f"label: must be a class of the {n} logits, 0 to {n - 1} (got {v['label']})")
        )
    les = Lesson("softmax", "Chapter 3 · SoftMax, cross-entropy and its gradient", inputs=dict(v))
    book = v["logits"] == BOOK_LOGITS and v["label"] == 8
    if book:
        les.notes.append(
            "The book gives the sum of the exponentials (24.813) and two probabilities, 0.244 (neuron 5) "
            "and 0.181 (neuron 9, the label's); the logits are those two exponentials' logarithms, the "
            "other eight share the rest of the sum evenly (its Figure 3-2 draws them)."
        )
    z = torch.tensor(v["logits"], dtype=torch.float64, requires_grad=True)
    target = torch.tensor([v["label"]])
    e = z.detach().exp()
    total = e.sum()
    p = e / total
    one_hot = F.one_hot(target, n)[0].to(torch.float64)
    loss = F.cross_entropy(z.unsqueeze(0), target)
    loss.backward()
    k = int(p.argmax())
    lab = v["label"]
    s = les.section(
        "SoftMax (Figure 3-2)",
        "p_i = e^z_i / Σ_j e^z_j: every logit exponentiated, each divided by the sum. The neurons are "
        "numbered 1 to 10 in the book; neuron k answers for digit k - 1.",
    )
    s.add("logits z", vec(z, 3))
    s.add("e^z", vec(e, 3))
    s.add("Σ e^z", num(total, 3))
    s.add("p = e^z / Σ", vec(p, 3), "torch.softmax gives the same")
    s.add("one-hot label", vec(one_hot, 0), f"digit {lab}: its 1 at index {lab} (neuron {lab + 1})")
    s.add(
        "prediction",
        f"neuron {k + 1} (digit {k}), p = {num(p[k])}",
        book="the book calls neuron 5's answer the digit 5; with neuron 9 being digit 8 it is 4" if book else "",
    )
    s.add("the label's probability", f"neuron {lab + 1}: p = {num(p[lab])}")
    s = les.section("Cross-entropy (Figure 3-3)", "L = -ln p_label: the loss is the label's probability only.")
    hand = -math.log(float(p[lab]))
    s.add(
        "L = -ln p_label",
        num(loss),
        f"-ln {num(p[lab])}; torch.nn.functional.cross_entropy: {num(loss, 4)}",
        book=f"the book prints -log(0.181) = 0.734: the natural log gives {num(-math.log(0.181))} (log10 would "
        f"give {num(-math.log10(0.181))})"
        if book
        else "",
    )
    s = les.section(
        "Gradient at the output (Figure 3-4)",
        "For SoftMax with cross-entropy the error of output neuron i is δ_i = p_i - y_i (probability "
        "minus the one-hot label): autograd of the loss with respect to the logits gives the same.",
    )
    delta = p - one_hot
    s.add("δ = p - one-hot", vec(delta, 3))
    s.add("autograd dL/dz", vec(z.grad, 3))
    s.add(f"δ of neuron {lab + 1} (the label)", num(delta[lab]), f"{num(p[lab])} - 1")
    if k != lab:
        s.add(f"δ of neuron {k + 1} (the prediction)", num(delta[k]), f"{num(p[k])} - 0")
    s.add("hidden neurons' δ", "(Σ_k w_kj·δ_k)·ReLU'(z_j)", "the same rule one layer back (Figure 3-4)")
    s.add(
        "weight update (Figures 3-5, 3-6)",
        "w ← w - η·δ·input",
        "the gradient is δ of the neuron × the input through the weight",
        book="the book's Figure 3-6 adds the adjustment to the weight: the same update "
        "when the adjustment is -η·gradient (Chapter 2 subtracts)"
        if book
        else "",
    )
    _size(torch, les, v)
    les.values.update(
        exp=e.tolist(),
        exp_sum=float(total),
        probabilities=p.tolist(),
        predicted=k,
        cross_entropy=float(loss.detach()),
        cross_entropy_hand=hand,
        delta=delta.tolist(),
        grad=z.grad.tolist(),
    )
    return les


def _size(torch, les: Lesson, v) -> None:
    nn = torch.nn
    hidden = nn.Linear(v["inputs"], v["hidden"], device="meta")
    out = nn.Linear(v["hidden"], len(v["logits"]), device="meta")
    w = hidden.weight.numel() + out.weight.numel()
    b = hidden.bias.numel() + out.bias.numel()
    fp32 = hidden.weight.element_size()
    s = les.section(
        f"The network: {v['inputs']} → {v['hidden']} → {len(v['logits'])} (Chapter 3)",
        "Every hidden neuron has one weight per input; every output neuron one per hidden neuron. In "
        "data-parallel training all of it is the gradient each GPU sends in the AllReduce.",
    )
    s.add("hidden-layer weights", count(hidden.weight.numel()), f"{v['hidden']} × {v['inputs']}")
    s.add("output-layer weights", count(out.weight.numel()), f"{len(v['logits'])} × {v['hidden']}")
    s.add("weights", count(w))
    s.add("FP32 bytes of the weights", count(w * fp32), f"{fp32} × {count(w)}")
    s.add("biases", count(b))
    s.add("gradient AllReduce per step (FP32, with biases)", count((w + b) * fp32) + " B")
    side, batch = v["dp_side"], v["dp_batch"]
    feats = side * side
    dp_hidden = nn.Linear(feats, v["hidden"], device="meta")
    book = (side, batch, v["hidden"]) == (32, 64, 128)
    s.add(
        f"data-parallel example: {side} × {side} images, first layer's weights",
        count(dp_hidden.weight.numel()),
        f"{v['hidden']} × {count(feats)}: the batch of {batch} images shares them",
        book=f"the book counts {batch} × {v['hidden']} × {count(feats)} = {count(batch * v['hidden'] * feats)} "
        '"weights": the batch size does not multiply the weights'
        if book
        else "",
    )
    les.values.update(
        hidden_weights=hidden.weight.numel(),
        output_weights=out.weight.numel(),
        weights=w,
        weight_bytes=w * fp32,
        biases=b,
        dp_first_layer_weights=dp_hidden.weight.numel(),
    )
