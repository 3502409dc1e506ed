from .cnn import CNN, Conv, conv_output_side
from .feedforward import FeedForward
from .lstm import LSTM
from .transformer import MLA, MoE, Transformer
from .zoo import MODELS, Model, get_model, transformers

__all__ = [
           "CNN",
           "LSTM",
           "MLA",
           "MODELS",
           "Conv",
           "FeedForward",
           "MoE",
           "Model",
           "Transformer",
           "conv_output_side",
           "get_model",
           "transformers",
]
