"""A compared metric as the tables print it, and its difference to the first run (compare's and sweep's tables,
compare.html)."""

from __future__ import annotations

TIME_KEYS = ("iteration_time_s", "compute_time_s", "communication_time_s", "exposed_communication_s")


def format_metric(key: str, value: float | None) -> str:
    """A metric as the tables print it: times in s/ms/µs, fractions in %, bytes in GB/MB."""
    from .terminal import fmt_bytes, fmt_time, fmt_usd, fmt_watts

    if value is None:
        return "–"
    if key in TIME_KEYS:
        return fmt_time(value)
    if key == "mfu" or key.startswith("max_util"):
        return f"{100 * value:.1f}%"
    if key.endswith("_bytes"):
        return fmt_bytes(value)
    if key.endswith("_usd"):
        return fmt_usd(value)
    if key.endswith("_w"):
        return fmt_watts(value)
    return f"{value:,.2f}" if abs(value) < 1e6 else f"{value:.3e}"


def delta_pct(value: float | None, base: float | None) -> float | None:
    """(value - base) / base in percent; None when either is missing or the base is 0."""
    if value is None or not base:
        return None
    return 100 * (value - base) / base
