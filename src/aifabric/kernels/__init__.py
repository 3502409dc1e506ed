"""The compute model: each kernel of a training step timed from what it is (docs/validation.md)."""

from .calibration import GemmTable, load_gemm_table
from .model import KINDS, Kernel, KernelModel, KernelSeq
from .transformer import ATTENTION_IMPLS, TransformerKernels, optimizer_kernels

__all__ = [
    "ATTENTION_IMPLS",
    "GemmTable",
    "KINDS",
    "Kernel",
    "KernelModel",
    "KernelSeq",
    "TransformerKernels",
    "load_gemm_table",
    "optimizer_kernels",
]
