"""Chapter 7: a decoder-only transformer on the book's toy sizes. The sentence's tokens (IDs from 2: 0 is
padding, 1 unknown), 2-dimensional word embeddings with the book's positional embedding (its Figure 7-7:
"clear" at position 4 becomes [1.7, 2.0]), then one decoder block with 3-dimensional word vectors (the size of
the book's Add & Norm and FFN examples): Q, K, V, causal scaled dot-product attention for the second "clear",
the context vector, Add & Norm, the FFN (3 -> 9 -> 3), and the next-word probabilities through the word
embedding matrix (weight tying). The toy is trained on the sentence first, so its prediction means something.
Last, GPT-3's sizes from real (meta-device) layers."""

from __future__ import annotations

import math
import re
from typing import Any

from .lesson import Lesson, Param, count, num, vec

SENTENCE = "The sky is clear, so she finally decided to clear the backyard"

PARAMS = {
    "sentence": Param(SENTENCE, "the text (the book's Figure 7-6)", "text"),
    "clear": Param(
        [2.5, 1.0], 'the 2-dimensional word embedding of "clear" (the book\'s Figure 7-7)', "floats", length=2
    ),
    "focus": Param(
        10, 'position (1-based) of the word whose attention is shown: the second "clear"', "int", positive=True
    ),
    "d_model": Param(
        3,
        "width of the decoder's word vectors (the book's Add & Norm and FFN examples: 3)",
        "int",
        positive=True,
        high=64,
    ),
    "ffn": Param(
        3,
        "FFN expansion: hidden neurons = ffn × d_model (the book's example 3; its rule 4)",
        "int",
        positive=True,
        high=8,
    ),
    "train_steps": Param(
        300, "training steps on the sentence before the walk-through (0: untrained)", "int", low=0, high=5000
    ),
    "lr": Param(0.05, "learning rate of that training (Adam)", positive=True),
    "seed": Param(0, "seed of the initial weights", "int", low=0),
}


def tokenize(text: str) -> tuple[list[str], dict[str, int]]:
    """Lower-cased words without punctuation; IDs in order of first appearance from 2 (0 padding, 1 unknown)."""
    words = re.findall(r"[a-z0-9']+", text.lower())
    ids: dict[str, int] = {"<pad>": 0, "<unk>": 1}
    for w in words:
        ids.setdefault(w, len(ids))
    return words, ids


def book_positions(torch, pos, d: int):
    """The book's formula: component i is sin(pos / 10000^(2i/d)) for even i, cos(...) for odd i (its Figure 7-7
    uses i = 0 for x and i = 1 for y)."""
    i = torch.arange(d, dtype=torch.float64)
    angle = pos.to(torch.float64).unsqueeze(-1) / 10000 ** (2 * i / d)
    return torch.where(i % 2 == 0, torch.sin(angle), torch.cos(angle))


