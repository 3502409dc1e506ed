"""The code every rank runs. It reads the torchrun environment (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT), so the same worker runs under `aifabric train` on one machine or under
torchrun on many:

    torchrun --nnodes 2 --nproc-per-node 4 ... -m aifabric.train.worker --model fnn --dp 2 --tp 2 --pp 2 --out DIR

Per step: micro-batches through the pipeline schedule (tensor-parallel collectives inside the stages),
data-parallel gradient AllReduce overlapped with the last backward, SGD. Before the first step rank 0 of
each data-parallel group Broadcasts its weights (the other replicas start from different weights on
purpose, so a missing Broadcast shows up as a wrong result).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from .comm import Comm
from .data import batch_indices
from .grad_sync import GradSync
from .layers import TP
from .layout import Layout, split_evenly, stage_bounds
from .models import build_stage, dataset, default_batch, full_units, stage_loss
from .schedule import Pipe, run_schedule
from .tracer import Tracer


@dataclass(frozen=True)
class TrainConfig:
    model: str = "fnn"
    dp: int = 1
    tp: int = 1
    pp: int = 1
    steps: int = 3
    batch_size: int = 0  # global batch; 0 = the model's default
    micro_batches: int = 0  # per step and replica; 0 = pp (1 without pipeline)
    schedule: str = "1f1b"
    lr: float = 0.1
    seed: int = 0
    layers: str = ""  # sizes for the small models, comma-separated (workload/small_models.py trainer_model)
    cell: str = "standard"  # lstm: standard | book (Chapter 6's cell)
    tp_style: str = "megatron"  # megatron | book (Chapter 8's tensor parallelism, train/book_tp.py)
    explain: bool = False  # record one step's values, gradients and collectives on `explain_rank` (explain.py)
    explain_rank: int = 0
    bucket_bytes: int = 25 * 2**20
    trace: bool = True
    alternate_trace: bool = False  # overhead measurement: odd steps untraced, same processes, interleaved
    fault: str = ""  # tests: "crash:RANK:STEP" or "hang:RANK:STEP"
    out: str = "."

    @property
    def layout(self) -> Layout:
        return Layout(self.dp, self.tp, self.pp)

    @property
    def layer_widths(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self.layers.replace(" ", "").split(",") if x) if self.layers else ()

    @property
    def global_batch(self) -> int:
        return self.batch_size or default_batch(self.model)

    @property
    def n_micro(self) -> int:
        return self.micro_batches or (max(1, self.pp))


def _inject(cfg: TrainConfig, rank: int, step: int) -> None:
    if not cfg.fault:
        return
    kind, r, s = cfg.fault.split(":")
    if int(r) == rank and int(s) == step:
        if kind == "crash":
            raise RuntimeError(f"injected crash on rank {rank} at step {step}")
        if kind == "hang":
            time.sleep(3600)


def _watch_parent() -> None:
    """End this process if the launcher disappears (no orphans blocked in a collective)."""
    parent = os.getppid()

    def loop():
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=loop, daemon=True).start()


def train(cfg: TrainConfig, rank: int, world: int, progress=None) -> dict:
    """Train on this rank; write its trace, weights and losses into cfg.out. Returns the rank's result."""
    torch.set_num_threads(1)
    layout = cfg.layout
    if layout.world_size != world:
        raise ValueError(f"dp x tp x pp = {layout.world_size} but WORLD_SIZE = {world}")
    c = layout.coords(rank)
    out = Path(cfg.out)
    tracer = Tracer(
        rank,
        enabled=cfg.trace,
        progress=progress,
        meta={
            "world_size": world,
            "layout": {"dp": cfg.dp, "tp": cfg.tp, "pp": cfg.pp},
            "config": asdict(cfg),
            "backend": dist.get_backend() if world > 1 else "none",
        },
    )
    comm = Comm(layout, rank, tracer) if world > 1 else None
    data = dataset(cfg.model, cfg.seed, cfg.layer_widths)
    # replicas other than the first start elsewhere: the Broadcast must fix that
    units = full_units(cfg.model, cfg.seed + 7919 * c.dp, data.vocab_size, cfg.layer_widths, cfg.cell)
    start, stop = stage_bounds(len(units), cfg.pp, c.pp)
    device = _device()
    stage = build_stage(units, start, stop, TP(comm, layout.tp_group(rank), c.tp), cfg.tp_style).to(device)
    params = list(stage.parameters())
    dp_group = layout.dp_group(rank)
    if cfg.dp > 1:
        assert comm is not None  # data parallelism: several processes
        flat = torch.cat([p.detach().reshape(-1) for p in params])
        comm.broadcast(flat, dp_group[0], dp_group, "init/broadcast")
        torch.nn.utils.vector_to_parameters(flat, params)
    sync = GradSync(params, comm, dp_group, cfg.bucket_bytes) if cfg.dp > 1 and comm is not None else None
    shapes = boundary_shapes(cfg, data)
    losses, step_times = [], []
    explain = cfg.explain and rank == cfg.explain_rank
    for step in range(cfg.steps):
        tracer.set_step(step)
        tracer.enabled = cfg.trace and not (cfg.alternate_trace and step % 2 == 1)
        _inject(cfg, rank, step)
        t0 = time.time()
        idx = batch_indices(cfg.seed, len(data), cfg.global_batch, step)
        a, b = split_evenly(cfg.global_batch, cfg.dp, c.dp)
        xs, ys = (t.to(device) for t in data.batch(idx[a:b]))
        xs, ys = list(xs.chunk(cfg.n_micro)), list(ys.chunk(cfg.n_micro))
        for p in params:
            p.grad = None
        rec = None
        loss_fn = stage_loss(stage, data)
        if explain and step == 0:
            from .explain import StepRecorder

            rec = StepRecorder(stage, params, loss_fn, data.loss)
            loss_fn = rec.loss_fn
        pipe = Pipe(
            stage,
            comm,
            layout.prev_stage(rank),
            layout.next_stage(rank),
            shapes[start] if start > 0 else None,
            shapes[stop] if c.pp < cfg.pp - 1 else None,
            cfg.n_micro,
            xs if c.pp == 0 else [],
            ys if c.pp == cfg.pp - 1 else [],
            loss_fn,
            (lambda: setattr(sync, "final", True)) if sync else (lambda: None),
        )
        loss = run_schedule(cfg.schedule, pipe, c.pp, cfg.pp)
        local = rec.snapshot("grad") if rec else None
        if sync:
            sync.finish()
        if rec:
            averaged, before = (rec.snapshot("grad") if sync else {}), rec.snapshot("weights")
        sgd_step(params, cfg.lr)
        if rec:
            _write_explain(cfg, rank, c, b - a, rec, local, averaged, before, tracer, sync, params, out)
        t1 = time.time()
        step_loss = loss if c.pp == cfg.pp - 1 else None  # the last stage's
        losses.append(step_loss)
        step_times.append(t1 - t0)
        if tracer.enabled:
            tracer.record_step(step, t0, t1, step_loss)
    tracer.write(out)
    shards = {p.full_name: (p.detach().cpu().clone(), p.shard_dim) for p in params}
    torch.save(shards, out / f"weights-rank{rank}.pt")
    result = {"rank": rank, "coords": asdict(c), "losses": losses, "step_times_s": step_times, "comm_ops": tracer.seq}
    (out / f"result-rank{rank}.json").write_text(json.dumps(result), encoding="utf-8")
    return result


