"""`aifabric calibrate`: the model fitted to the user's own measurements.

`nccl-tests FILE...` reads nccl-tests outputs and writes a `calibration:` block (per tier: bandwidth
efficiency, extra latency) that a scenario takes as `calibration: calibration.yaml`; `gemm` times
torch.matmul over a grid of shapes and writes a GEMM table (`calibration: {gemm: gemm-table.yaml}`); `attention`
times torch's fused attention by sequence length and head dimension and writes an attention table
(`calibration: {attention: attention-table.yaml}`).
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from ..catalog import CPU_VENDORS, GPUS
from ..errors import InputError, Problem
from .app import app
from .console import PIPE_WIDTH, make_console
from .errors import Interrupted
from .outdir import claim_file

FORCE_HELP = "replace an --out file aifabric did not write"
NCCL_HEAD = "# aifabric calibrate nccl-tests"
GEMM_HEAD = "# aifabric calibrate gemm"  # the first words of GemmTable.to_yaml
ATTENTION_HEAD = "# aifabric calibrate attention"  # the first words of attention_calibration.table_yaml

console = make_console()
err_console = Console(stderr=True)
if not err_console.is_terminal:
    err_console = Console(stderr=True, width=PIPE_WIDTH)
calibrate_app = typer.Typer(
    help="Fit the model to your own measurements: nccl-tests outputs, GEMM and attention timings.", no_args_is_help=True
)
app.add_typer(calibrate_app, name="calibrate")


def size_text(size_bytes: float) -> str:
    """nccl-tests' sizes as people say them: 8 B, 64 KiB, 4 GiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:g} {unit}"
    return f"{size_bytes:g} B"


def _tier_source(files) -> str:
    parts = []
    for f in files:
        m = f.measurement
        parts.append(
            f"{m.label} ({m.op}, {m.n} GPUs on {m.servers} node{'s' * (m.servers > 1)}, "
            f"{size_text(m.sizes[0])}..{size_text(m.sizes[-1])})"
        )
    return "nccl-tests: " + "; ".join(parts)


def _gpu_of(run, flag: str) -> str:
    """The catalog GPU for a run: --gpu, else the file's device name ("" when the catalog has none)."""
    from ..calibration import catalog_gpu

    return flag.upper() if flag != "auto" else catalog_gpu(run.gpu_name)


def _short_device(name: str) -> str:
    from ..calibration import catalog_gpu

    return catalog_gpu(name) or name.removeprefix("NVIDIA ").strip() or "?"


