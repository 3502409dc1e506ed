"""Data-parallel gradient AllReduce, bucketed and overlapped with backward (what DDP's reducer does, in a
page): parameters are grouped into buckets in reverse registration order (about the order backward
produces their gradients); when the last gradient of a bucket is accumulated in the last micro-batch's
backward, the bucket is flattened and its AllReduce launched without waiting; `finish` waits for all
buckets and divides by the data-parallel size (the average of Ch. 14)."""

from __future__ import annotations

import torch

from .comm import Comm


def make_buckets(sizes_bytes: list[int], cap_bytes: int) -> list[list[int]]:
    """Indices of parameters, in reverse order, cut into buckets of at most `cap_bytes` (a parameter larger
    than the cap gets a bucket of its own)."""
    buckets: list[list[int]] = []
    cur: list[int] = []
    total = 0
    for i in reversed(range(len(sizes_bytes))):
        if cur and total + sizes_bytes[i] > cap_bytes:
            buckets.append(cur)
            cur, total = [], 0
        cur.append(i)
        total += sizes_bytes[i]
    if cur:
        buckets.append(cur)
    return buckets


class GradSync:
    def __init__(self, params: list[torch.nn.Parameter], comm: Comm, group: tuple[int, ...], cap_bytes: int):
        self.params, self.comm, self.group = params, comm, group
        self.buckets = make_buckets([p.numel() * p.element_size() for p in params], cap_bytes)
        self.bucket_of = {i: b for b, idx in enumerate(self.buckets) for i in idx}
        self.final = False
        self._ready: list[int] = [0] * len(self.buckets)
        self._pending: dict[int, tuple[object, torch.Tensor]] = {}
        for i, p in enumerate(params):
            p.register_post_accumulate_grad_hook(self._hook(i))

    def _hook(self, i: int):
        def hook(p):
            if not self.final:
                return
            b = self.bucket_of[i]
            self._ready[b] += 1
            if self._ready[b] == len(self.buckets[b]):
                self._launch(b)
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
                g.copy_(flat[offset: offset + g.numel()].view_as(g) / n)
                offset += g.numel()
        self._pending.clear()
        self._ready = [0] * len(self.buckets)
        self.final = False
