"""Fused attention kernels' measured throughput, by kernel, sequence length and head dimension (the GPU
catalog's data).

A fused attention kernel (FlashAttention and its kin) runs at a rate that depends on which kernel it is, how
long the sequence is (short sequences leave the kernel's pipeline half-filled), the head dimension (the size of
its matrix products), whether a causal mask skips the blocks above the diagonal (the blocks along it are
half-empty, and the rows do unequal work), and the direction (the backward pass recomputes the scores and
writes three gradients).

Hopper, 16-bit, head dimension 64, 128 and 256 (32, 16 and 8 heads: hidden 2,048), batch x sequence = 16K
tokens, on an H100 80GB SXM5 at a fixed 1,830 MHz: J. Shah, G. Bikshandi, Y. Zhang, V. Thakkar, P. Ramani,
T. Dao, "FlashAttention-3: Fast and Accurate Attention with Asynchrony and Low-precision" (2024), Figure 5
forward without and with the causal mask, Figure 6 backward without it (head dimensions 64 and 128), the
TFLOPS/s printed above each bar for FlashAttention-2 2.5.8, cuDNN 9.1.1.17 and FlashAttention-3 (the paper's
appendix C.1 names the versions); FLOPs counted as the paper does, 4 · s^2 · d · heads forward, halved with the
mask, x 2.5 backward. Derived, and stated so in `AttentionKernel.source`: the causal backward (no chart) as the
backward rate times the forward's causal to non-causal ratio at the same length; the backward at head
dimension 256 (no chart) as the forward there times the backward-to-forward ratio at 128.

Ampere: FlashAttention-2 on an A100, "up to 230 TFLOPs/s, 73% of the theoretical maximum" forward and
"50-73%" overall (T. Dao, "FlashAttention-2", 2023): one rate at every length, the backward at the 50 %
end (156 TFLOP/s), with and without the mask alike (the paper's per-length charts are not taken here).

Which kernel a run uses: "when both implementations are applicable, Transformer Engine prefers cuDNN flash
attention on Hopper+ architectures, and Tri Dao flash attention" on Ampere (NVIDIA NeMo Framework
documentation, memory optimizations, "Flash Attention"; NVIDIA/NeMo pull request 9188, May 2024; Transformer
Engine's context-parallel attention runs cuDNN too since its pull request 572, January 2024): the catalog's
`attention_default`.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

FA3_PAPER_SEQ_LENS = (512, 1024, 2048, 4096, 8192, 16384)
"""The sequence lengths of the FlashAttention-3 paper's 16-bit charts (batch x sequence = 16K tokens)."""


Row = tuple[float, ...]


