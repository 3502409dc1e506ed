"""Convolutional networks as the seeds build them (Ch. 4): convolution layers of k x k x depth kernels,
pooling that halves each side, a flatten, then fully connected layers."""

from __future__ import annotations

import itertools
from dataclasses import dataclass


def conv_output_side(side: int, kernel: int, stride: int = 1) -> int:
    """floor((H - K) / S) + 1, no padding (the seeds label the "+1" "bias": it is not)."""
    return (side - kernel) // stride + 1


@dataclass(frozen=True)
class Conv:
    kernels: int
    size: int = 3
    stride: int = 1
    pool: int = 0  # side of the max-pool window after the layer (0 = none); stride = window


@dataclass(frozen=True)
class CNN:
    name: str
    input_side: int
    input_channels: int
    convs: tuple[Conv, ...]
    dense: tuple[int, ...]  # fully connected widths after the flatten, output last
    bias: bool = False  # the seeds count weights only

    def feature_shapes(self) -> list[tuple[int, int]]:
        """(side, channels) after each conv (+ pool) layer."""
        side, ch, out = self.input_side, self.input_channels, []
        for c in self.convs:
            side = conv_output_side(side, c.size, c.stride)
            if c.pool:
                side //= c.pool
            ch = c.kernels
            out.append((side, ch))
        return out

    @property
    def flatten_width(self) -> int:
        side, ch = self.feature_shapes()[-1]
        return side * side * ch

    def conv_params(self) -> list[int]:
        ch, out = self.input_channels, []
        for c in self.convs:
            out.append(c.kernels * (c.size * c.size * ch + (1 if self.bias else 0)))
            ch = c.kernels
        return out

    def dense_params(self) -> list[int]:
        widths = (self.flatten_width, *self.dense)
        return [a * b + (b if self.bias else 0) for a, b in itertools.pairwise(widths)]

    @property
    def params(self) -> int:
        return sum(self.conv_params()) + sum(self.dense_params())

    def forward_flops(self, samples: int) -> float:
        """2 FLOP per multiply-accumulate: each kernel visits every output position; then the dense layers."""
        side, ch, total = self.input_side, self.input_channels, 0.0
        for c in self.convs:
            side = conv_output_side(side, c.size, c.stride)
            total += 2.0 * side * side * c.kernels * c.size * c.size * ch
            if c.pool:
                side //= c.pool
            ch = c.kernels
        total += 2.0 * sum(self.dense_params())
        return total * samples

    def backward_flops(self, samples: int) -> float:
        return 2.0 * self.forward_flops(samples)
