"""Timing `torch.matmul` over a grid of GEMM shapes on this machine (`aifabric calibrate gemm`).

Each shape: two random M×K and K×N matrices on the device, one warm-up product, then `repeats`
samples, each a run of back-to-back products long enough (>= 1 ms) that the clock's resolution and a
GPU's launch gap do not matter, bracketed by synchronizations (`torch.cuda.synchronize` on a GPU, whose
kernels are asynchronous). The shape's time is the median sample divided by its products.

The grid is the product of one list of sizes for M, N and K: powers of two and 3·2^k between them (the
GEMM table interpolates in log2 of M, N, K, so the points should be spread evenly there). torch is
imported inside the functions: it is an optional dependency (`aifabric[train]`).
"""

from __future__ import annotations

import itertools
import math
import platform
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..kernels.calibration import GemmEntry
from . import catalog_gpu

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
QUICK_DIMS = (128, 256, 384, 512)  # 64 shapes: a few seconds on a 2-core CPU
CPU_DIMS = (128, 256, 384, 512, 768, 1024, 2048)  # fp32 on a CPU: 2048³ is ~0.1-1 s a product
GPU_DIMS = (256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)
MIN_SAMPLE_S = 1e-3
MAX_INNER = 1000


def shape_grid(quick: bool, device_type: str) -> list[tuple[int, int, int]]:
    """(M, N, K) shapes, least work first: the progress bar moves early, and an interrupted run keeps
    every shape below the one it stopped at."""
    dims = QUICK_DIMS if quick else (GPU_DIMS if device_type == "cuda" else CPU_DIMS)
    return sorted(((m, n, k) for m, n, k in itertools.product(dims, repeat=3)), key=lambda s: (s[0] * s[1] * s[2], s))


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return "cpu: " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu: " + (platform.processor() or platform.machine() or "unknown")


def resolve_device(torch, device: str) -> tuple[Any, str, str]:
    """(torch.device, the device's name as torch reports it, the catalog GPU it stands for or "")."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        name = torch.cuda.get_device_name(0)
        return torch.device("cuda", 0), name, catalog_gpu(name)
    return torch.device("cpu"), cpu_name(), ""


def time_matmul(torch, a, b, out, repeats: int, sync: Callable[[], None]) -> float:
    """Seconds per product a @ b (`median_time`)."""
    return median_time(lambda: torch.matmul(a, b, out=out), repeats, sync)


def median_time(call: Callable[[], object], repeats: int, sync: Callable[[], None]) -> float:
    """Seconds per `call`: the median of `repeats` samples after one warm-up (the lower middle one for an even
    count: a sample slowed by another process weighs nothing unless most are), each sample a run of calls of at
    least MIN_SAMPLE_S between two synchronizations."""
    call()
    sync()
    t0 = time.perf_counter()
    call()
    sync()
    once = time.perf_counter() - t0
    inner = max(1, min(MAX_INNER, math.ceil(MIN_SAMPLE_S / max(once, 1e-9))))
    samples = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(inner):
            call()
        sync()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median_low(samples)


def measure(
    torch, shapes: list[tuple[int, int, int]], device, dtype: str, repeats: int, seed: int = 0
) -> Iterator[GemmEntry]:
    """One entry per shape, as each is measured (an interrupted caller keeps what it has)."""
    tdtype = getattr(torch, DTYPES[dtype])
    gen = torch.Generator(device=device).manual_seed(seed)  # on the device: no host-side fill and copy
    if device.type == "cuda":

        def sync() -> None:
            torch.cuda.synchronize(device)
    else:

        def sync() -> None:
            return None

    for m, n, k in shapes:
        a = torch.randn(m, k, generator=gen, device=device).to(tdtype)
        b = torch.randn(k, n, generator=gen, device=device).to(tdtype)
        out = torch.empty(m, n, device=device, dtype=tdtype)
        t = time_matmul(torch, a, b, out, repeats, sync)
        del a, b, out
        yield GemmEntry(m, n, k, 1, t)
