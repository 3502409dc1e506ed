"""Chapter 6: the LSTM cell. The book's cell (sigmoid gates, ReLU for the input and output activations, no
biases) beside the standard one (tanh, biases: PyTorch's nn.LSTMCell, which it is checked against), step by
step on the one-hot characters of "alley", with the same weights; the constant error carousel (the cell
state's gradient to the step before is the forget gate) and the parameter counts."""

from __future__ import annotations

from typing import Any

from .lesson import Lesson, Param, count, vec

PARAMS = {
    "word": Param("alley", "the input characters (one-hot, as in Chapter 5)", "text"),
    "hidden": Param(2, "hidden units (cell state and output width)", "int", positive=True, high=64),
    "seed": Param(0, "seed of the random weights (the book gives no gate values)", "int", low=0),
    "closed": Param(0.01, "the book's optional threshold: a gate below it counts as closed (0)"),
    "open": Param(0.95, "above it, fully open (1)"),
}

GATES = ("f", "i", "a", "o")  # forget, input, input activation (candidate), output


def cell(torch, x, h, c, U, W, b, book: bool):
    """One step. book: ReLU activations, no biases; standard: tanh, biases."""
    pre = {k: U[k] @ x + W[k] @ h + (0 if book else b[k]) for k in GATES}
    f, i, o = (torch.sigmoid(pre[k]) for k in ("f", "i", "o"))
    a = torch.relu(pre["a"]) if book else torch.tanh(pre["a"])
    c_new = f * c + i * a  # forget gate's output + input gate's output (the book's "identification function")
    h_new = o * (torch.relu(c_new) if book else torch.tanh(c_new))
    return {"f": f, "i": i, "a": a, "o": o}, c_new, h_new


def run(v: dict[str, Any]) -> Lesson:
    import torch
    import torch.nn.functional as F

    from ..errors import InputError, Problem

    word = v["word"].strip().lower()
    if not word:
        raise InputError(Problem("--values", "word: at least one character"))
    les = Lesson("lstm", "Chapter 6 · the LSTM cell, the book's and the standard", inputs=dict(v))
    vocab = sorted(set(word))
    n, H = len(vocab), v["hidden"]
    xs = F.one_hot(torch.tensor([vocab.index(ch) for ch in word]), n).to(torch.float64)
    g = torch.Generator().manual_seed(v["seed"])

    def rnd(*shape):
        return torch.rand(*shape, generator=g, dtype=torch.float64) - 0.5

    U = {k: rnd(H, n) for k in GATES}
    W = {k: rnd(H, H) for k in GATES}
    b = {k: rnd(H) for k in GATES}
    s = les.section(
        "The two cells (Chapter 6)",
        "Gates: forget f = σ(W_f·h + U_f·x), input i = σ(...), output o = σ(...); input activation a; "
        "cell state C_t = f·C_(t-1) + i·a (the constant error carousel); output h_t = o·act(C_t).",
    )
    s.add(
        "book",
        "a = ReLU(W_a·h + U_a·x), h = o·ReLU(C); no biases",
        book="the book uses ReLU for the input and output activations and writes no biases; the standard LSTM "
        "(and PyTorch's) uses tanh and biases",
    )
    s.add("standard", "a = tanh(W_a·h + U_a·x + b_a), h = o·tanh(C); a bias per gate")
    lt = torch.nn.LSTMCell(n, H, dtype=torch.float64)
    with torch.no_grad():  # PyTorch's gate order: input, forget, cell (candidate), output
        lt.weight_ih.copy_(torch.cat([U[k] for k in ("i", "f", "a", "o")]))
        lt.weight_hh.copy_(torch.cat([W[k] for k in ("i", "f", "a", "o")]))
        lt.bias_ih.copy_(torch.cat([b[k] for k in ("i", "f", "a", "o")]))
        lt.bias_hh.zero_()
    state = {
        True: (torch.zeros(H, dtype=torch.float64), torch.zeros(H, dtype=torch.float64)),
        False: (torch.zeros(H, dtype=torch.float64), torch.zeros(H, dtype=torch.float64)),
    }
    ref_h, ref_c = torch.zeros(1, H, dtype=torch.float64), torch.zeros(1, H, dtype=torch.float64)
    steps = []
    max_diff = 0.0
    before_last = state[True]
    for t, ch in enumerate(word):
        before_last = state[True]
        s = les.section(f'Step {t + 1}: "{ch}" {vec(xs[t], 0)}')
        rec = {}
        for book in (True, False):
            h, c = state[book]
            gates, c2, h2 = cell(torch, xs[t], h, c, U, W, b, book)
            state[book] = (h2, c2)
            name = "book" if book else "standard"
            s.add(f"{name}: f i a o", "  ".join(f"{k} {vec(gates[k], 2)}" for k in GATES))
            s.add(f"{name}: C, h", f"C {vec(c2)}  h {vec(h2)}", _thresholds(gates, v) if book else "")
            rec[name] = {"gates": {k: gv.tolist() for k, gv in gates.items()}, "c": c2.tolist(), "h": h2.tolist()}
        with torch.no_grad():
            ref_h, ref_c = lt(xs[t].unsqueeze(0), (ref_h, ref_c))
        max_diff = max(
            max_diff, float((ref_h[0] - state[False][0]).abs().max()), float((ref_c[0] - state[False][1]).abs().max())
        )
        steps.append(rec)
    s = les.section("Checks")
    s.add("standard cell vs torch.nn.LSTMCell", f"largest difference {max_diff:.1e}", "same weights, same h and C")
    # the constant error carousel: ∂C_t/∂C_(t-1) with the gates' inputs held is the forget gate
    h, c = before_last
    c = c.clone().requires_grad_(True)
    gates, c2, _ = cell(torch, xs[-1], h, c, U, W, b, True)
    c2.sum().backward()
    s.add(
        "∂C_t/∂C_(t-1) (book cell, last step)",
        f"{vec(c.grad)} = the forget gate f {vec(gates['f'])}",
        "autograd through C_t = f·C_(t-1) + i·a: the error flows back scaled by f only (the carousel)",
    )
    book_params = sum(U[k].numel() + W[k].numel() for k in GATES)
    torch_params = sum(p.numel() for p in lt.parameters())
    s.add("parameters: book cell", count(book_params), f"4 gates × {H} × ({n} + {H})")
    s.add("parameters: torch.nn.LSTMCell", count(torch_params), f"+ two bias vectors of 4 × {H}")
    les.values.update(
        steps=steps,
        lstmcell_max_diff=max_diff,
        cec_grad=c.grad.tolist(),
        forget=gates["f"].tolist(),
        book_params=book_params,
        torch_params=torch_params,
    )
    return les


def _thresholds(gates, v) -> str:
    closed = [k for k in ("f", "i", "o") if bool((gates[k] < v["closed"]).all())]
    opened = [k for k in ("f", "i", "o") if bool((gates[k] > v["open"]).all())]
    parts = ([f"closed: {', '.join(closed)}"] if closed else []) + ([f"open: {', '.join(opened)}"] if opened else [])
    return "; ".join(parts) or f"no gate beyond the thresholds {v['closed']:g} / {v['open']:g}"
