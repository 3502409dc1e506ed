from .files import new_run_dir, write_atomic, write_json
from .html import build_html
from .summary import SUMMARY_SCHEMA_VERSION, build_summary
from .tables import write_tables
from .terminal import print_summary
from .trace import build_trace

__all__ = [
    "SUMMARY_SCHEMA_VERSION", "build_html", "build_summary", "build_trace", "new_run_dir", "print_summary",
    "write_atomic", "write_json", "write_tables",
]
