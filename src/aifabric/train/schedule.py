"""Pipeline schedules over micro-batches: GPipe (all forwards, then all backwards) and 1F1B (warm-up
forwards, then one forward / one backward, then cool-down backwards; Megatron's non-interleaved
schedule). Activations go to the next stage and activation gradients back with send/recv; a stage posts
its send and its receive together, so the two directions never wait on each other."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .names import SCHEDULES  # noqa: F401  (re-exported)


class Pipe:
    """One stage's view: what to run, whom to talk to, and the shape of what crosses each boundary."""

    def __init__(
        self,
        stage: torch.nn.Module,
        comm,
        prev: int | None,
        next_: int | None,
        in_shape: tuple[int, ...] | None,
        out_shape: tuple[int, ...] | None,
        m: int,
        inputs: list[torch.Tensor],
        targets: list[torch.Tensor],
        loss_fn: Callable,
        on_last_backward: Callable[[], None],
    ):
        self.stage, self.comm, self.prev, self.next = stage, comm, prev, next_
        self.in_shape, self.out_shape = in_shape, out_shape
        self.inputs, self.targets, self.loss_fn = inputs, targets, loss_fn
        self.on_last_backward = on_last_backward
        self.m = m
        self.stash: dict[int, tuple[torch.Tensor | None, torch.Tensor]] = {}
        self.loss = 0.0
        self.backwards = 0
        self.device = next(stage.parameters()).device

    # communication -------------------------------------------------------------------------------------
    def _x_buf(self):
        return torch.empty(self.in_shape, device=self.device) if self.prev is not None else None

    def _g_buf(self):
        return torch.empty(self.out_shape, device=self.device) if self.next is not None else None

    def xchg(self, send_fwd=None, send_bwd=None, recv_fwd=False, recv_bwd=False):
        sends, recvs = [], []
        if send_fwd is not None and self.next is not None:
            sends.append((send_fwd.detach(), self.next, "pp/act"))
        if send_bwd is not None and self.prev is not None:
            sends.append((send_bwd, self.prev, "pp/grad"))
        x = self._x_buf() if recv_fwd else None
        g = self._g_buf() if recv_bwd else None
        if x is not None:
            recvs.append((x, self.prev, "pp/act"))
        if g is not None:
            recvs.append((g, self.next, "pp/grad"))
        self.comm.exchange(sends, recvs) if self.comm is not None else None
        return x, g

    # compute ---------------------------------------------------------------------------------------------
    def forward(self, i: int, x: torch.Tensor | None) -> torch.Tensor | None:
        if x is None:
            x = self.inputs[i]
        else:
            x.requires_grad_(True)
        out = self.stage(x)
        if self.next is None:
            loss = self.loss_fn(out, self.targets[i]) / self.m
            self.loss += loss.item()
            self.stash[i] = (x, loss)
            return None
        self.stash[i] = (x, out)
        return out

    def backward(self, i: int, g: torch.Tensor | None) -> torch.Tensor | None:
        x, out = self.stash.pop(i)
        self.backwards += 1
        if self.backwards == self.m:
            self.on_last_backward()
        torch.autograd.backward(out, grad_tensors=g)
        return x.grad if self.prev is not None and x is not None else None  # x: received from the previous stage


def gpipe(p: Pipe) -> float:
    for i in range(p.m):
        x, _ = p.xchg(recv_fwd=True)
        y = p.forward(i, x)
        p.xchg(send_fwd=y)
    for i in range(p.m):
        _, g = p.xchg(recv_bwd=True)
        dx = p.backward(i, g)
        p.xchg(send_bwd=dx)
    return p.loss


def one_f_one_b(p: Pipe, stage_index: int, stages: int) -> float:
    warmup = min(stages - stage_index - 1, p.m)
    for i in range(warmup):
        x, _ = p.xchg(recv_fwd=True)
        p.xchg(send_fwd=p.forward(i, x))
    remaining = p.m - warmup
    x = p.xchg(recv_fwd=True)[0] if remaining else None
    for j in range(remaining):
        i = warmup + j
        y = p.forward(i, x)
        _, g = p.xchg(send_fwd=y, recv_bwd=True)
        dx = p.backward(j, g)
        if j == remaining - 1:
            p.xchg(send_bwd=dx)
        else:
            x, _ = p.xchg(send_bwd=dx, recv_fwd=True)
    for j in range(remaining, p.m):
        _, g = p.xchg(recv_bwd=True)
        p.xchg(send_bwd=p.backward(j, g))
    return p.loss


def run_schedule(name: str, p: Pipe, stage_index: int, stages: int) -> float:
    if name == "gpipe":
        return gpipe(p)
    return one_f_one_b(p, stage_index, stages)
