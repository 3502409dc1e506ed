"""Chapter 2: back propagation through the book's two-neuron network. Neuron-a takes three inputs and a bias,
neuron-b takes neuron-a's output y_a and a bias; both ReLU. Loss E = 0.5·(ŷ - y)². The error terms by the
book's formulas (E_b = MSE'·f'(z_b), E_a = w_b1·E_b·f'(z_a)), every gradient (input × error term) next to
autograd's, the updates w - η·∇w, for as many iterations as asked; then the data-parallel averaging of two
GPUs' gradients."""

from __future__ import annotations

from typing import Any

from .lesson import Lesson, Param, num, vec

PARAMS = {
    "x": Param(
        [3.0, 2.0, 1.0],
        "neuron-a's inputs x1, x2, x3 (the book gives x1 = 3.0; x2, x3 are in its Figure 2-1 only)",
        "floats",
        length=3,
    ),
    "w_a": Param(
        [0.1, 0.8, 0.6], "neuron-a's weights w_a1, w_a2, w_a3 (the book gives w_a1 = 0.1)", "floats", length=3
    ),
    "w_a0": Param(0.5, "neuron-a's bias weight (with the weights above, z_a = 3.0 as in the book)"),
    "w_b1": Param(0.4, "neuron-b's weight of y_a"),
    "w_b0": Param(0.5, "neuron-b's bias weight (z_b = 0.5 + 0.4·3.0 = 1.7, the book's output)"),
    "y": Param(1.0, "the expected value"),
    "lr": Param(0.05, "learning rate η (the book prints 0.012; its updates use 0.05)", positive=True),
    "iterations": Param(2, "training iterations shown", "int", low=1, high=50),
    "x_gpu_b": Param([1.0, 1.0, 1.0], "data parallelism: GPU-B's sample (GPU-A has x)", "floats", length=3),
    "y_gpu_b": Param(0.5, "data parallelism: GPU-B's expected value"),
}

BOOK_LR_PRINTED = 0.012


def _net(torch, v):
    f64 = torch.float64
    return {
        "w_a": torch.tensor(v["w_a"], dtype=f64, requires_grad=True),
        "w_a0": torch.tensor(v["w_a0"], dtype=f64, requires_grad=True),
        "w_b1": torch.tensor(v["w_b1"], dtype=f64, requires_grad=True),
        "w_b0": torch.tensor(v["w_b0"], dtype=f64, requires_grad=True),
    }


def forward(torch, w, x, y):
    z_a = (w["w_a"] * x).sum() + w["w_a0"]
    y_a = torch.relu(z_a)
    z_b = w["w_b1"] * y_a + w["w_b0"]
    y_hat = torch.relu(z_b)
    loss = 0.5 * (y_hat - y) ** 2
    return z_a, y_a, z_b, y_hat, loss


