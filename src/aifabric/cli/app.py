"""The command tree. Each command family lives in its own module and registers itself here."""

from __future__ import annotations

import typer

from .. import __version__

app = typer.Typer(
    name="aifabric",
    help="What distributed training does to an AI data-center network, and what the network does to training.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"aifabric {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="show the traceback of internal errors"),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="print the version"),
) -> None:
    """aifabric: model + parallelism plan + GPU cluster + backend fabric -> every transfer, the fabric's
    reaction, the iteration time."""


# the commands register themselves on `app` when imported
from . import (  # noqa: E402,F401
    calibrate_cmd,
    collective_cmd,
    compare_cmd,
    fabric_cmd,
    fabric_config_cmd,
    learn_cmd,
    packet_cmd,
    pipeline_cmd,
    run_cmds,
    sweep_cmd,
    train_cmd,
    workload_cmd,
)