def standard_positions(torch, pos, d: int):
    """Vaswani et al.: the pair (2k, 2k+1) shares the angle pos / 10000^(2k/d)."""
    i = torch.arange(d, dtype=torch.float64)
    angle = pos.to(torch.float64).unsqueeze(-1) / 10000 ** (2 * (i // 2) / d)
    return torch.where(i % 2 == 0, torch.sin(angle), torch.cos(angle))


def layer_norm(torch, x):
    """(x - mean) / sqrt(population variance): the book's Add & Norm, without learned scale and shift."""
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + 1e-12), mu, var


def run(v: dict[str, Any]) -> Lesson:
    import torch
    import torch.nn.functional as F

    from ..errors import InputError, Problem

    words, ids = tokenize(v["sentence"])
    if len(words) < 2:
        raise InputError(Problem("--values", "sentence: at least two words"))
    if v["focus"] > len(words):
        raise InputError(Problem("--values", f"focus: the sentence has {len(words)} words (got {v['focus']})"))
    book = v["sentence"] == SENTENCE
    les = Lesson("transformer", "Chapter 7 · a decoder-only transformer, toy sized", inputs=dict(v))
    s = les.section(
        "Tokens (Chapter 7)",
        "Each word of the vocabulary gets a token ID, from 2: 0 is kept for "
        "padding, 1 for unknown words. A repeated word keeps its ID.",
    )
    vocab = list(ids)
    tokens = torch.tensor([ids[w] for w in words])
    s.add("words", " ".join(words))
    s.add("token IDs", " ".join(str(t) for t in tokens.tolist()))
    s.add("vocabulary", f"{len(vocab)} entries", ", ".join(f"{w}={i}" for w, i in ids.items()))
    les.values.update(tokens=tokens.tolist(), vocabulary=vocab)
    _positions(torch, les, v, words, ids)
    _decoder(torch, F, les, v, words, ids, tokens, book)
    _gpt3(torch, les)
    return les


def _positions(torch, les: Lesson, v, words, ids) -> None:
    target = "clear" if "clear" in ids else words[0]
    first = words.index(target) + 1
    emb = torch.nn.Embedding(len(ids), 2, dtype=torch.float64)
    with torch.no_grad():
        emb.weight[ids[target]] = torch.tensor(v["clear"], dtype=torch.float64)
    tok = torch.tensor([ids[target]])
    wv = emb(tok)[0].detach()
    positions = [i + 1 for i, w in enumerate(words) if w == target]
    s = les.section(
        "Word and positional embedding (Figures 7-2, 7-6, 7-7)",
        "The token ID picks a row of the word embedding matrix; a positional vector, from the word's "
        'position, is added, so the two "clear"s differ. The book\'s formula: x = sin(pos / 10000^(2i/d)) '
        "with i = 0, y = cos(pos / 10000^(2i/d)) with i = 1 (d = 2, pos 1-based).",
    )
    s.add(f'"{target}" → token {ids[target]} → embedding', vec(wv, 1), "nn.Embedding lookup")
    out = {}
    for pos in positions:
        p = torch.tensor([pos])
        pe = book_positions(torch, p, 2)[0]
        pe_std = standard_positions(torch, p, 2)[0]
        final = wv + pe
        s.add(f"position {pos}: PE (the book's formula)", vec(pe, 3), f"[sin({pos}), cos({pos}/10000)]")
        s.add(
            f"position {pos}: embedding + PE",
            f"{vec(final, 3)} ≈ {vec(final, 1)}",
            "the book's [+1.7, +2.0]"
            if pos == 4 and v["clear"] == [2.5, 1.0]
            else ("the book omits this one" if pos == 10 else ""),
        )
        s.add(
            f"position {pos}: the standard formula",
            f"PE {vec(pe_std, 3)} → {vec(wv + pe_std, 3)}",
            book=(
                "the book's y-axis uses i = 1, so its y-component is about 1.0 at every small position; the "
                "standard formula gives the pair (x, y) the same angle: cos(4) = -0.654"
            )
            if pos == 4
            else "",
        )
        out[pos] = {"pe": pe.tolist(), "final": final.tolist(), "pe_standard": pe_std.tolist()}
    les.values.update(positions=out, first_position=first)


def _decoder(torch, F, les: Lesson, v, words, ids, tokens, book) -> None:
    d, V = v["d_model"], len(ids)
    hid = v["ffn"] * d
    g = torch.Generator().manual_seed(v["seed"])

    def init(*shape, scale=None):
        scale = scale or 1 / math.sqrt(shape[-1])
        return ((torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1) * scale).requires_grad_(True)

    P = {
        "E": init(V, d, scale=1.0),
        "Wq": init(d, d),
        "Wk": init(d, d),
        "Wv": init(d, d),
        "W1": init(hid, d),
        "b1": init(hid),
        "W2": init(d, hid),
        "b2": init(d),
    }
    n = len(tokens)
    pe = book_positions(torch, torch.arange(1, n + 1), d)
    mask = torch.triu(torch.ones(n, n, dtype=torch.bool), 1)  # a word sees itself and the words before it

    def forward(keep=None):
        x = P["E"][tokens] + pe
        q, k, val = x @ P["Wq"].T, x @ P["Wk"].T, x @ P["Wv"].T
        scores = q @ k.T
        logits = scores / math.sqrt(d)
        att = torch.softmax(logits.masked_fill(mask, float("-inf")), -1)
        ctx = att @ val
        a, mu1, var1 = layer_norm(torch, x + ctx)
        h1 = torch.relu(a @ P["W1"].T + P["b1"])
        f = torch.relu(h1 @ P["W2"].T + P["b2"])
        out, mu2, var2 = layer_norm(torch, a + f)
        vocab_logits = out @ P["E"].T  # the word embedding matrix as the output weights
        if keep is not None:
            keep.update(
                x=x,
                q=q,
                k=k,
                v=val,
                scores=scores,
                logits=logits,
                att=att,
                ctx=ctx,
                a=a,
                mu1=mu1,
                var1=var1,
                h1=h1,
                f=f,
                out=out,
                vocab_logits=vocab_logits,
            )
        return vocab_logits

    def loss_of(vl):
        return F.cross_entropy(vl[:-1], tokens[1:])

    loss0 = float(loss_of(forward()).detach())
    adam(torch, list(P.values()), lambda: loss_of(forward()), v["train_steps"], v["lr"])
    keep: dict = {}
    with torch.no_grad():
        vl = forward(keep)
        loss1 = float(loss_of(vl))
    t = v["focus"] - 1
    word = words[t]
    s = les.section(
        f"The decoder, trained on the sentence (d = {d}, one attention head, {hid}-neuron FFN)",
        f"Word vectors of {d} dimensions (embedding + the book's positional formula), one decoder block "
        "(attention, Add & Norm, FFN, Add & Norm), the word embedding matrix as output weights. Trained "
        "to predict each next word of the sentence.",
    )
    s.add(
        "training",
        f"{v['train_steps']} steps, loss {num(loss0)} → {num(loss1)}",
        "Adam, cross-entropy of each next word",
    )
    s.add(f'word vector of "{word}" (position {t + 1})', vec(keep["x"][t]), "embedding + PE")
    s = les.section(
        "Query, key, value (Figures 7-9 ... 7-11)",
        "Each word vector times the Q, K and V weight matrices (shared by all words of the layer).",
    )
    s.add(
        "W_Q shape",
        f"{d} × {d}",
        book="the book's Figure 7-10 reduces 5-dimensional word vectors to 3; here both are 3, its Add & Norm size"
        if book and d == 3
        else "",
    )
    s.add(f'q of "{word}"', vec(keep["q"][t]))
    s.add(f'k, v of "{word}"', f"{vec(keep['k'][t])}, {vec(keep['v'][t])}")
    s = les.section(
        f'Attention of "{word}" (Figures 7-12, 7-13)',
        "Its query times its own key and the keys of the words before it (causal), ÷ √d (scaled dot "
        "product), SoftMax: how much of each word's value enters its context vector.",
    )
    e = torch.exp(keep["logits"][t, : t + 1])
    for j in range(t + 1):
        s.add(
            f"  {j + 1}: {words[j]}",
            f"q·k {num(keep['scores'][t, j], 2)}  ÷ √{d} = "
            f"{num(keep['logits'][t, j], 2)}  e^ {num(e[j], 2)}  p {num(keep['att'][t, j])}",
        )
    s.add("Σ e^", num(e.sum(), 2), "every probability is e^ ÷ this sum; they add up to 1")
    if book:
        les.values["book_figure_7_12"] = float(torch.tensor(3.16, dtype=torch.float64) / 482.22)
        s.add(
            "the book's Figure 7-12",
            f"3.16 / 482.22 = {num(torch.tensor(3.16) / 482.22, 5)} ≈ 0.007",
            'its scores are illustrative: "clear" 0.665, "decided" 0.210',
        )
    ctx = keep["ctx"][t]
    s.add("context vector Σ p·v", vec(ctx))
    s = les.section(
        "Add & Norm (Figure 7-14)",
        "The word vector plus its context vector (a residual connection), then normalized: subtract the "
        "mean, divide by the standard deviation (population variance over the dimensions).",
    )
    res = keep["x"][t] + ctx
    s.add("x + context", vec(res))
    s.add("mean, variance", f"{num(keep['mu1'][t])}, {num(keep['var1'][t])}")
    s.add(
        "(x - mean) / std",
        vec(keep["a"][t]),
        f"mean {num(keep['a'][t].mean())}, std {num(keep['a'][t].pow(2).mean().sqrt())}",
        book='the book\'s text ends at "the square root of this result": it leaves out (x - mean) / std, which its '
        "output needs"
        if book
        else "",
    )
    if book:
        bo = torch.tensor([1.40, -0.55, -0.87])
        les.values["book_add_norm_mean_std"] = (float(bo.mean()), float(bo.var(unbiased=False).sqrt()))
        s.add(
            "the book's output [1.40, -0.55, -0.87]",
            f"mean {num(bo.mean(), 4)}, std {num(bo.var(unbiased=False).sqrt(), 4)}",
            "a normalized vector: mean ≈ 0, std ≈ 1",
        )
    s = les.section(
        "Feed-forward network (Figure 7-15)",
        f"Position-wise: the same {d} → {hid} → {d} network on each word; ReLU; Add & Norm again.",
    )
    s.add(
        "hidden (ReLU)",
        vec(keep["h1"][t], 2),
        f"{hid} neurons",
        book="the book's example expands 3 to 9 (3×); its rule, and GPT's, is 4×" if book and v["ffn"] == 3 else "",
    )
    s.add("output (ReLU)", vec(keep["f"][t]), "the book applies ReLU to the output layer too; GPT-style FFNs do not")
    s.add("Add & Norm", vec(keep["out"][t]), "the decoder's output for this word")
    p = torch.softmax(keep["vocab_logits"][t], -1)
    k = int(p.argmax())
    inv = {i: w for w, i in ids.items()}
    s = les.section(
        "Next word (Figures 7-17 ... 7-20)",
        f"The decoder output times the word embedding matrix ({len(ids)} words): a logit per word, "
        "SoftMax, the most probable token, looked up as a word; its embedding + PE is the next input.",
    )
    top = torch.argsort(p, descending=True)[:3].tolist()
    s.add("top probabilities", ", ".join(f"{inv[i]} {num(p[i])}" for i in top))
    s.add(
        "predicted next word",
        f'"{inv[k]}"',
        f"token {k}" + (f'; the sentence continues "{words[t + 1]}"' if t + 1 < len(words) else ""),
    )
    les.values.update(
        loss_untrained=loss0,
        loss_trained=loss1,
        attention=keep["att"][t, : t + 1].tolist(),
        context=ctx.tolist(),
        add_norm=keep["a"][t].tolist(),
        next_word=inv[k],
        next_probabilities=p.tolist(),
    )


def adam(torch, params, loss, steps: int, lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> None:
    """Adam (Kingma & Ba), written out: torch.optim takes seconds to import."""
    m = [torch.zeros_like(p) for p in params]
    s = [torch.zeros_like(p) for p in params]
    for t in range(1, steps + 1):
        for p in params:
            p.grad = None
        loss().backward()
        with torch.no_grad():
            for p, m_, s_ in zip(params, m, s):
                m_.mul_(b1).add_(p.grad, alpha=1 - b1)
                s_.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                p -= lr * (m_ / (1 - b1**t)) / ((s_ / (1 - b2**t)).sqrt() + eps)


def _gpt3(torch, les: Lesson) -> None:
    nn = torch.nn
    d, vocab, blocks, ctxlen = 12288, 50_000, 96, 2048
    emb = nn.Embedding(vocab, d, device="meta")
    attn = [nn.Linear(d, d, device="meta") for _ in range(4)]  # Q, K, V, output projection
    ffn = [nn.Linear(d, 4 * d, device="meta"), nn.Linear(4 * d, d, device="meta")]
    attn_w = sum(m.weight.numel() for m in attn)
    attn_all = sum(p.numel() for m in attn for p in m.parameters())
    ffn_w = sum(m.weight.numel() for m in ffn)
    ffn_all = sum(p.numel() for m in ffn for p in m.parameters())
    norms = 2 * 2 * d
    block = attn_all + ffn_all + norms
    pos = ctxlen * d
    total = blocks * block + emb.weight.numel() + pos + 2 * d
    s = les.section(
        "GPT-3 at full size (Chapters 7, 8)",
        "The same parts, 12,288 wide, 96 blocks, a 50,000-word vocabulary (parameters from layers on "
        "PyTorch's meta device: shapes without memory).",
    )
    s.add("word embedding matrix", count(emb.weight.numel()), f"{count(d)} × {count(vocab)}")
    s.add(
        "  in FP16",
        f"{emb.weight.numel() * 2 / 1e9:.2f} GB",
        book="the book's Chapter 8 calls a typical embedding matrix about 200 MB; GPT-3's is 1.23 GB in FP16",
    )
    s.add(
        "attention per block (Q, K, V, output)",
        f"{count(attn_w)} weights, {count(attn_all)} with biases",
        book="the book says roughly 600 million (Chapter 7) and approximately 605 million (Chapter 8): 604.0 million",
    )
    s.add("FFN per block (×4 expansion)", f"{count(ffn_w)} weights, {count(ffn_all)} with biases", "≈ 1.2 billion")
    s.add(
        f"{blocks} blocks",
        f"{blocks * (attn_w + ffn_w) / 1e9:.1f} billion weights, {blocks * block / 1e9:.1f} "
        "billion with biases and norms",
        book="the book's 173 billion is 96 × (605 million + 1.2 billion) = 173.3 billion, from its rounded figures",
    )
    s.add("with embeddings, positions and the final norm", f"{total / 1e9:.1f} billion", "≈ 175 billion")
    les.values.update(
        gpt3_embedding=emb.weight.numel(),
        gpt3_attention=attn_w,
        gpt3_attention_with_bias=attn_all,
        gpt3_ffn=ffn_w,
        gpt3_block_weights=blocks * (attn_w + ffn_w),
        gpt3_blocks=blocks * block,
        gpt3_total=total,
    )
