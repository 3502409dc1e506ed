"""Starting N ranks on this machine the way torchrun does (one process per rank, RANK / WORLD_SIZE /
LOCAL_RANK / MASTER_ADDR / MASTER_PORT in the environment, rendezvous at rank 0's TCP port), watching them,
and collecting what they wrote.

Processes come from a fork server that has imported torch once (importing it per rank costs seconds).
A rank that exits with an error ends the run at once; a run that makes no progress for `timeout_s` is
ended, naming the ranks that fell behind (the hung ones: their peers wait inside a collective they never
entered). Every process started is killed and reaped before `launch` returns or raises.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import socket
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import InputError, Problem
from .tracer import merge_rank_traces
from .worker import TrainConfig, spawn_entry

STARTUP_S = 120.0  # the longest a run waits for its ranks' first progress, whatever timeout_s is


class TrainFailure(RuntimeError):
    """A rank crashed or hung; the message names it."""

    def __init__(self, message: str, ranks: list[int], pids: list[int] | None = None):
        super().__init__(message)
        self.ranks = ranks
        self.pids = pids or []


@dataclass
class TrainRun:
    config: TrainConfig
    out_dir: Path
    trace_path: Path | None
    results: list[dict]  # per rank
    wall_s: float

    @property
    def losses(self) -> list[float]:
        """Global-batch loss per step: the last stage's shares summed over replicas, averaged."""
        cfg = self.config
        last = [r for r in self.results if r["coords"]["pp"] == cfg.pp - 1 and r["coords"]["tp"] == 0]
        return [sum(r["losses"][k] for r in last) / len(last) for k in range(cfg.steps)]

    @property
    def step_times_s(self) -> list[float]:
        return [max(r["step_times_s"][k] for r in self.results) for k in range(self.config.steps)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_config(cfg: TrainConfig) -> None:
    """Plan problems as InputError naming the flag (before any process starts)."""
    from ..workload.small_models import layers_problem
    from .layers import TP
    from .layout import stage_bounds
    from .models import MODELS, build_stage, dataset, full_units
    from .names import CELLS, TP_STYLES
    from .schedule import SCHEDULES

    problems = []
    if cfg.model not in MODELS:
        raise InputError(Problem("--model", f"must be one of {', '.join(MODELS)} (got {cfg.model!r})"))
    try:
        widths = cfg.layer_widths
    except ValueError:
        raise InputError(Problem("--layers", f"whole numbers separated by commas (got {cfg.layers!r})")) from None
    why = layers_problem(cfg.model, widths)
    if why:
        problems.append(Problem("--layers", why))
    if cfg.cell not in CELLS:
        problems.append(Problem("--cell", f"must be one of {', '.join(CELLS)} (got {cfg.cell!r})"))
    elif cfg.cell == "book" and cfg.model != "lstm":
        problems.append(Problem("--cell", f"the book's cell is an LSTM cell: --model lstm (got {cfg.model})"))
    if cfg.tp_style not in TP_STYLES:
        problems.append(Problem("--tp-style", f"must be one of {', '.join(TP_STYLES)} (got {cfg.tp_style!r})"))
    elif cfg.tp_style == "book" and cfg.model not in ("fnn", "gpt"):
        problems.append(
            Problem(
                "--tp-style",
                "the book's tensor parallelism (Chapter 8) splits feed-forward layers "
                f"and attention: --model fnn or gpt (got {cfg.model})",
            )
        )
    if not 0 <= cfg.explain_rank < max(1, cfg.layout.world_size) and cfg.explain:
        problems.append(
            Problem(
                "--explain-rank",
                f"must be a rank of the run, 0 to {cfg.layout.world_size - 1} (got {cfg.explain_rank})",
            )
        )
    for flag, v in (("--dp", cfg.dp), ("--tp", cfg.tp), ("--pp", cfg.pp), ("--steps", cfg.steps)):
        if v < 1:
            problems.append(Problem(flag, f"must be >= 1 (got {v})"))
    if cfg.schedule not in SCHEDULES:
        problems.append(Problem("--schedule", f"must be one of {', '.join(SCHEDULES)} (got {cfg.schedule!r})"))
    if problems:
        raise InputError(problems)
    data = dataset(cfg.model, cfg.seed, cfg.layer_widths)
    units = full_units(cfg.model, cfg.seed, data.vocab_size, cfg.layer_widths, cfg.cell)
    if cfg.pp > len(units):
        problems.append(
            Problem(
                "--pp",
                f"{cfg.model} has {len(units)} layers to place; at most {len(units)} pipeline stages (got {cfg.pp})",
            )
        )
    per_micro = cfg.global_batch / (cfg.dp * cfg.n_micro)
    if per_micro != int(per_micro) or per_micro < 1:
        problems.append(
            Problem(
                "--batch-size",
                f"global batch {cfg.global_batch} must split evenly into dp {cfg.dp} x micro-batches {cfg.n_micro}",
            )
        )
    if not problems:
        for s in range(cfg.pp):
            a, b = stage_bounds(len(units), cfg.pp, s)
            try:
                for t in sorted({0, cfg.tp - 1}):
                    stage = build_stage(units, a, b, TP(None, tuple(range(cfg.tp)), t), cfg.tp_style)
                    if not list(stage.parameters()):
                        problems.append(
                            Problem(
                                "--pp",
                                f"stage {s} would hold no weights on tensor-parallel rank "
                                f"{t} (the book's style keeps the embedding on the first "
                                "rank): fewer pipeline stages",
                            )
                        )
            except ValueError as exc:
                problems.append(Problem("--tp", f"stage {s} of {cfg.model}: {exc}"))
                break
            if problems:
                break
    if problems:
        raise InputError(problems)


def launch(cfg: TrainConfig, timeout_s: float = 120.0, poll_s: float = 0.05) -> TrainRun:
    check_config(cfg)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    world = cfg.layout.world_size
    for pattern in ("error-rank*.txt", "result-rank*.json", "weights-rank*.pt", "trace-rank*.jsonl"):
        for old in out.glob(pattern):
            old.unlink()
    t0 = time.time()
    if world == 1:
        from .worker import train

        results = [train(cfg, 0, 1)]
    else:
        results = _run_processes(cfg, world, timeout_s, poll_s)
    trace = merge_rank_traces(out, world) if cfg.trace else None
    return TrainRun(cfg, out, trace, results, time.time() - t0)


def _run_processes(cfg: TrainConfig, world: int, timeout_s: float, poll_s: float) -> list[dict]:
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed", "aifabric.train.worker"])
    progress = ctx.Array("q", 2 * world, lock=False)  # per rank: comm ops entered, step
    port = free_port()
    procs = []
    out = Path(cfg.out)
    try:
        for r in range(world):
            env = {
                "RANK": str(r),
                "WORLD_SIZE": str(world),
                "LOCAL_RANK": str(r),
                "LOCAL_WORLD_SIZE": str(world),
                "GROUP_RANK": "0",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "OMP_NUM_THREADS": "1",
            }
            p = ctx.Process(target=spawn_entry, args=(r, env, cfg, progress), name=f"aifabric-rank{r}")
            p.start()
            procs.append(p)
        last_change, seen = time.time(), list(progress)
        while True:
            codes = [p.exitcode for p in procs]
            failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                time.sleep(0.2)  # let the other ranks notice too, then tell the cause from the consequences
                codes = [p.exitcode for p in procs]
                failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
                reasons = {r: _reason(out, r, codes[r]) for r in failed}
                cause = [r for r in failed if not _lost_peer(reasons[r])] or failed
                lost = [r for r in failed if r not in cause]
                msg = "; ".join(f"rank {r} exited with code {codes[r]}: {reasons[r]}" for r in cause)
                if lost:
                    msg += f"; then rank{'s' if len(lost) > 1 else ''} {', '.join(map(str, lost))} lost the connection"
                raise TrainFailure(msg + "; all ranks were stopped", cause)
            if all(c == 0 for c in codes):
                break
            now = time.time()
            # before any rank reports progress, start-up (importing torch, joining the group) is what takes time:
            # a loaded machine may need more than timeout_s for it
            limit = timeout_s if any(seen) else max(timeout_s, STARTUP_S)
            if list(progress) != seen:
                seen, last_change = list(progress), now
            elif now - last_change > limit:
                stuck = _behind(seen, [r for r, c in enumerate(codes) if c is None])
                ops = {r: seen[2 * r] for r in range(world)}
                raise TrainFailure(
                    f"no progress for {timeout_s:g} s: rank{'s' if len(stuck) > 1 else ''} "
                    f"{', '.join(map(str, stuck))} hung at step {seen[2 * stuck[0] + 1]} after "
                    f"{ops[stuck[0]]} communication ops (the others wait in op {max(ops.values())}); "
                    f"all ranks were stopped",
                    stuck,
                )
            time.sleep(poll_s)
    except TrainFailure as exc:
        exc.pids = [p.pid for p in procs if p.pid is not None]  # every one started
        raise
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join(5)
    return [json.loads((out / f"result-rank{r}.json").read_text(encoding="utf-8")) for r in range(world)]


def _behind(progress: list[int], alive: list[int]) -> list[int]:
    ops = {r: progress[2 * r] for r in alive}
    low = min(ops.values())
    return [r for r in alive if ops[r] == low]


def _reason(out: Path, rank: int, code: int | None) -> str:
    err = out / f"error-rank{rank}.txt"
    if err.exists():
        return err.read_text(encoding="utf-8").strip()
    return f"killed by signal {-code}" if code is not None and code < 0 else "no message"


def _lost_peer(reason: str) -> bool:
    """gloo's words for 'another rank went away' (a consequence, not a cause)."""
    return any(s in reason for s in ("Connection closed by peer", "Connection reset by peer", "Broken pipe"))


def single_process(cfg: TrainConfig, out: Path) -> TrainRun:
    """The same model and data on one process, no parallelism (the reference of the equality tests)."""
    return launch(replace(cfg, dp=1, tp=1, pp=1, micro_batches=1, out=str(out), fault="", explain=False))
