"""The models behind the traffic, as the book "Deep Learning for Network Engineers" shows them (Chapters 1-8),
computed with real PyTorch tensors and autograd: one module per topic, each with the book's inputs as
defaults (`PARAMS`) and a `run(values) -> Lesson`. Where the book prints a wrong number the lesson shows the
right one and what the book printed. `aifabric learn TOPIC` prints a lesson (docs/learn.md).
"""

from __future__ import annotations

import importlib
from typing import Any

from .lesson import Lesson, Param, parse_values
from .names import TOPICS


def params(topic: str) -> dict[str, Param]:
    return importlib.import_module(f".{topic}", __name__).PARAMS


def run(topic: str, values: list[str] | dict[str, Any] | None = None) -> Lesson:
    """Run a topic with the book's inputs, or with the user's: `--values` strings or a dict of overrides."""
    if topic not in TOPICS:
        raise KeyError(topic)
    mod = importlib.import_module(f".{topic}", __name__)
    if isinstance(values, dict):
        given = {k: p.default for k, p in mod.PARAMS.items()}
        unknown = set(values) - set(given)
        if unknown:
            raise KeyError(f"{topic} takes no {', '.join(sorted(unknown))}")
        given.update(values)
    else:
        given = parse_values(topic, mod.PARAMS, values)
    return mod.run(given)


__all__ = ["TOPICS", "Lesson", "Param", "params", "run"]
