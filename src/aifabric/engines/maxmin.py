"""Max-min fair rates of flows over shared links (progressive filling / water-filling).

Every flow's rate rises together until some link is full; the flows crossing that link are frozen
at its fair share; the rest keep rising. The result is the unique max-min fair allocation: no flow
can get more without taking from a flow that has no more than it.

The core works on (flow, link) incidence pairs so an engine can hand over its active flows without
building per-flow Python objects.
"""

from __future__ import annotations

import numpy as np


def max_min_pairs(
    flow_of: np.ndarray, link_of: np.ndarray, n_flows: int, capacity: np.ndarray, weight: np.ndarray | None = None
) -> np.ndarray:
    """Max-min fair rates for `n_flows` flows; pair k says flow `flow_of[k]` crosses link `link_of[k]`,
    putting `weight[k]` of its rate there (1 on a path; a sprayed flow splits over equal-cost links).

    Flows that cross no link get an infinite rate (the network does not limit them).
    """
    rates = np.full(n_flows, np.inf)
    if n_flows == 0 or len(flow_of) == 0:
        return rates
    if len(capacity) > 4 * len(link_of):  # work on the links in use only (engines pass them compacted)
        used_links, pl = np.unique(link_of, return_inverse=True)
        residual = capacity[used_links].astype(float)
    else:
        pl, residual = link_of, capacity.astype(float)
    n_used = len(residual)
    active = np.zeros(n_flows, dtype=bool)
    active[flow_of] = True
    pf = flow_of
    pw = weight
    while len(pf):
        counts = np.bincount(pl, weights=pw, minlength=n_used)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(counts > 0, residual / counts, np.inf)
        level = share.min()
        saturated = share <= level * (1 + 1e-12)
        frozen = np.zeros(n_flows, dtype=bool)
        frozen[pf[saturated[pl]]] = True
        rates[frozen] = level
        active[frozen] = False
        gone = ~active[pf]
        residual -= np.bincount(pl[gone], weights=None if pw is None else pw[gone], minlength=n_used) * level
        np.maximum(residual, 0.0, out=residual)
        keep = ~gone
        pf, pl = pf[keep], pl[keep]
        if pw is not None:
            pw = pw[keep]
    return rates


def bottleneck_pairs(
    flow_of: np.ndarray, link_of: np.ndarray, n_flows: int, capacity: np.ndarray, weight: np.ndarray | None = None
) -> np.ndarray:
    """No sharing: every flow gets its slowest link's full capacity (the analytic engine's model); a
    flow with a share w of its rate on a link may go at capacity / w there."""
    rates = np.full(n_flows, np.inf)
    if len(flow_of):
        np.minimum.at(rates, flow_of, capacity[link_of] if weight is None else capacity[link_of] / weight)
    return rates


def _pairs(routes: list[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(r) for r in routes), dtype=np.int64, count=len(routes))
    flow_of = np.repeat(np.arange(len(routes)), lengths)
    link_of = np.fromiter((li for r in routes for li in r), dtype=np.int64, count=int(lengths.sum()))
    return flow_of, link_of


def max_min_rates(routes: list[tuple[int, ...]], capacity: np.ndarray) -> np.ndarray:
    """Rates (bytes/s) for flows whose routes are lists of link indices into `capacity` (bytes/s)."""
    flow_of, link_of = _pairs(routes)
    return max_min_pairs(flow_of, link_of, len(routes), np.asarray(capacity, dtype=float))


def bottleneck_rates(routes: list[tuple[int, ...]], capacity: np.ndarray) -> np.ndarray:
    flow_of, link_of = _pairs(routes)
    return bottleneck_pairs(flow_of, link_of, len(routes), np.asarray(capacity, dtype=float))