@dataclass(frozen=True)
class AttentionKernel:
    """One fused attention kernel's measured TFLOP/s on one GPU: a row of rates per head dimension in
    `head_dims`, one rate per sequence length in `seq_lens` (both ascending). Between two measured points the
    rate is interpolated on log2 of the length, then of the head dimension; outside them it is the nearest
    measured one. A backward row may be None (not measured at that head dimension): see `tflops`."""

    name: str
    seq_lens: tuple[int, ...]
    forward_tflops: tuple[Row, ...]
    forward_causal_tflops: tuple[Row, ...]
    backward_tflops: tuple[Row | None, ...]
    source: str
    head_dims: tuple[int, ...] = (128,)
    # a measured causal backward, per head dimension (None: derived from the forward's causal ratio)
    backward_causal_tflops: tuple[Row | None, ...] | None = None

    def __post_init__(self) -> None:
        n, h = len(self.seq_lens), len(self.head_dims)
        rows: tuple[tuple[Row | None, ...], ...] = (
            self.forward_tflops,
            self.forward_causal_tflops,
            self.backward_tflops,
        )
        if self.backward_causal_tflops is not None:
            rows += (self.backward_causal_tflops,)
        if n == 0 or h == 0 or any(len(r) != h for r in rows):
            raise ValueError(f"attention kernel {self.name}: one row of rates per head dimension, in each direction")
        if any(row is not None and len(row) != n for r in rows for row in r):
            raise ValueError(f"attention kernel {self.name}: one rate per sequence length, in each direction")
        if all(row is None for row in self.backward_tflops):
            raise ValueError(f"attention kernel {self.name}: a backward row at one head dimension at least")
        for axis, values in (("sequence lengths", self.seq_lens), ("head dimensions", self.head_dims)):
            if list(values) != sorted(set(values)):
                raise ValueError(f"attention kernel {self.name}: {axis} must ascend")

    @staticmethod
    def _interp(xs: tuple[int, ...], ys: list[float] | tuple[float, ...], x: float) -> float:
        if x <= xs[0]:
            return ys[0]
        if x >= xs[-1]:
            return ys[-1]
        i = bisect.bisect_right(xs, x)
        x0, x1 = math.log2(xs[i - 1]), math.log2(xs[i])
        w = (math.log2(x) - x0) / (x1 - x0)
        return ys[i - 1] + w * (ys[i] - ys[i - 1])

    def _at(self, row: Row, seq_len: float) -> float:
        return self._interp(self.seq_lens, row, seq_len)

    def _backward_row_rate(self, i: int, seq_len: float) -> float:
        """The measured backward rate at head dimension `i`, or where that was not measured, the forward's
        there times the backward-to-forward ratio at the nearest head dimension that was (derived)."""
        row = self.backward_tflops[i]
        if row is not None:
            return self._at(row, seq_len)
        j, measured = min(
            ((k, r) for k, r in enumerate(self.backward_tflops) if r is not None),
            key=lambda kr: abs(math.log2(self.head_dims[kr[0]]) - math.log2(self.head_dims[i])),
        )
        ratio = self._at(measured, seq_len) / self._at(self.forward_tflops[j], seq_len)
        return self._at(self.forward_tflops[i], seq_len) * ratio

    def _row_rate(self, i: int, seq_len: float, causal: bool, backward: bool) -> float:
        if not backward:
            return self._at((self.forward_causal_tflops if causal else self.forward_tflops)[i], seq_len)
        measured = None if self.backward_causal_tflops is None else self.backward_causal_tflops[i]
        if causal and measured is not None:
            return self._at(measured, seq_len)
        rate = self._backward_row_rate(i, seq_len)
        if causal:
            rate *= self._at(self.forward_causal_tflops[i], seq_len) / self._at(self.forward_tflops[i], seq_len)
        return rate

    def tflops(self, seq_len: float, causal: bool, backward: bool, head_dim: float = 128) -> float:
        """The kernel's rate at a sequence length and head dimension. Causal backward: measured where the table
        has it (`backward_causal_tflops`), else the backward rate times the forward's causal to non-causal ratio
        at that length (derived)."""
        rates = [self._row_rate(i, seq_len, causal, backward) for i in range(len(self.head_dims))]
        return self._interp(self.head_dims, rates, head_dim)

    def scaled(self, factor: float, note: str, name: str = "") -> AttentionKernel:
        """The same kernel on another GPU (or standing in for `name` there), every rate times `factor` (no
        measurement there: stated in `note`)."""

        def times(rows):
            return tuple(None if row is None else tuple(v * factor for v in row) for row in rows)

        return AttentionKernel(
            name or self.name,
            self.seq_lens,
            times(self.forward_tflops),
            times(self.forward_causal_tflops),
            times(self.backward_tflops),
            f"{self.source}; {note}",
            self.head_dims,
            None if self.backward_causal_tflops is None else times(self.backward_causal_tflops),
        )


_FA3_PAPER = "FlashAttention-3 paper (Shah et al. 2024), H100 SXM5, Fig. 5 and 6"
_CAUSAL_BWD = "derived: the causal backward from the forward's causal ratio, head dim 256's backward from 128's"

