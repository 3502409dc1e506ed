"""Writing output files atomically: a reader never sees a half-written file."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, cast


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()


def write_atomic(path: Path, text: str | Iterable[str | bytes | memoryview]) -> Path:
    """Write to a temporary file beside `path`, then rename over it (atomic on POSIX). `text`: a string, or
    pieces of one (written as they come: large files need not be held in memory whole); a piece may be ASCII
    bytes, written as they are (report.trace's compiled blocks: no decoding and encoding again)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            if isinstance(text, str):
                fh.write(text)
            else:
                for piece in text:
                    if isinstance(piece, str):
                        fh.write(piece)
                    elif os.linesep == "\n":  # no newline translation: the bytes are the text
                        fh.flush()
                        fh.buffer.write(cast(bytes, piece))  # any bytes-like object: no copy
                    else:
                        fh.write(bytes(piece).decode("ascii"))
        os.chmod(tmp, _FILE_MODE)  # mkstemp creates 0600; give the file the mode open() would
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json(path: Path, data: Any) -> Path:
    """Indented strict JSON (a non-finite number, which JSON has no word for, is written as null); an object with
    a `json_pieces()` or `json_chunks()` method (report.trace.Trace) writes itself."""
    if hasattr(data, "json_pieces"):
        return write_atomic(path, data.json_pieces())
    if hasattr(data, "json_chunks"):
        return write_atomic(path, data.json_chunks())
    try:
        text = dumps_indented(data)
    except ValueError:  # NaN or Infinity somewhere: Python would write them, no JSON reader takes them
        text = dumps_indented(_finite(data))
    return write_atomic(path, text + "\n")


class _Unusual(Exception):
    """Something `dumps_indented` leaves to json.dumps (a key that is not a string, a type json converts)."""


_SCALARS = (str, int, float, type(None))
_encoders: dict[int, json.JSONEncoder] = {}


def _leaf_encoder(level: int) -> json.JSONEncoder:
    """json's C encoder writing a container of scalars at `level` with its items on lines of their own (but for
    the brackets: see `_encode`)."""
    enc = _encoders.get(level)
    if enc is None:
        enc = _encoders[level] = json.JSONEncoder(separators=(",\n" + "  " * (level + 1), ": "), allow_nan=False)
    return enc


def _encode(o: Any, level: int) -> str:
    if isinstance(o, dict):
        if not o:
            return "{}"
        inner = "\n" + "  " * (level + 1)
        if all(type(k) is str for k in o) and all(isinstance(v, _SCALARS) for v in o.values()):
            text = _leaf_encoder(level).encode(o)  # '{"a": 1,<inner>"b": 2}'
            return "{" + inner + text[1:-1] + "\n" + "  " * level + "}"
        items = []
        for k, v in o.items():
            if type(k) is not str:
                raise _Unusual
            items.append(json.encoder.encode_basestring_ascii(k) + ": " + _encode(v, level + 1))
        return "{" + inner + ("," + inner).join(items) + "\n" + "  " * level + "}"
    if isinstance(o, (list, tuple)):
        if not o:
            return "[]"
        inner = "\n" + "  " * (level + 1)
        if all(isinstance(v, _SCALARS) for v in o):
            text = _leaf_encoder(level).encode(list(o))
            return "[" + inner + text[1:-1] + "\n" + "  " * level + "]"
        return "[" + inner + ("," + inner).join(_encode(v, level + 1) for v in o) + "\n" + "  " * level + "]"
    if isinstance(o, _SCALARS):
        return _leaf_encoder(level).encode(o)
    raise _Unusual


def dumps_indented(data: Any) -> str:
    """json.dumps(data, indent=2, allow_nan=False), the same text, with every container of scalars (a summary's
    thousands of per-rank and per-link objects) written by json's C encoder instead of its Python one."""
    try:
        return _encode(data, 0)
    except _Unusual:
        return json.dumps(data, indent=2, sort_keys=False, allow_nan=False)


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
