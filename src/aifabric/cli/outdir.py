"""Output folders that never destroy what the user wrote.

`claim_out` checks `--out` before any work is done: a new folder, an empty one, or a folder aifabric wrote the
same kind of output into before (its marker file, e.g. `summary.json`, is aifabric's, and every other entry has a
name that command writes) is accepted; a folder holding anything else is refused (exit 2) unless `--force`. The
output is written into a hidden staging folder beside the target and moved into place when every file is
complete (`OutFolder.publish`), the marker last, so the target never holds a mix of a half-written run and the
user's files. What each command writes is its `Layout` (RUN, COMPARE, TRAIN, SWEEP, PACKET, PLAN).

`claim_file` does the same for a command that writes one file (`calibrate ... --out FILE`): an existing file is
replaced only when aifabric wrote it (its first line says so) or with `--force`; it is written to a temporary file
beside it and renamed over it (report.files.write_atomic).

A Ctrl-C while the staged files are moved in, or while an interrupted run writes what it has, is held until that
is done (`held_interrupts`): a second Ctrl-C never leaves a half-moved folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, Problem

TABLES = ("links", "collectives", "ranks", "flows")
RUN_FILES = frozenset(
    {"summary.json", "trace.json", "report.html", "scenario.yaml"}
    | {f"{t}.{ext}" for t in TABLES for ext in ("csv", "parquet")}
)
SHOWN = 5  # foreign files named in the message


def _json_object_with(path: Path, keys: tuple[str, ...]) -> bool:
    try:
        if not path.is_file() or path.stat().st_size > 1 << 30:
            return False
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and all(k in data for k in keys)


@dataclass(frozen=True)
class Layout:
    """What one command writes into its --out folder: a marker file (a JSON object with `keys`) that says
    aifabric wrote the folder, and the names of the files (`files`) and folders (`dirs`) it writes, as regular
    expressions; a folder entry matching `dirs` is aifabric's only when `inner` (if any) finds nothing foreign
    in it."""

    marker: str
    keys: tuple[str, ...]
    files: str
    dirs: str = r"(?!)"
    inner: Layout | None = None
    what: str = "the run"
    dirs_alone: bool = False  # a folder of its folders alone, without the marker, is aifabric's too (a cut-off
    # comparison: the variants finished, no compare.json)

    def ours(self, folder: Path) -> bool:
        if _json_object_with(folder / self.marker, self.keys):
            return True
        if not self.dirs_alone:
            return False
        entries = list(folder.iterdir())
        return bool(entries) and all(p.is_dir() and self.owns(p) for p in entries)

    def owns(self, entry: Path) -> bool:
        """An entry of a folder this layout wrote that is one of its own files or folders."""
        if entry.is_file() and not entry.is_symlink():
            return re.fullmatch(self.files, entry.name) is not None
        if entry.is_dir() and not entry.is_symlink() and re.fullmatch(self.dirs, entry.name):
            return self.inner is None or not foreign_entries(entry, self.inner)
        return False


RUN = Layout("summary.json", ("aifabric_version", "schema_version"), "|".join(re.escape(n) for n in sorted(RUN_FILES)))
COMPARE = Layout(
    "compare.json",
    ("variants", "schema_version"),
    r"compare\.(json|html)",
    dirs=r"\d{2,}-.+",
    inner=RUN,
    what="the comparison",
    dirs_alone=True,
)
TRAIN = Layout(
    "train.json",
    ("aifabric_version", "schema_version"),
    r"train\.json|report\.html|weights\.pt|trace\.jsonl|explain\.json|scenario\.yaml",
    what="the run",
)
SWEEP = Layout(
    "sweep.json",
    ("schema_version", "kind", "cases"),
    r"sweep\.json|results\.(csv|parquet)|plotly\.min\.js|(sweep|optimize)\.html|optimize\.json",
    dirs="runs",
    what="the sweep",
)
PACKET = Layout("packet-stats.json", ("scenario",), r"packet-stats\.json|packet\.html|[\w.=-]+\.pcap", what="the run")
PLAN = Layout("plan.json", ("name", "design"), r"plan\.json|bom\.csv|cabling\.csv|addressing\.csv", what="the plan")


def foreign_entries(folder: Path, layout: Layout = RUN) -> list[str]:
    """Entries of `folder` aifabric did not write there: all of them, unless its marker file is aifabric's; then
    those that are not of the layout's files and folders."""
    entries = sorted(folder.iterdir())
    if not entries:
        return []
    ours = layout.ours(folder)
    return [p.name for p in entries if not (ours and layout.owns(p))]


