"""The names of the collective operations, their algorithms and reduce operations (no numpy: the command
line's help texts read them)."""

from __future__ import annotations

OPS = (
    "all-reduce",
    "reduce-scatter",
    "all-gather",
    "broadcast",
    "reduce",
    "all-to-all",
    "all-to-allv",
    "send-recv",
    "barrier",
)
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "all-reduce": ("ring", "tree", "direct", "rhd", "hierarchical", "hierarchical-rhd", "nvls"),
    "reduce-scatter": ("ring", "direct", "rhd", "hierarchical"),
    "all-gather": ("ring", "direct", "rhd", "hierarchical"),
    "broadcast": ("ring", "tree", "direct"),
    "reduce": ("ring", "tree", "direct"),
    "all-to-all": ("direct", "pxn"),
    "all-to-allv": ("direct", "pxn"),
    "send-recv": ("direct",),
    "barrier": ("dissemination",),
}
REDUCE_OPS = ("sum", "avg", "max", "min")
