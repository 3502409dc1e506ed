"""Calibration from the user's own measurements: nccl-tests outputs fitted to the collective cost model
(`nccl_tests` parses, `fit` fits), and GEMM throughput timed with torch (`gemm_bench`)."""

from __future__ import annotations

import re

from ..catalog import GPUS


def catalog_gpu(device_name: str) -> str:
    """The catalog entry a device name (as CUDA reports it) stands for, or "" when none does.

    A key's parts ("A100", "A100-40GB", "H100-PCIE") must all be words of the name; the key with the most
    parts wins: "NVIDIA H100 80GB HBM3" -> H100, "NVIDIA A100-SXM4-80GB" -> A100, "NVIDIA A100-SXM4-40GB"
    -> A100-40GB, "NVIDIA H100 PCIe" -> H100-PCIE, "NVIDIA GB200" -> GB200 (not B200); "NVIDIA GB10",
    "NVIDIA GH200 120GB" and CPUs -> ""."""
    words = set(re.split(r"[^A-Z0-9]+", device_name.upper())) - {""}
    best, parts = "", 0
    for key in GPUS:
        need = key.upper().split("-")
        if len(need) > parts and all(p in words for p in need):
            best, parts = key, len(need)
    return best


__all__ = ["catalog_gpu"]
