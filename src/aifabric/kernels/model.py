"""The kernel model: each kernel of a training step timed from what it is, on one GPU.

Four kinds of kernels (`Kernel.kind`), the classes the report shows compute time by:

- `gemm`: matrix multiplies, from their shapes (kernels/gemm.py: tiles, waves, split-K, memory bound),
  anchored to the GPU's measured maximum achievable matmul throughput, or looked up in a table the user
  measured with `aifabric calibrate gemm` (kernels/calibration.py);
- `attention`: the fused attention kernel (FlashAttention, cuDNN): its FLOPs at the rate the kernel reaches
  on the GPU in its published benchmarks at that sequence length and head dimension, causal or not (catalog:
  `attention_kernels`, attention_rates.py), with the SMs it leaves idle when there
  are fewer query blocks than SMs, or its memory traffic, whichever takes longer; without a fused kernel
  (`attention: unfused`, Megatron-LM before FlashAttention) the scores are batched GEMMs and the softmax
  and dropout are memory-bound kernels over the s x s scores;
- `memory`: element-wise and normalization kernels (norms, activations, dropout and residual adds, rotary
  embeddings, softmax, casts, the loss): their bytes over the achievable HBM bandwidth;
- `optimizer`: the optimizer step (multi-tensor Adam): bytes over the achievable HBM bandwidth.

An op of the workload (one `Compute`) is a sequence of kernels (`KernelSeq`). Its time: the kernels'
GPU time plus a small gap between consecutive kernels on the GPU, or the host's time to launch them
(eager PyTorch issues one kernel per few microseconds), whichever is longer: the host runs ahead of the
GPU, so launches cost time only when the kernels are shorter than them. What that adds is reported as
`launch`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..catalog import GpuSpec
from ..units import BYTES_PER_ELEMENT
from .gemm import Device, gemm_cost, sm_flops_from_measurement

KINDS = ("gemm", "attention", "memory", "optimizer", "launch")
SOFTWARE = ("current", "megatron-2022", "megatron-2021")
"""`workload.software`: the kernels a run was made with. current: GEMMs anchored to the GPU's maximum
achievable matmul throughput (2025 software), norms at the achievable HBM bandwidth, as today's fused
kernels (Apex's fast LayerNorm: 1,258 / 1,163 GB/s forward / backward on an A100 40 GB, 91 % / 84 % of its
STREAM Triad) run. megatron-2022: GEMMs anchored to the GPU's CUDA 11.7 measurement (catalog:
`matmul_by_software`). megatron-2021: that, and LayerNorm as Megatron-LM's fused kernel of 2021 (Apex's
FusedLayerNorm, "the only difference between the fused layer norm in Megatron's code vs APEX is in the
types", J. Casper, NVIDIA, 2021) ran it: 895.8 GB/s forward, 572.2 GB/s backward on GA100 (NVIDIA/apex pull
request 1037, B = 32, S = 512), taken as fractions of the A100 40 GB's Triad (1,377.5 GB/s)."""
_NORM_FRACTION = {"megatron-2021": (895.8 / 1377.5, 572.2 / 1377.5)}  # forward, backward, of achievable HBM
_GEMM_SOFTWARE = {"megatron-2022": "cuda-11.7", "megatron-2021": "cuda-11.7"}
FLASH_BLOCK_ROWS = 128  # query rows per thread block of FlashAttention-2's forward kernel (Dao 2023, §3.3)


@dataclass(frozen=True)
class Kernel:
    kind: str  # gemm | attention | memory | optimizer
    name: str
    flops: float  # FLOPs the kernel executes
    bytes: float  # HBM bytes it moves
    time_s: float  # GPU time


@dataclass(frozen=True)
class KernelSeq:
    """The kernels of one op, in order, and how long they take together."""

    kernels: tuple[Kernel, ...]
    gap_s: float = 0.0  # GPU idle between two kernels
    launch_s: float = 0.0  # host time to launch one kernel

    @property
    def gpu_s(self) -> float:
        return sum(k.time_s for k in self.kernels) + self.gap_s * len(self.kernels)

    @property
    def time_s(self) -> float:
        return max(self.gpu_s, self.launch_s * len(self.kernels))

    @property
    def flops(self) -> float:
        return sum(k.flops for k in self.kernels)

    def by_kind(self) -> tuple[tuple[str, float], ...]:
        """Seconds per kind; `launch` = gaps and launch-bound time beyond the kernels' own."""
        out: dict[str, float] = {}
        for k in self.kernels:
            out[k.kind] = out.get(k.kind, 0.0) + k.time_s
        extra = self.time_s - sum(out.values())
        if extra > 0:
            out["launch"] = extra
        return tuple((kind, out[kind]) for kind in KINDS if kind in out)

    def __add__(self, other: KernelSeq) -> KernelSeq:
        return KernelSeq(self.kernels + other.kernels, self.gap_s, self.launch_s)


