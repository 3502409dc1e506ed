"""Symbolic execution of a schedule: who sends what to whom, and what every rank holds after each step.

Chunks are lettered A, B, C, ... and a rank's original copy of chunk X is written X<rank> (the seeds'
Ch. 14 notation: A0 is rank 0's copy of chunk A). A partial sum lists its terms in the order they
were added ("D3+D0": rank 0 received D3 and added its own D0).
"""

from __future__ import annotations

from dataclasses import dataclass

from .schedule import REDUCE, Schedule


def chunk_letter(chunk: int) -> str:
    if chunk < 26:
        return chr(ord("A") + chunk)
    return f"c{chunk}"


def describe(chunk: int, terms: tuple[int, ...], group_size: int) -> str:
    x = chunk_letter(chunk)
    if len(terms) == 1:
        return f"{x}{terms[0]}"
    body = "+".join(f"{x}{t}" for t in terms) if len(terms) <= 8 else f"{len(terms)} terms"
    if len(terms) == group_size:
        return f"{x} (full sum: {body})"
    return f"{x}={body}"


@dataclass(frozen=True)
class SentChunk:
    src: int
    dst: int
    chunk: int
    elements: int
    value: str  # what was sent, e.g. "D3+D0"


@dataclass(frozen=True)
class StepExplanation:
    step: int
    phase: str
    sends: tuple[SentChunk, ...]
    holdings: dict[int, tuple[str, ...]]  # rank -> description of every chunk it holds, in chunk order
    full: dict[int, tuple[int, ...]]  # rank -> chunks it holds fully reduced


def explain(schedule: Schedule) -> list[StepExplanation]:
    n = len(schedule.ranks)
    state = {r: [(r,) for _ in range(schedule.n_chunks)] for r in schedule.ranks}
    out = []
    for k, step in enumerate(schedule.steps()):
        sent = [state[m.src][m.chunk] for m in step]
        sends = []
        for m, terms in zip(step, sent):
            sends.append(SentChunk(m.src, m.dst, m.chunk, schedule.chunk_elements(m.chunk),
                                   describe(m.chunk, terms, n)))
            own = state[m.dst][m.chunk]
            state[m.dst][m.chunk] = terms + own if m.mode == REDUCE else terms
        holdings = {r: tuple(describe(c, state[r][c], n) for c in range(schedule.n_chunks)) for r in schedule.ranks}
        full = {r: tuple(c for c in range(schedule.n_chunks) if len(state[r][c]) == n) for r in schedule.ranks}
        out.append(StepExplanation(k, step[0].phase if step else "", tuple(sends), holdings, full))
    return out
