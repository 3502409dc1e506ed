"""Timing fused attention (`torch.nn.functional.scaled_dot_product_attention`) over sequence lengths and head
dimensions on this machine (`aifabric calibrate attention`).

Each point (head dimension d, sequence length s): `tokens` tokens a measurement, as the FlashAttention-3 paper
measures (batch = tokens / s), `hidden / d` heads, 16-bit on a GPU; forward without and with the causal mask,
and the backward of each (the forward's graph kept, its backward run again and again). A time is the median of
`repeats` samples, each a run of back-to-back calls long enough (>= 1 ms) that the clock's resolution and a GPU's
launch gap do not matter, bracketed by synchronizations. Rates in the catalog's convention (attention_rates.py):
4 · s² · d · heads a sequence forward, halved with the mask, x 2.5 backward. torch picks the kernel it has for the
device (FlashAttention or cuDNN on a GPU, its math or flash CPU kernel on a CPU); the table says which device.
torch is imported inside the functions: it is an optional dependency (`aifabric[train]`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .gemm_bench import DTYPES, median_time

GPU_SEQ_LENS = (512, 1024, 2048, 4096, 8192, 16384)
CPU_SEQ_LENS = (128, 256, 512, 1024)
QUICK_SEQ_LENS = (64, 128, 256)  # seconds on a 2-core CPU
GPU_TOKENS, CPU_TOKENS, QUICK_TOKENS = 16384, 2048, 256
GPU_HIDDEN, CPU_HIDDEN, QUICK_HIDDEN = 2048, 512, 128  # heads = hidden / head dimension (the paper's 2,048)
KERNEL = "torch.nn.functional.scaled_dot_product_attention"
BACKENDS = {  # --backend -> torch.nn.attention.SDPBackend member (auto: torch's own choice)
    "auto": None,
    "flash": "FLASH_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "math": "MATH",
}


@dataclass(frozen=True)
class AttentionPoint:
    """One head dimension and sequence length: seconds per call, and the rates they give."""

    head_dim: int
    seq_len: int
    batch: int
    heads: int
    times_s: tuple[float, float, float, float]  # forward, forward causal, backward, backward causal

    def flops(self, causal: bool, backward: bool) -> float:
        f = 4.0 * self.batch * self.heads * self.seq_len**2 * self.head_dim * (0.5 if causal else 1.0)
        return f * (2.5 if backward else 1.0)

    def tflops(self) -> tuple[float, float, float, float]:
        kinds = ((False, False), (True, False), (False, True), (True, True))
        return tuple(self.flops(c, b) / t / 1e12 for (c, b), t in zip(kinds, self.times_s))  # type: ignore[return-value]


def grid(quick: bool, device_type: str) -> tuple[tuple[int, ...], int, int]:
    """(sequence lengths, tokens a measurement, hidden width) for this device."""
    if quick:
        return QUICK_SEQ_LENS, QUICK_TOKENS, QUICK_HIDDEN
    if device_type == "cuda":
        return GPU_SEQ_LENS, GPU_TOKENS, GPU_HIDDEN
    return CPU_SEQ_LENS, CPU_TOKENS, CPU_HIDDEN


def measure(
    torch,
    head_dims: tuple[int, ...],
    seq_lens: tuple[int, ...],
    tokens: int,
    hidden: int,
    device,
    dtype: str,
    repeats: int,
    seed: int = 0,
    backend: str = "auto",
) -> Iterator[AttentionPoint]:
    """One point per (head dimension, sequence length), head dimension outermost, as each is measured (an
    interrupted caller keeps what it has). `backend`: the kernel torch must use (`BACKENDS`); RuntimeError from
    torch when the device has no such kernel for these shapes."""
    tdtype = getattr(torch, DTYPES[dtype])
    gen = torch.Generator(device=device).manual_seed(seed)
    if device.type == "cuda":

        def sync() -> None:
            torch.cuda.synchronize(device)
    else:

        def sync() -> None:
            return None

    for d in head_dims:
        heads = max(1, hidden // d)
        for s in seq_lens:
            batch = max(1, tokens // s)
            shape = (batch, heads, s, d)
            times = tuple(
                _time_call(torch, shape, tdtype, gen, device, causal, backward, repeats, sync, backend)
                for backward in (False, True)
                for causal in (False, True)
            )
            yield AttentionPoint(d, s, batch, heads, times)  # type: ignore[arg-type]


def _time_call(
    torch, shape, tdtype, gen, device, causal: bool, backward: bool, repeats: int, sync, backend: str = "auto"
) -> float:
    """Seconds per forward call of SDPA on random (batch, heads, s, d) Q, K, V, or per backward of one (its
    kernel is the one the forward chose)."""
    q, k, v = (torch.randn(shape, generator=gen, device=device).to(tdtype).requires_grad_(backward) for _ in "qkv")
    member = BACKENDS[backend]

    def sdpa(*args, **kw):
        if member is None:
            return torch.nn.functional.scaled_dot_product_attention(*args, **kw)
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(getattr(SDPBackend, member)):
            return torch.nn.functional.scaled_dot_product_attention(*args, **kw)

    if not backward:
        with torch.no_grad():
            return median_time(lambda: sdpa(q, k, v, is_causal=causal), repeats, sync)
    out = sdpa(q, k, v, is_causal=causal)
    grad = torch.randn(out.shape, generator=gen, device=device).to(tdtype)
    return median_time(lambda: out.backward(grad, retain_graph=True), repeats, sync)