class KernelModel:
    """Kernel times on one GPU at one precision. `gemm_table`: measured GEMM throughputs that replace the
    tile model for the shapes they cover (kernels/calibration.py)."""

    def __init__(self, gpu: GpuSpec, precision: str, gemm_table=None, software: str = "current", attention_table=None):
        self.gpu = gpu
        # measured fused attention (kernels/attention_calibration.py): replaces the catalog's kernels
        self.attention_table = attention_table
        self.precision = precision
        self.software = software
        self.in_bytes = BYTES_PER_ELEMENT[precision]
        self.act_bytes = max(2, self.in_bytes)  # activations stay 16-bit with fp8 GEMMs (Transformer Engine)
        self.hbm_bytes_per_s = gpu.hbm_bandwidth_gBps * 1e9 * gpu.hbm_efficiency
        measured, shape = gpu.gemm_anchor(precision)  # sustained under full load where measured
        if software in _GEMM_SOFTWARE:
            stack = _GEMM_SOFTWARE[software]
            if stack not in gpu.matmul_by_software or precision not in ("bf16", "fp16"):
                raise ValueError(
                    f"workload.software: {software} needs a 16-bit matmul measurement with {stack} "
                    f"on {gpu.name}; the catalog has one for: "
                    f"{', '.join(gpu_name_with(stack)) or 'no GPU'} (16-bit precisions)"
                )
            tflops, shape = gpu.matmul_by_software[stack]
            measured = tflops * 1e12
        self.norm_fraction = _NORM_FRACTION.get(software, (1.0, 1.0))
        sm = sm_flops_from_measurement(
            measured, shape, gpu.sm_count, self.hbm_bytes_per_s, self.in_bytes, self.act_bytes
        )
        self.device = Device(gpu.sm_count, sm, self.hbm_bytes_per_s, measured)
        self.gemm_table = gemm_table
        self.gap_s = gpu.kernel_gap_us * 1e-6
        self.launch_s = gpu.launch_us * 1e-6

    # ---- single kernels ---------------------------------------------------------------------
    def gemm_time_s(self, m: int, n: int, k: int, batch: int = 1) -> float:
        """The tile model's time of a GEMM (no table): what a GEMM table scales from shape to shape."""
        return gemm_cost(m, n, k, self.device, batch=batch, in_bytes=self.in_bytes, out_bytes=self.act_bytes).time_s

    def gemm(self, name: str, m: float, n: float, k: float, batch: int = 1, accumulate_fp32: bool = False) -> Kernel:
        m, n, k = max(1, round(m)), max(1, round(n)), max(1, round(k))
        cost = gemm_cost(
            m,
            n,
            k,
            self.device,
            batch=batch,
            in_bytes=self.in_bytes,
            out_bytes=self.act_bytes,
            accumulate_bytes=4.0 if accumulate_fp32 else 0.0,
        )
        time_s = cost.time_s
        if self.gemm_table is not None:
            measured = self.gemm_table.flops_per_s(m, n, k, batch)
            if measured:
                time_s = max(cost.flops / measured, cost.bytes / self.hbm_bytes_per_s)
        return Kernel("gemm", name, cost.flops, cost.bytes, time_s)

    def memory(self, name: str, nbytes: float, kind: str = "memory", flops: float = 0.0) -> Kernel:
        return Kernel(kind, name, flops, nbytes, nbytes / self.hbm_bytes_per_s)

    def norm(self, name: str, elements: float, backward: bool, out_bytes: float | None = None) -> Kernel:
        """A LayerNorm / RMSNorm over `elements` activations: read x (and the gradient backward), write one
        tensor (16-bit, or `out_bytes` per element: a norm that writes FP8 itself), at the norm kernel's share
        of the achievable bandwidth (`SOFTWARE`)."""
        written = self.act_bytes if out_bytes is None else out_bytes
        nbytes = elements * ((2 if backward else 1) * self.act_bytes + written)
        return Kernel("memory", name, 0.0, nbytes, nbytes / (self.hbm_bytes_per_s * self.norm_fraction[backward]))

    def elementwise(self, name: str, elements: float, reads: float, writes: float, extra_bytes: float = 0.0) -> Kernel:
        """A memory-bound kernel over `elements` activations: `reads` + `writes` tensors of that size."""
        return self.memory(name, elements * (reads + writes) * self.act_bytes + extra_bytes)

    def flash_attention(
        self,
        name: str,
        batch: int,
        heads: int,
        kv_heads: int,
        s_q: int,
        s_kv: int,
        head_dim: int,
        causal: bool,
        backward: bool,
        kernel: str = "flash",
        window: int | None = None,
    ) -> Kernel:
        """FlashAttention: forward 2 products (Q·K^T, P·V), backward 5 (the forward's two recomputed, dV,
        dP, and dQ, dK from dS: counted as 2.5 x forward, Dao 2023). A causal mask skips the blocks
        above the diagonal; a sliding `window` (causal) computes only the band of blocks within it of the
        diagonal. Memory: Q, K, V, O (and dO, dQ, dK, dV, the fp32 dQ accumulator backward).
        The rate: the measured rate of `kernel` (catalog: `attention_kernels`; `flash`, the GPU's default)
        at the head dimension and the length of the shorter side (a context-parallel rank's queries meet the
        keys in blocks of its own length; a windowed query its window), with or without the mask."""
        # context parallelism gives each rank s_q of the s_kv queries, balanced over the causal triangle
        # (Megatron's load-balanced chunks): its share of the whole square's computed blocks
        if window is not None and window < s_kv:
            visible = _band_fraction(s_kv, window, FLASH_BLOCK_ROWS)
        else:
            visible = _causal_fraction(s_kv, s_kv, FLASH_BLOCK_ROWS) if causal else 1.0
            window = None
        fwd_flops = 4.0 * batch * heads * s_q * s_kv * head_dim * visible
        flops = fwd_flops * (2.5 if backward else 1.0)
        length = min(s_q, s_kv) if window is None else min(s_q, s_kv, window)
        if self.attention_table is not None:  # the user's own measurement of the device's kernel
            rate = self.attention_table.tflops(length, causal, backward, head_dim) * 1e12
        else:
            rate = self.gpu.attention_flops(self.precision, backward, kernel, length, causal, head_dim)
        blocks = batch * heads * math.ceil(s_q / FLASH_BLOCK_ROWS)
        sms = self.gpu.sm_count
        busy = blocks / (sms * math.ceil(blocks / sms))  # the last wave's idle SMs
        q = batch * s_q * heads * head_dim * self.act_bytes
        kv = 2 * batch * s_kv * kv_heads * head_dim * self.act_bytes
        # forward: read Q, K, V, write O; backward: read Q, K, V, O, dO, write dQ, dK, dV, and the fp32 dQ
        # accumulator read and written once more
        nbytes = (4 * q + 2 * kv + 2 * 4 * q / self.act_bytes) if backward else (2 * q + kv)
        time_s = max(flops / (rate * busy), nbytes / self.hbm_bytes_per_s)
        return Kernel("attention", name, flops, nbytes, time_s)

    def optimizer(self, name: str, nbytes: float, flops: float = 0.0) -> Kernel:
        return self.memory(name, nbytes, "optimizer", flops)

    # ---- sequences -----------------------------------------------------------------------------
    def seq(self, *kernels: Kernel) -> KernelSeq:
        return KernelSeq(tuple(kernels), self.gap_s, self.launch_s)


def gpu_name_with(stack: str) -> list[str]:
    """The catalog's GPUs that hold a matmul measurement with software `stack`."""
    from ..catalog import GPUS

    return [name for name, spec in GPUS.items() if stack in spec.matmul_by_software]


def _band_fraction(s: int, window: int, block: int) -> float:
    """Share of the blocks of an s x s score square a causal sliding-window kernel computes: per row of query
    blocks, the diagonal block and the blocks the window reaches back into (w / block, rounded up), fewer near
    the start of the sequence."""
    n = math.ceil(max(s, 1) / block)
    reach = math.ceil(window / block)  # key blocks before the diagonal a query block's window touches
    ramp = min(reach, n)  # the first rows of blocks, whose window starts before the sequence does
    return (ramp * (ramp + 1) / 2 + (n - ramp) * (reach + 1)) / (n * n)


def _causal_fraction(s_q: int, s_kv: int, block: int) -> float:
    """Share of the blocks of an s x s causal score square a kernel computes (the diagonal blocks too):
    (n + 1) / 2n for n blocks per side."""
    n = math.ceil(max(s_q, s_kv, 1) / block)
    return (n + 1) / (2 * n)
