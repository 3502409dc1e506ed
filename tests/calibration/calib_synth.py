"""nccl-tests output written the way nccl-tests writes it (src/common.cu), from times the test chooses:
the synthetic files the parser and the fit are checked on."""

from __future__ import annotations

from aifabric.collectives.cost import busbw_factor

PROGRAMS = {
    "all-reduce": "all_reduce_perf",
    "all-gather": "all_gather_perf",
    "reduce-scatter": "reduce_scatter_perf",
    "broadcast": "broadcast_perf",
    "reduce": "reduce_perf",
    "all-to-all": "alltoall_perf",
    "send-recv": "sendrecv_perf",
}


def float_str(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: %.2f if it fits the width, else %.1f, %.0f, then exponent."""
    for fmt in (f"%{width}.2f", f"%{width}.1f", f"%{width}.0f"):
        text = fmt % value
        if len(text) <= width:
            return text
    return (f"%{width}.1e" if width >= 7 else f"%{width}.0e") % value


def row(
    size: int,
    type_bytes: int,
    redop: str,
    root: int,
    t_oop_us: float,
    t_ip_us: float,
    factor: float,
    wrong_ip: str = "0",
) -> str:
    def body(t: float, wrong: str) -> str:
        algbw = size / t / 1e3 if t > 0 else 0.0
        return f"  {float_str(t, 7)}  {float_str(algbw, 6)}  {float_str(algbw * factor, 6)}  " + (
            f"{wrong:>6}" if wrong != "N/A" else "   N/A"
        )

    return (
        f"{size:12d}  {size // type_bytes:12d}  {'float':>8}  {redop:>6}  {root:6d}"
        + body(t_oop_us, "0")
        + body(t_ip_us, wrong_ip)
    )


def output(
    op: str,
    nodes: int,
    gpus_per_node: int,
    sizes,
    times_us,
    *,
    gpu: str = "NVIDIA H100 80GB HBM3",
    new_format: bool = True,
    gpus_per_process: int = 1,
    noise: dict[int, str] | None = None,
) -> str:
    """A whole output: header, one rank line per GPU (processes of `gpus_per_process` GPUs, as -g), rows.
    `noise`: lines inserted before row i."""
    program = PROGRAMS[op]
    n = nodes * gpus_per_node
    lines = []
    if new_format:
        lines += [
            "# nccl-tests version 2.18.5 nccl-headers=22809 nccl-library=22809",
            f"# Collective test starting: {program}",
        ]
    lines += [
        f"# nThread 1 nGpus {gpus_per_process} minBytes {min(sizes)} maxBytes {max(sizes)} step: 2(factor) "
        "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0" + (" unalign: 0" if new_format else ""),
        "#",
        "# Using devices",
    ]
    for r in range(n):
        host, local = divmod(r, gpus_per_node)
        pid = 4000 + r // gpus_per_process
        lines.append(
            f"#  Rank {r:2d} Group {0:2d} Pid {pid:6d} on {f'node-{host}':>10} device {local:2d} "
            f"[0000:{0x10 + local:02x}:00] {gpu}"
        )
    lines += [
        "#",
        "#                                                              out-of-place                       "
        "in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
        "   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)"
        "  (GB/s)       ",
    ]
    factor = busbw_factor(op, n)
    redop = "sum" if op in ("all-reduce", "reduce-scatter", "reduce") else "none"
    root = 0 if op in ("broadcast", "reduce") else -1
    for i, (s, t) in enumerate(zip(sizes, times_us)):
        if noise and i in noise:
            lines.append(noise[i])
        lines.append(row(s, 4, redop, root, t, t * 1.002, factor))
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.0 ", "#"]
    if new_format:
        lines += [f"# Collective test concluded: {program}", "#"]
    return "\n".join(lines) + "\n"
