"""Load-balancing helpers shared by switches and NICs (the policies themselves live in switch.py)."""

from __future__ import annotations

from ..fabric.ecmp import fmix32


def spray_index(entropy: int, seed: int, n: int) -> int:
    """Which of n equal-cost ports a packet with this entropy value takes (UET per-packet entropy)."""
    return fmix32((entropy * 0x9E3779B1) ^ seed) % n
