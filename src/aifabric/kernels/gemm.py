"""A GEMM's time from its shape, as a tiled kernel runs it on the GPU's streaming multiprocessors.

C[M, N] = A[M, K] · B[K, N] (a batch of `batch` such products) is cut into output tiles of Tm x Tn; each
SM computes one tile at a time, walking the whole K dimension (NVIDIA, "Matrix Multiplication Background
User's Guide", Deep Learning Performance documentation: tile quantization and wave quantization). So:

- tiles = ceil(M / Tm) · ceil(N / Tn) · batch; a partial tile at an edge costs a whole tile (tile
  quantization);
- the tiles run in waves of one tile per SM: waves = ceil(tiles / SMs) (wave quantization);
- when the tiles fill less than one wave, K is split over several SMs (split-K: cuBLAS's
  answer to skinny products) and the partial sums, in fp32, are added by a second pass over memory;
- a tile's time is its main loop, 2 · Tm · Tn · K / (the SM's achievable rate), then its epilogue: the
  tile's result written to HBM (fp32 partial sums under split-K) at the SM's share of the achievable
  bandwidth, not overlapped with the main loop. Checked against Azure's published cuBLASLt throughputs
  (AI-benchmarking-guide, Azure_Results): A100-SXM4-80GB,
  CUDA 12.5, fp16 and H100 80GB HBM3, CUDA 12.6, fp8, each model anchored on the table's largest
  square, every other shape but 1024^3 (a kernel of microseconds, launch-bound): mean error 4.0 % (A100)
  and 4.2 % (H100) with the epilogue, 7.9 % and 16.9 % without; the skinny 802816 x 192 x 768 +2 % / -3 %
  instead of +20 % / +15 %; nothing fitted (tests/kernels/test_gemm_measured.py). Those GEMMs write a
  fresh 16-bit result; no measurement was found of one that accumulates into an fp32 buffer (a weight
  gradient under Megatron-LM's gradient accumulation fusion reads and writes 8 bytes per element of C),
  so its epilogue is taken as the same 16-bit write, an assumption: serializing all 8 bytes would make
  the weight gradients of micro-batch-1 runs (K = 2,048 tokens) up to 25 % slower, and the 1T runs of
  Korthikanti et al. 2022 4-6 % slower (their errors +11.4 % and +11.3 % instead of +5.4 % and +6.8 %:
  docs/validation.md);
- memory bound: the operands and the result cross HBM at least once, so time >= bytes / achievable HBM
  bandwidth (small K, or a thin matrix);
- the library picks the fastest of its tiles. "Larger tiles have more data reuse, allowing them to use
  less bandwidth and be more efficient than smaller tiles" (the same guide), so the large tiles
  (256 x 128, 128 x 256, 128 x 128) are the candidates, and the small ones (128 x 64, 64 x 128, 64 x 64)
  only for a problem that the large ones cannot spread over one wave of SMs.

The SM's achievable rate is not the datasheet peak: it is set so that this model, on the shape where the
GPU's matmul throughput was measured (catalog: `GpuSpec.gemm_anchor`: the rate sustained under full load,
`matmul_sustained`, where there is one, else the maximum achievable, `matmul_tflops` on `matmul_best_shape`),
gives exactly that measured throughput, and no GEMM is faster than the measurement (a shape that fills
more SMs than the measured one would otherwise come out ahead of it): none is above the dense peak.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LARGE_TILES: tuple[tuple[int, int], ...] = ((256, 128), (128, 256), (128, 128))
SMALL_TILES: tuple[tuple[int, int], ...] = ((128, 64), (64, 128), (64, 64))
"""Output tiles of cuBLAS's tensor-core kernels (cublasLtMatmulTile_t), large and small."""


@dataclass(frozen=True)
class Device:
    """What the GEMM model needs of a GPU, at one precision."""

    sm_count: int
    sm_flops: float  # achievable FLOP/s of one SM on large tiles (see sm_flops_from_measurement)
    hbm_bytes_per_s: float  # achievable HBM bandwidth
    max_flops: float = 0.0  # the measured maximum: no GEMM runs faster (0: no cap)