def _files_table(cal, devices: list[str]):
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(
        title="nccl-tests vs the cost model. busbw: measured at the largest size, GB/s; model: the "
        "model's there at nominal bandwidth; eff.: the bandwidth factor that fits, averaged over "
        "sizes >= largest/16 (eff@max: at the largest); +lat: µs added per step; rms: the fitted "
        "model's error over all sizes",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    cols = ("file", "op", "ranks", "nodes", "GPU", "largest", "busbw", "model", "eff.", "eff@max", "+lat µs", "rms %")
    for c in cols:
        table.add_column(
            c, justify="left" if c in ("file", "op", "GPU") else "right", overflow="fold" if c == "file" else "ellipsis"
        )
    for f, device in zip(cal.files, devices):
        m, fit = f.measurement, f.fit
        eff = f"{fit.efficiency:.3f}" + (f" (raw {fit.raw_efficiency:.3f})" if fit.raw_efficiency > 1 else "")
        extra = f"{fit.extra_latency_us:.2f}" if fit.small_rows else "-"
        table.add_row(
            escape(m.label),
            m.op,
            str(m.n),
            str(m.servers),
            escape(device),
            size_text(m.sizes[-1]),
            f"{f.measured_busbw_gBps:.2f}",
            f"{f.nominal_busbw_gBps:.2f}",
            eff,
            f"{fit.efficiency_at_largest:.3f}",
            extra,
            f"{f.rms_error_pct:.1f}",
        )
    return table


@calibrate_app.command("nccl-tests")
def nccl_tests(
    files: list[Path] = typer.Argument(
        ...,
        help="nccl-tests outputs (all_reduce_perf, all_gather_perf, "
        "reduce_scatter_perf, broadcast_perf, reduce_perf, alltoall_perf, "
        "sendrecv_perf)",
        show_default=False,
    ),
    gpu_name: str = typer.Option(
        "auto",
        "--gpu",
        help=f"catalog GPU whose NVLink bandwidth is nominal ({', '.join(GPUS)}; auto: from the files' device names)",
    ),
    gpus_per_server: int = typer.Option(
        8, "--gpus-per-server", help="GPUs per node, for files without rank lines (partial outputs)"
    ),
    nic_gbps: float = typer.Option(0, "--nic-gbps", help="NIC speed per GPU, Gb/s (0: the catalog's for the GPU)"),
    cpu_vendor: str = typer.Option(
        "auto",
        "--cpu-vendor",
        help="the servers' CPU vendor, which sets NCCL's LL ceiling across servers (intel, amd, arm, other; "
        "auto: the GPU's reference server, e.g. DGX A100 amd, DGX H100 intel)",
    ),
    op: str = typer.Option(None, "--op", help="the operation, for files that do not say (allreduce, allgather, ...)"),
    out: Path = typer.Option(Path("calibration.yaml"), "--out", "-o", help="the calibration file to write"),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
) -> int:
    """Fit per-tier bandwidth efficiency and extra latency to nccl-tests outputs; write a calibration file."""
    import yaml
    from pydantic import ValidationError
    from rich.markup import escape

    from ..calibration.fit import calibrate, measurement
    from ..calibration.nccl_tests import parse_file
    from ..catalog import NCCL_LL_MAX_ACROSS_GBPS, gpu, server_cpu_vendor
    from ..report.files import write_atomic
    from ..scenario.calibration_spec import TierCalibration
    from ..simulate import NVLS_GPUS

    problems: list[Problem] = []
    if gpus_per_server < 1:
        problems.append(Problem("--gpus-per-server", f"must be >= 1 (got {gpus_per_server})"))
    if not nic_gbps >= 0 or nic_gbps == float("inf"):
        problems.append(Problem("--nic-gbps", f"must be a number >= 0, 0 for the catalog's (got {nic_gbps:g})"))
    if cpu_vendor not in ("auto", *CPU_VENDORS):
        problems.append(Problem("--cpu-vendor", f"auto or one of {', '.join(CPU_VENDORS)} (got {cpu_vendor!r})"))
    if gpu_name != "auto" and gpu_name.upper() not in GPUS:
        problems.append(Problem("--gpu", f"unknown GPU {gpu_name!r}; auto or one of {', '.join(GPUS)}"))
    if out.exists() and out.is_dir():
        problems.append(Problem("--out", f"{out} is a directory"))
    if problems:
        raise InputError(problems)
    out = claim_file(out, force, NCCL_HEAD)  # before any work: never over a file of the user's
    runs = []
    for path in files:
        try:
            runs.extend(parse_file(path, op=op, gpus_per_server=gpus_per_server))
        except InputError as exc:
            problems.extend(exc.problems)
    if problems:
        raise InputError(problems)
    ms, devices, notes = [], [], []
    for run in runs:
        name = _gpu_of(run, gpu_name)
        if gpu_name != "auto" and (own := _gpu_of(run, "auto")) and own != name:
            notes.append(
                f"{run.label}: ran on {own} ({run.gpu_name}); NVLink's nominal bandwidth taken from --gpu {name}"
            )
        spec = gpu(name) if name else None
        nvlink = spec.nvlink_bandwidth_gBps / 2 if spec else 0.0
        nic = nic_gbps or (spec.typical_nic_gbps if spec else 0.0)
        vendor = cpu_vendor if cpu_vendor != "auto" else server_cpu_vendor(name or "")
        ll_max = spec.nccl_ll_max_gBps if spec else 0.0  # NCCL's ceilings, as the simulator applies them
        across = NCCL_LL_MAX_ACROSS_GBPS["amd" if vendor == "amd" else "other"] if ll_max else (0.0, 0.0)
        try:
            ms.append(
                measurement(run, nvlink, nic, nvls=name in NVLS_GPUS, ll_max_gBps=ll_max, ll_max_across_gBps=across)
            )
        except InputError as exc:
            problems.extend(exc.problems)
            continue
        devices.append(_short_device(run.gpu_name) if run.gpu_name else (name or "?"))
        notes.extend(f"{run.label}: {note}" for note in run.notes)
    if problems:
        raise InputError(problems)

    cal = calibrate(ms)
    console.print(_files_table(cal, devices))
    for note in notes:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
    blocks = {}
    for tier, fit in cal.tiers.items():
        tier_files = [f for f in cal.files if f.measurement.tier == tier]
        block = {
            "bandwidth_efficiency": float(f"{fit.efficiency:.4g}"),
            "extra_latency_us": float(f"{fit.extra_latency_us:.4g}"),
            "source": _tier_source(tier_files),
        }
        try:
            blocks[tier] = TierCalibration.model_validate(block).model_dump()
        except ValidationError as exc:  # the fit keeps within the schema's ranges: this is a bug
            raise RuntimeError(f"the {tier} calibration does not fit the schema: {exc}") from exc
        console.print(
            f"[bold]{tier}[/]: bandwidth_efficiency {block['bandwidth_efficiency']}, extra_latency_us "
            f"{block['extra_latency_us']}  ({len(tier_files)} file(s); {fit.large_rows} large sizes, "
            f"{fit.small_rows} small)",
            highlight=False,
        )
        for note in fit.notes:
            console.print(f"  [yellow]note:[/] {escape(note)}", highlight=False)
    if "network" in cal.tiers and "nvlink" not in cal.tiers and any(f.measurement.per_server > 1 for f in cal.files):
        console.print(
            "  [yellow]note:[/] no single-node file: the network fit took NVLink at its nominal bandwidth and latency",
            highlight=False,
        )
    head = (
        f"{NCCL_HEAD}: per-tier corrections to the collective cost model\n"
        "# use it in a scenario: calibration: <this file>\n"
    )
    write_atomic(out, head + yaml.safe_dump({"calibration": blocks}, sort_keys=False, width=120))
    console.print(f"wrote {out} ({', '.join(blocks)})")
    return 0


def _bench_flags(device: str, dtype: str | None, repeats: int, out: Path) -> list[Problem]:
    """The flags `calibrate gemm` and `calibrate attention` share, checked before any work."""
    from ..calibration.gemm_bench import DTYPES

    problems: list[Problem] = []
    if device not in ("auto", "cpu", "cuda"):
        problems.append(Problem("--device", f"one of auto, cpu, cuda (got {device!r})"))
    if dtype is not None and dtype not in DTYPES:
        problems.append(Problem("--dtype", f"one of {', '.join(DTYPES)} (got {dtype!r})"))
    if repeats < 1:
        problems.append(Problem("--repeats", f"must be >= 1 (got {repeats})"))
    if out.exists() and out.is_dir():
        problems.append(Problem("--out", f"{out} is a directory"))
    return problems


def _torch_device(what: str, device: str):
    """torch, the device to time on, its name and the catalog GPU it stands for; exit 2 without torch or CUDA."""
    from ..calibration.gemm_bench import resolve_device

    try:
        import torch
    except ImportError:
        raise InputError(
            Problem(
                "torch", f"calibrate {what} and needs PyTorch: pip install 'aifabric[train]' (or pip install torch)"
            )
        ) from None
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError(Problem("--device", "cuda: torch sees no CUDA device (a CPU build, or no GPU)"))
    return (torch, *resolve_device(torch, device))


def _bench_progress(label: str):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=err_console,
        transient=True,
    )


