"""The `aifabric` command. Exit codes: 0 success, 2 bad input, 1 internal error (traceback with --debug),
130 interrupted (partial results written).

`import aifabric.cli` is light: `app` (the command tree) and `run_app` are imported on first use, and a command's
own modules only when it runs (`app.LazyGroup`)."""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # what the lazy exports below are, for type checkers
    from .app import app
    from .errors import run_app

_EXPORTS = {"app": ".app", "run_app": ".errors"}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["app", "main", "run_app"]


class _Package(types.ModuleType):
    """`aifabric.cli.app` is the command tree (the Typer), as when `__init__` said `from .app import app`: importing
    the submodule `aifabric.cli.app` (which the import system records on the package) does not replace it."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "app" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args in ([], ["--help"], ["--version"]):  # the root's own answers, without importing the command framework
        from .root import print_help, version_line

        if args == ["--version"]:
            print(version_line())
        else:
            print_help()
        sys.exit(0 if args else 2)  # no arguments: the help, and the usage error's code (as typer exits)
    try:  # importing the command tree (and then a command's modules) takes a moment: a Ctrl-C meanwhile is an interrupt
        from .app import app
        from .errors import run_app
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None
    code = run_app(app, args)
    if code == 130:
        _exit_interrupted()
    if argv is None:  # the command itself, about to exit: nothing is left for a Ctrl-C to interrupt
        _ignore_interrupts_while_exiting()
    sys.exit(code)


def _ignore_interrupts_while_exiting() -> None:
    """Ignore SIGINT from here on. The command's work is done and its files are in place, but the interpreter's
    own clean-up takes a while (a few tenths of a second after a report: modules and their data freed) and runs
    after CPython has put SIGINT's default action back: a Ctrl-C then would end the process by the signal, as if
    the finished command had been interrupted. An ignored signal is left ignored through that clean-up."""
    import signal

    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: no signal handling to change there
        pass


def _exit_interrupted() -> None:
    """Exit 130 now. A Ctrl-C that came while an extension module ran Python code through the C API (during an
    import, say) leaves CPython's 'unhandled KeyboardInterrupt' flag set although aifabric handled it, and the
    interpreter would then end itself by SIGINT at exit instead of with the code; the files are written and the
    rank processes stopped by now."""
    import atexit
    import os

    try:
        atexit._run_exitfuncs()  # what the interpreter's exit would run (multiprocessing's clean-up among them)
    except BaseException:  # noqa: BLE001 - exiting anyway
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(130)