@dataclass(frozen=True)
class GemmCost:
    time_s: float
    flops: float  # 2·M·N·K·batch, the useful work
    bytes: float  # HBM traffic
    tile: tuple[int, int]
    split_k: int
    waves: int
    memory_bound: bool

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.time_s if self.time_s > 0 else 0.0


def _tiles(m: int, n: int, batch: int, tile: tuple[int, int]) -> int:
    return math.ceil(m / tile[0]) * math.ceil(n / tile[1]) * batch


def gemm_cost(
    m: int,
    n: int,
    k: int,
    dev: Device,
    *,
    batch: int = 1,
    in_bytes: float = 2.0,
    out_bytes: float = 2.0,
    accumulate_bytes: float = 0.0,
) -> GemmCost:
    """The fastest tiling of one (batched) GEMM. `accumulate_bytes`: bytes per element of C that are read
    and written again instead of a fresh `out_bytes` result (a weight gradient accumulated into an fp32
    main-gradient buffer, Megatron-LM's gradient accumulation fusion: 4)."""
    m, n, k, batch = max(1, int(m)), max(1, int(n)), max(1, int(k)), max(1, int(batch))
    flops = 2.0 * m * n * k * batch
    c_bytes = 2 * accumulate_bytes if accumulate_bytes else out_bytes  # per element of C, to and from HBM
    base_bytes = batch * (in_bytes * (m * k + k * n) + c_bytes * m * n)
    best: GemmCost | None = None
    candidates = LARGE_TILES
    if max(_tiles(m, n, batch, t) for t in LARGE_TILES) < dev.sm_count:
        candidates = LARGE_TILES + SMALL_TILES
    for tile in candidates:
        tm, tn = tile
        tiles = _tiles(m, n, batch, tile)
        splits = range(1, 2)
        if tiles < dev.sm_count and k > 1:  # every split up to the one that fills the SMs; the fp32 partial
            splits = range(1, max(1, min(dev.sm_count // tiles, k)) + 1)  # sums of each keep the useful few
        for split in splits:
            waves = math.ceil(tiles * split / dev.sm_count)
            epilogue_bytes = tm * tn * (4.0 if split > 1 else out_bytes)
            epilogue_s = epilogue_bytes * dev.sm_count / dev.hbm_bytes_per_s
            compute_s = waves * (2.0 * tm * tn * math.ceil(k / split) / dev.sm_flops + epilogue_s)
            moved = base_bytes + (2 * 4.0 * m * n * split * batch if split > 1 else 0.0)  # fp32 partials out, in
            memory_s = moved / dev.hbm_bytes_per_s
            t = max(compute_s, memory_s, flops / dev.max_flops) if dev.max_flops else max(compute_s, memory_s)
            if best is None or t < best.time_s:
                best = GemmCost(t, flops, moved, tile, split, waves, memory_s > compute_s)
    assert best is not None
    return best


def sm_flops_from_measurement(
    measured_flops_per_s: float,
    shape: tuple[int, int, int],
    sm_count: int,
    hbm_bytes_per_s: float,
    in_bytes: float = 2.0,
    out_bytes: float = 2.0,
) -> float:
    """The per-SM rate for which `gemm_cost` on `shape` (M, N, K) runs at the measured throughput: the
    model is anchored to a measurement, never to the datasheet. Solved by bisection (time falls as the
    rate grows, until the shape turns memory bound)."""
    m, n, k = shape
    target_s = 2.0 * m * n * k / measured_flops_per_s
    lo, hi = measured_flops_per_s / sm_count * 0.5, measured_flops_per_s / sm_count * 4.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        dev = Device(sm_count, mid, hbm_bytes_per_s)
        t = gemm_cost(m, n, k, dev, in_bytes=in_bytes, out_bytes=out_bytes).time_s
        if t > target_s:
            lo = mid
        else:
            hi = mid
    return hi