FA3_PAPER_HEAD_DIMS = (64, 128, 256)
"""Head dimensions of the paper's 16-bit charts (32, 16 and 8 heads: hidden 2,048); its backward chart has no
256: there the backward is derived from the forward (see `AttentionKernel._backward_row_rate`)."""


def _fa3_paper_kernel(
    name: str, label: str, forward: tuple[Row, ...], forward_causal: tuple[Row, ...], backward_64_128: tuple[Row, ...]
) -> AttentionKernel:
    """One kernel of the FlashAttention-3 paper's 16-bit charts: rows at `FA3_PAPER_HEAD_DIMS`, the backward
    charted at 64 and 128 only (256 derived, see `AttentionKernel._backward_row_rate`)."""
    return AttentionKernel(
        name,
        FA3_PAPER_SEQ_LENS,
        forward,
        forward_causal,
        (*backward_64_128, None),
        f"{label}, {_FA3_PAPER}; {_CAUSAL_BWD}",
        FA3_PAPER_HEAD_DIMS,
    )


HOPPER_ATTENTION: dict[str, AttentionKernel] = {
    k.name: k
    for k in (
        _fa3_paper_kernel(
            "flash2",
            "FlashAttention-2 2.5.8",
            forward=(
                (282.0, 306.0, 318.0, 321.0, 322.0, 324.0),
                (309.0, 350.0, 362.0, 368.0, 370.0, 370.0),
                (275.0, 313.0, 321.0, 323.0, 324.0, 326.0),
            ),
            forward_causal=(
                (180.0, 229.0, 262.0, 284.0, 295.0, 299.0),
                (191.0, 260.0, 298.0, 319.0, 333.0, 335.0),
                (208.0, 251.0, 278.0, 293.0, 297.0, 298.0),
            ),
            backward_64_128=(
                (198.0, 238.0, 264.0, 279.0, 287.0, 291.0),
                (214.0, 260.0, 291.0, 310.0, 318.0, 322.0),
            ),
        ),
        _fa3_paper_kernel(
            "cudnn",
            "cuDNN 9.1.1 fused attention",
            forward=(
                (335.0, 373.0, 395.0, 408.0, 412.0, 413.0),
                (497.0, 574.0, 617.0, 609.0, 600.0, 595.0),
                (470.0, 546.0, 580.0, 581.0, 580.0, 581.0),
            ),
            forward_causal=(
                (225.0, 288.0, 334.0, 363.0, 379.0, 388.0),
                (315.0, 410.0, 484.0, 518.0, 529.0, 539.0),
                (308.0, 391.0, 450.0, 483.0, 497.0, 509.0),
            ),
            backward_64_128=(
                (266.0, 348.0, 395.0, 417.0, 432.0, 433.0),
                (305.0, 408.0, 465.0, 499.0, 518.0, 516.0),
            ),
        ),
        _fa3_paper_kernel(
            "flash3",
            "FlashAttention-3",
            forward=(
                (333.0, 392.0, 460.0, 476.0, 496.0, 497.0),
                (467.0, 565.0, 625.0, 638.0, 646.0, 648.0),
                (482.0, 639.0, 707.0, 736.0, 746.0, 756.0),
            ),
            forward_causal=(
                (197.0, 265.0, 371.0, 420.0, 460.0, 473.0),
                (292.0, 423.0, 521.0, 579.0, 602.0, 616.0),
                (286.0, 427.0, 537.0, 612.0, 628.0, 642.0),
            ),
            backward_64_128=(
                (272.0, 363.0, 422.0, 453.0, 472.0, 474.0),
                (316.0, 424.0, 501.0, 542.0, 559.0, 561.0),
            ),
        ),
    )
}

