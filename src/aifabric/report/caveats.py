"""Where the validation suite (docs/validation.md, `python bench/fidelity.py`) found the tool off for runs like
this one, said beside the numbers: in the terminal summary, summary.json (`caveats`) and report.html."""

from __future__ import annotations

from dataclasses import dataclass


# NVIDIA's NeMo FP8 runs on DGX-H100, by the software they ran: the 2024 containers (NeMo 24.07's pre-training
# table, F1-F9, and 24.03.01's long-sequence table, S1-S9) and Megatron Bridge's NeMo 25.11 (B1-B3);
# tests/test_caveats.py holds these figures to the suite's stored results
@dataclass(frozen=True)
class SuiteFigures:
    software: str
    sources: tuple[str, ...]  # bench/fidelity/cases.yaml sources
    cases: int
    range_pct: tuple[float, float]  # signed error, lowest and highest
    mean_pct: float  # mean absolute error


FP8_2025 = SuiteFigures("2025's software (NeMo 25.11)", ("bridge2025",), 3, (1.8, 15.9), 7.5)
FP8_2024 = SuiteFigures("2024's (NeMo 24.03-24.07)", ("nemo2024", "nemo2024cp"), 18, (14.0, 48.6), 28.2)
FP8_CASE_IDS = "B1-B3, F1-F9, S1-S9"
# Megatron Bridge's NeMo 25.11 FP8 runs on DGX-B200 (B4-B5) and DGX-GB200 (G1-G3): the catalog's Blackwell figures
# are partly derived
BLACKWELL = SuiteFigures("NeMo 25.11", ("bridge2025b200", "bridge2025gb200"), 5, (7.2, 15.6), 11.0)
BLACKWELL_CASE_IDS = "B4-B5, G1-G3"
BLACKWELL_GPUS = frozenset({"B200", "GB200"})

# Megatron Bridge's NeMo 25.11 mixture-of-experts runs (Q1-Q5: Qwen3 30B-A3B on H100, B200 and GB200, 235B-A22B on
# B200 and GB200), compared on tokens/s per GPU
MOE = SuiteFigures("NeMo 25.11", ("bridge2025moe",), 5, (8.4, 191.7), 89.8)
MOE_CASE_IDS = "Q1-Q5"

# MosaicML's LLM Foundry runs of MPT in bf16 with PyTorch FSDP (P1-P16: one server, and MPT-70B on 32 and 64 A100),
# by GPU
FSDP_A100 = SuiteFigures("LLM Foundry, PyTorch FSDP", ("foundry2023",), 11, (-7.9, 13.1), 7.5)
FSDP_A100_CASE_IDS = "P1-P9, P15-P16"
FSDP_H100 = SuiteFigures("LLM Foundry, PyTorch FSDP", ("foundry2023",), 5, (21.4, 44.2), 29.5)
FSDP_H100_CASE_IDS = "P10-P14"

# the GPUs with the H100's compute (the GH100 die): what the H100 cases say holds for them
HOPPER_GPUS = frozenset({"H100", "H100-PCIE", "H200"})
A100_GPUS = frozenset({"A100", "A100-40GB", "A100-PCIE"})
LONG_SEQUENCE_CASES = "S5-S9"


def _span(figures: SuiteFigures) -> str:
    """The range of the signed errors in words: '9-16 % optimistic', or 'from -1 to +16 %' when it crosses zero."""
    lo, hi = figures.range_pct
    if lo >= 0:
        return f"{lo:.0f}-{hi:.0f} % optimistic"
    return f"from {lo:+.0f} to {hi:+.0f} %"


def _eras() -> str:
    new, old = FP8_2025, FP8_2024
    return f"{_span(new)} with {new.software}, {new.cases} runs, and {_span(old)} with {old.software}, {old.cases} runs"


def _moe_line() -> str:
    return (
        f"Mixture of experts: against Megatron Bridge's {MOE.cases} published MoE runs ({MOE.software}: Qwen3 "
        f"30B-A3B and 235B-A22B on H100, B200 and GB200) the tool was {_span(MOE)} in tokens/s, the most "
        "with small experts and one sequence per micro-batch: a cost per micro-batch beyond the GPU's kernels (the "
        "host's launches and the token dispatch's synchronization are candidates) that the tool does not model; read the "
        f"iteration time as a lower bound (docs/validation.md, {MOE_CASE_IDS})"
    )


def _is_moe(workload) -> bool:
    from ..errors import InputError
    from ..workload.from_spec import resolve_model

    try:
        model = resolve_model(workload.model)
    except InputError:  # not a transformer: no MoE to warn of
        return False
    return getattr(model, "moe", None) is not None


def caveats(scenario) -> list[str]:
    """What to keep in mind reading this run's iteration time."""
    w = scenario.workload
    if getattr(w, "compute_efficiency", None) is not None:  # an override says its own time
        return []
    llm = w.kind == "llm-training"
    moe = [_moe_line()] if llm and _is_moe(w) else []
    return moe + _dense(scenario)


def _dense(scenario) -> list[str]:
    """The caveat of the run's GPU and precision, MoE or not."""
    w = scenario.workload
    gpu = scenario.cluster.gpu.upper()
    llm = w.kind == "llm-training"
    if llm and gpu in BLACKWELL_GPUS:
        return [
            f"Blackwell: against Megatron Bridge's {BLACKWELL.cases} published FP8 runs on B200 and GB200 "
            f"({BLACKWELL.software}) the kernel model was {_span(BLACKWELL)}; the catalog's B200 fp8 and GB200 bf16 "
            "GEMM rates and GB200's attention rates are derived, not measured (B200's attention is): read the "
            "iteration time as a lower bound "
            f"(docs/validation.md, {BLACKWELL_CASE_IDS})"
        ]
    if getattr(w, "precision", None) == "fp8":
        return [
            f"FP8: against NVIDIA's published NeMo FP8 runs on H100 (4 to 1,024 GPUs, 2K to 1M tokens a sequence) the "
            f"kernel model was {_eras()}: read the iteration time as a lower bound (docs/validation.md, "
            f"{FP8_CASE_IDS})"
        ]
    if llm and gpu in HOPPER_GPUS:
        return [
            f"Hopper: against NVIDIA's published NeMo runs on H100 the kernel model was {_eras()}, the most on "
            f"long sequences whose time is mostly 16-bit attention ({LONG_SEQUENCE_CASES}); against MosaicML's "
            f"{FSDP_H100.cases} published bf16 runs with PyTorch FSDP on one H100 server it was {_span(FSDP_H100)}: "
            f"read the iteration time as a lower bound (docs/validation.md, {FSDP_H100_CASE_IDS})"
        ]
    if llm and gpu in A100_GPUS and _fsdp(w):
        return [
            f"FSDP on A100: against MosaicML's {FSDP_A100.cases} published bf16 runs with PyTorch FSDP on 8 to 64 "
            f"A100 (MPT, 125M to 70B parameters) the kernel model was {_span(FSDP_A100)}, the smaller the model "
            f"the more optimistic (docs/validation.md, {FSDP_A100_CASE_IDS})"
        ]
    return []


def _fsdp(workload) -> bool:
    """Weights sharded over data parallelism: ZeRO-3 or PyTorch FSDP's full shard."""
    par = getattr(workload, "parallelism", None)
    return par is not None and (par.zero >= 3 or par.fsdp)
