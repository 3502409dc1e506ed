"""What flowlet and adaptive routing compare between ports: queued bytes plus a discounting rate estimator of the
bytes sent (CONGA's DRE), decaying with time constant `tau_s`, so an idle-queue port busy sending still counts as
loaded."""

from __future__ import annotations

from math import exp


class LoadEstimator:
    """A port's recently sent bytes, decaying exponentially (`sent_bytes` as of `t_s`)."""

    __slots__ = ("sent_bytes", "t_s", "tau_s")

    def __init__(self, tau_s: float):
        self.tau_s = tau_s
        self.sent_bytes = 0.0
        self.t_s = 0.0

    def load(self, now: float, backlog_bytes: int) -> float:
        """Queued bytes plus the decayed estimate, at `now`."""
        return backlog_bytes + self.sent_bytes * exp(-(now - self.t_s) / self.tau_s)

    def sent(self, now: float, backlog_bytes: int, size_bytes: int) -> None:
        """A frame of `size_bytes` starts on the wire at `now` (`backlog_bytes` still queued)."""
        self.sent_bytes = self.load(now, backlog_bytes) - backlog_bytes + size_bytes
        self.t_s = now
