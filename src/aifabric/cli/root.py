"""The root command's own answers, `aifabric --version` and `aifabric --help` (no arguments: the help), written
without the command framework: typer and its help renderer take longer to import than these take to answer. The
help lists `command_index.COMMANDS` in the panels typer draws for a group (the root group's `--help` writes this
same text: `app.LazyGroup.format_help`)."""

from __future__ import annotations

import os
import re
from typing import TextIO

from .. import __version__
from .command_index import COMMANDS

HELP = "What distributed training does to an AI data-center network, and what the network does to training."
USAGE = "aifabric [OPTIONS] COMMAND [ARGS]..."
OPTIONS = {
    "--debug": "show the traceback of internal errors",
    "--version": "print the version",
    "--help": "Show this message and exit.",
}


def version_line() -> str:
    return f"aifabric {__version__}"


def first_paragraph(help_text: str) -> str:
    """A command's line in the list: its help's first paragraph, as one line (the table wraps it)."""
    return " ".join(re.split(r"\n\s*\n", help_text.strip())[0].split())


def print_help(file: TextIO | None = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    width = os.environ.get("TERMINAL_WIDTH")  # as typer reads it
    console = Console(file=file, width=int(width) if width and width.isdigit() else None, highlight=False, emoji=False)
    console.print(Padding(Text.assemble(("Usage: ", "yellow"), (USAGE, "bold")), 1))
    console.print(Padding(Text(HELP), (0, 1, 1, 1)))
    for title, rows in (
        ("Options", OPTIONS.items()),
        ("Commands", ((name, first_paragraph(help_text)) for name, (_, help_text) in COMMANDS.items())),
    ):
        table = Table(highlight=False, show_header=False, expand=True, box=None, padding=(0, 1), pad_edge=False)
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column(ratio=10)
        for name, text in rows:
            table.add_row(name, escape(text))
        console.print(Panel(table, border_style="dim", title=title, title_align="left"))