@calibrate_app.command("gemm")
def gemm(
    device: str = typer.Option("auto", "--device", help="auto (CUDA when there is one), cpu or cuda"),
    dtype: str = typer.Option(None, "--dtype", help="bf16, fp16 or fp32 (default: bf16 on CUDA, fp32 on CPU)"),
    quick: bool = typer.Option(False, "--quick", help="a small grid (64 shapes up to 512): seconds, even on a CPU"),
    out: Path = typer.Option(Path("gemm-table.yaml"), "--out", "-o", help="the GEMM table to write"),
    repeats: int = typer.Option(5, "--repeats", help="timed samples per shape (the median is kept)"),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
) -> int:
    """Time torch.matmul over a grid of M, N, K on this machine; write a GEMM table for `calibration.gemm`."""
    from rich.markup import escape

    from ..calibration.gemm_bench import measure, shape_grid
    from ..kernels.calibration import GemmTable
    from ..report.files import write_atomic

    problems = _bench_flags(device, dtype, repeats, out)
    if problems:
        raise InputError(problems)
    out = claim_file(out, force, GEMM_HEAD)  # before any work: never over a file of the user's
    torch, dev, device_name, gpu_key = _torch_device("gemm times torch.matmul", device)
    dtype = dtype or ("bf16" if dev.type == "cuda" else "fp32")
    shapes = shape_grid(quick, dev.type)
    entries = []
    err_console.print(
        f"timing {len(shapes)} GEMM shapes ({dtype}) on {escape(device_name)} "
        "(Ctrl-C stops and writes the shapes measured so far)",
        highlight=False,
    )
    progress = _bench_progress("matmul")
    interrupted = False
    with progress:
        task = progress.add_task("", total=len(shapes))
        try:
            for entry in measure(torch, shapes, dev, dtype, repeats):
                entries.append(entry)
                progress.update(
                    task,
                    advance=1,
                    description=f"{entry.m}×{entry.n}×{entry.k}: {entry.flops_per_s / 1e12:.2f} TFLOP/s",
                )
        except KeyboardInterrupt:
            interrupted = True
    if not entries:
        raise Interrupted("no shape measured; nothing written") if interrupted else RuntimeError("no shapes")
    table = GemmTable(device_name, gpu_key, dtype, tuple(entries), str(torch.__version__))
    write_atomic(out, table.to_yaml())
    best = table.best()
    line = (
        f"best {best.flops_per_s / 1e12:.2f} TFLOP/s at {best.m}×{best.n}×{best.k}; "
        f"smallest shape {entries[0].flops_per_s / 1e12:.3f} TFLOP/s"
    )
    if gpu_key and dtype in GPUS[gpu_key].peak_tflops:
        peak = GPUS[gpu_key].peak_flops(dtype)
        line += f"; {best.flops_per_s / peak:.0%} of the {gpu_key}'s {dtype} peak ({peak / 1e12:g} TFLOP/s)"
    console.print(line, highlight=False)
    if interrupted:
        raise Interrupted(f"wrote {len(entries)} of {len(shapes)} shapes to {out} (a valid table)")
    console.print(
        f"wrote {out}: {len(entries)} shapes on {escape(device_name)}"
        + (f" (catalog GPU {gpu_key})" if gpu_key else ""),
        highlight=False,
    )
    return 0


