"""Measured fused-attention throughput (`aifabric calibrate attention`) and how the compute model uses it.

The file is YAML:

```yaml
kind: aifabric-attention-table
version: 1
device: NVIDIA H100 80GB HBM3    # what torch reported
gpu: H100                        # the catalog entry it stands for ("" when none, e.g. a CPU)
dtype: bf16
torch: 2.13.0
kernel: torch.nn.functional.scaled_dot_product_attention
tokens: 16384                    # batch x sequence of every measurement
seq_lens: [512, 1024, 2048]      # ascending
head_dims: [128]                 # ascending; one row of rates per head dimension in each direction
forward_tflops: [[497.0, 574.0, 617.0]]
forward_causal_tflops: [[315.0, 410.0, 484.0]]
backward_tflops: [[305.0, 408.0, 465.0]]
backward_causal_tflops: [[193.0, 291.0, 365.0]]
```

FLOPs are counted as the catalog's measurements count them (attention_rates.py): 4 · s² · d · heads a
sequence forward, halved with the causal mask, x 2.5 backward. A scenario's `calibration.attention` replaces
the catalog's fused attention kernels for that run: every attention core is timed at the table's rates
(interpolated on log2 of the length and head dimension, the nearest measured point outside them).
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from ..attention_rates import AttentionKernel
from ..errors import InputError, Problem
from .calibration import read_table

TABLE_KIND = "aifabric-attention-table"
TABLE_VERSION = 1
DIRECTIONS = ("forward_tflops", "forward_causal_tflops", "backward_tflops", "backward_causal_tflops")
MEASURED = "measured"  # the kernel's name in a run that uses a table


def table_yaml(kernel: AttentionKernel, device: str, gpu: str, dtype: str, torch_version: str, tokens: int) -> str:
    """The file `aifabric calibrate attention` writes for a measured kernel."""
    data = {
        "kind": TABLE_KIND,
        "version": TABLE_VERSION,
        "device": device,
        "gpu": gpu,
        "dtype": dtype,
        "torch": torch_version,
        "kernel": kernel.source,
        "tokens": tokens,
        "seq_lens": list(kernel.seq_lens),
        "head_dims": list(kernel.head_dims),
    }
    rows = (kernel.forward_tflops, kernel.forward_causal_tflops, kernel.backward_tflops, kernel.backward_causal_tflops)
    for name, table in zip(DIRECTIONS, rows):
        data[name] = [[float(f"{v:.5g}") for v in row] for row in (table or ()) if row is not None]
    head = (
        f"# aifabric calibrate attention: measured fused-attention throughput on {device}\n"
        "# use it in a scenario: calibration: {attention: <this file>}\n"
    )
    return head + yaml.safe_dump(data, sort_keys=False, width=200, default_flow_style=None)


def load_attention_table(path: str | Path, field: str = "calibration.attention") -> tuple[AttentionKernel, str, str]:
    """(the measured kernel, the catalog GPU it was measured on or "", the device as torch named it). Every
    problem names the file and the key, and raises InputError."""
    p, data = read_table(path, field, TABLE_KIND, "an attention table", "attention")
    problems: list[Problem] = []

    def ascending_ints(key: str) -> tuple[int, ...]:
        raw = data.get(key)
        if (
            isinstance(raw, list)
            and raw
            and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in raw)
            and raw == sorted(set(raw))
        ):
            return tuple(raw)
        problems.append(Problem(field, f"{p}: {key} must be a non-empty ascending list of positive integers"))
        return ()

    seq_lens, head_dims = ascending_ints("seq_lens"), ascending_ints("head_dims")
    rows: dict[str, tuple[tuple[float, ...], ...]] = {}
    for key in DIRECTIONS:
        raw = data.get(key)
        if not isinstance(raw, list):
            raw = None
        good = (
            raw is not None
            and len(raw) == len(head_dims)
            and all(
                isinstance(row, list)
                and len(row) == len(seq_lens)
                and all(
                    isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0 for v in row
                )
                for row in raw
            )
        )
        if not good or raw is None:
            problems.append(
                Problem(
                    field,
                    f"{p}: {key} must hold one row per head dimension ({len(head_dims)}), each one positive "
                    f"rate (TFLOP/s) per sequence length ({len(seq_lens)})",
                )
            )
            continue
        rows[key] = tuple(tuple(float(v) for v in row) for row in raw)
    if problems:
        raise InputError(problems)
    kernel = AttentionKernel(
        MEASURED,
        seq_lens,
        rows["forward_tflops"],
        rows["forward_causal_tflops"],
        rows["backward_tflops"],
        f"measured on {data.get('device') or 'a device'} ({data.get('dtype', '')}, {data.get('kernel', '')}): {p.name}",
        head_dims,
        rows["backward_causal_tflops"],
    )
    return kernel, str(data.get("gpu", "") or ""), str(data.get("device", "") or "")
