"""One console factory: wide tables when the output is a file or a pipe (rich would default to 80 columns)."""

from __future__ import annotations

from rich.console import Console

PIPE_WIDTH = 132


def make_console() -> Console:
    console = Console()
    if not console.is_terminal:
        console = Console(width=PIPE_WIDTH)
    return console
