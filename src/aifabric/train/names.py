"""What `aifabric train` accepts, without importing PyTorch (the command checks its flags first)."""

from __future__ import annotations

MODELS = ("fnn", "cnn", "lstm", "gpt")
SCHEDULES = ("gpipe", "1f1b")
