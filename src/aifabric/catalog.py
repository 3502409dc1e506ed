"""GPU catalog: the figures the simulator needs for each accelerator.

All figures are per GPU, dense (no structured sparsity), from the vendor's public datasheets:

- A100 SXM4 80 GB: NVIDIA A100 Tensor Core GPU datasheet (2021). FP32 19.5, TF32 156, BF16/FP16 312
  TFLOP/s; HBM2e 2,039 GB/s; NVLink 3, 12 links, 600 GB/s total; DGX A100 pairs each GPU with a
  200 Gb/s ConnectX-6.
- H100 SXM5 80 GB: NVIDIA H100 Tensor Core GPU datasheet (2023); the datasheet's sparse figures halved.
  FP32 67, TF32 494.7, BF16/FP16 989.4, FP8 1,978.9 TFLOP/s; HBM3 3.35 TB/s; NVLink 4, 18 links,
  900 GB/s total (seeds Ch. 13: 5+4+4+5 links to four NVSwitch chips); ConnectX-7 400 Gb/s per GPU in
  DGX H100.
- H200 SXM 141 GB: NVIDIA H200 datasheet (2024): H100 compute, HBM3e 141 GB at 4.8 TB/s.
- B200 (HGX B200) 180 GB: NVIDIA HGX/DGX B200 datasheets (2024), sparse figures halved: FP8 4.5,
  BF16 2.25, TF32 1.1 PFLOP/s; HBM3e 8 TB/s; NVLink 5, 18 links, 1.8 TB/s total; ConnectX-8 800 Gb/s.
- GB200 (one Blackwell GPU of a GB200 NVL72), 186 GB: NVIDIA GB200 NVL72 datasheet (2024), per-GPU
  share of the rack figures (FP8 5, BF16 2.5, TF32 1.25 PFLOP/s dense); HBM3e 8 TB/s; NVLink 5 1.8 TB/s.

"NVLink bandwidth" here is NVIDIA's headline figure: the sum of both directions. Each direction
carries half (H100: 450 GB/s each way).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuSpec:
    name: str
    hbm_gB: float
    hbm_bandwidth_gBps: float
    peak_tflops: dict[str, float] = field(repr=False)
    nvlink_links: int
    nvlink_bandwidth_gBps: float  # total, both directions
    typical_nic_gbps: float
    pcie_gen: int

    def peak_flops(self, precision: str) -> float:
        """Dense peak FLOP/s for a precision (bf16, fp16, fp32, tf32, fp8)."""
        return self.peak_tflops[precision] * 1e12


GPUS: dict[str, GpuSpec] = {
    "A100": GpuSpec(
        name="A100",
        hbm_gB=80,
        hbm_bandwidth_gBps=2039,
        peak_tflops={"fp64": 19.5, "fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312},
        nvlink_links=12,
        nvlink_bandwidth_gBps=600,
        typical_nic_gbps=200,
        pcie_gen=4,
    ),
    "H100": GpuSpec(
        name="H100",
        hbm_gB=80,
        hbm_bandwidth_gBps=3350,
        peak_tflops={"fp64": 67, "fp32": 67, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
        nvlink_links=18,
        nvlink_bandwidth_gBps=900,
        typical_nic_gbps=400,
        pcie_gen=5,
    ),
    "H200": GpuSpec(
        name="H200",
        hbm_gB=141,
        hbm_bandwidth_gBps=4800,
        peak_tflops={"fp64": 67, "fp32": 67, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
        nvlink_links=18,
        nvlink_bandwidth_gBps=900,
        typical_nic_gbps=400,
        pcie_gen=5,
    ),
    "B200": GpuSpec(
        name="B200",
        hbm_gB=180,
        hbm_bandwidth_gBps=8000,
        peak_tflops={"fp64": 40, "fp32": 80, "tf32": 1100, "bf16": 2250, "fp16": 2250, "fp8": 4500},
        nvlink_links=18,
        nvlink_bandwidth_gBps=1800,
        typical_nic_gbps=800,
        pcie_gen=5,
    ),
    "GB200": GpuSpec(
        name="GB200",
        hbm_gB=186,
        hbm_bandwidth_gBps=8000,
        peak_tflops={"fp64": 45, "fp32": 90, "tf32": 1250, "bf16": 2500, "fp16": 2500, "fp8": 5000},
        nvlink_links=18,
        nvlink_bandwidth_gBps=1800,
        typical_nic_gbps=800,
        pcie_gen=5,
    ),
}

PCIE_X16_GBPS_PER_DIRECTION = {4: 32.0, 5: 64.0}
"""PCIe x16 usable bandwidth per direction, GB/s (PCI-SIG: Gen4 16 GT/s, Gen5 32 GT/s per lane, 128b/130b).
The seeds (Ch. 13) quote Gen5 x16 as "64 GB/s bidirectional (32 GB/s each direction)": that is the
Gen4 figure; Gen5 x16 carries about 64 GB/s in each direction."""


def gpu(name: str) -> GpuSpec:
    return GPUS[name.upper()]


# Inside an H100 server (seeds Ch. 13, Figure 13-1): each GPU's 18 NVLink-4 links go 5 + 4 + 4 + 5 to the
# four NVSwitch chips of its baseboard; 900 GB/s per GPU over 18 links = 50 GB/s per link (both directions).
H100_NVLINKS_PER_NVSWITCH_CHIP = (5, 4, 4, 5)
NVL72_GPUS, NVL72_TRAYS, NVL72_NVSWITCH_CHIPS = 72, 18, 18  # GB200 NVL72: 18 compute trays x 4 GPUs, 9 x 2 chips


def nvlink_bandwidth_per_link_gBps(name: str) -> float:
    spec = gpu(name)
    return spec.nvlink_bandwidth_gBps / spec.nvlink_links


def min_gpus_for_weights(params: float, gpu_memory_gB: float, bytes_per_param: float = 2.0) -> int:
    """GPUs needed just to hold the weights (seeds Figure 13-3: 2 bytes per parameter, FP16/BF16).

    8B -> 16 GB -> 1 GPU of 80 GB; 70B -> 140 GB -> 2; 405B -> 810 GB -> 11 (the book says 10, but
    10 x 80 GB = 800 GB < 810 GB: spec errata #1). Decimal GB, as the book uses.
    """
    need_gB = params * bytes_per_param / 1e9
    return max(1, -(-round(need_gB * 1e6) // round(gpu_memory_gB * 1e6)))
