"""Max-min fair rates of flows over shared links (progressive filling / water-filling).

Every flow's rate rises together until some link is full; the flows crossing that link are frozen
at its fair share; the rest keep rising. The result is the unique max-min fair allocation: no flow
can get more without taking from a flow that has no more than it.
"""

from __future__ import annotations

import numpy as np


def max_min_rates(routes: list[tuple[int, ...]], capacity: np.ndarray) -> np.ndarray:
    """Rates (bytes/s) for flows whose routes are lists of link indices into `capacity` (bytes/s)."""
    n = len(routes)
    rates = np.zeros(n)
    if n == 0:
        return rates
    lengths = np.fromiter((len(r) for r in routes), dtype=np.int64, count=n)
    flow_of = np.repeat(np.arange(n), lengths)
    link_of = np.fromiter((li for r in routes for li in r), dtype=np.int64, count=int(lengths.sum()))
    # compact the link ids to the links in use
    used, link_of = np.unique(link_of, return_inverse=True)
    residual = capacity[used].astype(float)
    active = lengths > 0
    rates[~active] = np.inf  # a flow that crosses no link is not limited by the network
    while active.any():
        pair_active = active[flow_of]
        counts = np.bincount(link_of[pair_active], minlength=len(used))
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(counts > 0, residual / np.maximum(counts, 1), np.inf)
        level = share.min()
        saturated = share <= level * (1 + 1e-12)
        freeze_pairs = pair_active & saturated[link_of]
        frozen = np.unique(flow_of[freeze_pairs])
        rates[frozen] = level
        active[frozen] = False
        frozen_mask = np.zeros(n, dtype=bool)
        frozen_mask[frozen] = True
        residual -= np.bincount(link_of[frozen_mask[flow_of]], minlength=len(used)) * level
        np.maximum(residual, 0.0, out=residual)
    return rates


def bottleneck_rates(routes: list[tuple[int, ...]], capacity: np.ndarray) -> np.ndarray:
    """No sharing: every flow gets its slowest link's full capacity (the analytic engine's model)."""
    return np.array([capacity[list(r)].min() if r else np.inf for r in routes], dtype=float)
