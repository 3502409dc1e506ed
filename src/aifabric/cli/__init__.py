"""The `aifabric` command. Exit codes: 0 success, 2 bad input, 1 internal error (traceback with --debug),
130 interrupted (partial results written)."""

from __future__ import annotations

import sys

from .app import app
from .errors import run_app


def main(argv: list[str] | None = None) -> None:
    sys.exit(run_app(app, argv))
