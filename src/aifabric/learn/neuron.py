"""Chapter 1: one artificial neuron. Weighted sum z = w1·x1 + w2·x2 + w0 (the bias input is 1), the sigmoid
and ReLU activations, what moving the bias does, and the neuron's size in bits."""

from __future__ import annotations

from typing import Any

from .lesson import Lesson, Param, num

PARAMS = {
    "x1": Param(12.0, "first input (the book's Figure 1-4 shows it; its text gives z = 4.8)"),
    "x2": Param(5.0, "second input"),
    "w0": Param(0.3, "bias weight (the bias input is 1)"),
    "w1": Param(0.5, "weight of x1"),
    "w2": Param(-0.3, "weight of x2"),
    "w0_shift": Param(-4.0, "the bias weight after the shift of Figure 1-5"),
    "weight_bits": Param(32, "bits per weight (FP32)", "int", positive=True),
    "input_bits": Param(8, "bits per input", "int", positive=True),
}


def run(v: dict[str, Any]) -> Lesson:
    import torch

    les = Lesson("neuron", "Chapter 1 · an artificial neuron", inputs=dict(v))
    if (v["x1"], v["x2"]) == (PARAMS["x1"].default, PARAMS["x2"].default):
        les.notes.append(
            "The book gives the weights (w0 = +0.3, w1 = +0.5, w2 = -0.3) and z = 4.8; the inputs are "
            "in its Figure 1-4 only. x1 = 12, x2 = 5 give that z (0.5·12 - 0.3·5 + 0.3 = 4.8)."
        )
    x = torch.tensor([v["x1"], v["x2"]], dtype=torch.float64)
    w = torch.tensor([v["w1"], v["w2"]], dtype=torch.float64, requires_grad=True)
    b = torch.tensor(v["w0"], dtype=torch.float64, requires_grad=True)
    terms = w * x
    z = terms.sum() + b
    z.retain_grad()
    y = torch.sigmoid(z)
    y.backward()
    hand = float((y * (1 - y)).detach())
    s = les.section(
        "Weighted sum (Figures 1-3, 1-4)",
        "Each input is multiplied by its weight; the products and the bias weight (its input is "
        "always 1) are summed: the pre-activation z = W·X.",
    )
    s.add("w1·x1", num(terms[0]), f"{num(v['w1'], 2)} × {num(v['x1'], 2)}")
    s.add("w2·x2", num(terms[1]), f"{num(v['w2'], 2)} × {num(v['x2'], 2)}")
    s.add("bias w0·1", num(b), "the bias input is 1")
    s.add("z = Σ wi·xi + w0", num(z, 2), "torch: (w * x).sum() + b")
    s = les.section("Sigmoid (Figure 1-4)", "σ(z) = 1 / (1 + e^-z): an output between 0 and 1.")
    s.add("ŷ = σ(z)", num(y), f"1 / (1 + e^-{num(z, 2)})")
    s.add("dŷ/dz", num(z.grad, 4), f"autograd; by hand σ(z)·(1 - σ(z)) = {num(hand, 4)}")
    s.add(
        "dŷ/dw1, dŷ/dw2, dŷ/dw0",
        f"{num(w.grad[0], 4)}, {num(w.grad[1], 4)}, {num(b.grad, 4)}",
        "autograd: input × dŷ/dz (the bias input is 1)",
    )
    # Figure 1-5: the same inputs, the bias weight moved
    b2 = torch.tensor(v["w0_shift"], dtype=torch.float64)
    z2 = (w.detach() * x).sum() + b2
    y2 = torch.sigmoid(z2)
    shift = float(z2 - z.detach())
    s = les.section(
        "Bias shift (Figure 1-5)",
        "Changing the bias weight moves z along the axis without touching the weights of the inputs.",
    )
    s.add("new bias w0", num(b2, 2))
    s.add(
        "z",
        f"{num(z, 2)} → {num(z2, 2)}",
        f"shift {num(shift, 2)}",
        book=("the book prints the first sum as 4.84: it is 4.8 (4.8 - 4.3 = 0.5)" if _is_book(v) else ""),
    )
    s.add("ŷ = σ(z)", f"{num(y)} → {num(y2)}")
    r = torch.relu(z.detach())
    s = les.section("ReLU (Figure 1-6)", "ReLU(z) = max(0, z): zero for z ≤ 0, z itself above.")
    s.add("ŷ = ReLU(z)", num(r, 2), f"max(0, {num(z, 2)})")
    s.add("ReLU(z) after the bias shift", num(torch.relu(z2), 2))
    n_weights = w.numel() + b.numel()
    bits_w, bits_x = n_weights * v["weight_bits"], x.numel() * v["input_bits"]
    s = les.section(
        "Size (Chapter 1, network impact)",
        "Every connection has a weight, usually 32 bits; the inputs here are 8-bit values. A model "
        "this small fits anywhere; one that does not fit a GPU's memory is split over GPUs, which "
        "then synchronize over NVLink or the backend network.",
    )
    s.add("weights", f"{n_weights} × {v['weight_bits']} bits = {bits_w} bits", "2 connections + the bias")
    s.add("inputs", f"{x.numel()} × {v['input_bits']} bits = {bits_x} bits")
    s.add("total", f"{bits_w + bits_x} bits")
    les.values.update(
        z=float(z.detach()),
        sigmoid=float(y.detach()),
        dsigmoid_dz=float(z.grad),
        dsigmoid_dz_hand=hand,
        grad_w=w.grad.tolist(),
        grad_w0=float(b.grad),
        z_shifted=float(z2),
        sigmoid_shifted=float(y2),
        relu=float(r),
        weight_bits=bits_w,
        input_bits=bits_x,
        total_bits=bits_w + bits_x,
    )
    return les


def _is_book(v: dict[str, Any]) -> bool:
    return all(v[k] == p.default for k, p in PARAMS.items())
