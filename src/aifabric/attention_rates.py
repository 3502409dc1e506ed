"""Fused attention kernels' measured throughput, by kernel and sequence length (the GPU catalog's data).

A fused attention kernel (FlashAttention and its kin) runs at a rate that depends on which kernel it is, how
long the sequence is (short sequences leave the kernel's pipeline half-filled), whether a causal mask skips
the blocks above the diagonal (the blocks along it are half-empty, and the rows do unequal work), and the
direction (the backward pass recomputes the scores and writes three gradients).

Hopper, 16-bit, head dimension 128, batch x sequence = 16K tokens, 16 heads, on an H100 80GB SXM5 at a
fixed 1,830 MHz: J. Shah, G. Bikshandi, Y. Zhang, V. Thakkar, P. Ramani, T. Dao, "FlashAttention-3: Fast and
Accurate Attention with Asynchrony and Low-precision" (2024), Figure 5 (c) forward without and (d) with the
causal mask, Figure 6 (b) backward without it, the TFLOPS/s printed above each bar for FlashAttention-2
2.5.8, cuDNN 9.1.1.17 and FlashAttention-3 (the paper's appendix C.1 names the versions); FLOPs counted as
the paper does, 4 · s^2 · d · heads forward, halved with the mask, x 2.5 backward. The paper has no causal
backward chart: that rate is derived as the backward rate scaled by the forward's causal to non-causal
ratio at the same length (stated as derived in `AttentionKernel.source`).

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


@dataclass(frozen=True)
class AttentionKernel:
    """One fused attention kernel's measured TFLOP/s on one GPU, at the sequence lengths `seq_lens`
    (ascending); between two lengths the rate is interpolated on log2 of the length, outside them it is
    the nearest measured rate."""

    name: str
    seq_lens: tuple[int, ...]
    forward_tflops: tuple[float, ...]
    forward_causal_tflops: tuple[float, ...]
    backward_tflops: tuple[float, ...]
    source: str

    def __post_init__(self) -> None:
        n = len(self.seq_lens)
        if n == 0 or any(len(v) != n for v in (self.forward_tflops, self.forward_causal_tflops, self.backward_tflops)):
            raise ValueError(f"attention kernel {self.name}: one rate per sequence length, in each direction")
        if list(self.seq_lens) != sorted(set(self.seq_lens)):
            raise ValueError(f"attention kernel {self.name}: sequence lengths must ascend")

    def _at(self, values: tuple[float, ...], seq_len: float) -> float:
        lens = self.seq_lens
        if seq_len <= lens[0]:
            return values[0]
        if seq_len >= lens[-1]:
            return values[-1]
        i = bisect.bisect_right(lens, seq_len)
        x0, x1 = math.log2(lens[i - 1]), math.log2(lens[i])
        w = (math.log2(seq_len) - x0) / (x1 - x0)
        return values[i - 1] + w * (values[i] - values[i - 1])

    def tflops(self, seq_len: float, causal: bool, backward: bool) -> float:
        """The kernel's rate at a sequence length. Causal backward: the backward rate times the forward's
        causal to non-causal ratio at that length (derived: no measurement of it is published)."""
        if not backward:
            return self._at(self.forward_causal_tflops if causal else self.forward_tflops, seq_len)
        rate = self._at(self.backward_tflops, seq_len)
        if causal:
            rate *= self._at(self.forward_causal_tflops, seq_len) / self._at(self.forward_tflops, seq_len)
        return rate

    def scaled(self, factor: float, note: str, name: str = "") -> AttentionKernel:
        """The same kernel on another GPU (or standing in for `name` there), every rate times `factor` (no
        measurement there: stated in `note`)."""
        return AttentionKernel(
            name or self.name,
            self.seq_lens,
            tuple(v * factor for v in self.forward_tflops),
            tuple(v * factor for v in self.forward_causal_tflops),
            tuple(v * factor for v in self.backward_tflops),
            f"{self.source}; {note}",
        )


_FA3_PAPER = "FlashAttention-3 paper (Shah et al. 2024), H100 SXM5, Fig. 5 (c, d) and 6 (b)"
_CAUSAL_BWD = "causal backward derived from the forward's causal ratio"

HOPPER_ATTENTION: dict[str, AttentionKernel] = {
    "flash2": AttentionKernel(
        "flash2",
        FA3_PAPER_SEQ_LENS,
        forward_tflops=(309.0, 350.0, 362.0, 368.0, 370.0, 370.0),
        forward_causal_tflops=(191.0, 260.0, 298.0, 319.0, 333.0, 335.0),
        backward_tflops=(214.0, 260.0, 291.0, 310.0, 318.0, 322.0),
        source=f"FlashAttention-2 2.5.8, {_FA3_PAPER}; {_CAUSAL_BWD}",
    ),
    "cudnn": AttentionKernel(
        "cudnn",
        FA3_PAPER_SEQ_LENS,
        forward_tflops=(497.0, 574.0, 617.0, 609.0, 600.0, 595.0),
        forward_causal_tflops=(315.0, 410.0, 484.0, 518.0, 529.0, 539.0),
        backward_tflops=(305.0, 408.0, 465.0, 499.0, 518.0, 516.0),
        source=f"cuDNN 9.1.1 fused attention, {_FA3_PAPER}; {_CAUSAL_BWD}",
    ),
    "flash3": AttentionKernel(
        "flash3",
        FA3_PAPER_SEQ_LENS,
        forward_tflops=(467.0, 565.0, 625.0, 638.0, 646.0, 648.0),
        forward_causal_tflops=(292.0, 423.0, 521.0, 579.0, 602.0, 616.0),
        backward_tflops=(316.0, 424.0, 501.0, 542.0, 559.0, 561.0),
        source=f"FlashAttention-3, {_FA3_PAPER}; {_CAUSAL_BWD}",
    ),
}

AMPERE_ATTENTION: dict[str, AttentionKernel] = {
    "flash2": AttentionKernel(
        "flash2",
        (16384,),
        forward_tflops=(230.0,),
        forward_causal_tflops=(230.0,),
        backward_tflops=(156.0,),
        source="FlashAttention-2 paper (Dao 2023): up to 230 TFLOP/s forward, 50 % of the peak backward; "
        "one rate at every length, causal or not",
    ),
}


def scaled_kernels(kernels: dict[str, AttentionKernel], factor: float, note: str) -> dict[str, AttentionKernel]:
    """Every kernel of a GPU's table on another GPU, its rates times `factor`."""
    return {name: k.scaled(factor, note) for name, k in kernels.items()}
