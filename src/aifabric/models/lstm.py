"""LSTM layers (seeds Ch. 6): forget, input, input-activation and output gates, each with a weight
matrix U for the input x_t and W for the previous output h_{t-1} (the book writes no biases; standard
LSTMs, e.g. PyTorch's, have two bias vectors per gate)."""

from __future__ import annotations

from dataclasses import dataclass

GATES = 4


@dataclass(frozen=True)
class LSTM:
    name: str
    input_size: int
    hidden: int
    layers: int = 1
    output_size: int = 0  # a SoftMax layer on top (0 = none)
    bias: bool = True
    biases_per_gate: int = 1  # PyTorch keeps two (b_ih and b_hh)
    time_steps: int = 4  # steps per sample (the book's LSTM-RNN unrolls 4)

    def layer_params(self, input_size: int) -> int:
        h = self.hidden
        per_gate = h * input_size + h * h + (self.biases_per_gate * h if self.bias else 0)
        return GATES * per_gate

    @property
    def params(self) -> int:
        total = self.layer_params(self.input_size)
        total += (self.layers - 1) * self.layer_params(self.hidden)
        if self.output_size:
            total += self.hidden * self.output_size + (self.output_size if self.bias else 0)
        return total

    def forward_flops(self, samples: int) -> float:
        """Every weight is used once per time step (2 FLOP per multiply-accumulate)."""
        return 2.0 * self.params * self.time_steps * samples

    def backward_flops(self, samples: int) -> float:
        """Backpropagation through time: twice the forward."""
        return 2.0 * self.forward_flops(samples)
