"""The topics of `aifabric learn`, without importing PyTorch (the command's help and its checks read them)."""

from __future__ import annotations

# topic -> (the book's chapter, what it shows)
TOPICS: dict[str, tuple[str, str]] = {
    "neuron": ("Chapter 1", "weighted sum, bias, sigmoid and ReLU; the neuron's size in bits"),
    "backprop": ("Chapter 2", "the two-neuron network: loss, error terms, gradients, updates, two iterations"),
    "softmax": ("Chapter 3", "logits, probabilities, cross-entropy and its gradient; the digits network's size"),
    "conv": ("Chapter 4", "output size, the Prewitt edge example, the Kirsch two-layer CNN, the 600-dpi image"),
    "rnn": ("Chapter 5", "one-hot encoding of 'alley', the recurrent step, backpropagation through time, saturation"),
    "lstm": ("Chapter 6", "the book's LSTM cell (ReLU, no biases) beside the standard one, step by step"),
    "transformer": (
        "Chapter 7",
        "tokens, embeddings, positions, Q/K/V, attention, add & norm, FFN, next token; GPT-3's size",
    ),
    "power": ("Chapter 8", "the power and energy of a 50,000-GPU training run and its price"),
}
