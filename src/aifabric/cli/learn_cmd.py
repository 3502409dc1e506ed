"""learn: the book's Chapters 1-8 worked through with real tensors (docs/learn.md)."""

from __future__ import annotations

import typer

from ..errors import InputError, Problem
from ..learn.names import TOPICS
from .app import app
from .console import make_console

console = make_console()

TOPIC_HELP = " | ".join(TOPICS)


def need_torch(what: str) -> None:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise InputError(
            Problem(
                what,
                "needs PyTorch: python -m pip install torch (the CPU build: --index-url "
                "https://download.pytorch.org/whl/cpu), then python -m pip install "
                "'aifabric[train]'",
            )
        )


@app.command()
def learn(
    topic: str = typer.Argument(None, help=f"{TOPIC_HELP} (none: the list of topics)"),
    explain: bool = typer.Option(False, "--explain", help="say how each number is computed, in the book's words"),
    values: list[str] = typer.Option(
        None,
        "--values",
        help="your own inputs instead of the book's: NAME=VALUE (repeatable; several "
        "separated by spaces; a list comma-separated, e.g. logits=1,2,3). "
        "`aifabric learn TOPIC --explain` lists the names",
    ),
) -> int:
    """The models behind the traffic, as the book Deep Learning for Network Engineers shows them (Chapters 1-8):
    every intermediate computed with PyTorch tensors and autograd, with the book's inputs or yours. Where the
    book prints a wrong number, the correct one is shown with what the book printed."""
    from ..learn.lesson import parse_values

    if topic is None:
        if values:
            raise InputError(Problem("--values", "give a TOPIC first: aifabric learn TOPIC --values NAME=VALUE"))
        _print_topics(explain)
        return 0
    if topic not in TOPICS:
        raise InputError(Problem("TOPIC", f"must be one of {', '.join(TOPICS)} (got {topic!r})"))
    from ..learn import params

    spec = params(topic)
    given = parse_values(topic, spec, values)
    if topic != "power":
        need_torch("learn")
        import torch

        torch.set_num_threads(1)  # toy tensors: threads only add overhead (seconds on a busy machine)
    import importlib

    les = importlib.import_module(f"aifabric.learn.{topic}").run(given)
    render(les, spec, explain, changed={k for k, p in spec.items() if given[k] != p.default})
    return 0


def _print_topics(explain: bool) -> None:
    from rich.table import Table

    t = Table(
        title="aifabric learn TOPIC [--explain] [--values NAME=VALUE ...]",
        title_justify="left",
        show_header=False,
        box=None,
        padding=(0, 2),
    )
    for name, (chapter, what) in TOPICS.items():
        t.add_row(f"[bold]{name}[/]", chapter, what)
    console.print(t)
    console.print("The book: Deep Learning for Network Engineers. Each topic uses the book's inputs by default.")


def _fmt_value(v) -> str:
    if isinstance(v, list):
        return ",".join(f"{x:g}" for x in v)
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def render(les, spec, explain: bool, changed: set[str]) -> None:
    from rich.markup import escape
    from rich.table import Table

    console.print(f"[bold]{escape(les.title)}[/]  (Deep Learning for Network Engineers)", highlight=False)
    whose = "the book's" if not changed else f"yours: {', '.join(sorted(changed))} changed"
    if explain:
        t = Table(
            title=f"inputs ({whose}; change with --values NAME=VALUE)",
            title_justify="left",
            box=None,
            show_header=False,
            padding=(0, 2),
        )
        for k, p in spec.items():
            t.add_row(k, _fmt_value(les.inputs[k]), escape(p.help))
        console.print(t)
    else:
        console.print(
            f"inputs ({whose}): " + "  ".join(f"{k}={_fmt_value(les.inputs[k])}" for k in spec),
            highlight=False,
            soft_wrap=True,
        )
    for note in les.notes:
        console.print(f"[dim]{escape(note)}[/]", highlight=False)
    for s in les.sections:
        console.print()
        console.print(f"[bold cyan]{escape(s.title)}[/]", highlight=False)
        if explain and s.text:
            console.print(escape(s.text), highlight=False)
        t = Table(show_header=False, box=None, padding=(0, 2), pad_edge=False)
        t.add_column(no_wrap=True)
        t.add_column(no_wrap=False)
        if explain:
            t.add_column(style="dim")
        for r in s.rows:
            t.add_row(escape(r.name), escape(r.value), *([escape(r.how)] if explain else []))
            if r.book:
                t.add_row("", f"[yellow]↳ {escape(r.book)}[/]", *([""] if explain else []))
        console.print(t)
    fixes = les.corrections
    if fixes:
        console.print()
        console.print("[bold yellow]where the book differs[/]")
        for r in fixes:
            console.print(f"  {escape(r.name)}: {escape(r.value)} · {escape(r.book)}", highlight=False)
