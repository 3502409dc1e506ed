"""Pipeline schedules: the order in which each stage runs forward (F) and backward (B) passes of the
micro-batches, and the time-step table of who works when (seeds Ch. 8; GPipe: Huang et al. 2019;
1F1B: Narayanan et al. 2019 (PipeDream-Flush); interleaved 1F1B: Narayanan et al. 2021).

Stages and micro-batches are 0-based here; tables print them 1-based as the seeds do.

- gpipe: every forward, then every backward.
- 1f1b: p - s - 1 warm-up forwards on stage s, then alternate one forward and one backward, then drain.
  Same bubble as GPipe, (p - 1) / (m + p - 1), but at most p micro-batches of activations in flight.
- interleaved: each stage holds v model chunks (virtual stages s, s + p, ...); the bubble shrinks to
  (p - 1) / (v m + p - 1) of the time. Needs m divisible by p (Megatron's rule).
- book / blog: the seeds' 4-GPU example, where a GPU can do two things in one time step: the last stage
  runs forward and backward of a micro-batch in the same step (book) or backward one step later (blog).
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEDULES = ("gpipe", "1f1b", "interleaved", "book", "blog")
F, B = "F", "B"


@dataclass(frozen=True)
class PassRef:
    kind: str  # "F" or "B"
    micro_batch: int
    chunk: int = 0  # model chunk of the stage (interleaved); virtual stage = chunk x p + stage

    def label(self, chunks: int = 1) -> str:
        """F3 = forward of micro-batch 3; with several chunks per stage F3.2 = of the stage's second chunk."""
        return f"{self.kind}{self.micro_batch + 1}" + (f".{self.chunk + 1}" if chunks > 1 else "")


def _check(p: int, m: int, v: int, schedule: str) -> None:
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; one of {', '.join(SCHEDULES)}")
    if p < 1 or m < 1 or v < 1:
        raise ValueError("stages, micro-batches and chunks must be >= 1")
    if schedule == "interleaved" and m % p:
        raise ValueError(f"the interleaved schedule needs micro-batches ({m}) divisible by stages ({p})")


def _interleaved_id(k: int, p: int, v: int, forward: bool) -> tuple[int, int]:
    """Megatron's mapping of the k-th forward (backward) of a stage to (micro-batch, chunk)."""
    group, within = divmod(k, p * v)
    chunk = within // p
    if not forward:
        chunk = v - 1 - chunk
    return group * p + within % p, chunk


def stage_order(schedule: str, p: int, m: int, stage: int, v: int = 1) -> list[PassRef]:
    """The passes stage `stage` runs, in order."""
    _check(p, m, v, schedule)
    if schedule in ("gpipe", "book", "blog"):
        return [PassRef(F, i) for i in range(m)] + [PassRef(B, i) for i in range(m)]
    if schedule == "1f1b":
        v = 1
    total = m * v
    if schedule == "1f1b":
        warmup = min(p - stage - 1, total)
    else:
        warmup = min((p - stage - 1) * 2 + (v - 1) * p, total)
    fwd = [PassRef(F, *_interleaved_id(k, p, v, True)) for k in range(total)]
    bwd = [PassRef(B, *_interleaved_id(k, p, v, False)) for k in range(total)]
    order = fwd[:warmup]
    for i in range(total - warmup):
        order += [fwd[warmup + i], bwd[i]]
    return order + bwd[total - warmup :]


def stage_bounds(n_units: int, pp: int, stage: int) -> tuple[int, int]:
    """[start, stop) of the units (layers) held by pipeline stage `stage`: contiguous, the first stages get
    the extra (aifabric.train splits its small models so)."""
    base, extra = divmod(n_units, pp)
    start = stage * base + min(stage, extra)
    return start, start + base + (1 if stage < extra else 0)


@dataclass(frozen=True)
class StepTable:
    """steps[t][s] = the passes stage s runs in time step t (empty = idle)."""

    schedule: str
    stages: int
    micro_batches: int
    chunks: int
    steps: list[list[list[PassRef]]]

    def active(self, t: int) -> list[int]:
        return [s for s in range(self.stages) if self.steps[t][s]]

    def utilization(self, t: int) -> float:
        return len(self.active(t)) / self.stages

    @property
    def overall_utilization(self) -> float:
        busy = sum(len(self.active(t)) for t in range(len(self.steps)))
        return busy / (self.stages * len(self.steps)) if self.steps else 0.0

    @property
    def bubble_fraction(self) -> float:
        return 1.0 - self.overall_utilization