B200_SEQ_LENS = (512, 1024, 2048, 4096, 8192, 16384, 32768)
B200_CUDNN_SEQ_LENS = B200_SEQ_LENS
# NVIDIA/cudnn-frontend, benchmark/sdpa_benchmark_training, artifacts/sdpa_bf16_benchmark_results_NVIDIA_B200.csv
# (log sample_b200_bf16_run.txt): through PyTorch (torch 2.9.0a0, NGC 25.09), bf16, causal, batch 1, 128 query and
# 8 key/value heads of 128, forward and backward TFLOP/s as printed (FLOPs 4·s²·d·heads halved by the mask, x 2.5
# backward): its pyt_cudnn rows (cuDNN 9.13.0) and its flash_attention rows (FlashAttention-2 2.7.4.post1)
_B200_CUDNN_CAUSAL_FWD = (83.991, 254.501, 478.921, 855.678, 1171.278, 1332.415, 1419.000)
_B200_CUDNN_CAUSAL_BWD = (134.164, 308.529, 371.486, 701.265, 942.509, 1074.776, 1108.688)
_B200_FA2_CAUSAL_FWD = (63.936, 154.417, 254.381, 342.990, 399.925, 425.128, 435.762)
_B200_FA2_CAUSAL_BWD = (81.393, 104.860, 198.845, 273.484, 318.004, 336.635, 345.634)


def _b200_measured(name: str, label: str, causal_fwd: Row, causal_bwd: Row) -> AttentionKernel:
    """A kernel measured on a B200 with the causal mask at head dimension 128 (cudnn-frontend's SDPA benchmark);
    without the mask (no such run was found) derived from it at the same H100 kernel's non-causal to causal ratio
    at each length (the ratio at 16K beyond it)."""
    h100 = HOPPER_ATTENTION[name]
    i = h100.head_dims.index(128)

    def ratio(s: int) -> float:
        return h100._at(h100.forward_tflops[i], s) / h100._at(h100.forward_causal_tflops[i], s)

    # the H100's non-causal backward over its causal one (derived there the same way) is its forward's ratio
    fwd = tuple(c * ratio(s) for s, c in zip(B200_SEQ_LENS, causal_fwd))
    bwd = tuple(c * ratio(s) for s, c in zip(B200_SEQ_LENS, causal_bwd))
    return AttentionKernel(
        name,
        B200_SEQ_LENS,
        (fwd,),
        (causal_fwd,),
        (bwd,),
        f"{label} on a B200 (PyTorch 2.9, NGC 25.09), NVIDIA/cudnn-frontend's SDPA training benchmark "
        "(sdpa_bf16_benchmark_results_NVIDIA_B200.csv): causal forward and backward measured at head dimension 128; "
        f"derived: without the mask, at the H100 {name} table's non-causal to causal ratio",
        (128,),
        (causal_bwd,),
    )


B200_ATTENTION: dict[str, AttentionKernel] = {
    "cudnn": _b200_measured("cudnn", "cuDNN 9.13.0", _B200_CUDNN_CAUSAL_FWD, _B200_CUDNN_CAUSAL_BWD),
    "flash2": _b200_measured("flash2", "FlashAttention-2 2.7.4.post1", _B200_FA2_CAUSAL_FWD, _B200_FA2_CAUSAL_BWD),
}
"""B200 (HGX, 1,000 W): cuDNN (the kernel Transformer Engine picks there) and FlashAttention-2, both measured."""


AMPERE_ATTENTION: dict[str, AttentionKernel] = {
    "flash2": AttentionKernel(
        "flash2",
        (16384,),
        forward_tflops=((230.0,),),
        forward_causal_tflops=((230.0,),),
        backward_tflops=((156.0,),),
        source="FlashAttention-2 paper (Dao 2023): up to 230 TFLOP/s forward, 50 % of the peak backward; "
        "one rate at every length and head dimension, causal or not",
    ),
}


def scaled_kernels(kernels: dict[str, AttentionKernel], factor: float, note: str) -> dict[str, AttentionKernel]:
    """Every kernel of a GPU's table on another GPU, its rates times `factor`."""
    return {name: k.scaled(factor, note) for name, k in kernels.items()}
