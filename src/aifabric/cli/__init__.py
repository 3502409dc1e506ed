"""The `aifabric` command. Exit codes: 0 success, 2 bad input, 1 internal error (traceback with --debug),
130 interrupted (partial results written)."""

from __future__ import annotations

import sys

try:  # the command tree imports every command module: a Ctrl-C meanwhile is an interrupt, not a traceback
    from .app import app
    from .errors import run_app
except KeyboardInterrupt:
    sys.stderr.write("interrupted\n")
    raise SystemExit(130) from None


def main(argv: list[str] | None = None) -> None:
    code = run_app(app, argv)
    if code == 130:
        _exit_interrupted()
    sys.exit(code)


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
