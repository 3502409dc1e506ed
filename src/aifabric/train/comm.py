"""Every byte a rank exchanges goes through `Comm`: torch.distributed calls, traced.

Also the tensor-parallel autograd operators (Megatron's f / g and the gather), whose backward passes
call Comm too, so backward communication is traced like forward communication.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .layout import Layout
from .tracer import Tracer


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


class TracedWork:
    def __init__(self, work, tracer: Tracer, ev, after=None):
        self.work, self.tracer, self.ev, self.after = work, tracer, ev, after

    def wait(self):
        self.work.wait()
        self.tracer.end(self.ev)
        if self.after is not None:
            self.after()


class Comm:
    """The rank's process groups (created collectively, every rank in the same order) and traced ops."""

    def __init__(self, layout: Layout, rank: int, tracer: Tracer):
        self.layout, self.rank, self.tracer = layout, rank, tracer
        self._groups: dict[tuple[int, ...], object] = {}
        for groups in (layout.tp_groups(), layout.dp_groups()):
            for g in groups:
                if len(g) > 1 and g not in self._groups:
                    pg = dist.new_group(list(g))
                    self._groups[g] = pg

    def pg(self, group: tuple[int, ...]):
        return self._groups[tuple(group)]

    # collectives -------------------------------------------------------------------------------------
    def all_reduce(self, t: torch.Tensor, group: tuple[int, ...], tag: str, async_op: bool = False, op: str = "sum"):
        """Sum (or with op="max", the maximum) over the group, in place. The trace does not record the
        reduction operator (it moves the same bytes); the tag says what is reduced."""
        ev = self.tracer.begin("all-reduce", group, _dtype(t), t.numel(), t.numel() * t.element_size(), tag)
        red = dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM
        work = dist.all_reduce(t, op=red, group=self.pg(group), async_op=async_op)
        if async_op:
            if ev is not None:
                ev["async_op"] = True
            return TracedWork(work, self.tracer, ev)
        self.tracer.end(ev)
        return t

    def all_gather(self, t: torch.Tensor, group: tuple[int, ...], tag: str, dim: int = -1) -> torch.Tensor:
        t = t.contiguous()
        n = len(group)
        ev = self.tracer.begin("all-gather", group, _dtype(t), t.numel() * n, t.numel() * t.element_size() * n, tag)
        parts = [torch.empty_like(t) for _ in range(n)]
        dist.all_gather(parts, t, group=self.pg(group))
        self.tracer.end(ev)
        return torch.cat(parts, dim=dim)

    def broadcast(self, t: torch.Tensor, src: int, group: tuple[int, ...], tag: str) -> torch.Tensor:
        ev = self.tracer.begin("broadcast", group, _dtype(t), t.numel(), t.numel() * t.element_size(), tag)
        dist.broadcast(t, src=src, group=self.pg(group))
        self.tracer.end(ev)
        return t

    # point to point ----------------------------------------------------------------------------------
    def exchange(self, sends: list[tuple[torch.Tensor, int, str]], recvs: list[tuple[torch.Tensor, int, str]]) -> None:
        """Post all sends and receives at once (no ordering deadlock), then wait for all of them."""
        ops, evs = [], []
        for t, peer, tag in sends:
            evs.append(
                self.tracer.begin("send", (self.rank, peer), _dtype(t), t.numel(), t.numel() * t.element_size(), tag)
            )
            ops.append(dist.P2POp(dist.isend, t.contiguous(), peer))
        for t, peer, tag in recvs:
            evs.append(
                self.tracer.begin("recv", (peer, self.rank), _dtype(t), t.numel(), t.numel() * t.element_size(), tag)
            )
            ops.append(dist.P2POp(dist.irecv, t, peer))
        if not ops:
            return
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        for ev in evs:
            self.tracer.end(ev)


# tensor-parallel autograd operators ------------------------------------------------------------------


class CopyToTP(torch.autograd.Function):
    """f: identity forward; backward sums the partial input gradients of the TP ranks (AllReduce)."""

    @staticmethod
    def forward(ctx, x, comm: Comm, group: tuple[int, ...], tag: str):
        ctx.comm, ctx.group, ctx.tag = comm, group, tag
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous().clone()
        ctx.comm.all_reduce(g, ctx.group, ctx.tag)
        return g, None, None, None


class ReduceFromTP(torch.autograd.Function):
    """g: AllReduce forward (sum of the row-parallel partial outputs); identity backward."""

    @staticmethod
    def forward(ctx, x, comm: Comm, group: tuple[int, ...], tag: str):
        x = x.contiguous().clone()
        comm.all_reduce(x, group, tag)
        return x

    @staticmethod
    def backward(ctx, g):
        return g, None, None, None


class GatherFromTP(torch.autograd.Function):
    """AllGather of the column-parallel output shards along the last dim; backward keeps this rank's slice
    (the gradient of the gathered, replicated tensor is the same on every TP rank)."""

    @staticmethod
    def forward(ctx, x, comm: Comm, group: tuple[int, ...], tag: str):
        ctx.index, ctx.width = group.index(comm.rank), x.shape[-1]
        return comm.all_gather(x, group, tag, dim=-1)

    @staticmethod
    def backward(ctx, g):
        a = ctx.index * ctx.width
        return g[..., a : a + ctx.width].contiguous(), None, None, None


def copy_to_tp(x, comm: Comm | None, group: tuple[int, ...], tag: str = "tp/bwd/all-reduce"):
    return x if comm is None or len(group) == 1 else CopyToTP.apply(x, comm, group, tag)


def reduce_from_tp(x, comm: Comm | None, group: tuple[int, ...], tag: str = "tp/fwd/all-reduce"):
    return x if comm is None or len(group) == 1 else ReduceFromTP.apply(x, comm, group, tag)


def gather_from_tp(x, comm: Comm | None, group: tuple[int, ...], tag: str = "tp/fwd/all-gather"):
    return x if comm is None or len(group) == 1 else GatherFromTP.apply(x, comm, group, tag)
