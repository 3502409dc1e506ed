"""Training data, with nothing downloaded: the 8x8 digits of scikit-learn (the seeds' MNIST stand-in) and
a generated character-level text for the GPT.

The digits file is read straight from scikit-learn's package data (importing sklearn.datasets takes
seconds per process; reading its bundled CSV takes milliseconds).
"""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np

WORDS = (
    "the",
    "gpu",
    "sends",
    "gradients",
    "over",
    "rail",
    "spine",
    "leaf",
    "ring",
    "all",
    "reduce",
    "gather",
    "nic",
    "queue",
    "pause",
    "packet",
    "loss",
    "layer",
    "token",
    "model",
)


def digits() -> tuple[np.ndarray, np.ndarray]:
    """(images (1797, 64) float32 in [0, 1], labels (1797,) int64)."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        from ..errors import InputError

        raise InputError("--model: the digits data needs scikit-learn (pip install 'aifabric[train]')")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz"
    with gzip.open(path, "rt") as fh:
        table = np.loadtxt(fh, delimiter=",", dtype=np.float32)
    return table[:, :-1] / 16.0, table[:, -1].astype(np.int64)


def teacher_data(rng: np.random.Generator, n_in: int, n_out: int, n: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """Inputs for a feed-forward network of any width (the book's small examples, e.g. 4 inputs and 1 output):
    Gaussian inputs labelled by a fixed random linear "teacher". One output: a regression target
    tanh(w·x) (float32, (n, 1)); several: the class of the teacher's largest output (int64)."""
    x = rng.standard_normal((n, n_in)).astype(np.float32)
    w = rng.standard_normal((n_in, n_out)).astype(np.float32) / np.sqrt(n_in)
    if n_out == 1:
        return x, np.tanh(x @ w).astype(np.float32)
    return x, np.argmax(x @ w, axis=1).astype(np.int64)


def generated_text(rng: np.random.Generator, n_words: int = 4000) -> str:
    return " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), n_words)) + "."


def vocabulary(text: str, multiple_of: int = 8) -> list[str]:
    """Characters of the text, padded to a multiple of `multiple_of` (the LM head is split by vocabulary)."""
    chars = sorted(set(text))
    pad = (-len(chars)) % multiple_of
    return chars + [f"<pad{i}>" for i in range(pad)]


def batch_indices(rng_seed: int, n_items: int, batch: int, step: int) -> np.ndarray:
    """The global batch of a step: a fixed seeded permutation, taken in order and wrapping around."""
    perm = np.random.default_rng(rng_seed).permutation(n_items)
    start = (step * batch) % n_items
    return np.take(perm, np.arange(start, start + batch), mode="wrap")