def bubble_fraction(p: int, m: int, v: int = 1) -> float:
    """Idle share of a GPipe / 1F1B pipeline, (p - 1) / (m + p - 1); interleaved: (p - 1) / (v m + p - 1)."""
    return (p - 1) / (v * m + p - 1)


def _closed_form(schedule: str, p: int, m: int) -> list[list[list[PassRef]]]:
    """The seeds' examples: forward of (s, i) in step s + i; backward in step i + 2p - 1 - s (book: the last
    stage does forward and backward of a micro-batch in the same step), one step later in the blog."""
    delay = 0 if schedule == "book" else 1
    n = m + 2 * p - 2 + delay
    steps: list[list[list[PassRef]]] = [[[] for _ in range(p)] for _ in range(n)]
    for s in range(p):
        for i in range(m):
            steps[s + i][s].append(PassRef(F, i))
            steps[i + 2 * p - 2 - s + delay][s].append(PassRef(B, i))
    return steps


def step_table(schedule: str, p: int, m: int, v: int = 1, backward_steps: int = 1) -> StepTable:
    """Run the schedule in unit time steps: a forward (of one chunk) takes one step, a backward
    `backward_steps`; a pass starts once its input is ready (the previous virtual stage's forward, the
    next one's backward) and the stage has finished its previous pass."""
    _check(p, m, v, schedule)
    if schedule in ("book", "blog"):
        return StepTable(schedule, p, m, 1, _closed_form(schedule, p, m))
    if schedule != "interleaved":
        v = 1
    orders = [stage_order(schedule, p, m, s, v) for s in range(p)]
    last_virtual = p * v - 1
    finish: dict[tuple[str, int, int], int] = {}  # (kind, micro-batch, virtual stage) -> step it ends
    nxt = [0] * p
    busy_until = [0] * p
    steps: list[list[list[PassRef]]] = []
    t = 0
    while any(nxt[s] < len(orders[s]) for s in range(p)):
        row: list[list[PassRef]] = [[] for _ in range(p)]
        for s in range(p):
            if busy_until[s] > t:
                row[s] = [orders[s][nxt[s] - 1]]
                continue
            if nxt[s] >= len(orders[s]):
                continue
            ref = orders[s][nxt[s]]
            vs = ref.chunk * p + s
            if ref.kind == F:
                dep = (F, ref.micro_batch, vs - 1) if vs > 0 else None
            else:
                dep = (B, ref.micro_batch, vs + 1) if vs < last_virtual else (F, ref.micro_batch, vs)
            if dep is not None and finish.get(dep, t + 1) > t:
                continue
            dur = 1 if ref.kind == F else backward_steps
            finish[(ref.kind, ref.micro_batch, vs)] = t + dur
            busy_until[s] = t + dur
            nxt[s] += 1
            row[s] = [ref]
        steps.append(row)
        t += 1
        if t > 10 * (m * v * (1 + backward_steps) + p) + 10:
            raise RuntimeError("pipeline schedule did not finish (deadlock)")
    return StepTable(schedule, p, m, v, steps)


@dataclass(frozen=True)
class StageTransfer:
    """What a pass hands on when it ends: activations y forward, errors E backward (seeds' notation)."""

    what: str  # "y" (activations) or "E" (error / activation gradient)
    micro_batch: int
    src_stage: int
    dst_stage: int


def step_transfers(table: StepTable, t: int) -> list[StageTransfer]:
    """Transfers sent at the end of step t: forward to the next virtual stage, backward to the previous."""
    p, last = table.stages, table.stages * table.chunks - 1
    out = []
    for s, cell in enumerate(table.steps[t]):
        for ref in cell:
            vs = ref.chunk * p + s
            if t + 1 < len(table.steps) and ref in table.steps[t + 1][s]:
                continue  # a multi-step backward sends when it ends
            if ref.kind == F and vs < last:
                out.append(StageTransfer("y", ref.micro_batch, s, (vs + 1) % p))
            elif ref.kind == B and vs > 0:
                out.append(StageTransfer("E", ref.micro_batch, s, (vs - 1) % p))
    return out
