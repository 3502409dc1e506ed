"""Where the validation suite (docs/validation.md, `python bench/fidelity.py`) found the tool off for runs like
this one, said beside the numbers: in the terminal summary, summary.json (`caveats`) and report.html."""

from __future__ import annotations

# NVIDIA's NeMo FP8 runs on DGX-H100: the 24.07 pre-training table (cases F1-F9) and the 24.03.01 long-sequence
# table (S1-S9); tests/test_caveats.py holds these figures to the suite's stored results
FP8_RANGE_PCT = (13.8, 37.2)
FP8_MEAN_PCT = 24.8
FP8_CASES = 18


# the GPUs with the H100's compute (the GH100 die): what the H100 cases say holds for them
HOPPER_GPUS = frozenset({"H100", "H100-PCIE", "H200"})
LONG_SEQUENCE_CASES = "S5-S9"


def caveats(scenario) -> list[str]:
    """What to keep in mind reading this run's iteration time."""
    w = scenario.workload
    out = []
    on_kernel_model = getattr(w, "compute_efficiency", None) is None
    lo, hi = FP8_RANGE_PCT
    if getattr(w, "precision", None) == "fp8" and on_kernel_model:
        out.append(
            f"FP8: against NVIDIA's {FP8_CASES} published NeMo FP8 runs on H100 (4 to 1,024 GPUs, 2K to 1M tokens a "
            f"sequence) the kernel model was {lo:.0f}-{hi:.0f} % optimistic (mean {FP8_MEAN_PCT:.0f} %): read the "
            "iteration time as a lower bound (docs/validation.md, F1-F9, S1-S9)"
        )
    elif w.kind == "llm-training" and on_kernel_model and scenario.cluster.gpu.upper() in HOPPER_GPUS:
        out.append(
            f"Hopper: against NVIDIA's {FP8_CASES} published NeMo runs on H100 the kernel model was {lo:.0f}-{hi:.0f} % "
            f"optimistic, also on the five at 64K-1M tokens a sequence whose time is mostly 16-bit attention "
            f"({LONG_SEQUENCE_CASES}); no 16-bit H100 run is checked directly: read the iteration time as a lower "
            "bound (docs/validation.md)"
        )
    return out
