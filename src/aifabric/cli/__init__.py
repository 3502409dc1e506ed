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
    sys.exit(run_app(app, argv))
