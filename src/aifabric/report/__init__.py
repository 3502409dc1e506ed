from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # what the lazy exports below are, for type checkers
    from .files import new_run_dir, write_atomic, write_json
    from .html import build_html
    from .summary import SUMMARY_SCHEMA_VERSION, build_summary
    from .tables import write_tables
    from .terminal import print_summary
    from .trace import build_trace

_EXPORTS = {
    "new_run_dir": ".files",
    "write_atomic": ".files",
    "write_json": ".files",
    "build_html": ".html",
    "SUMMARY_SCHEMA_VERSION": ".summary",
    "build_summary": ".summary",
    "write_tables": ".tables",
    "print_summary": ".terminal",
    "build_trace": ".trace",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [
    "SUMMARY_SCHEMA_VERSION",
    "build_html",
    "build_summary",
    "build_trace",
    "new_run_dir",
    "print_summary",
    "write_atomic",
    "write_json",
    "write_tables",
]
