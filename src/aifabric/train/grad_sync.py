"""Data-parallel gradient AllReduce, bucketed and overlapped with backward (what DDP's reducer does, in a
page): parameters are grouped into buckets in reverse registration order (about the order backward
produces their gradients), a bucket closed once it holds at least the cap (DDP's rule,
workload/buckets.py); when the last gradient of a bucket is accumulated in the last micro-batch's
backward, the bucket is flattened and its AllReduce launched without waiting, in bucket order (DDP's
reducer: a full bucket waits for the buckets before it); `finish` waits for all
buckets and divides by the data-parallel size (the average of Ch. 14)."""

from __future__ import annotations

from typing import Any

import torch

from ..workload.buckets import ddp_buckets
from .comm import Comm


def make_buckets(sizes_bytes: list[int], cap_bytes: int) -> list[list[int]]:
    """Indices of parameters, in reverse order, cut into buckets as DDP cuts them (workload/buckets.py): a
    bucket closes once it holds at least `cap_bytes`."""
    order = list(reversed(range(len(sizes_bytes))))
    return [[order[k] for k in b] for b in ddp_buckets([sizes_bytes[i] for i in order], cap_bytes)]


class GradSync:
    def __init__(self, params: list[torch.nn.Parameter], comm: Comm, group: tuple[int, ...], cap_bytes: int):
        self.params, self.comm, self.group = params, comm, group
        self.buckets = make_buckets([p.numel() * p.element_size() for p in params], cap_bytes)
        self.bucket_of = {i: b for b, idx in enumerate(self.buckets) for i in idx}
        self.final = False
        self._ready: list[int] = [0] * len(self.buckets)
        self._next = 0  # the next bucket to launch
        self._pending: dict[int, tuple[Any, torch.Tensor]] = {}  # bucket -> (its AllReduce's work handle, flat)
        for i, p in enumerate(params):
            p.register_post_accumulate_grad_hook(self._hook(i))

    def _hook(self, i: int):
        def hook(p):
            if not self.final:
                return
            b = self.bucket_of[i]
            self._ready[b] += 1
            # DDP's reducer launches buckets in index order: a full bucket waits for the ones before it
            # (every rank then issues the AllReduces in the same order, whatever order autograd accumulates in)
            while self._next < len(self.buckets) and self._ready[self._next] == len(self.buckets[self._next]):
                self._launch(self._next)
                self._next += 1

        return hook

    def _launch(self, b: int) -> None:
        flat = torch.cat([self.params[i].grad.reshape(-1) for i in self.buckets[b]])
        work = self.comm.all_reduce(flat, self.group, f"grad-bucket{b}", async_op=True)
        self._pending[b] = (work, flat)

    def finish(self) -> None:
        for b in range(len(self.buckets)):
            if b not in self._pending:  # a bucket whose gradients never all arrived (unused parameters)
                for i in self.buckets[b]:
                    if self.params[i].grad is None:
                        self.params[i].grad = torch.zeros_like(self.params[i])
                self._launch(b)
        n = len(self.group)
        for b, (work, flat) in sorted(self._pending.items()):
            work.wait()
            offset = 0
            for i in self.buckets[b]:
                g = self.params[i].grad
                g.copy_(flat[offset : offset + g.numel()].view_as(g) / n)
                offset += g.numel()
        self._pending.clear()
        self._ready = [0] * len(self.buckets)
        self._next = 0
        self.final = False
