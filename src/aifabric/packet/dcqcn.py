"""DCQCN reaction point arithmetic (Zhu et al., SIGCOMM 2015; spec network.md §11.2), as pure functions.

State per QP: current rate RC, target rate RT, alpha, and the increase counters iT (timer expiries)
and iB (byte-counter expiries) since the last decrease.

- On a CNP (at most once per `rate_decrease_interval_s`): RT <- RC; RC <- RC (1 - alpha/2);
  alpha <- (1 - g) alpha + g; counters reset. With `clamp_target_rate` off (ns-3 `ClampTargetRate`
  default), RT keeps its value unless an increase happened since the previous decrease, so a burst of
  CNPs does not drag the target down with the rate.
- Every `alpha_update_interval_s` without a CNP: alpha <- (1 - g) alpha (applied lazily: the periods
  elapsed since the last alpha update are counted when the next CNP arrives).
- Every `rate_increase_timer_s` (iT += 1) and every `byte_counter_bytes` sent (iB += 1), an increase:
  the first F (= `fast_recovery_steps`) events are fast recovery RC <- (RT + RC)/2; then additive
  increase RT += R_AI; once both counters have passed F, hyper increase RT += i R_HAI (i = min(iT, iB) - F);
  every increase ends with RC <- (RT + RC)/2, capped at the line rate.

Counting convention: the k-th increase event (k = 1..F) is fast recovery, so after 5 events a 200 Gb/s
QP cut to 100 Gb/s is back at 196.875 Gb/s, as the paper's Figure 5 and spec §11.2's self-check have it.
(ns-3's `RdmaHw` increments the stage before testing it, which gives F-1 fast-recovery steps.)

Rates are in bytes per second, as everywhere inside the library; DCQCN's papers and the scenario's `dcqcn` keys
state them in Gb/s (converted at the edge, times 10^9 / 8: a power-of-two scaling, so the arithmetic is exactly
the papers' in bits).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RpState:
    rc_bytes_per_s: float
    rt_bytes_per_s: float
    alpha: float
    i_t: int = 0
    i_b: int = 0


def on_cnp(s: RpState, g: float, min_rate_bytes_per_s: float, clamp_target_rate: bool = True) -> None:
    """The rate decrease a CNP causes."""
    if clamp_target_rate or s.i_t or s.i_b:
        s.rt_bytes_per_s = s.rc_bytes_per_s
    s.rc_bytes_per_s = max(min_rate_bytes_per_s, s.rc_bytes_per_s * (1.0 - s.alpha / 2.0))
    s.alpha = (1.0 - g) * s.alpha + g
    s.i_t = 0
    s.i_b = 0


def decay_alpha(s: RpState, g: float, periods: int = 1) -> None:
    s.alpha = (1.0 - g) ** periods * s.alpha


def increase(
    s: RpState, fast_recovery_steps: int, r_ai_bytes_per_s: float, r_hai_bytes_per_s: float, line_bytes_per_s: float
) -> str:
    """One increase event (after iT or iB was incremented); returns the phase applied."""
    f = fast_recovery_steps
    if max(s.i_t, s.i_b) <= f:
        phase = "fast-recovery"
    elif min(s.i_t, s.i_b) > f:
        s.rt_bytes_per_s += (min(s.i_t, s.i_b) - f) * r_hai_bytes_per_s
        phase = "hyper-increase"
    else:
        s.rt_bytes_per_s += r_ai_bytes_per_s
        phase = "additive-increase"
    s.rt_bytes_per_s = min(s.rt_bytes_per_s, line_bytes_per_s)
    s.rc_bytes_per_s = min(line_bytes_per_s, (s.rt_bytes_per_s + s.rc_bytes_per_s) / 2.0)
    return phase
