"""Writing output files atomically: a reader never sees a half-written file."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()


def write_atomic(path: Path, text: str | Iterable[str]) -> Path:
    """Write to a temporary file beside `path`, then rename over it (atomic on POSIX). `text`: a string, or
    pieces of one (written as they come: large files need not be held in memory whole)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            if isinstance(text, str):
                fh.write(text)
            else:
                for piece in text:
                    fh.write(piece)
        os.chmod(tmp, _FILE_MODE)  # mkstemp creates 0600; give the file the mode open() would
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json(path: Path, data: Any) -> Path:
    """Indented strict JSON (a non-finite number, which JSON has no word for, is written as null); an object with
    a `json_chunks()` method (report.trace.Trace) writes itself."""
    if hasattr(data, "json_chunks"):
        return write_atomic(path, data.json_chunks())
    try:
        text = json.dumps(data, indent=2, sort_keys=False, allow_nan=False)
    except ValueError:  # NaN or Infinity somewhere: Python would write them, no JSON reader takes them
        text = json.dumps(_finite(data), indent=2, sort_keys=False, allow_nan=False)
    return write_atomic(path, text + "\n")


def _finite(data: Any) -> Any:
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(v) for v in data]
    return data


def new_run_dir(base: Path | None = None, prefix: str = "aifabric-run") -> Path:
    """A fresh folder under `base` (default: the current directory) named after the time."""
    base = base or Path.cwd()
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate = base / f"{prefix}-{stamp}"
    k = 1
    while candidate.exists():
        k += 1
        candidate = base / f"{prefix}-{stamp}-{k}"
    candidate.mkdir(parents=True)
    return candidate