@calibrate_app.command("attention")
def attention(
    device: str = typer.Option("auto", "--device", help="auto (CUDA when there is one), cpu or cuda"),
    dtype: str = typer.Option(None, "--dtype", help="bf16, fp16 or fp32 (default: bf16 on CUDA, fp32 on CPU)"),
    head_dim: list[int] = typer.Option(
        None, "--head-dim", help="head dimension to measure (repeatable; default 128, 32 with --quick)"
    ),
    backend: str = typer.Option(
        "auto",
        "--backend",
        help="the kernel torch must use: auto (its own choice), flash, cudnn (Transformer Engine's choice on Hopper "
        "and Blackwell), efficient or math",
    ),
    quick: bool = typer.Option(False, "--quick", help="a small grid (3 lengths up to 256): seconds, even on a CPU"),
    out: Path = typer.Option(Path("attention-table.yaml"), "--out", "-o", help="the attention table to write"),
    repeats: int = typer.Option(5, "--repeats", help="timed samples per point (the median is kept)"),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
) -> int:
    """Time fused attention (torch's scaled_dot_product_attention) by sequence length and head dimension, with and
    without the causal mask, forward and backward, on this machine; write a table for `calibration.attention`."""
    from rich.markup import escape

    from ..attention_rates import AttentionKernel
    from ..calibration.attention_bench import BACKENDS, KERNEL, grid, measure
    from ..kernels.attention_calibration import MEASURED, table_yaml
    from ..report.files import write_atomic

    problems = _bench_flags(device, dtype, repeats, out)
    if backend not in BACKENDS:
        problems.append(Problem("--backend", f"one of {', '.join(BACKENDS)} (got {backend!r})"))
    dims = sorted(set(head_dim or ((32,) if quick else (128,))))
    if any(not 8 <= d <= 512 for d in dims):
        problems.append(Problem("--head-dim", f"between 8 and 512 (got {', '.join(map(str, dims))})"))
    if problems:
        raise InputError(problems)
    out = claim_file(out, force, ATTENTION_HEAD)  # before any work: never over a file of the user's
    torch, dev, device_name, gpu_key = _torch_device("attention times torch's scaled_dot_product_attention", device)
    dtype = dtype or ("bf16" if dev.type == "cuda" else "fp32")
    seq_lens, tokens, hidden = grid(quick, dev.type)
    total = len(dims) * len(seq_lens)
    err_console.print(
        f"timing attention at {total} points ({dtype}, {tokens:,} tokens each, head dimension "
        f"{', '.join(map(str, dims))}) on {escape(device_name)} (Ctrl-C stops; nothing is written unless every "
        "length of a head dimension was measured)",
        highlight=False,
    )
    progress = _bench_progress("attention")
    points = []
    interrupted = False
    with progress:
        task = progress.add_task("", total=total)
        try:
            for point in measure(torch, tuple(dims), seq_lens, tokens, hidden, dev, dtype, repeats, backend=backend):
                points.append(point)
                fwd, fwd_c, bwd, bwd_c = point.tflops()
                progress.update(
                    task,
                    advance=1,
                    description=f"d {point.head_dim}, {point.seq_len} tokens: forward {fwd:.2f}, "
                    f"causal {fwd_c:.2f}, backward {bwd:.2f} TFLOP/s",
                )
        except KeyboardInterrupt:
            interrupted = True
        except RuntimeError as exc:  # the kernel asked for does not run here (device, dtype, head dimension, memory)
            if backend == "auto":
                raise
            msg = " ".join(str(exc).split())[:200]
            raise InputError(
                Problem("--backend", f"{backend}: torch could not run this kernel here on {device_name} ({msg})")
            ) from None
    complete = [d for d in dims if sum(p.head_dim == d for p in points) == len(seq_lens)]
    if not complete:
        raise (
            Interrupted("no head dimension measured at every length; nothing written")
            if interrupted
            else (RuntimeError("no points"))
        )
    rows = [tuple(tuple(p.tflops()[i] for p in points if p.head_dim == d) for d in complete) for i in range(4)]
    name = KERNEL if backend == "auto" else f"{KERNEL}, {backend} backend"
    kernel = AttentionKernel(MEASURED, seq_lens, rows[0], rows[1], rows[2], name, tuple(complete), rows[3])
    write_atomic(out, table_yaml(kernel, device_name, gpu_key, dtype, str(torch.__version__), tokens))
    d = complete[-1]
    at = seq_lens[-1]
    line = (
        f"head dimension {d}, {at} tokens: forward {kernel.tflops(at, False, False, d):.2f} "
        f"(causal {kernel.tflops(at, True, False, d):.2f}), backward {kernel.tflops(at, False, True, d):.2f} "
        f"(causal {kernel.tflops(at, True, True, d):.2f}) TFLOP/s"
    )
    console.print(line, highlight=False)
    if interrupted:
        raise Interrupted(f"wrote head dimension(s) {', '.join(map(str, complete))} to {out} (a valid table)")
    console.print(
        f"wrote {out}: {total} points on {escape(device_name)}" + (f" (catalog GPU {gpu_key})" if gpu_key else ""),
        highlight=False,
    )
    return 0
