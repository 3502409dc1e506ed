"""train: real training on torch.distributed, traced; replay: a trace run on a simulated fabric."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import typer

from ..errors import InputError, Problem
from ..train.names import LAYERS_HELP
from .app import app
from .console import make_console
from .outdir import TRAIN, check_folder, claim_out, out_path
from .run_cmds import FOLDER_FORCE_HELP, OUT_HELP, _engine

console = make_console()


def _need_torch() -> None:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise InputError(Problem("train", "needs PyTorch: pip install torch (CPU build) then 'aifabric[train]'"))


def _fmt_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


@app.command()
def train(
    model: str = typer.Option("fnn", "--model", "-m", help="fnn | cnn | lstm | gpt"),
    dp: int = typer.Option(1, "--dp", help="data-parallel replicas"),
    tp: int = typer.Option(1, "--tp", help="tensor-parallel ranks per stage"),
    pp: int = typer.Option(1, "--pp", help="pipeline stages"),
    steps: int = typer.Option(5, "--steps", help="training steps"),
    schedule: str = typer.Option("1f1b", "--schedule", help="pipeline schedule: 1f1b | gpipe"),
    micro_batches: int = typer.Option(0, "--micro-batches", help="per replica and step (default: pp)"),
    batch_size: int = typer.Option(0, "--batch-size", help="global batch (default: 32, gpt 16)"),
    lr: float = typer.Option(0.1, "--lr", help="SGD learning rate"),
    seed: int = typer.Option(0, "--seed"),
    bucket_kb: int = typer.Option(25 * 1024, "--bucket-kb", help="gradient AllReduce bucket size (kB)"),
    layers: str = typer.Option("", "--layers", help=LAYERS_HELP),
    cell: str = typer.Option(
        "standard", "--cell", help="lstm cell: standard (tanh, biases) | book (the book's Chapter 6: ReLU, no biases)"
    ),
    tp_style: str = typer.Option(
        "megatron",
        "--tp-style",
        help="tensor parallelism: megatron (column -> row, AllReduce of activations) | book "
        "(Chapter 8: AllGather of outputs, Broadcast and AllGather of Q and K in "
        "attention, AllReduce of weight gradients; fnn and gpt)",
    ),
    explain_step: bool = typer.Option(
        False,
        "--explain-step",
        help="show the first step on one rank: forward values, gradients, the "
        "collectives that carry them, the averaged gradients and the update",
    ),
    explain_rank: int = typer.Option(0, "--explain-rank", help="the rank --explain-step shows"),
    trace: bool = typer.Option(True, "--trace/--no-trace", help="record every collective and send/recv"),
    overhead: bool = typer.Option(
        False, "--measure-overhead", help="first a run with traced and untraced steps interleaved: tracing's cost"
    ),
    timeout: float = typer.Option(60.0, "--timeout", help="seconds without progress before the run is ended"),
    fault: str = typer.Option("", "--inject-fault", hidden=True, help="crash:RANK:STEP or hang:RANK:STEP"),
    out: Path = typer.Option(
        None,
        "--out",
        "-o",
        help="output directory (default: a new aifabric-train-<time> folder in the current directory)",
        parser=out_path,
    ),
    force: bool = typer.Option(False, "--force", help=FOLDER_FORCE_HELP),
) -> int:
    """Train a small model for real: dp x tp x pp processes on torch.distributed (gloo on CPU, NCCL on GPU),
    every collective and send/recv traced into trace.jsonl."""
    import math
    import re

    from ..train.names import CELLS, MODELS, SCHEDULES, TP_STYLES

    problems: list[Problem] = []
    if model not in MODELS:
        problems.append(Problem("--model", f"must be one of {', '.join(MODELS)} (got {model!r})"))
    if layers and not re.fullmatch(r"\s*\d+(\s*,\s*\d+)*\s*", layers):
        problems.append(Problem("--layers", f"whole numbers separated by commas, e.g. 4,3,2,1 (got {layers!r})"))
    if cell not in CELLS:
        problems.append(Problem("--cell", f"must be one of {', '.join(CELLS)} (got {cell!r})"))
    if tp_style not in TP_STYLES:
        problems.append(Problem("--tp-style", f"must be one of {', '.join(TP_STYLES)} (got {tp_style!r})"))
    if explain_rank < 0:
        problems.append(Problem("--explain-rank", f"must be >= 0 (got {explain_rank})"))
    if explain_step and not trace:
        problems.append(Problem("--explain-step", "shows the traced collectives: leave out --no-trace"))
    if schedule not in SCHEDULES:
        problems.append(Problem("--schedule", f"must be one of {', '.join(SCHEDULES)} (got {schedule!r})"))
    for flag, v, low in (
        ("--dp", dp, 1),
        ("--tp", tp, 1),
        ("--pp", pp, 1),
        ("--steps", steps, 1),
        ("--micro-batches", micro_batches, 0),
        ("--batch-size", batch_size, 0),
        ("--seed", seed, 0),
        ("--bucket-kb", bucket_kb, 1),
    ):
        if v < low:
            problems.append(Problem(flag, f"must be >= {low} (got {v})"))
    if not (math.isfinite(lr) and lr > 0):
        problems.append(Problem("--lr", f"must be a positive number (got {lr:g})"))
    if not (math.isfinite(timeout) and timeout > 0):
        problems.append(Problem("--timeout", f"must be a positive number of seconds (got {timeout:g})"))
    if fault and not re.fullmatch(r"(crash|hang):\d+:\d+", fault):
        problems.append(Problem("--inject-fault", "must be crash:RANK:STEP or hang:RANK:STEP"))
    if out is not None and out.exists() and not out.is_dir():
        problems.append(Problem("--out", f"{out} exists and is not a directory"))
    if problems:
        raise InputError(problems)
    _need_torch()
    from ..train.launcher import check_config
    from ..train.worker import TrainConfig

    def config(out_dir: str) -> TrainConfig:
        return TrainConfig(
            model=model,
            dp=dp,
            tp=tp,
            pp=pp,
            steps=steps,
            schedule=schedule,
            micro_batches=micro_batches,
            batch_size=batch_size,
            lr=lr,
            seed=seed,
            bucket_bytes=bucket_kb * 1024,
            trace=trace,
            fault=fault,
            out=out_dir,
            layers=layers.replace(" ", ""),
            cell=cell,
            tp_style=tp_style,
            explain=explain_step,
            explain_rank=explain_rank,
        )

    check_config(config(""))  # before any folder is made or process started
    # refused before any process starts when it would lose the user's files; the run is written into a staging
    # folder and moved into --out when complete (or when Ctrl-C stops it)
    folder = claim_out(out, force, prefix="aifabric-train", layout=TRAIN)
    try:
        cfg = config(str(folder.staging))
        variant = "".join(
            [
                f", layers {layers}" if layers else "",
                ", the book's LSTM cell" if cell == "book" else "",
                ", the book's tensor parallelism" if tp_style == "book" and tp > 1 else "",
            ]
        )
        console.print(
            f"training {model}: dp {dp} x tp {tp} x pp {pp} = {cfg.layout.world_size} processes, "
            f"{steps} steps, {cfg.n_micro} micro-batch(es), {schedule if pp > 1 else 'no pipeline'}{variant}"
        )
        stage = ["starting"]
        try:
            summary, record, files, replayable = _train_into(
                cfg, folder.staging, overhead, timeout, explain_step, explain_rank, stage
            )
            folder.publish()
        except KeyboardInterrupt:
            _stop_rank_processes()
            written = _write_stopped_training(cfg, folder, stage[0])
            raise _interrupted(
                f"stopped while {stage[0]}; wrote {folder.target}/: {', '.join(written)} (train.json: complete false)"
            ) from None
    finally:
        folder.discard()
    _print(summary)
    if explain_step and record is not None:  # None: the rank wrote no explain file
        _print_step(record)
    console.print(f"\nwrote {folder.target}/: {files}")
    if replayable:
        console.print(f"replay it: aifabric replay {folder.target / summary['trace']} --scenario FILE")
    return 0


def _interrupted(message: str):
    from .errors import Interrupted

    return Interrupted(message)


def _train_into(
    cfg, out_dir: Path, overhead: bool, timeout: float, explain_step: bool, explain_rank: int, stage: list[str]
) -> tuple[dict, dict | None, str, bool]:
    """The training run (its processes write into `out_dir`, the staging folder), then train.json, report.html,
    weights.pt; `stage` says what is being done (for a Ctrl-C)."""
    from ..report.files import write_atomic, write_json
    from ..train.launcher import launch
    from ..train.summary import assemble_weights, build_train_summary, tracing_overhead

    measured = None
    stage[0] = "starting the rank processes"
    _start_forkserver_deaf_to_ctrl_c()
    if overhead:
        stage[0] = "measuring the tracing overhead"
        scratch = out_dir / "overhead"
        steps_each = max(5, cfg.steps)
        alt = launch(
            replace(cfg, steps=2 * steps_each + 1, trace=True, alternate_trace=True, explain=False, out=str(scratch)),
            timeout_s=timeout,
        )
        measured = tracing_overhead(alt)
        shutil.rmtree(scratch, ignore_errors=True)
    stage[0] = "training"
    run = launch(cfg, timeout_s=timeout)
    import torch

    stage[0] = "writing"
    _save_atomic(torch, assemble_weights(out_dir, run), out_dir / "weights.pt")
    for f in out_dir.glob("weights-rank*.pt"):
        f.unlink()
    for f in out_dir.glob("result-rank*.json"):
        f.unlink()
    from ..train.tracer import read_trace

    traced = None
    if run.trace_path:
        try:
            traced = read_trace(run.trace_path)
        except InputError:  # one process: no communication to tabulate, show or replay
            traced = None
    summary = build_train_summary(run if traced is not None else replace(run, trace_path=None), measured)
    summary["trace"] = run.trace_path.name if run.trace_path else None
    summary["complete"] = True
    record = None
    explained = out_dir / f"explain-rank{explain_rank}.json"
    if explain_step and explained.exists():
        import json

        record = json.loads(explained.read_text(encoding="utf-8"))
        write_json(out_dir / "explain.json", record)
        explained.unlink()
    from ..train.report_html import build_train_html

    write_atomic(out_dir / "report.html", build_train_html(summary, traced))
    write_json(out_dir / "train.json", summary)  # last: its presence says the run is complete
    files = (
        "train.json, report.html, weights.pt"
        + (", trace.jsonl" if run.trace_path else "")
        + (", explain.json" if explain_step else "")
    )
    return summary, record, files, traced is not None


def _start_forkserver_deaf_to_ctrl_c() -> None:
    """The rank processes' forkserver, started with SIGINT ignored (cli/procs.py), which every rank process it forks
    keeps: a Ctrl-C reaches the launcher alone, which stops the ranks and writes what the run leaves."""
    from .procs import start_forkserver_deaf_to_ctrl_c

    start_forkserver_deaf_to_ctrl_c(["torch", "torch.distributed", "aifabric.train.worker"])


def _stop_rank_processes() -> None:
    """After a Ctrl-C: every process the forkserver started (the launcher stops those it knows; one being started
    when the Ctrl-C came it never learnt of, and rank processes ignore SIGINT) and the forkserver itself, so that
    nothing is left waiting in a collective, holding the terminal."""
    import os
    import signal
    from multiprocessing import forkserver

    server = forkserver._forkserver  # the stdlib's: its pid is what names the rank processes (their parent)
    pid = getattr(server, "_forkserver_pid", None)
    if not pid:
        return
    try:
        entries = os.listdir("/proc")
    except OSError:  # not Linux: the launcher's own clean-up is what there is
        entries = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            try:
                os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass
    try:
        os.kill(pid, signal.SIGKILL)
        server._stop()  # type: ignore[attr-defined]  # reap it and forget it (a later run starts a new one)
    except Exception:  # noqa: BLE001 - gone already
        pass


def _save_atomic(torch, obj, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        torch.save(obj, tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def _write_stopped_training(cfg, folder, stage: str) -> list[str]:
    """What a training run stopped by Ctrl-C leaves in --out: the trace of the ops recorded so far (trace.jsonl,
    when tracing) and train.json saying `complete: false` and where it stopped; nothing half written (a second
    Ctrl-C meanwhile is held until the files are in place)."""
    from .. import __version__
    from ..report.files import write_json
    from ..train.summary import TRAIN_SCHEMA_VERSION
    from .outdir import held_interrupts

    out_dir = folder.staging
    with held_interrupts():
        shutil.rmtree(out_dir / "overhead", ignore_errors=True)
        for pattern in (
            "weights-rank*.pt",
            "result-rank*.json",
            "error-rank*.txt",
            "explain-rank*.json",
            "weights.pt",
            "report.html",
            "explain.json",
            ".*.tmp",
        ):
            for f in out_dir.glob(pattern):
                f.unlink(missing_ok=True)
        if cfg.trace and any(out_dir.glob("trace-rank*.jsonl")):
            from ..train.tracer import merge_rank_traces

            merge_rank_traces(out_dir, cfg.layout.world_size)
        write_json(
            out_dir / "train.json",
            {
                "schema_version": TRAIN_SCHEMA_VERSION,
                "aifabric_version": __version__,
                "complete": False,
                "stopped_in": stage,
                "model": cfg.model,
                "plan": {
                    "dp": cfg.dp,
                    "tp": cfg.tp,
                    "pp": cfg.pp,
                    "schedule": cfg.schedule,
                    "micro_batches": cfg.n_micro,
                    "global_batch": cfg.global_batch,
                },
                "world_size": cfg.layout.world_size,
                "steps": cfg.steps,
                "trace": "trace.jsonl" if (out_dir / "trace.jsonl").exists() else None,
                "note": "stopped by Ctrl-C: the trace (if any) holds the ops recorded until then and may end inside "
                "a step",
            },
        )
        written = sorted(p.name for p in out_dir.iterdir() if not p.name.startswith("."))
        folder.publish()
    return written


def _print(s: dict) -> None:
    from rich.table import Table

    head = Table(
        title=f"aifabric train · {s['model']} · dp {s['plan']['dp']} × tp {s['plan']['tp']} × pp {s['plan']['pp']}",
        show_header=False,
        title_justify="left",
    )
    head.add_column(style="bold")
    head.add_column()
    head.add_row("processes", str(s["world_size"]))
    head.add_row("loss per step", " → ".join(f"{x:.4f}" for x in s["losses"]))
    head.add_row("median step time", f"{s['median_step_time_s'] * 1e3:.1f} ms (first step excluded)")
    head.add_row("wall time", f"{s['wall_s']:.1f} s")
    ov = s["tracing_overhead"]
    if ov:
        head.add_row(
            "tracing overhead",
            f"{ov['overhead_fraction'] * 100:+.1f}% per step measured "
            f"({ov['untraced_step_s'] * 1e3:.1f} → {ov['traced_step_s'] * 1e3:.1f} ms, "
            f"{ov['steps_each']} steps each, interleaved)",
        )
        head.add_row(
            "tracer's own cost",
            f"{ov['tracer_cost_per_op_s'] * 1e6:.1f} µs per op × "
            f"{ov['ops_per_step']:.0f} ops per step = {ov['tracer_cost_fraction'] * 100:.2f}% of a step",
        )
    console.print(head)
    if s["communication"]:
        t = Table(title="communication (all ranks, all steps)", title_justify="left")
        for col in ("op", "what", "ops", "bytes", "time"):
            t.add_column(col, justify="right" if col in ("ops", "bytes", "time") else "left")
        for row in s["communication"]:
            t.add_row(
                row["op"], row["tag"], str(row["count"]), _fmt_bytes(row["bytes"]), f"{row['time_s'] * 1e3:.1f} ms"
            )
        console.print(t)


def _vec(xs) -> str:
    return "[" + ", ".join(f"{x:.4f}" for x in xs) + (", …]" if len(xs) >= 4 else "]")


def _print_step(r: dict) -> None:
    """One step on one rank, in the book's vocabulary (train/explain.py records it)."""
    from rich.markup import escape
    from rich.table import Table

    c, p = r["coords"], r["plan"]
    console.print()
    console.print(
        f"[bold]step {r['step']} on rank {r['rank']}[/]: data-parallel replica {c['dp'] + 1} of {p['dp']}, "
        f"pipeline stage {c['pp'] + 1} of {p['pp']}, tensor-parallel rank {c['tp'] + 1} of {p['tp']}"
        + (" (the book's style)" if p["tp_style"] == "book" and p["tp"] > 1 else ""),
        highlight=False,
    )
    console.print(
        f"data: {r['samples']} of the global batch's {r['global_batch']} samples"
        + (" (the other replicas have the rest: Chapter 2's data parallelism)" if p["dp"] > 1 else "")
        + f", in {p['micro_batches']} micro-batch(es)",
        highlight=False,
    )
    console.print(
        "[bold]forward[/], first micro-batch (Chapter 1: z = W·x + b, then the activation; Chapter 3: "
        "SoftMax and the loss)",
        highlight=False,
    )
    t = Table(box=None, padding=(0, 2))
    for col in ("layer", "this rank holds", "in", "out", "first sample's first values"):
        t.add_column(col)
    for layer in r["layers"]:
        t.add_row(
            f"{layer.get('unit', layer['index'])} {layer['module']}",
            escape(layer["name"]),
            " × ".join(map(str, layer["in_shape"] or [])),
            " × ".join(map(str, layer["out_shape"])),
            _vec(layer["sample"]),
        )
    console.print(t)
    loss = r["loss"]
    if loss:
        line = f"loss: {loss['kind']} {loss['value']:.4f} (mean over the micro-batch's {loss['samples']} samples)"
        if "label" in loss:
            line += (
                f"; first sample: label {loss['label']}, SoftMax gives it p = {loss['p_label']:.4f}, predicted "
                f"{loss['predicted']}; its output error is p - one-hot (Chapter 3)"
            )
        console.print(line, highlight=False)
    else:
        console.print(
            "loss: computed on the last pipeline stage; this stage receives the error from the next one (Chapter 8)",
            highlight=False,
        )
    averaged = p["dp"] > 1
    console.print(
        "[bold]backward[/] (Chapter 2: each gradient = the input through the weight × its neuron's error "
        "term; here autograd), " + ("the averaging and " if averaged else "") + "the update w ← w - η·∇w",
        highlight=False,
    )
    t = Table(box=None, padding=(0, 2))
    for col in (
        "parameter",
        "shape",
        "largest ∇ at",
        "local ∇",
        *(["averaged ∇ (÷ dp)"] if averaged else []),
        f"w before → after (η = {r['lr']:g})",
        "‖∇‖" + (" local → averaged" if averaged else ""),
    ):
        t.add_column(col)
    for name, g in r["gradients"].items():
        t.add_row(
            name,
            " × ".join(map(str, g["shape"])),
            str(g["index"]),
            f"{g['local']:+.5f}",
            *([f"{g['averaged']:+.5f}"] if averaged else []),
            f"{g['before']:.5f} → {g['after']:.5f}",
            f"{g['local_norm']:.4f}" + (f" → {g['averaged_norm']:.4f}" if averaged else ""),
        )
    console.print(t)
    if p["tp_style"] == "book" and p["tp"] > 1:
        console.print(
            "in the book's style every GPU holds the whole layers and computes the gradients of its own "
            "neurons' weights; the AllReduce of the weight gradients inside backward (Chapter 8) gives it "
            "the others', so \"local ∇\" here is already the whole layer's",
            highlight=False,
        )
    if r.get("buckets"):
        console.print(
            "gradient buckets (DDP's, reverse registration order): "
            + "; ".join(f"{k}: {', '.join(names)}" for k, names in enumerate(r["buckets"])),
            highlight=False,
            soft_wrap=True,
        )
    console.print(
        "[bold]communication[/]: the collectives and transfers of this step on this rank, in order", highlight=False
    )
    t = Table(box=None, padding=(0, 2))
    for col in ("#", "op", "ranks", "bytes", "what it carries"):
        t.add_column(col)
    for e in r["communication"]:
        t.add_row(
            str(e["seq"]),
            e["op"] + (" (async)" if e["async_op"] else ""),
            ",".join(map(str, e["group"])),
            _fmt_bytes(e["bytes"]),
            escape(e["what"]),
        )
    if not r["communication"]:
        t.add_row("", "", "", "", "none: one process holds the whole model and batch")
    console.print(t)


