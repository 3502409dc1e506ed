"""Symbolic execution of a schedule: who sends what to whom, and what every rank holds after each step.

Chunks are lettered A, B, C, ... and a rank's original copy of chunk X is written X<rank> (the book's
Ch. 14 notation: A0 is rank 0's copy of chunk A). A partial sum lists its terms in the order they
were added ("D3+D0": rank 0 received D3 and added its own D0).
"""

from __future__ import annotations

from dataclasses import dataclass

from .schedule import ALL, REDUCE, Schedule


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
    """Symbolic execution: every chunk a rank holds as the list of ranks whose copies were added into it.
    A move carrying a run of chunks is shown as one send per chunk."""
    n = len(schedule.ranks)
    state: dict[int, list[tuple[int, ...]]] = {r: [(r,) for _ in range(schedule.n_chunks)] for r in schedule.ranks}
    everyone = set(schedule.ranks)

    def final(c: int, terms: tuple[int, ...]) -> bool:
        """Reduced chunks: every rank's copy added exactly once; others: the source's copy."""
        src = int(schedule.source[c])
        return (len(terms) == n and set(terms) == everyone) if src == ALL else terms == (src,)

    out = []
    for k, step in enumerate(schedule.steps()):
        per_chunk = [(m, c) for m in step for c in range(m.chunk, m.chunk + m.count)]
        sent = [state[m.src][c] for m, c in per_chunk]
        sends = []
        for (m, c), terms in zip(per_chunk, sent):
            sends.append(SentChunk(m.src, m.dst, c, schedule.chunk_elements(c), describe(c, terms, n)))
            own = state[m.dst][c]
            state[m.dst][c] = terms + own if m.mode == REDUCE else terms
        holdings = {r: tuple(describe(c, state[r][c], n) for c in range(schedule.n_chunks)) for r in schedule.ranks}
        full = {r: tuple(c for c in range(schedule.n_chunks) if final(c, state[r][c])) for r in schedule.ranks}
        out.append(StepExplanation(k, step[0].phase if step else "", tuple(sends), holdings, full))
    return out
