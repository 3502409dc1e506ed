"""`aifabric collective`: one collective, step by step (--explain) or timed on a fabric."""

from __future__ import annotations

import typer
from rich.table import Table

from ..collectives import ring_all_reduce, snake_ring
from ..collectives.explain import chunk_letter, explain
from ..errors import InputError, Problem
from .app import app
from .console import make_console

console = make_console()
collective_app = typer.Typer(help="One collective on a fabric: step tables (--explain), timing.", no_args_is_help=True)
app.add_typer(collective_app, name="collective")

EXPLAIN_MAX_RANKS = 32


def _network(src: int, dst: int, gpus_per_server: int) -> str:
    if src // gpus_per_server == dst // gpus_per_server:
        return "NVLink"
    a, b = src % gpus_per_server, dst % gpus_per_server
    return f"rail {a}" if a == b else f"rail {a} → spine → rail {b}"


@collective_app.command("allreduce")
def allreduce(
    ranks: int = typer.Option(4, "--ranks", "-n", help="ranks in the group"),
    elements: int = typer.Option(1024, "--elements", help="elements in each rank's buffer"),
    gpus_per_server: int = typer.Option(8, "--gpus-per-server", help="ranks per server (NVLink inside)"),
    explain_steps: bool = typer.Option(False, "--explain", help="print every step: who sends what, who holds what"),
) -> int:
    """Ring AllReduce = ReduceScatter + AllGather, 2(n-1) steps."""
    problems = []
    if ranks < 1:
        problems.append(Problem("--ranks", f"must be >= 1 (got {ranks})"))
    if elements < 0:
        problems.append(Problem("--elements", f"must be >= 0 (got {elements})"))
    if gpus_per_server < 1:
        problems.append(Problem("--gpus-per-server", f"must be >= 1 (got {gpus_per_server})"))
    if explain_steps and ranks > EXPLAIN_MAX_RANKS:
        problems.append(Problem("--ranks", f"--explain prints per-rank tables: at most {EXPLAIN_MAX_RANKS} ranks"))
    if problems:
        raise InputError(problems)
    ring = snake_ring(range(ranks), lambda r: r // gpus_per_server, lambda r: r % gpus_per_server)
    sched = ring_all_reduce(ring, elements)
    sizes = sorted({sched.chunk_elements(c) for c in range(sched.n_chunks)})
    console.print(
        f"[bold]ring AllReduce[/]: {ranks} ranks, {elements} elements per rank, {sched.n_chunks} chunks of "
        f"{' or '.join(map(str, sizes))} elements; ring {' → '.join(map(str, ring))} → {ring[0]}; "
        f"{ranks - 1} ReduceScatter + {ranks - 1} AllGather = {sched.n_steps} steps"
    )
    if not explain_steps:
        per_rank = sum(sched.chunk_elements(m.chunk) for m in sched.moves if m.src == ring[0])
        console.print(f"each rank sends {per_rank} elements = 2(n−1)/n × {elements}")
        return 0
    letters = [chunk_letter(c) for c in range(sched.n_chunks)]
    for st in explain(sched):
        phase_step = st.step + 1 if st.step < ranks - 1 else st.step - (ranks - 1) + 1
        sends = Table(title=f"step {st.step + 1}: {st.phase} iteration {phase_step}", title_justify="left")
        for col in ("sender", "receiver", "chunk", "value sent", "elements", "network"):
            sends.add_column(col)
        for s in st.sends:
            sends.add_row(f"rank {s.src}", f"rank {s.dst}", letters[s.chunk], s.value, str(s.elements),
                          _network(s.src, s.dst, gpus_per_server))
        console.print(sends)
        held = Table(title=f"after step {st.step + 1}: what each rank holds (bold = full sum)", title_justify="left")
        held.add_column("rank")
        for x in letters:
            held.add_column(x)
        for r in ring:
            cells = [f"[bold]{h}[/]" if c in st.full[r] else h for c, h in enumerate(st.holdings[r])]
            held.add_row(str(r), *cells)
        console.print(held)
        if st.step == ranks - 2:
            owners = ", ".join(f"rank {r} holds {letters[c]}" for r in sorted(ring) for c in st.full[r])
            console.print(f"ReduceScatter done: {owners} (fully reduced)\n")
    console.print(
        f"AllReduce done: every rank holds all {elements} summed elements; divide by {ranks} for the average "
        "(local, no communication)."
    )
    return 0
