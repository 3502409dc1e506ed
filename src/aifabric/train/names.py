"""What `aifabric train` accepts, without importing PyTorch (the command checks its flags first)."""

from __future__ import annotations

MODELS = ("fnn", "cnn", "lstm", "gpt")
SCHEDULES = ("gpipe", "1f1b")
CELLS = ("standard", "book")  # lstm: the standard cell, or the book's (Chapter 6: ReLU, no biases)
TP_STYLES = ("megatron", "book")  # tensor parallelism: Megatron-LM's, or the book's (Chapter 8)
LAYERS_HELP = (
    "layer sizes, comma-separated: fnn input,hidden...,output (64,128,10; other inputs or outputs "
    "train on generated data, e.g. 4,3,2,1); cnn kernels,hidden... (8,32); lstm hidden units (32)"
)