@app.command()
def replay(
    trace: Path = typer.Argument(..., help="trace.jsonl from `aifabric train` (or its folder)"),
    scenario: Path = typer.Option(..., "--scenario", "-s", help="scenario YAML: the cluster and fabric"),
    engine: str = typer.Option(None, "--engine", "-e", help="flow | analytic | packet (default: the scenario's)"),
    compute: str = typer.Option(
        "measured",
        "--compute",
        help="measured: the gaps between ops as the traced run measured them (on its own "
        "hardware: a CPU for gloo runs, not the scenario's GPU) | zero: no compute, "
        "communication alone",
    ),
    placement_how: str = typer.Option(
        "packed",
        "--placement",
        help="packed: trace rank r on GPU r (torchrun order) | spread: round-robin "
        "over the servers, so the ranks talk over the network",
    ),
    out: Path = typer.Option(None, "--out", "-o", help=OUT_HELP, parser=out_path),
    force: bool = typer.Option(False, "--force", help=FOLDER_FORCE_HELP),
) -> int:
    """Replay a training trace's communication on a scenario's fabric and write the usual report."""
    from ..report import print_summary
    from ..report.terminal import fmt_bytes
    from ..scenario import load_scenario
    from ..simulate import build_fabric
    from ..train.replay import (
        PLACEMENTS,
        check_fits,
        place,
        placement,
        trace_to_workload,
        unsupported_ops,
        without_ops,
    )
    from ..train.tracer import read_trace

    problems = []
    if compute not in ("measured", "zero"):
        problems.append(Problem("--compute", f"must be measured or zero (got {compute!r})"))
    if placement_how not in PLACEMENTS:
        problems.append(Problem("--placement", f"must be one of {', '.join(PLACEMENTS)} (got {placement_how!r})"))
    if out is not None and out.exists() and not out.is_dir():
        problems.append(Problem("--out", f"{out} exists and is not a directory"))
    if problems:
        raise InputError(problems)
    if out is not None:  # before any work: a folder of the user's files, or a place that cannot be written
        check_folder(out, force)
    eng = _engine(engine) if engine else None
    t = read_trace(trace)
    s = load_scenario(scenario)
    check_fits(t, s.cluster.total_gpus)
    n, world, gps = t.world_size, s.cluster.total_gpus, s.cluster.gpus_per_server
    gpu_of = placement(n, s.cluster.servers, gps, placement_how)
    servers_used = sorted({g // gps for g in gpu_of})
    t = place(t, gpu_of, world)
    workload = trace_to_workload(t, compute, name=f"replay of {trace}")
    fabric, router = build_fabric(s)
    missing = unsupported_ops(workload, fabric, router)
    if missing:
        console.print(f"[yellow]note:[/] left out {', '.join(sorted(missing))}: not supported by the engines yet")
        workload = without_ops(workload, missing)
    where = (
        f"server {servers_used[0]}" if len(servers_used) == 1 else f"{len(servers_used)} of {s.cluster.servers} servers"
    )
    console.print(
        f"placement {placement_how}: the trace's {n} ranks on GPUs "
        f"{', '.join(map(str, gpu_of[:8]))}{', ...' if n > 8 else ''} ({where})"
        + (f"; {world - n} of the scenario's {world} GPUs idle" if world > n else ""),
        highlight=False,
    )
    meta = next(iter(t.meta.values()), {})
    backend = meta.get("backend", "?")
    if compute == "measured":
        console.print(
            f"compute: the gaps measured in the traced run (backend {backend}"
            + (", on CPU" if backend in ("gloo", "none") else "")
            + f"), not times of the scenario's {s.cluster.gpu}; --compute zero replays the communication "
            "alone",
            highlight=False,
        )
    from .run_cmds import simulate_into

    # staged and moved into --out when complete; a Ctrl-C leaves scenario.yaml and summary.json (complete: false)
    run, out_dir = simulate_into(s, out, eng, scenario.read_text(encoding="utf-8"), force, workload=workload)
    print_summary(run, console)
    if run.results.scale_out_bytes == 0:
        hint = (
            " --placement spread puts them on different servers."
            if placement_how == "packed" and len(servers_used) == 1 and s.cluster.servers > 1
            else ""
        )
        console.print(
            f"[yellow]note:[/] no transfer crossed the network ({fmt_bytes(run.results.scale_up_bytes)} "
            f"over NVLink): the trace's ranks share {where}.{hint}",
            highlight=False,
        )
    console.print(f"\nwrote {out_dir}/: summary.json, trace.json, report.html, tables")
    if not run.results.complete:  # Ctrl-C stopped the event loop: never presented as a finished replay
        raise _interrupted(f"partial results written to {out_dir} (summary.json: complete false)")
    return 0
