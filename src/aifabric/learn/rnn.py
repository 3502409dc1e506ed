"""Chapter 5: a recurrent network on the word "alley". One-hot encoding of its characters, the recurrent step
z_t = U·x_t + W·h_(t-1) + b, h_t = σ(z_t), the SoftMax output, backpropagation through time (the recurrent
weight's gradient accumulated over the time steps, each step's share from autograd), and saturation: where
the sigmoid's slope vanishes."""

from __future__ import annotations

from typing import Any

from .lesson import Lesson, Param, num, vec

PARAMS = {
    "word": Param("alley", "the training text (the book's)", "text"),
    "hidden": Param(
        1, "hidden neurons (the book's example has one, so one recurrent weight)", "int", positive=True, high=64
    ),
    "seed": Param(0, "seed of the random initial weights (the book's are in its Figure 5-3 only)", "int", low=0),
    "lr": Param(0.5, "learning rate of the one update shown", positive=True),
    "z": Param([-2.2, -5.0, -5.5, -7.0], "weighted sums at which saturation is shown", "floats"),
}


def run(v: dict[str, Any]) -> Lesson:
    import torch
    import torch.nn.functional as F

    from ..errors import InputError, Problem

    word = v["word"].strip().lower()
    if len(word) < 2:
        raise InputError(Problem("--values", f"word: at least two characters (got {v['word']!r})"))
    les = Lesson("rnn", 'Chapter 5 · a recurrent network on "alley"', inputs=dict(v))
    vocab = sorted(set(word))
    index = {c: i for i, c in enumerate(vocab)}
    n, hdim = len(vocab), v["hidden"]
    onehot = F.one_hot(torch.tensor([index[c] for c in word]), n).to(torch.float64)
    s = les.section(
        "One-hot encoding (Figure 5-2)",
        "Each character gets an index (the sorted characters of the word) and a vector with a 1 at "
        "that index. The network reads one character per time step and should output the next one.",
    )
    for c in vocab:
        s.add(f'"{c}"', vec(onehot[word.index(c)], 0), f"index {index[c]}")
    pairs = [(word[t], word[t + 1]) for t in range(len(word) - 1)]
    s.add("training pairs", ", ".join(f"{a}→{b}" for a, b in pairs), "input → expected output")
    les.values.update(vocabulary=vocab, one_hot={c: onehot[word.index(c)].tolist() for c in vocab}, pairs=pairs)
    g = torch.Generator().manual_seed(v["seed"])

    def rand(*shape):
        return (torch.rand(*shape, generator=g, dtype=torch.float64) - 0.5).requires_grad_(True)

    U, W, b, V, c = rand(hdim, n), rand(hdim, hdim), rand(hdim), rand(n, hdim), rand(n)
    steps = len(pairs)
    W_t = [W * 1 for _ in range(steps)]  # the same weight, one handle per time step: its share of the gradient
    for w in W_t:
        w.retain_grad()
    h = torch.zeros(hdim, dtype=torch.float64)
    s = les.section(
        "Forward through time (Figures 5-3, 5-4)",
        "z_t = U·x_t + W·h_(t-1) + b, h_t = σ(z_t); the output layer's logits V·h_t + c go through "
        "SoftMax. U, W, V are shared by every time step. With a one-hot x_t only one column of U "
        'contributes (for "a", [1, 0, 0, 0], the first: U_n1).',
    )
    loss = torch.zeros((), dtype=torch.float64)
    preds = []
    for t, (a, nxt) in enumerate(pairs):
        x = onehot[t]
        ux = U @ x
        wh = W_t[t] @ h
        z = ux + wh + b
        h = torch.sigmoid(z)
        logits = V @ h + c
        p = torch.softmax(logits, 0)
        loss = loss + F.cross_entropy(logits.unsqueeze(0), torch.tensor([index[nxt]]))
        k = int(p.argmax())
        preds.append(vocab[k])
        s.add(f't{t + 1}: "{a}"', f"U·x {vec(ux)}  W·h {vec(wh)}  z {vec(z)}  h {vec(h)}", f"column {index[a]} of U")
        s.add("", f'p {vec(p)} → "{vocab[k]}" (expected "{nxt}")')
    s.add(
        "fed back",
        "h_t, the activation, is W's input at the next step",
        book="the book stores the weighted sum z for the next step in one place (Figure 5-3) and feeds back the "
        "activation h in another (its Challenges section): h it is",
    )
    s.add("loss", num(loss), "cross-entropy summed over the time steps")
    loss.backward()
    shares = [w.grad.clone() for w in W_t]
    s = les.section(
        "Backpropagation through time (Chapter 5)",
        "The error of every time step flows back through the steps before it; the recurrent weight's "
        "adjustments from each step are accumulated (and may be averaged over the steps).",
    )
    for t, gshare in enumerate(shares):
        s.add(f"∂L/∂W from step {t + 1}", vec(gshare, 4))
    total = sum(shares)
    s.add("sum over the steps", vec(total, 4), f"autograd's W.grad: {vec(W.grad, 4)}")
    s.add("averaged over the steps", vec(total / steps, 4))
    with torch.no_grad():
        for p_ in (U, W, b, V, c):
            p_ -= v["lr"] * p_.grad
    with torch.no_grad():
        h = torch.zeros(hdim, dtype=torch.float64)
        after = 0.0
        for t, (_, nxt) in enumerate(pairs):
            h = torch.sigmoid(U @ onehot[t] + W @ h + b)
            after += float(F.cross_entropy((V @ h + c).unsqueeze(0), torch.tensor([index[nxt]])))
    s.add(f"loss after one update (η = {v['lr']:g})", f"{num(loss)} → {num(after)}")
    les.values.update(
        predictions=preds,
        loss=float(loss.detach()),
        grad_W_steps=[g_.tolist() for g_ in shares],
        grad_W=W.grad.tolist(),
        loss_after=after,
    )
    _saturation(torch, les, v)
    s = les.section(
        "In parallel (Chapter 5)",
        "Data parallelism: each GPU runs BPTT on its own sequences and the gradients are averaged "
        "across the GPUs (an AllReduce, then ÷ GPUs). Model parallelism: activations cross GPUs in the "
        "forward pass, gradients in the backward pass, at every time step (`aifabric train --model "
        "lstm --tp 2` shows it: an AllGather of h per step).",
    )
    s.add(
        "gradient values AllReduced per training step",
        f"{sum(p_.numel() for p_ in (U, W, b, V, c))}",
        "U, W, b, V, c: once per step, however many time steps",
    )
    return les


def _saturation(torch, les: Lesson, v) -> None:
    z = torch.tensor(v["z"], dtype=torch.float64, requires_grad=True)
    y = torch.sigmoid(z)
    y.sum().backward()
    s = les.section(
        "Saturation (Figure 5-5)",
        "Beyond |z| ≈ 2.2 the sigmoid flattens and near ±5.5 its slope is almost zero: the gradient "
        "that flows back through it vanishes, and early time steps stop learning.",
    )
    for zi, yi, gi in zip(z.tolist(), y.tolist(), z.grad.tolist()):
        book = ""
        if zi == -5.0:
            book = "the book prints 0.0998 for z = -5: that is σ(-2.2); σ(-5) = 0.0067"
        s.add(f"z = {zi:g}", f"σ(z) = {yi:.4f}   σ'(z) = {gi:.4f}", "σ' from autograd = σ(1 - σ)", book=book)
    les.values.update(saturation={zi: (yi, gi) for zi, yi, gi in zip(z.tolist(), y.tolist(), z.grad.tolist())})
