"""The communication trace: every collective and point-to-point transfer of every rank.

A trace is JSON lines (docs/train.md), one file per rank (`trace-rank<R>.jsonl`, written by the rank
itself, so it works the same under torchrun on many nodes) merged by the launcher into `trace.jsonl`.
Each line is one record with a `kind`:

- `meta`: rank, world_size, layout {dp, tp, pp}, model, schedule, micro_batches, batch_size, steps.
- `comm`: rank, seq (per-rank order), op (all-reduce | all-gather | broadcast | send | recv), group
  (global ranks, sorted for collectives; [src, dst] for send/recv), dtype, elements, bytes (nccl-tests
  convention: the whole buffer; for all-gather the gathered output), tag (what moved, e.g.
  `grad-bucket0`, `tp/fwd/all-gather`, `pp/act`), step, start_s / end_s (Unix time; a non-blocking op
  ends when its completion is observed), async_op (true: launched without waiting, e.g. a gradient
  bucket during backward).
- `step`: rank, step, start_s, end_s, loss (the rank's share of the global-batch loss; None off the last
  pipeline stage).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TRACE_FILE = "trace.jsonl"
OPS = ("all-reduce", "all-gather", "broadcast", "send", "recv")


@dataclass
class Tracer:
    """Records in memory (no I/O on the training path); `write` at the end. `enabled=False` records
    nothing but still counts operations for the launcher's hang report."""

    rank: int
    enabled: bool = True
    meta: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    step: int = 0
    seq: int = 0
    progress: Any = None  # shared array [ops entered, step] per rank, set by the launcher

    def begin(
        self, op: str, group: tuple[int, ...], dtype: str, elements: int, size_bytes: int, tag: str
    ) -> dict[str, Any] | None:
        self.seq += 1
        if self.progress is not None:
            self.progress[2 * self.rank] = self.seq
        if not self.enabled:
            return None
        return {
            "rank": self.rank,
            "seq": self.seq,
            "op": op,
            "group": list(group),
            "dtype": dtype,
            "elements": elements,
            "bytes": size_bytes,
            "tag": tag,
            "step": self.step,
            "start_s": time.time(),
            "end_s": 0.0,
            "async_op": False,
            "kind": "comm",
        }

    def end(self, ev: dict[str, Any] | None) -> None:
        if ev is None:
            return
        ev["end_s"] = time.time()
        self.events.append(ev)

    def set_step(self, step: int) -> None:
        self.step = step
        if self.progress is not None:
            self.progress[2 * self.rank + 1] = step

    def record_step(self, step: int, start_s: float, end_s: float, loss: float | None) -> None:
        self.events.append(
            {"kind": "step", "rank": self.rank, "step": step, "start_s": start_s, "end_s": end_s, "loss": loss}
        )

    def write(self, out_dir: Path) -> Path:
        path = Path(out_dir) / f"trace-rank{self.rank}.jsonl"
        lines = [json.dumps({"kind": "meta", "rank": self.rank, **self.meta})]
        lines += [json.dumps(e) for e in sorted(self.events, key=lambda e: (e["start_s"], e.get("seq", 0)))]
        tmp = path.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        tmp.replace(path)
        return path


def merge_rank_traces(out_dir: Path, world_size: int) -> Path:
    """Concatenate the per-rank files into trace.jsonl (rank order) and remove them."""
    out_dir = Path(out_dir)
    parts = [out_dir / f"trace-rank{r}.jsonl" for r in range(world_size)]
    text = "".join(p.read_text(encoding="utf-8") for p in parts if p.exists())
    path = out_dir / TRACE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    for p in parts:
        p.unlink(missing_ok=True)
    return path


@dataclass(frozen=True)
class Trace:
    meta: dict[int, dict[str, Any]]  # per rank
    comms: dict[int, list[dict[str, Any]]]  # per rank, in seq order
    steps: dict[int, list[dict[str, Any]]]

    @property
    def world_size(self) -> int:
        return int(next(iter(self.meta.values()))["world_size"]) if self.meta else len(self.comms)


def read_trace(path: str | Path) -> Trace:
    """Read trace.jsonl (or a run directory holding one). Raises InputError naming the line on bad input."""
    from ..errors import InputError

    def text(f: Path) -> str:
        try:
            return f.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            line = f.read_bytes()[: exc.start].count(b"\n") + 1
            raise InputError(f"{f} line {line}: not UTF-8 text ({exc.reason}): not a trace file") from None
        except OSError as exc:
            raise InputError(f"{f}: cannot read: {exc.strerror or exc}") from None

    path = Path(path)
    if path.is_dir():
        rank_files = sorted(path.glob("trace-rank*.jsonl"))
        if not (path / TRACE_FILE).exists() and rank_files:  # straight from torchrun: one file per rank
            return _read_lines(
                path, [(f, n, line) for f in rank_files for n, line in enumerate(text(f).splitlines(), 1)]
            )
        path = path / TRACE_FILE
    if not path.exists():
        raise InputError(f"{path}: no such trace file")
    return _read_lines(path, [(path, n, line) for n, line in enumerate(text(path).splitlines(), 1)])


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number in JSON")


def _read_lines(where: Path, lines: list[tuple[Path, int, str]]) -> Trace:
    """Every record checked (trace_check): InputError listing each problem with its file and line."""
    from ..errors import InputError, Problem
    from .trace_check import LINE, cap, record_problems, trace_problems

    meta: dict[int, dict[str, Any]] = {}
    comms: dict[int, list[dict[str, Any]]] = {}
    steps: dict[int, list[dict[str, Any]]] = {}
    problems: list[Problem] = []
    for path, n, line in lines:
        if not line.strip():
            continue
        try:
            rec = json.loads(line, parse_constant=_no_constant)  # strict JSON: no NaN, Infinity
        except (ValueError, RecursionError) as exc:
            problems.append(Problem(f"{path} line {n}", f"not a JSON record ({str(exc)[:120]})"))
            continue
        bad = record_problems(rec, OPS)
        if bad:
            problems += [Problem(f"{path} line {n}", b) for b in bad]
            if len(problems) > 2 * 50:
                break
            continue
        rec[LINE] = (str(path), n)
        kind, rank = rec["kind"], rec["rank"]
        if kind == "meta":
            meta[rank] = rec
        elif kind == "comm":
            comms.setdefault(rank, []).append(rec)
        else:
            steps.setdefault(rank, []).append(rec)
    if not problems and not meta and not comms:
        raise InputError(f"{where}: empty trace")
    if not problems:
        problems = trace_problems(meta, comms, steps)
    if problems:
        raise InputError(cap([p if p.path else Problem(str(where), p.message) for p in problems]))
    for lst in comms.values():
        lst.sort(key=lambda e: e["seq"])
    return Trace(meta, comms, steps)


def tracer_cost_s(n: int = 20_000) -> float:
    """The tracer's own cost per operation (begin + end), without any communication."""
    t = Tracer(0)
    t0 = time.perf_counter()
    for _ in range(n):
        t.end(t.begin("all-reduce", (0, 1), "float32", 100, 400, "grad-bucket0"))
    return (time.perf_counter() - t0) / n
