"""A fully connected feed-forward network, as the seeds draw it (Ch. 1-3): layers of neurons, each
neuron with one weight per input plus a bias."""

from __future__ import annotations

import itertools
from dataclasses import dataclass


@dataclass(frozen=True)
class FeedForward:
    layer_widths: tuple[int, ...]  # input width first
    bias: bool = True

    @property
    def weights(self) -> int:
        w = self.layer_widths
        return sum(a * b for a, b in itertools.pairwise(w))

    @property
    def biases(self) -> int:
        return sum(self.layer_widths[1:]) if self.bias else 0

    @property
    def params(self) -> int:
        return self.weights + self.biases

    def forward_flops(self, samples: int) -> float:
        """2 FLOP (multiply + add) per weight per sample."""
        return 2.0 * self.params * samples

    def backward_flops(self, samples: int) -> float:
        """Twice the forward pass: gradients with respect to activations and to weights."""
        return 2.0 * self.forward_flops(samples)
