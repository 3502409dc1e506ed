from __future__ import annotations

from .._lazy import lazy_exports

_EXPORTS = {
    "CNN": ".cnn", "Conv": ".cnn", "conv_output_side": ".cnn",
    "FeedForward": ".feedforward",
    "LSTM": ".lstm",
    "MLA": ".transformer", "MoE": ".transformer", "Transformer": ".transformer",
    "MODELS": ".zoo", "Model": ".zoo", "get_model": ".zoo", "transformers": ".zoo",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["CNN", "Conv", "FeedForward", "LSTM", "MLA", "MODELS", "MoE", "Model", "Transformer", "conv_output_side",
           "get_model", "transformers"]