@contextlib.contextmanager
def held_interrupts(reraise: bool = False):
    """Hold a Ctrl-C (SIGINT) until the block is done: files being moved or written when it came are complete.
    The blocks held are the last of a command (moving its files in, or writing what an interrupted run leaves),
    so the Ctrl-C is then dropped, unless `reraise`. Outside the main thread (no signal handlers there) the block
    runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if getattr(signal.getsignal(signal.SIGINT), "holds", False):  # inside another such block: that one holds it
        yield
        return
    caught: list[int] = []

    def hold(signum, frame) -> None:
        caught.append(signum)

    hold.holds = True  # type: ignore[attr-defined]
    try:
        previous = signal.signal(signal.SIGINT, hold)
    except ValueError:  # pragma: no cover - not the main interpreter
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught and reraise:
        raise KeyboardInterrupt


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


@dataclass
class OutFolder:
    target: Path
    staging: Path
    layout: Layout = RUN
    created: bool = False  # the target is a new aifabric-...-<time> folder made for this output

    def publish(self) -> Path:
        """Move the staged files into the target; the entries of an earlier aifabric output there that this one
        did not write are removed (its marker first, so the folder never claims a completeness it lacks). A
        Ctrl-C meanwhile is held until the move is done."""
        with held_interrupts():
            self.target.mkdir(parents=True, exist_ok=True)
            new = sorted(p.name for p in self.staging.iterdir())
            marker = self.layout.marker
            if self.layout.ours(self.target):
                (self.target / marker).unlink(missing_ok=True)
                for entry in sorted(self.target.iterdir()):
                    if entry.name not in new and self.layout.owns(entry):
                        _remove(entry)
            for name in sorted(new, key=lambda n: n == marker):  # the marker last
                dst = self.target / name
                if dst.is_dir() and not dst.is_symlink():
                    shutil.rmtree(dst)  # an earlier output's folder of the same name (or --force)
                os.replace(self.staging / name, dst)
            self.discard()
        return self.target

    def discard(self) -> None:
        """Remove the staging folder (what publish did not move in), and the target when it was made for this
        output and nothing was moved into it (a failed run leaves no empty folder behind)."""
        shutil.rmtree(self.staging, ignore_errors=True)
        if self.created:
            try:
                self.target.rmdir()  # only when empty
            except OSError:
                pass


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

        raise typer.BadParameter(
            "is empty: give a folder name (or leave --out out for a new folder in the current directory)",
            param_hint="'--out'",
        )
    return Path(value)


def check_folder(
    out: str | Path, force: bool = False, layout: Layout = RUN, flag: str = "--out", prefix: str = "aifabric-run"
) -> Path:
    """The checks of `claim_out` alone (no staging folder): `out` as an absolute path, or InputError naming
    `flag`."""
    if not str(out).strip():
        raise InputError(
            Problem(
                flag,
                "is empty: give a folder name (or leave it out for a new "
                f"{prefix}-<time> folder in the current directory)",
            )
        )
    target = Path(out).expanduser()
    try:
        if target.exists() and not target.is_dir():
            raise InputError(Problem(flag, f"{target} exists and is not a directory"))
        foreign = foreign_entries(target, layout) if target.is_dir() else []
    except OSError as exc:
        raise InputError(Problem(flag, f"cannot read {target}: {exc.strerror or exc}")) from None
    if foreign and not force:
        more = f" and {len(foreign) - SHOWN} more" if len(foreign) > SHOWN else ""
        raise InputError(
            Problem(
                flag,
                f"{target} holds files aifabric did not write there ({', '.join(foreign[:SHOWN])}{more}); "
                f"give a new or empty folder, or add --force to write {layout.what} into it anyway (files of the "
                "same names are replaced, others kept)",
            )
        )
    target = Path(os.path.abspath(target))
    _can_create(target.parent, flag)
    return target


def _can_create(folder: Path, flag: str) -> None:
    """Without touching anything: the nearest existing folder on the way to `folder` is a folder this process may
    write in (a file on the way, or a read-only place, was an OS error after the run)."""
    here = folder
    while not here.exists() and here != here.parent:
        here = here.parent
    if not here.is_dir():
        raise InputError(Problem(flag, f"cannot create {folder}: {here} is not a directory"))
    if not os.access(here, os.W_OK | os.X_OK):
        raise InputError(Problem(flag, f"cannot write in {here}: permission denied"))


def claim_out(
    out: str | Path | None, force: bool = False, prefix: str = "aifabric-run", layout: Layout = RUN, flag: str = "--out"
) -> OutFolder:
    """Check `--out` and create the staging folder; raise InputError naming --out for any folder that would lose
    the user's files (without `force`), an empty name, or a place that cannot be written."""
    created = out is None
    if out is None:
        from ..report.files import new_run_dir

        try:
            target = Path(os.path.abspath(new_run_dir(prefix=prefix)))
        except OSError as exc:
            raise InputError(
                Problem(
                    flag,
                    f"cannot create a {prefix}-<time> folder in the current directory: "
                    f"{exc.strerror or exc}; give one with {flag}",
                )
            ) from None
    else:
        target = check_folder(out, force, layout, flag, prefix)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name or 'out'}.partial-", dir=target.parent))
    except OSError as exc:
        raise InputError(Problem(flag, f"cannot write beside {target}: {exc.strerror or exc}")) from None
    return OutFolder(target, staging, layout, created)


def compare_out(out: Path, force: bool = False) -> Path:
    """`compare --out` checked and created (no staging): kept for callers of the earlier interface."""
    target = check_folder(out, force, COMPARE)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(Problem("--out", f"cannot create {target}: {exc.strerror or exc}")) from None
    return target


def claim_file(
    out: Path, force: bool, header: str | None = None, flag: str = "--out", json_keys: tuple[str, ...] = ()
) -> Path:
    """A file to write (`calibrate ... --out FILE`, `fabric draw --out FILE`), checked before any work: not a
    folder, in a place that takes a file, and, if it exists, one aifabric wrote (its text starts with `header`, or
    it is a JSON object with `json_keys`) unless `force`."""
    if not str(out).strip():
        raise InputError(Problem(flag, "is empty: give the file to write"))
    path = Path(out).expanduser()
    if path.is_dir():
        raise InputError(Problem(flag, f"{path} is a directory; give the file to write"))
    if path.exists() and not force:
        if json_keys:
            ours = _json_object_with(path, json_keys)
        else:
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    ours = fh.read(len(header or "")) == header
            except OSError as exc:
                raise InputError(Problem(flag, f"cannot read {path}: {exc.strerror or exc}")) from None
        if not ours:
            raise InputError(
                Problem(
                    flag,
                    f"{path} exists and aifabric did not write it; give another file, or add --force to replace it",
                )
            )
    probe_out(path, "file", flag)
    return path
