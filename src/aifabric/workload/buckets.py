"""Gradient buckets as PyTorch DDP cuts them (torch/csrc/distributed/c10d/reducer.cpp,
`compute_bucket_assignment_by_size`): whole parameters, in the order their gradients are produced
(about the reverse of registration order), are added to the open bucket, and the bucket is closed as soon
as it holds at least the cap. A bucket can therefore exceed the cap by less than its last parameter, and a
parameter larger than the cap closes the bucket it lands in.

Not modelled: DDP's first iteration (one bucket for everything unless unused parameters are searched) and,
with the default cap only, the smaller first bucket (1 MiB) of the rebuilt buckets; an explicit
`bucket_cap_mb` gives every bucket that cap.
"""

from __future__ import annotations

from collections.abc import Sequence


def ddp_buckets(sizes: Sequence[float], cap: float) -> list[list[int]]:
    """Indices into `sizes` (given in gradient-ready order), cut into buckets: a bucket closes once its
    total reaches `cap`; the last one holds what is left."""
    buckets: list[list[int]] = []
    cur: list[int] = []
    total = 0.0
    for i, n in enumerate(sizes):
        cur.append(i)
        total += n
        if total >= cap:
            buckets.append(cur)
            cur, total = [], 0.0
    if cur:
        buckets.append(cur)
    return buckets