def run(v: dict[str, Any]) -> Lesson:
    import torch

    les = Lesson("backprop", "Chapter 2 · back propagation, two neurons", inputs=dict(v))
    book = all(v[k] == PARAMS[k].default for k in ("x", "w_a", "w_a0", "w_b1", "w_b0", "y"))
    if book:
        les.notes.append(
            "The book gives x1 = 3.0, w_a1 = 0.1, y_a = 3.0, w_b1 = 0.4, ŷ = 1.7 and y = 1.0; neuron-a's "
            "other inputs and weights are in its Figure 2-1 only: x2 = 2, x3 = 1, w_a2 = 0.8, w_a3 = 0.6, "
            "bias 0.5 give its z_a = 3.0, and neuron-b's bias 0.5 its ŷ = 1.7."
        )
    x = torch.tensor(v["x"], dtype=torch.float64)
    y = torch.tensor(v["y"], dtype=torch.float64)
    w = _net(torch, v)
    lr = v["lr"]
    history: list[dict[str, Any]] = []
    for it in range(1, v["iterations"] + 1):
        z_a, y_a, z_b, y_hat, loss = forward(torch, w, x, y)
        loss.backward()
        z_a, y_a, z_b, y_hat, loss = (t.detach() for t in (z_a, y_a, z_b, y_hat, loss))
        # the book's hand formulas (Figures 2-4 ... 2-9)
        mse_d = float(y_hat - y)  # MSE' = -(y - ŷ)
        f_b = 1.0 if float(z_b) > 0 else 0.0  # ReLU'
        f_a = 1.0 if float(z_a) > 0 else 0.0
        e_b = mse_d * f_b
        e_a = float(w["w_b1"].detach()) * e_b * f_a
        hand: dict[str, Any] = {
            "w_b1": float(y_a) * e_b,
            "w_b0": e_b,
            "w_a": [float(xi) * e_a for xi in x],
            "w_a0": e_a,
        }
        grads = {k: t.grad.detach().clone() for k, t in w.items()}
        old = {k: t.detach().clone() for k, t in w.items()}
        with torch.no_grad():
            for t in w.values():
                t -= lr * t.grad
                t.grad = None
        rec = {
            "z_a": float(z_a),
            "y_a": float(y_a),
            "z_b": float(z_b),
            "y_hat": float(y_hat),
            "loss": float(loss),
            "mse_derivative": mse_d,
            "E_b": e_b,
            "E_a": e_a,
            "grad": {k: g.tolist() for k, g in grads.items()},
            "grad_hand": hand,
            "delta": {k: (lr * g).tolist() for k, g in grads.items()},
            "new": {k: t.detach().tolist() for k, t in w.items()},
        }
        history.append(rec)
        s = les.section(
            f"Iteration {it}: forward" + (" (Figure 2-2)" if it == 1 else ""),
            "Neuron-a: z_a = Σ w_ai·x_i + w_a0, y_a = ReLU(z_a); neuron-b: z_b = w_b1·y_a + w_b0, ŷ = ReLU(z_b).",
        )
        s.add(
            "z_a",
            num(z_a),
            f"{vec(old['w_a'], 2)} · {vec(x, 1)} + {num(old['w_a0'], 3)}",
            book="the book names the Sigmoid for neuron-a; its y_a = 3.0 and f'(a) = 1 are ReLU's"
            if it == 1 and book
            else "",
        )
        s.add("y_a = ReLU(z_a)", num(y_a))
        s.add("z_b", num(z_b), f"{num(old['w_b1'], 3)} × {num(y_a)} + {num(old['w_b0'], 3)}")
        s.add("ŷ = ReLU(z_b)", num(y_hat), "the model's output")
        s.add("E = 0.5·(ŷ - y)²", num(loss), f"0.5 × ({num(y_hat)} - {num(y, 1)})²")
        s = les.section(
            f"Iteration {it}: backward" + (" (Figures 2-4 ... 2-9)" if it == 1 else ""),
            "Error term of the output neuron E_b = MSE'·f'(z_b); of the hidden neuron E_a = w_b1·E_b·"
            "f'(z_a); each gradient = the input through the weight × the error term of its neuron. "
            "autograd (loss.backward()) gives the same numbers.",
        )
        s.add("MSE' = -(y - ŷ)", num(mse_d))
        s.add("f'(z_b), f'(z_a)", f"{f_b:g}, {f_a:g}", "ReLU': 1 when z > 0")
        s.add("E_b = MSE'·f'(z_b)", num(e_b))
        s.add("E_a = w_b1·E_b·f'(z_a)", num(e_a), f"{num(old['w_b1'], 3)} × {num(e_b)} × {f_a:g}")
        s.add("∇w_b1 = y_a·E_b", num(grads["w_b1"]), f"hand {num(hand['w_b1'])}; autograd {num(grads['w_b1'])}")
        s.add("∇w_b0 = 1·E_b", num(grads["w_b0"]), f"hand {num(hand['w_b0'])}")
        s.add("∇w_a1, ∇w_a2, ∇w_a3 = x_i·E_a", vec(grads["w_a"]), f"hand {vec(hand['w_a'])}")
        s.add("∇w_a0 = 1·E_a", num(grads["w_a0"]), f"hand {num(hand['w_a0'])}")
        s = les.section(
            f"Iteration {it}: update" + (" (Figure 2-10)" if it == 1 else ""),
            "Δw = η·∇w, w_new = w_old - Δw, for every weight including the biases'.",
        )
        lr_book = (
            (
                f"the book prints η = {BOOK_LR_PRINTED}; its Δw 0.042 and 0.105 are 0.05 × 0.84 and 0.05 × 2.1 "
                f"(0.012 would give 0.01008 and 0.0252)"
            )
            if it == 1 and book
            else ""
        )
        s.add("η", f"{lr:g}", book=lr_book)
        s.add(
            "Δw_b1, new w_b1",
            f"{num(lr * grads['w_b1'])}, {num(w['w_b1'])}",
            f"{num(old['w_b1'], 3)} - {num(lr * grads['w_b1'])}",
        )
        s.add("Δw_b0, new w_b0", f"{num(lr * grads['w_b0'])}, {num(w['w_b0'])}")
        s.add(
            "Δw_a, new w_a",
            f"{vec(lr * grads['w_a'])}, {vec(w['w_a'])}",
            f"{vec(old['w_a'], 3)} - {vec(lr * grads['w_a'])}",
        )
        s.add("Δw_a0, new w_a0", f"{num(lr * grads['w_a0'])}, {num(w['w_a0'])}")
    with torch.no_grad():
        z_a, y_a, z_b, y_hat, loss = forward(torch, w, x, y)
    s = les.section(
        f"After {v['iterations']} iteration{'s' if v['iterations'] > 1 else ''} (Figure 2-12)",
        "The next forward pass with the updated weights: the output moves towards the expected value.",
    )
    s.add("ŷ", num(y_hat), f"from {num(history[0]['y_hat'])}")
    s.add("E", num(loss, 4), f"from {num(history[0]['loss'])}")
    if book:
        book_y = torch.tensor(1.119, dtype=torch.float64)
        les.values["book_second_output_loss"] = float(0.5 * (book_y - 1.0) ** 2)
        s.add(
            "the book's output after one update",
            "1.119, E = " + num(0.5 * (book_y - 1.0) ** 2),
            "0.5 × (1.119 - 1.0)² = 0.00708",
            book="the book also prints ŷ = 1.28 for it, whose E would be 0.039, not 0.007; its figures hold "
            "neuron-a's other inputs, on which this output depends",
        )
    les.values.update(iterations=history, y_hat_final=float(y_hat), loss_final=float(loss))
    _data_parallel(torch, les, v, x, y)
    return les


