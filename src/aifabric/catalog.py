"""GPU catalog: the figures the simulator needs for each accelerator, datasheet and measured.

Two kinds of figures, kept apart:

- **Datasheet** (dense, no structured sparsity; sparse figures halved): SMs, the clock the tensor peak
  is quoted at, peak FLOP/s per precision, HBM size and bandwidth, L2 size, NVLink links and bandwidth
  (NVIDIA's headline figure: both directions summed; each direction carries half), PCIe generation.
  Sources: NVIDIA A100 datasheet (2021) and whitepaper; NVIDIA H100 datasheet (2023) and whitepaper
  (H100 PCIe: 114 SMs, tensor peak at 1,620 MHz); NVIDIA H200 datasheet (2024); NVIDIA HGX/DGX B200 and
  GB200 NVL72 datasheets (2024; GB200 per GPU = the rack's figures / 72); AMD Instinct MI300X data sheet
  and ROCm GPU specifications (304 CUs, 2,100 MHz, 256 MiB Infinity Cache, 32 MiB L2).
- **Measured** (hardware characterization, never fitted to a training run):
  - `matmul_tflops`: the maximum achievable matmul throughput found by a brute-force shape search
    (S. Bekman, "Machine Learning Engineering", compute/accelerator, MAMF table: mean of 100 iterations
    after 50 warm-ups; `mamf-finder.py`), with the shape it was found on (`matmul_best_shape`). The GEMM
    model (kernels/gemm.py) is anchored to it where no sustained measurement exists (below).
  - `matmul_sustained`: the rate a matmul holds under full load, the clock settled at the board's power cap
    (S. Bekman, ml-engineering, compute/accelerator/benchmarks/README.md, "How MAMF and MSMF are defined":
    MSMF, "the steady rate under full load, which matches real training throughput"), per precision with its
    shape; what the GEMM model is anchored to where it exists, since a training run is one long saturated run.
    H200 bf16 "2816x1536 ... 749 at K=6144 (1879 MHz, 685 W)", fp8 "1536x2816" at K=10240, "about 1337" (that
    README's MSMF runs; its MAMF on the same H200: 843-850 bf16); B200 bf16 1421-1428 over five runs (MAMF
    1682-1705), shape not quoted: taken at the MAMF shape. FP8 where Azure published cuBLASLt after 10,000
    warm-up iterations (AI-benchmarking-guide, CUDA 12.6-12.8), its table's highest rate: H100 SXM 1,382.2 at
    32768^3 (ND H100 v5), H200 1,366.3 at 16384^3 (ND H200 v5; the MSMF runs above: about 1,337), GB200
    2,906.9 at 16384^3 (ND GB200 v6). H100 SXM bf16: the H200's (the same GH100 die at the same 700 W).
    Derived, stated as such: B200 fp8 at the B200's bf16 sustained-to-MAMF ratio, GB200 bf16 at the B200's
    ratio (1,200 W: a lower bound; its fp8 so derived, 2,952.6, is within 1.6 % of Azure's measurement). The
    A100s, H100 PCIe and MI300X have none published: their MAMF (a mean of 100 iterations after 50 warm-ups),
    nearer a burst.
  - `hbm_efficiency`: BabelStream Triad over the peak (A100-SXM4-40GB 1,377.5 of 1,555 GB/s, ALCF
    Polaris; A100-SXM4-80GB 1,724.8 of 2,039, Tursa; H100 NVL 3,303.8 of 3,900; MI300X 3,948.1 of 5,300,
    AMD ROCm system validation guide), or STREAM Triad where that is what was published (H100 SXM 2.97 of
    3.35 TB/s, H200 4.15 of 4.8: Azure AI-benchmarking-guide, ND H100 v5 and ND H200 v5). B200 and GB200
    have no published run we could check: they take the H100 NVL figure, stated as such.
  - `attention_kernels`: fused attention kernels by name, each with its measured rate by sequence length,
    with and without the causal mask (attention_rates.py): Hopper FlashAttention-2, cuDNN 9.1 and
    FlashAttention-3 from the FlashAttention-3 paper's charts (Shah et al. 2024, Figures 5 and 6); A100
    FlashAttention-2, "up to 230 TFLOPs/s" forward and the 50 % end of "50-73%" backward (Dao 2023).
    `attention_default`: the kernel Transformer Engine picks (cuDNN on Hopper and Blackwell,
    FlashAttention-2 on Ampere). B200: cuDNN 9.13.0 and FlashAttention-2 2.7.4 measured with the causal mask at head
    dimension 128, forward and backward, 512 to 32K tokens (NVIDIA/cudnn-frontend's SDPA training benchmark,
    through PyTorch, NGC 25.09: the software of 2025's Blackwell runs), their non-causal rates derived
    (attention_rates.py); GB200 the B200's scaled by the bf16 peaks' ratio. Other GPUs' tables are the H100's scaled by the peaks' ratio, stated.
  - `nvlink_efficiency`: NCCL's ring bus bandwidth inside one server over the per-direction NVLink line
    rate: A100 232.8 of 300 GB/s (nccl-tests all_reduce_perf, 8 x A100-SXM4-80GB, 4 GB); H100 "an
    effective NVLink bandwidth of 370GB/s" of 450 (S. Jeaugey, NVIDIA, nccl-tests issue 212, 2024).
  - `matmul_by_software`: the same kind of measurement with an older software stack, for runs made with it
    (`workload.software`): A100 with CUDA 11.7 (2022), "MatMul FP32 / FP16 | 116 / 230" TFLOPS on an A100
    80 GB, square matrices up to n = 8,192, NGC PyTorch 22.07 (M. Li, mli/transformers-benchmarks). No
    CUDA 11.0-11.4 (2020-2021) figure was found; 2021 runs take this one, an upper bound for them.
  - `nccl_ll_max_gBps`: the most bus bandwidth NCCL's LL protocol reaches inside one server, NCCL's own tuner
    constant `llMaxBws` for one node (NVIDIA/nccl src/graph/tuning.cc: Ampere 87.7, Hopper 141.0, Blackwell
    2 x 141.0 GB/s), where LL's flags alone would give half the link (A100: 116 GB/s); 0: no cap known (RCCL).
  - `fp8_any_layout`, `mxfp8` (architecture, from Transformer Engine's source): Blackwell's FP8 GEMMs take their
    operands in either layout (`nvte_is_non_tn_fp8_gemm_supported`: compute capability 10.x), so a per-tensor FP8
    cast keeps no transposed copy, and its tensor cores take MXFP8 (a scale per 32 elements).
  - `kernel_gap_us`, `launch_us`: GPU idle between dependent kernels and host launch cost per kernel in
    eager PyTorch: ~4-6 µs per launch measured through the driver (CUDA launch-latency studies); 1 µs gap.
    Calibrate for your system.

`tdp_w` is the board's maximum power from its datasheet (each with its `tdp_source`): what the power and
energy model (aifabric.costs) counts per GPU, as the book's Chapter 8 example does (GPUs x watts each).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .attention_rates import AMPERE_ATTENTION, B200_ATTENTION, HOPPER_ATTENTION, AttentionKernel, scaled_kernels


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
    # the compute model's characterization
    sm_count: int = 0
    tensor_clock_mhz: float = 0.0  # the clock the tensor peak is quoted at
    l2_mb: float = 0.0
    matmul_tflops: dict[str, float] = field(default_factory=dict, repr=False)  # measured, per precision
    matmul_best_shape: tuple[int, int, int] = (8192, 8192, 8192)  # (M, N, K) of the bf16 measurement
    # under full load (MSMF): precision -> (TFLOP/s, the (M, N, K) it was measured on); the GEMM anchor where given
    matmul_sustained: dict[str, tuple[float, tuple[int, int, int]]] = field(default_factory=dict, repr=False)
    # older software stacks: name -> (measured 16-bit matmul TFLOP/s, the (M, N, K) it was measured on)
    matmul_by_software: dict[str, tuple[float, tuple[int, int, int]]] = field(default_factory=dict, repr=False)
    hbm_efficiency: float = 0.85
    # measured fused attention kernels by name (attention_rates.py), and the one Transformer Engine picks
    attention_kernels: dict[str, AttentionKernel] = field(default_factory=dict, repr=False)
    attention_default: str = ""
    nvlink_efficiency: float = 0.8
    nccl_ll_max_gBps: float = 0.0  # NCCL's LL bus-bandwidth ceiling inside one server (tuning.cc llMaxBws)
    kernel_gap_us: float = 1.0
    launch_us: float = 5.0
    # Blackwell (sm 10.x): FP8 GEMMs take operands in either layout (Transformer Engine's
    # nvte_is_non_tn_fp8_gemm_supported), so per-tensor FP8 keeps no transposed copy; MXFP8 block scaling
    fp8_any_layout: bool = False
    mxfp8: bool = False
    sources: str = field(default="", repr=False)
    # board power: the datasheet's maximum thermal design power (TDP), W, and where it is stated
    tdp_w: float = 0.0
    tdp_source: str = field(default="", repr=False)

    def peak_flops(self, precision: str) -> float:
        """Dense peak FLOP/s for a precision (bf16, fp16, fp32, tf32, fp8)."""
        return self.peak_tflops[precision] * 1e12

    def matmul_flops(self, precision: str) -> float:
        """Achievable matmul FLOP/s: the measurement for this precision, or the bf16 one's fraction of its
        peak applied to this precision's peak (fp32 / tf32 / a GPU without an fp8 measurement)."""
        if precision in self.matmul_tflops:
            return self.matmul_tflops[precision] * 1e12
        fraction = self.matmul_tflops["bf16"] / self.peak_tflops["bf16"]
        return fraction * self.peak_flops(precision)

    def gemm_anchor(self, precision: str) -> tuple[float, tuple[int, int, int]]:
        """What the GEMM model is anchored to for this precision (FLOP/s, shape): the sustained measurement
        where there is one (a training run is one long saturated run), else the achievable maximum."""
        if precision in self.matmul_sustained:
            tflops, shape = self.matmul_sustained[precision]
            return tflops * 1e12, shape
        return self.matmul_flops(precision), self.matmul_best_shape

    def attention_kernel(self, kernel: str = "flash") -> AttentionKernel:
        """A fused attention kernel of this GPU by name; `flash`: the one Transformer Engine picks here."""
        name = self.attention_default if kernel == "flash" else kernel
        if name not in self.attention_kernels:
            have = ", ".join(sorted(self.attention_kernels)) or "none"
            raise ValueError(
                f"workload.attention: {kernel} has no measurement on {self.name}; the catalog has: flash "
                f"(= {self.attention_default or 'none'}), {have}, or unfused"
            )
        return self.attention_kernels[name]

    def attention_flops(
        self, precision: str, backward: bool, kernel: str, seq_len: float, causal: bool, head_dim: float
    ) -> float:
        """Fused attention FLOP/s at a sequence length and head dimension (16-bit; an fp8 run keeps attention
        in 16-bit, as Transformer Engine does)."""
        rate = self.attention_kernel(kernel).tflops(seq_len, causal, backward, head_dim) * 1e12
        if precision in ("fp32", "tf32"):
            rate *= self.peak_tflops[precision] / self.peak_tflops["bf16"]
        return rate


