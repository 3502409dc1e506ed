"""Where the validation suite (docs/validation.md, `python bench/fidelity.py`) found the tool off for runs like
this one, said beside the numbers: in the terminal summary, summary.json (`caveats`) and report.html."""

from __future__ import annotations

# NVIDIA's NeMo 24.07 FP8 runs on DGX-H100 (cases F1-F9; tests/test_caveats.py holds these figures to the
# suite's stored results)
FP8_RANGE_PCT = (17.7, 34.4)
FP8_MEAN_PCT = 23.5
FP8_CASES = 9


def caveats(scenario) -> list[str]:
    """What to keep in mind reading this run's iteration time."""
    w = scenario.workload
    out = []
    if getattr(w, "precision", None) == "fp8" and getattr(w, "compute_efficiency", None) is None:
        lo, hi = FP8_RANGE_PCT
        out.append(
            f"FP8: against NVIDIA's {FP8_CASES} published NeMo FP8 runs on H100 (8 to 512 GPUs) the kernel model "
            f"was {lo:.0f}-{hi:.0f} % optimistic (mean {FP8_MEAN_PCT:.0f} %): read the iteration time as a lower "
            "bound (docs/validation.md, F1-F9)"
        )
    return out
