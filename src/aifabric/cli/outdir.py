"""Output folders that never destroy what the user wrote.

`claim_out` checks `--out` before any work is done: a new folder, an empty one, or a folder aifabric wrote a run
into before (its `summary.json` says so, and every other file in it has a name aifabric writes) is accepted;
a folder holding anything else is refused (exit 2) unless `--force`. The run is written into a hidden staging
folder beside the target and moved into place when every file is complete (`OutFolder.publish`), summary.json
last, so the target never holds a mix of a half-written run and the user's files.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, Problem

TABLES = ("links", "collectives", "ranks", "flows")
RUN_FILES = frozenset({"summary.json", "trace.json", "report.html", "scenario.yaml"}
                      | {f"{t}.{ext}" for t in TABLES for ext in ("csv", "parquet")})
SHOWN = 5  # foreign files named in the message


def _written_by_aifabric(summary: Path, keys: tuple[str, ...] = ("aifabric_version", "schema_version")) -> bool:
    try:
        if summary.stat().st_size > 1 << 30:
            return False
        data = json.loads(summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and all(k in data for k in keys)


def foreign_entries(folder: Path, names: frozenset[str] = RUN_FILES) -> list[str]:
    """Entries of `folder` aifabric did not write there: all of them, unless its summary.json is aifabric's; then
    those whose names are not of a run's files."""
    entries = sorted(p.name for p in folder.iterdir())
    if not entries:
        return []
    ours = _written_by_aifabric(folder / "summary.json")
    return [n for n in entries if not (ours and n in names and (folder / n).is_file())]


@dataclass
class OutFolder:
    target: Path
    staging: Path
    names: frozenset[str] = RUN_FILES

    def publish(self) -> Path:
        """Move the staged files into the target; files of an earlier aifabric run there that this run did not
        write are removed (its summary.json first, so the folder never claims a completeness it lacks)."""
        self.target.mkdir(parents=True, exist_ok=True)
        new = sorted(p.name for p in self.staging.iterdir())
        old_summary = self.target / "summary.json"
        ours = _written_by_aifabric(old_summary)
        if ours:
            old_summary.unlink(missing_ok=True)
            for name in self.names - set(new):
                path = self.target / name
                if path.is_file():
                    path.unlink()
        for name in sorted(new, key=lambda n: n == "summary.json"):  # summary.json last
            os.replace(self.staging / name, self.target / name)
        self.discard()
        return self.target

    def discard(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


def compare_out(out: Path, force: bool = False) -> Path:
    """`compare --out`: a new or empty folder, or one an earlier comparison wrote (its compare.json is aifabric's,
    and the rest is compare.html and numbered run folders); otherwise refused (exit 2) unless `force`."""
    import re

    if out.exists() and not out.is_dir():
        raise InputError(Problem("--out", f"{out} exists and is not a directory"))
    if out.is_dir() and not force:
        try:
            entries = sorted(out.iterdir())
            ours = _written_by_aifabric(out / "compare.json", ("variants", "schema_version"))
        except OSError as exc:
            raise InputError(Problem("--out", f"cannot read {out}: {exc.strerror or exc}")) from None
        foreign = [p.name for p in entries if not (ours and (
            (p.is_file() and p.name in ("compare.json", "compare.html"))
            or (p.is_dir() and re.match(r"^\d{2,}-", p.name) and not foreign_entries(p))))]
        if foreign:
            more = f" and {len(foreign) - SHOWN} more" if len(foreign) > SHOWN else ""
            raise InputError(Problem(
                "--out", f"{out} holds files aifabric did not write there ({', '.join(foreign[:SHOWN])}{more}); give "
                         "a new or empty folder, or add --force to write the comparison into it anyway"))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(Problem("--out", f"cannot create {out}: {exc.strerror or exc}")) from None
    return out


def probe_out(path: Path | None, kind: str, flag: str = "--out") -> None:
    """Before any work: the folder to write into (kind "dir", created now) or the folder of the file to write
    (kind "file") exists or can be created, and takes a file; InputError naming `flag` otherwise (the OS error
    came after the whole run, as exit 1)."""
    if path is None:
        return
    folder = path if kind == "dir" else (path.parent if str(path.parent) else Path("."))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise InputError(Problem(flag, f"cannot write in {folder}: {exc.strerror or exc}")) from None


def out_path(value: str) -> Path:
    """The `--out` parser: an empty name is refused (Path("") would be the current directory)."""
    if not str(value).strip():
        import typer

        raise typer.BadParameter("is empty: give a folder name (or leave --out out for a new folder in the current "
                                 "directory)", param_hint="'--out'")
    return Path(value)


def claim_out(out: str | Path | None, force: bool = False, prefix: str = "aifabric-run",
              names: frozenset[str] = RUN_FILES) -> OutFolder:
    """Check `--out` and create the staging folder; raise InputError naming --out for any folder that would lose
    the user's files (without `force`), an empty name, or a place that cannot be written."""
    if out is None:
        from ..report.files import new_run_dir

        target = new_run_dir(prefix=prefix)
    else:
        if not str(out).strip():
            raise InputError(Problem("--out", "is empty: give a folder name (or leave --out out for a new "
                                              f"{prefix}-<time> folder in the current directory)"))
        target = Path(out).expanduser()
        if target.exists() and not target.is_dir():
            raise InputError(Problem("--out", f"{target} exists and is not a directory"))
        if target.is_dir():
            try:
                foreign = foreign_entries(target, names)
            except OSError as exc:
                raise InputError(Problem("--out", f"cannot read {target}: {exc.strerror or exc}")) from None
            if foreign and not force:
                more = f" and {len(foreign) - SHOWN} more" if len(foreign) > SHOWN else ""
                raise InputError(Problem(
                    "--out", f"{target} holds files aifabric did not write there ({', '.join(foreign[:SHOWN])}{more}); "
                             "give a new or empty folder, or add --force to write the run into it anyway (files of "
                             "the same names are replaced, others kept)"))
    target = Path(os.path.abspath(target))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name or 'out'}.partial-", dir=target.parent))
    except OSError as exc:
        raise InputError(Problem("--out", f"cannot write beside {target}: {exc.strerror or exc}")) from None
    return OutFolder(target, staging, names)
