"""The command tree. Each command family lives in its own module and registers itself on `app` when imported;
`LazyGroup` imports a command's modules only when that command runs (`command_index.COMMANDS` names them, and
gives `aifabric --help` each command's help line), so `aifabric --version` and `--help` import no command module."""

from __future__ import annotations

import importlib
from typing import Any

import typer
import typer.main
from typer.core import TyperGroup

from .command_index import COMMANDS
from .root import HELP, OPTIONS, print_help, version_line


class LazyGroup(TyperGroup):
    """The root group: its commands are those of `COMMANDS`, each one's modules imported when it is first asked for."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *(name for name in self.commands if name not in COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        entry = COMMANDS.get(cmd_name)
        if entry is not None and (cmd_name not in self.commands or not _imported(entry[0])):
            for module in entry[0]:
                importlib.import_module(f"{__package__}.{module}")
            # the modules registered their commands on `app`: the group typer builds now has them
            self.commands[cmd_name] = typer.main.get_group(app).commands[cmd_name]
        return super().get_command(ctx, cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        print_help()


def import_all_commands() -> None:
    """Import every command's modules, so that `app` holds them all (for what walks the whole tree: tests, docs)."""
    for modules, _ in COMMANDS.values():
        for module in modules:
            importlib.import_module(f"{__package__}.{module}")


def _imported(modules: tuple[str, ...]) -> bool:
    import sys

    return all(f"{__package__}.{module}" in sys.modules for module in modules)


app = typer.Typer(
    name="aifabric",
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=LazyGroup,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help=OPTIONS["--debug"]),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help=OPTIONS["--version"]),
) -> None:
    """aifabric: model + parallelism plan + GPU cluster + backend fabric -> every transfer, the fabric's
    reaction, the iteration time."""
