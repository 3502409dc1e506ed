"""Measured GEMM throughputs (`aifabric calibrate gemm`) and how the compute model uses them.

The file is YAML:

```yaml
kind: aifabric-gemm-table
version: 1
device: NVIDIA H100 80GB HBM3     # what torch reported
gpu: H100                         # the catalog entry it stands for ("" when none, e.g. a CPU)
dtype: bf16
torch: 2.13.0
entries:                          # one per measured shape
  - {m: 8192, n: 8192, k: 8192, batch: 1, time_s: 0.00139, tflops: 791.2}
```

A shape that was measured takes its measured throughput. Any other shape takes the throughput of the
nearest measured shape (in log2 of M, N, K) scaled by the tile model's ratio between the two shapes
(kernels/gemm.py): the table sets the device's level, the model carries the shape's tile, wave and
memory effects from one shape to its neighbour.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import InputError, Problem

TABLE_KIND = "aifabric-gemm-table"
TABLE_VERSION = 1


@dataclass(frozen=True)
class GemmEntry:
    m: int
    n: int
    k: int
    batch: int
    time_s: float

    @property
    def flops_per_s(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.batch / self.time_s


@dataclass(frozen=True)
class GemmTable:
    device: str
    gpu: str
    dtype: str
    entries: tuple[GemmEntry, ...]
    torch_version: str = ""
    model_time_s: object = None  # (m, n, k, batch) -> the tile model's time on the scenario's GPU (set by the user)

    def best(self) -> GemmEntry:
        return max(self.entries, key=lambda e: e.flops_per_s)

    def nearest(self, m: int, n: int, k: int, batch: int = 1) -> GemmEntry:
        def dist(e: GemmEntry) -> float:
            return sum(math.log2(a / b) ** 2 for a, b in ((m, e.m), (n, e.n), (k, e.k), (batch, e.batch)))

        return min(self.entries, key=dist)

    def flops_per_s(self, m: int, n: int, k: int, batch: int = 1) -> float:
        """The throughput the table gives this shape (see the module's docstring)."""
        e = self.nearest(m, n, k, batch)
        measured = e.flops_per_s
        if (e.m, e.n, e.k, e.batch) == (m, n, k, batch) or self.model_time_s is None:
            return measured
        model = self.model_time_s
        here = 2.0 * m * n * k * batch / model(m, n, k, batch)
        there = 2.0 * e.m * e.n * e.k * e.batch / model(e.m, e.n, e.k, e.batch)
        return measured * here / there

    def with_model(self, model_time_s) -> GemmTable:
        return GemmTable(self.device, self.gpu, self.dtype, self.entries, self.torch_version, model_time_s)

    def to_yaml(self) -> str:
        data = {
            "kind": TABLE_KIND,
            "version": TABLE_VERSION,
            "device": self.device,
            "gpu": self.gpu,
            "dtype": self.dtype,
            "torch": self.torch_version,
            "entries": [
                {
                    "m": e.m,
                    "n": e.n,
                    "k": e.k,
                    "batch": e.batch,
                    "time_s": float(f"{e.time_s:.6g}"),
                    "tflops": round(e.flops_per_s / 1e12, 3),
                }
                for e in self.entries
            ],
        }
        head = (
            f"# aifabric calibrate gemm: measured matrix-multiply throughput on {self.device}\n"
            "# use it in a scenario: calibration: {gemm: <this file>}\n"
        )
        return head + yaml.safe_dump(data, sort_keys=False, width=200)


def read_table(path: str | Path, field: str, kind: str, what: str, command: str) -> tuple[Path, dict]:
    """A measured table's YAML mapping, checked to be `what` (`kind`, as `aifabric calibrate <command>` writes it);
    an unreadable file, invalid YAML (with its line) or another kind raises InputError naming the file."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(Problem(field, f"cannot read {p}: {exc.strerror or exc}")) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise InputError(Problem(field, f"{p}{where}: not valid YAML")) from None
    if not isinstance(data, dict) or data.get("kind") != kind:
        raise InputError(
            Problem(field, f"{p}: not {what} (expected kind: {kind}, as `aifabric calibrate {command}` writes)")
        )
    return p, data


def load_gemm_table(path: str | Path, field: str = "calibration.gemm") -> GemmTable:
    """Read a table; every problem names the file (and the entry) and raises InputError."""
    p, data = read_table(path, field, TABLE_KIND, "a GEMM table", "gemm")
    problems: list[Problem] = []
    entries = []
    raw = data.get("entries")
    if not isinstance(raw, list) or not raw:
        raise InputError(Problem(field, f"{p}: entries must be a non-empty list"))
    for i, row in enumerate(raw):
        try:
            e = GemmEntry(int(row["m"]), int(row["n"]), int(row["k"]), int(row.get("batch", 1)), float(row["time_s"]))
        except (TypeError, KeyError, ValueError):
            problems.append(Problem(f"{field}", f"{p}: entries[{i}] needs integer m, n, k (batch) and a number time_s"))
            continue
        if min(e.m, e.n, e.k, e.batch) < 1 or not e.time_s > 0:
            problems.append(Problem(field, f"{p}: entries[{i}] needs m, n, k, batch >= 1 and time_s > 0"))
            continue
        entries.append(e)
    if problems:
        raise InputError(problems)
    return GemmTable(
        str(data.get("device", "")),
        str(data.get("gpu", "") or ""),
        str(data.get("dtype", "")),
        tuple(entries),
        str(data.get("torch", "")),
    )
