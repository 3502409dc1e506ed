"""Turning exceptions into the exit-code contract."""

from __future__ import annotations

import traceback

import typer

try:  # typer >= 0.20 vendors its own click
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import ClickException  # type: ignore[assignment, no-redef, unused-ignore]
from rich.console import Console
from rich.markup import escape

from ..errors import InputError

stderr = Console(stderr=True)


class Interrupted(Exception):
    """A run stopped by Ctrl-C after writing its partial results."""


def print_input_error(exc: InputError) -> None:
    n = len(exc.problems)
    head = f"{exc.source}: " if exc.source and all(exc.source not in p.message for p in exc.problems) else ""
    if n > 1:
        stderr.print(f"[bold red]error:[/] {escape(head)}{n} problems", highlight=False, soft_wrap=True)
        for p in exc.problems:
            stderr.print(f"  - {escape(str(p))}", highlight=False, soft_wrap=True)
    else:
        stderr.print(f"[bold red]error:[/] {escape(head + str(exc.problems[0]))}", highlight=False, soft_wrap=True)


def run_app(app: typer.Typer, argv: list[str] | None) -> int:
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        result = app(args=args, standalone_mode=False, prog_name="aifabric")
        if result == 130:  # typer's form of a Ctrl-C that no command handled: it returns Exit(130)'s code
            stderr.print("[yellow]interrupted[/]")
        return int(result or 0)
    except InputError as exc:
        print_input_error(exc)
        return 2
    except typer.Abort:
        stderr.print("[red]aborted[/]")
        return 130
    except ClickException as exc:  # usage errors: bad flag, missing argument
        exc.show()
        return 2
    except typer.Exit as exc:
        if exc.exit_code == 130 and isinstance(exc.__cause__, KeyboardInterrupt):  # typer's form of Ctrl-C
            stderr.print("[yellow]interrupted[/]")
        return exc.exit_code
    except Interrupted as exc:
        stderr.print(f"[yellow]interrupted:[/] {exc}")
        return 130
    except KeyboardInterrupt:
        stderr.print("[yellow]interrupted[/]")
        return 130
    except Exception as exc:  # noqa: BLE001 - the contract: exit 1, traceback only with --debug
        if _caused_by_interrupt(exc):
            stderr.print("[yellow]interrupted[/]")
            return 130
        if debug:
            traceback.print_exc()
        else:
            stderr.print(
                f"[bold red]internal error:[/] {escape(f'{type(exc).__name__}: {exc}')}",
                highlight=False,
                soft_wrap=True,
            )
            stderr.print("run again with --debug for the traceback", style="dim")
        return 1


def _caused_by_interrupt(exc: BaseException) -> bool:
    """Whether a Ctrl-C is what this exception stands for. Python wraps some exceptions raised in code it calls
    on a class's creation (a Ctrl-C during a `__set_name__` while a module is imported becomes a RuntimeError
    whose cause is the KeyboardInterrupt), so an interrupt can reach here in another type's clothes."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False
