from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # what the lazy exports below are, for type checkers
    from .cnn import CNN, Conv, conv_output_side
    from .feedforward import FeedForward
    from .lstm import LSTM
    from .transformer import MLA, MoE, Transformer
    from .zoo import MODELS, Model, get_model, transformers

_EXPORTS = {
    "CNN": ".cnn",
    "Conv": ".cnn",
    "conv_output_side": ".cnn",
    "FeedForward": ".feedforward",
    "LSTM": ".lstm",
    "MLA": ".transformer",
    "MoE": ".transformer",
    "Transformer": ".transformer",
    "MODELS": ".zoo",
    "Model": ".zoo",
    "get_model": ".zoo",
    "transformers": ".zoo",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [
    "CNN",
    "Conv",
    "FeedForward",
    "LSTM",
    "MLA",
    "MODELS",
    "MoE",
    "Model",
    "Transformer",
    "conv_output_side",
    "get_model",
    "transformers",
]
