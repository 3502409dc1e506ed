"""The kernels of the book's small networks (feed-forward, CNN, LSTM) for one data-parallel rank's batch.

- Feed-forward (Chapters 1-3): per layer a GEMM (samples x inputs -> outputs) and its activation;
  backward, the activation's gradient, the weight gradient (inputs x outputs over the samples) and,
  except for the first layer (the data needs no gradient), the input gradient.
- CNN (Chapter 4): each convolution as the implicit GEMM cuDNN runs (samples x output positions, kernels,
  k x k x input channels), its activation, the pooling; the dense layers as above.
- LSTM (Chapter 6): per layer and time step one GEMM for the four gates ([x_t, h_{t-1}] x 4h) and the
  gate arithmetic (sigmoid, tanh, the cell update: element-wise over 4h); backward through time, the
  same GEMMs twice (input and weight gradients) and twice the element-wise work.
"""

from __future__ import annotations

from ..models.cnn import CNN, conv_output_side
from ..models.feedforward import FeedForward
from ..models.lstm import GATES, LSTM
from .model import Kernel, KernelModel, KernelSeq


def _dense(km: KernelModel, widths, samples: int, first_needs_grad: bool) -> tuple[list[Kernel], list[Kernel]]:
    fwd: list[Kernel] = []
    bwd: list[Kernel] = []
    pairs = list(zip(widths[:-1], widths[1:]))
    for i, (a, b) in enumerate(pairs):
        fwd += [km.gemm(f"linear {i + 1}", samples, b, a), km.elementwise(f"activation {i + 1}", samples * b, 1, 1)]
    for i, (a, b) in reversed(list(enumerate(pairs))):
        bwd += [
            km.elementwise(f"activation {i + 1} backward", samples * b, 2, 1),
            km.gemm(f"linear {i + 1} wgrad", a, b, samples),
        ]
        if i > 0 or first_needs_grad:
            bwd.append(km.gemm(f"linear {i + 1} dgrad", samples, a, b))
    return fwd, bwd


def network_kernels(km: KernelModel, model, samples: int) -> tuple[KernelSeq, KernelSeq]:
    """(forward, backward) kernels of one rank's `samples` through `model`."""
    if isinstance(model, FeedForward):
        fwd, bwd = _dense(km, model.layer_widths, samples, False)
        return km.seq(*fwd), km.seq(*bwd)
    if isinstance(model, CNN):
        fwd, bwd = [], []
        side, ch = model.input_side, model.input_channels
        for i, c in enumerate(model.convs):
            out = conv_output_side(side, c.size, c.stride)
            rows, k = samples * out * out, c.size * c.size * ch
            f = [
                km.gemm(f"conv {i + 1}", rows, c.kernels, k),
                km.elementwise(f"conv {i + 1} activation", rows * c.kernels, 1, 1),
            ]
            b = [
                km.elementwise(f"conv {i + 1} activation backward", rows * c.kernels, 2, 1),
                km.gemm(f"conv {i + 1} wgrad", k, c.kernels, rows),
            ]
            if i > 0:
                b.append(km.gemm(f"conv {i + 1} dgrad", rows, k, c.kernels))
            side = out
            if c.pool:
                f.append(km.elementwise(f"pool {i + 1}", rows * c.kernels, 1, 1 / (c.pool * c.pool)))
                b.insert(0, km.elementwise(f"pool {i + 1} backward", rows * c.kernels, 1 / (c.pool * c.pool), 1))
                side //= c.pool
            ch = c.kernels
            fwd += f
            bwd = b + bwd
        dfwd, dbwd = _dense(km, (model.flatten_width, *model.dense), samples, True)
        return km.seq(*fwd, *dfwd), km.seq(*dbwd, *bwd)
    if isinstance(model, LSTM):
        fwd, bwd = [], []
        width = model.input_size
        h = model.hidden
        for layer in range(model.layers):
            for t in range(model.time_steps):
                fwd += [
                    km.gemm(f"L{layer + 1} t{t} gates", samples, GATES * h, width + h),
                    km.elementwise(f"L{layer + 1} t{t} cell", samples * GATES * h, 2, 1),
                ]
                bwd += [
                    km.elementwise(f"L{layer + 1} t{t} cell backward", samples * GATES * h, 3, 2),
                    km.gemm(f"L{layer + 1} t{t} gates wgrad", width + h, GATES * h, samples),
                    km.gemm(f"L{layer + 1} t{t} gates dgrad", samples, width + h, GATES * h),
                ]
            width = h
        if model.output_size:
            dfwd, dbwd = _dense(km, (h, model.output_size), samples, True)
            fwd += dfwd
            bwd = dbwd + bwd
        return km.seq(*fwd), km.seq(*bwd)
    raise TypeError(f"no kernel model for {type(model).__name__}")