def _write_explain(cfg, rank, coords, samples, rec, local, averaged, before, tracer, sync, params, out) -> None:
    from .explain import build_record

    rec.detach_hooks()
    buckets = [[params[i].full_name for i in b] for b in sync.buckets] if sync else None
    record = build_record(
        cfg, rank, coords, samples, rec, local, averaged, before, rec.snapshot("weights"), tracer.events, buckets
    )
    (out / f"explain-rank{rank}.json").write_text(json.dumps(record), encoding="utf-8")


def _device() -> torch.device:
    """NCCL moves GPU memory: with it, each rank uses the GPU of its LOCAL_RANK; gloo runs on the CPU."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    return torch.device("cpu")


def sgd_step(params: list[torch.nn.Parameter], lr: float) -> None:
    """w <- w - lr * dL/dw (seeds' Ch. 2; torch.optim would import its compiler machinery, seconds per rank)."""
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.add_(p.grad, alpha=-lr)


def boundary_shapes(cfg: TrainConfig, data) -> dict[int, tuple[int, ...]]:
    """Shape of the activation entering each unit for one micro-batch (from a dry run of the whole model)."""
    units = full_units(cfg.model, cfg.seed, data.vocab_size, cfg.layer_widths, cfg.cell)
    mb = cfg.global_batch // cfg.dp // cfg.n_micro
    x, _ = data.batch(batch_indices(cfg.seed, len(data), mb, 0))
    shapes = {}
    with torch.no_grad():
        for i in range(len(units)):
            shapes[i] = tuple(x.shape)
            x = build_stage(units, i, i + 1, TP(None))(x)
    shapes[len(units)] = tuple(x.shape)
    return shapes


def run_from_env(cfg: TrainConfig, progress=None) -> dict:
    """torchrun entry: rank and world from the environment; gloo on CPU, NCCL when CUDA is present."""
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        return train(cfg, rank, world, progress)
    finally:
        if world > 1:
            dist.destroy_process_group()


def spawn_entry(rank: int, env: dict[str, str], cfg: TrainConfig, progress) -> None:
    """Entry of a process started by the launcher: the torchrun environment, then the worker."""
    os.environ.update(env)
    _watch_parent()
    try:
        run_from_env(cfg, progress)
    except BaseException as exc:  # noqa: BLE001 - report the reason to the launcher, then fail quietly
        Path(cfg.out, f"error-rank{rank}.txt").write_text(f"{type(exc).__name__}: {exc}", encoding="utf-8")
        sys.exit(1)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="aifabric training worker (run under torchrun)")
    for f in TrainConfig.__dataclass_fields__.values():
        kind: Any = {"int": int, "float": float, "bool": lambda s: s.lower() in ("1", "true", "yes")}.get(
            f.type if isinstance(f.type, str) else f.type.__name__, str
        )
        ap.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=f.default)
    cfg = TrainConfig(**vars(ap.parse_args(argv)))
    Path(cfg.out).mkdir(parents=True, exist_ok=True)
    run_from_env(cfg)


if __name__ == "__main__":
    main()