_A100_PEAKS = {"fp64": 19.5, "fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312}
_HOPPER_PEAKS = {"fp64": 67, "fp32": 67, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}
_A100_SXM_2022 = {"cuda-11.7": (230.0, (8192, 8192, 8192))}  # mli/transformers-benchmarks, A100 80 GB (SXM)
_A100_MEASURED: dict[str, Any] = dict(
    sm_count=108,
    tensor_clock_mhz=1410,
    l2_mb=40,
    attention_kernels=AMPERE_ATTENTION,
    attention_default="flash2",
    nvlink_efficiency=232.8 / 300,
    nccl_ll_max_gBps=87.7,
)
# MSMF, S. Bekman's ml-engineering (see the module docstring): the H200's, which the H100 SXM shares for bf16
_GH100_BF16_SUSTAINED = (749.0, (2816, 1536, 6144))
_B200_MAMF = {"bf16": 1745.0, "fp16": 1745.0, "fp8": 3432.5}
_B200_MAMF_SHAPE = (1792, 16128, 3072)
_B200_BF16_SUSTAINED_TFLOPS = 1425.0  # middle of "1421-1428" over five runs
_B200_SUSTAINED_RATIO = _B200_BF16_SUSTAINED_TFLOPS / _B200_MAMF["bf16"]  # how much of its MAMF a saturated B200 keeps
_GB200_MAMF = {"bf16": 1822.0, "fp16": 1822.0, "fp8": 3615.6}
_GB200_MAMF_SHAPE = (4096, 9728, 2048)


def _derived_sustained(mamf: dict[str, float], shape: tuple[int, int, int], *precisions: str) -> dict:
    """Sustained rates derived, where none was measured, as the B200's sustained fraction of the MAMF."""
    return {p: (mamf[p] * _B200_SUSTAINED_RATIO, shape) for p in precisions}


_HOPPER_MEASURED: dict[str, Any] = dict(
    sm_count=132,
    tensor_clock_mhz=1830,
    l2_mb=50,
    hbm_efficiency=3303.8 / 3900,
    attention_kernels=HOPPER_ATTENTION,
    attention_default="cudnn",
    nvlink_efficiency=370 / 450,
    nccl_ll_max_gBps=141.0,
)

GPUS: dict[str, GpuSpec] = {
    "A100": GpuSpec(  # A100 SXM4 80 GB
        name="A100",
        hbm_gB=80,
        hbm_bandwidth_gBps=2039,
        peak_tflops=_A100_PEAKS,
        nvlink_links=12,
        nvlink_bandwidth_gBps=600,
        typical_nic_gbps=200,
        pcie_gen=4,
        matmul_tflops={"bf16": 271.2, "fp16": 271.2},
        matmul_best_shape=(1024, 10240, 5120),
        matmul_by_software=_A100_SXM_2022,
        hbm_efficiency=1724.8 / 2039,
        **_A100_MEASURED,
        tdp_w=400,
        tdp_source="NVIDIA A100 datasheet (2021): A100 80GB SXM, max TDP 400 W",
        sources="MAMF 271.2 TFLOP/s bf16 (torch 2.6.0+cu126); BabelStream Triad 1,724.8 GB/s",
    ),
    "A100-40GB": GpuSpec(  # A100 SXM4 40 GB: HBM2 at 1,555 GB/s, otherwise the 80 GB part
        name="A100-40GB",
        hbm_gB=40,
        hbm_bandwidth_gBps=1555,
        peak_tflops=_A100_PEAKS,
        nvlink_links=12,
        nvlink_bandwidth_gBps=600,
        typical_nic_gbps=200,
        pcie_gen=4,
        matmul_tflops={"bf16": 271.2, "fp16": 271.2},
        matmul_best_shape=(1024, 10240, 5120),
        matmul_by_software=_A100_SXM_2022,
        hbm_efficiency=1377.5 / 1555,
        **_A100_MEASURED,
        tdp_w=400,
        tdp_source="NVIDIA A100 datasheet (2021): A100 40GB SXM, max TDP 400 W",
        sources="MAMF of the A100 SXM (same chip and clocks); BabelStream Triad 1,377.5 GB/s (ALCF Polaris)",
    ),
    "A100-PCIE": GpuSpec(  # A100 PCIe 80 GB: 300 W, HBM2e 1,935 GB/s, NVLink bridge to one peer only
        name="A100-PCIE",
        hbm_gB=80,
        hbm_bandwidth_gBps=1935,
        peak_tflops=_A100_PEAKS,
        nvlink_links=12,
        nvlink_bandwidth_gBps=600,
        typical_nic_gbps=200,
        pcie_gen=4,
        matmul_tflops={"bf16": 252.9, "fp16": 252.9},
        matmul_best_shape=(2048, 5120, 6144),
        hbm_efficiency=1724.8 / 2039,
        **_A100_MEASURED,
        tdp_w=300,
        tdp_source="NVIDIA A100 datasheet (2021): A100 80GB PCIe, max TDP 300 W",
        sources="MAMF 252.9 TFLOP/s bf16 (torch 2.5.1+cu124); HBM efficiency of the A100 SXM 80 GB",
    ),
    "H100": GpuSpec(  # H100 SXM5 80 GB
        name="H100",
        hbm_gB=80,
        hbm_bandwidth_gBps=3350,
        peak_tflops=_HOPPER_PEAKS,
        nvlink_links=18,
        nvlink_bandwidth_gBps=900,
        typical_nic_gbps=400,
        pcie_gen=5,
        matmul_tflops={"bf16": 794.5, "fp16": 794.5, "fp8": 1402.6},
        matmul_best_shape=(2048, 2048, 13312),
        matmul_sustained={
            "bf16": _GH100_BF16_SUSTAINED,
            "fp16": _GH100_BF16_SUSTAINED,
            "fp8": (1382.2, (32768, 32768, 32768)),
        },
        **{**_HOPPER_MEASURED, "hbm_efficiency": 2970 / 3350},
        tdp_w=700,
        tdp_source="NVIDIA H100 datasheet (2023): H100 SXM, max TDP up to 700 W (configurable)",
        sources="MAMF 794.5 bf16 / 1,402.6 fp8 TFLOP/s (torch 2.7.0+cu126); sustained: fp8 1,382.2 (cuBLASLt "
        "32768^3 after 10,000 warm-ups, Azure ND H100 v5), bf16 the H200's MSMF 749; STREAM Triad 2.97 TB/s (Azure)",
    ),
    "H100-PCIE": GpuSpec(  # H100 PCIe 80 GB: 114 SMs, HBM2e 2.0 TB/s, 350 W
        name="H100-PCIE",
        hbm_gB=80,
        hbm_bandwidth_gBps=2000,
        peak_tflops={"fp64": 51, "fp32": 51, "tf32": 378, "bf16": 756, "fp16": 756, "fp8": 1513},
        nvlink_links=12,
        nvlink_bandwidth_gBps=600,
        typical_nic_gbps=400,
        pcie_gen=5,
        matmul_tflops={"bf16": 499.5, "fp16": 499.5},
        matmul_best_shape=(6912, 16384, 2048),
        **{
            **_HOPPER_MEASURED,
            "sm_count": 114,
            "tensor_clock_mhz": 1620,
            "attention_kernels": scaled_kernels(HOPPER_ATTENTION, 756 / 989.4, "scaled by the peaks' ratio"),
        },
        tdp_w=350,
        tdp_source="NVIDIA H100 datasheet (2023): H100 PCIe, max TDP 300-350 W (configurable)",
        sources="MAMF 499.5 TFLOP/s bf16 (mag-/gpu_benchmark, after Bekman's MAMF finder); attention scaled "
        "from the SXM by the peaks' ratio",
    ),
    "H200": GpuSpec(  # H200 SXM 141 GB: H100 compute, HBM3e 4.8 TB/s
        name="H200",
        hbm_gB=141,
        hbm_bandwidth_gBps=4800,
        peak_tflops=_HOPPER_PEAKS,
        nvlink_links=18,
        nvlink_bandwidth_gBps=900,
        typical_nic_gbps=400,
        pcie_gen=5,
        matmul_tflops={"bf16": 794.5, "fp16": 794.5, "fp8": 1453.4},
        matmul_best_shape=(2048, 2048, 13312),
        matmul_sustained={
            "bf16": _GH100_BF16_SUSTAINED,
            "fp16": _GH100_BF16_SUSTAINED,
            "fp8": (1366.3, (16384, 16384, 16384)),
        },
        **{**_HOPPER_MEASURED, "hbm_efficiency": 4150 / 4800},
        tdp_w=700,
        tdp_source="NVIDIA H200 datasheet (2024): H200 SXM, max TDP up to 700 W (configurable)",
        sources="MAMF bf16 of the H100 SXM ('H200 is the same'), fp8 1,453.4 TFLOP/s (torch 2.7.1+cu128); sustained "
        "bf16 749 (MSMF, ml-engineering), fp8 1,366.3 (cuBLASLt 16384^3 after 10,000 warm-ups, Azure ND H200 v5); "
        "STREAM Triad 4.15 TB/s (Azure)",
    ),
    "B200": GpuSpec(  # HGX B200, 1,000 W
        name="B200",
        hbm_gB=180,
        hbm_bandwidth_gBps=8000,
        peak_tflops={"fp64": 40, "fp32": 80, "tf32": 1100, "bf16": 2250, "fp16": 2250, "fp8": 4500},
        nvlink_links=18,
        nvlink_bandwidth_gBps=1800,
        typical_nic_gbps=800,
        pcie_gen=5,
        matmul_tflops=_B200_MAMF,
        matmul_best_shape=_B200_MAMF_SHAPE,
        matmul_sustained={  # bf16 measured (its MSMF shape not quoted: the MAMF one), fp8 derived
            "bf16": (_B200_BF16_SUSTAINED_TFLOPS, _B200_MAMF_SHAPE),
            "fp16": (_B200_BF16_SUSTAINED_TFLOPS, _B200_MAMF_SHAPE),
            **_derived_sustained(_B200_MAMF, _B200_MAMF_SHAPE, "fp8"),
        },
        **{
            **_HOPPER_MEASURED,
            "sm_count": 148,
            "tensor_clock_mhz": 0,
            "l2_mb": 0,
            "attention_kernels": B200_ATTENTION,
            "fp8_any_layout": True,
            "mxfp8": True,
            "nccl_ll_max_gBps": 2 * 141.0,
        },
        tdp_w=1000,
        tdp_source="NVIDIA HGX B200 datasheet (2024): 1,000 W per B200 GPU",
        sources="MAMF 1,745.0 bf16 / 3,432.5 fp8 TFLOP/s (torch 2.7.1+cu128); MSMF bf16 1,421-1,428 (ml-engineering), "
        "fp8 sustained derived at the same fraction of its MAMF; attention: cuDNN 9.13 measured (causal, head "
        "dimension 128; cudnn-frontend's SDPA benchmark); no published HBM measurement: Hopper's fraction; NVLink 5 "
        "efficiency taken as NVLink 4's",
    ),
    "GB200": GpuSpec(  # one Blackwell GPU of a GB200 NVL72
        name="GB200",
        hbm_gB=186,
        hbm_bandwidth_gBps=8000,
        peak_tflops={"fp64": 45, "fp32": 90, "tf32": 1250, "bf16": 2500, "fp16": 2500, "fp8": 5000},
        nvlink_links=18,
        nvlink_bandwidth_gBps=1800,
        typical_nic_gbps=800,
        pcie_gen=5,
        matmul_tflops=_GB200_MAMF,
        matmul_best_shape=_GB200_MAMF_SHAPE,
        matmul_sustained={  # bf16 derived (GB200's 1,200 W: a lower bound), fp8 measured
            **_derived_sustained(_GB200_MAMF, _GB200_MAMF_SHAPE, "bf16", "fp16"),
            "fp8": (2906.9, (16384, 16384, 16384)),  # cuBLASLt after 10,000 warm-ups, Azure ND GB200 v6
        },
        **{
            **_HOPPER_MEASURED,
            "sm_count": 148,
            "tensor_clock_mhz": 0,
            "l2_mb": 0,
            "attention_kernels": scaled_kernels(
                B200_ATTENTION, 2500 / 2250, "the B200's, scaled by the bf16 peaks' ratio (no GB200 run of that cuDNN)"
            ),
            "fp8_any_layout": True,
            "mxfp8": True,
            "nccl_ll_max_gBps": 2 * 141.0,
        },
        tdp_w=1200,
        tdp_source="NVIDIA GB200 NVL72 (2024): up to 1,200 W per Blackwell GPU of a GB200 superchip",
        sources="MAMF 1,822.0 bf16 / 3,615.6 fp8 TFLOP/s (torch 2.10 nightly, cu130); sustained: fp8 2,906.9 "
        "(cuBLASLt 16384^3 after 10,000 warm-ups, Azure ND GB200 v6), bf16 derived at the B200's fraction of its "
        "MAMF (no GB200 MSMF published); as B200 otherwise",
    ),
    "MI300X": GpuSpec(  # AMD Instinct MI300X, 750 W; 8 GPUs joined all-to-all by Infinity Fabric (7 x 64 GB/s)
        name="MI300X",
        hbm_gB=192,
        hbm_bandwidth_gBps=5300,
        peak_tflops={"fp64": 81.7, "fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9},
        nvlink_links=7,
        nvlink_bandwidth_gBps=896,
        typical_nic_gbps=400,
        pcie_gen=5,
        sm_count=304,
        tensor_clock_mhz=2100,
        l2_mb=32,
        matmul_tflops={"bf16": 668.4, "fp16": 668.4},
        matmul_best_shape=(10240, 15360, 8192),
        hbm_efficiency=3948.1 / 5300,
        attention_kernels={
            "ck": HOPPER_ATTENTION["flash3"].scaled(
                668.4 / 794.5, "standing in for AMD's Composable Kernel attention: no published measurement", "ck"
            )
        },
        attention_default="ck",
        nvlink_efficiency=312.9 / 448,
        tdp_w=750,
        tdp_source="AMD Instinct MI300X data sheet (2023): total board power 750 W peak",
        sources="MAMF 668.4 TFLOP/s bf16 (ROCm 6.3, TunableOp); BabelStream Triad 3,948.1 GB/s; RCCL all-reduce "
        "busbw 312.9 GB/s on 8 GPUs over 448 GB/s of Infinity Fabric per direction; attention scaled "
        "from the H100's by the MAMF ratio (no published measurement). The Infinity Fabric mesh is "
        "modelled as a switch of the same aggregate bandwidth",
    ),
}

CPU_VENDORS = ("intel", "amd", "arm", "other")  # `cluster.cpu_vendor`: NCCL tells AMD apart from the rest
SERVER_CPU_VENDOR: dict[str, tuple[str, str]] = {
    "A100": ("amd", "NVIDIA DGX A100 datasheet: 2 x AMD EPYC 7742"),
    "A100-40GB": ("amd", "NVIDIA DGX A100 (320 GB) datasheet: 2 x AMD EPYC 7742"),
    "H100": ("intel", "NVIDIA DGX H100 datasheet: 2 x Intel Xeon Platinum 8480C"),
    "H200": ("intel", "NVIDIA DGX H200 datasheet: 2 x Intel Xeon Platinum 8480C"),
    "B200": ("intel", "NVIDIA DGX B200 datasheet: 2 x Intel Xeon Platinum 8570"),
    "GB200": ("arm", "NVIDIA GB200 NVL72: the Grace CPU (Arm Neoverse V2) of each superchip"),
}
"""The CPU vendor of each GPU's reference server (NVIDIA's own DGX system): what `cluster.cpu_vendor` defaults
to. NCCL's tuner caps the LL protocol's bus bandwidth across servers by the CPU vendor (`NCCL_LL_MAX_ACROSS_GBPS`
below), not by the GPU. PCIe cards and MI300X have no
reference server: "other" (NCCL's non-AMD row)."""


NCCL_LL_MAX_ACROSS_GBPS = {"amd": (22.5, 19.0), "other": (39.0, 20.4)}
"""NCCL's LL ceiling on the bus bandwidth across servers, GB/s, for 2 servers and for more (nccl
src/graph/tuning.cc 2.28, `llMaxBws` columns N2 and N4: "for single node, we look at GPU type; for multi-node,
we look at CPU type"): AMD (or mixed) CPUs take its second row, any other vendor its first."""


def server_cpu_vendor(gpu_name: str) -> str:
    """`cluster.cpu_vendor`'s default for a GPU: its reference server's CPU vendor, else "other"."""
    return SERVER_CPU_VENDOR.get(gpu_name.upper(), ("other", ""))[0]


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
