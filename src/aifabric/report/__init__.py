from .files import new_run_dir, write_atomic, write_json
from .summary import SUMMARY_SCHEMA_VERSION, build_summary
from .terminal import print_summary

__all__ = ["SUMMARY_SCHEMA_VERSION", "build_summary", "new_run_dir", "print_summary", "write_atomic", "write_json"]