def _data_parallel(torch, les: Lesson, v, x_a, y_a) -> None:
    """Chapter 2's data parallelism: each GPU its own sample, the gradients summed (AllReduce) and averaged."""
    w0 = _net(torch, v)
    per_gpu = []
    for x, y in (
        (x_a, y_a),
        (torch.tensor(v["x_gpu_b"], dtype=torch.float64), torch.tensor(v["y_gpu_b"], dtype=torch.float64)),
    ):
        w = _net(torch, v)
        forward(torch, w, x, y)[-1].backward()
        per_gpu.append({k: t.grad.detach().clone() for k, t in w.items()})
    summed = {k: per_gpu[0][k] + per_gpu[1][k] for k in w0}
    avg = {k: g / 2 for k, g in summed.items()}
    loss = (
        forward(torch, w0, x_a, y_a)[-1]
        + forward(
            torch, w0, torch.tensor(v["x_gpu_b"], dtype=torch.float64), torch.tensor(v["y_gpu_b"], dtype=torch.float64)
        )[-1]
    ) / 2
    loss.backward()
    s = les.section(
        "Data parallelism: two GPUs (Chapter 2, the AllReduce of Chapter 14)",
        "GPU-A trains on the sample above, GPU-B on its own. Each computes its gradients; the "
        "AllReduce gives every GPU the sum; each divides by the number of GPUs (2). The result is the "
        "gradient of the mean loss of both samples, and both GPUs apply the same update.",
    )
    s.add("∇w_b1 on GPU-A, GPU-B", f"{num(per_gpu[0]['w_b1'])}, {num(per_gpu[1]['w_b1'])}")
    s.add(
        "AllReduce (sum)",
        num(summed["w_b1"]),
        "every GPU receives the sum",
        book="the book synchronizes and averages the error terms layer by layer (Chapters 2, 8); frameworks "
        "AllReduce the weight gradients after each GPU's whole backward pass (Chapter 14), as here: that "
        "is what equals the gradient of the mean loss",
    )
    s.add("÷ 2 GPUs", num(avg["w_b1"]), f"one GPU, mean loss of both samples: {num(w0['w_b1'].grad)}")
    s.add("∇w_a averaged", vec(avg["w_a"]), f"one GPU: {vec(w0['w_a'].grad)}")
    les.values.update(
        dp_grads=[{k: g.tolist() for k, g in d.items()} for d in per_gpu],
        dp_average={k: g.tolist() for k, g in avg.items()},
        dp_single={k: t.grad.tolist() for k, t in w0.items()},
    )
