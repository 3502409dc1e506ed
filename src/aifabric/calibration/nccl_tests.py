"""Reading nccl-tests output (all_reduce_perf, all_gather_perf, ...) into plain data.

What nccl-tests prints (src/common.cu; the first two lines only since version 2.17 or so):

    # nccl-tests version 2.18.5 nccl-headers=22809 nccl-library=22809
    # Collective test starting: all_gather_perf
    # nThread 1 nGpus 1 minBytes 8 maxBytes 4294967296 step: 2(factor) warmup iters: 5 iters: 20 ...
    # Using devices
    #  Rank  0 Group  0 Pid  37755 on promaxgb10-4c75 device  0 [000f:01:00] NVIDIA GB10
    #  Rank  1 Group  0 Pid  30808 on promaxgb10-4c99 device  0 [000f:01:00] NVIDIA GB10
    #                                  out-of-place                       in-place
    #       size    count   type  redop  root   time  algbw  busbw #wrong   time  algbw  busbw #wrong
    #        (B) (elements)                     (us) (GB/s) (GB/s)          (us) (GB/s) (GB/s)
     17179869184  2147483648  float  none  -1  374425  45.88  22.94  0  373792  45.96  22.98  0
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 22.9611
    # Collective test concluded: all_gather_perf

How many GPUs: every GPU has its own `Rank` line. A process started with `-t T -g G` drives T × G
GPUs and prints T × G lines (rank = process × T × G + i, all with the process's Pid), and rank 0
gathers every process's lines over MPI; so the GPUs are the rank lines, not rank lines × nGpus. (A
process's lines are cut at 2,048 characters, ending in "..."; then Pids × T × G counts them.) The
nodes are the distinct host names; GPUs per node the most on one host.

The columns come from the column header (older versions have no `root`, call `#wrong` `error`
and print no `Group` in the rank lines; `-C`
prints `cputime`, `-R`/`-I` add `#bitdiff`, `i_min`, ..., `timestamp`); the first time/algbw/busbw is
out-of-place, the second in-place. `#wrong` is a count or `N/A`. Anything else in the file (the
echoed command, MPI or NCCL messages, markdown around it) is skipped, but a line that starts like a
row (two integers) must be a whole row: a truncated row or a non-number is an error naming the line.

Everything here is pure: text in, dataclasses or `InputError` out.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..collectives.cost import busbw_factor
from ..errors import InputError, Problem

# nccl-tests program (without _perf) -> the cost model's operation
TEST_OPS = {
    "all_reduce": "all-reduce",
    "all_gather": "all-gather",
    "reduce_scatter": "reduce-scatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "alltoall": "all-to-all",
    "sendrecv": "send-recv",
}
UNMODELLED_TESTS = ("scatter", "gather", "hypercube")  # nccl-tests has them; the cost model does not
_NAME_KEYS = (
    ("reducescatter", "reduce-scatter"),
    ("allreduce", "all-reduce"),
    ("allgather", "all-gather"),
    ("alltoall", "all-to-all"),
    ("sendrecv", "send-recv"),
    ("broadcast", "broadcast"),
    ("reduce", "reduce"),
)
STANDARD_COLUMNS = (
    "size",
    "count",
    "type",
    "redop",
    "root",
    "time",
    "algbw",
    "busbw",
    "#wrong",
    "time",
    "algbw",
    "busbw",
    "#wrong",
)

_RANK = re.compile(
    r"^#\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+"
    r"\[([^\]]*)\]\s*(.*?)\s*$"
)
_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded:")
_NTHREAD = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)")
_USING = re.compile(r"^#\s*Using devices")
_PROGRAM = re.compile(r"(?:^|[\s/])(\w+?)_perf(?:_mpi)?(?=\s|$)")
_INT = re.compile(r"^[+-]?\d+$")


@dataclass(frozen=True)
class RankLine:
    rank: int
    group: int
    pid: int
    host: str
    device: int
    bus_id: str
    gpu_name: str
    line: int


@dataclass(frozen=True)
class Timing:
    time_us: float
    algbw_gBps: float
    busbw_gBps: float
    wrong: str  # a count, or "N/A"


@dataclass(frozen=True)
class Row:
    size_bytes: int
    count: int
    type: str
    redop: str
    root: int
    out_of_place: Timing
    in_place: Timing | None
    line: int

    @property
    def best(self) -> Timing:
        """The faster of out-of-place and in-place."""
        both = [t for t in (self.out_of_place, self.in_place) if t is not None and t.time_us > 0]
        return min(both, key=lambda t: t.time_us) if both else self.out_of_place


@dataclass(frozen=True)
class NcclTestsRun:
    """One test's output (a file usually holds one; several tests in one log are several runs)."""

    path: str
    op: str  # the cost model's name: all-reduce, all-gather, ...
    op_from: str  # where the operation was read
    test: str  # nccl-tests' program, e.g. all_reduce_perf ("" when the file does not say)
    version: str  # "" for versions that do not print it
    ranks: tuple[RankLine, ...]
    gpus: int
    nodes: int
    gpus_per_node: int
    gpu_name: str  # as the file prints it, e.g. "NVIDIA A100-SXM4-80GB" ("" when unknown)
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = ()
    first_line: int = 1

    @property
    def label(self) -> str:
        return f"{Path(self.path).name}" + (f":{self.first_line}" if self.first_line > 1 else "")


@dataclass(frozen=True)
class _Layout:
    """Where each value sits in a row, from the column header."""

    columns: tuple[str, ...]
    line: int  # 0: nccl-tests' standard layout, no header seen

    def index(self, name: str, k: int = 0) -> int | None:
        hits = [i for i, c in enumerate(self.columns) if c == name]
        return hits[k] if len(hits) > k else None

    def block(self, k: int) -> tuple[int, int, int, int | None] | None:
        time_i = [i for i, c in enumerate(self.columns) if c in ("time", "cputime")]
        alg = [i for i, c in enumerate(self.columns) if c == "algbw"]
        bus = [i for i, c in enumerate(self.columns) if c == "busbw"]
        wrong = [i for i, c in enumerate(self.columns) if c in ("#wrong", "error")]
        if len(time_i) <= k or len(alg) <= k or len(bus) <= k:
            return None
        return time_i[k], alg[k], bus[k], wrong[k] if len(wrong) > k else None

    @property
    def tokens(self) -> int:
        return len(self.columns) + (1 if self.columns and self.columns[-1] == "timestamp" else 0)  # date, time


STANDARD_LAYOUT = _Layout(STANDARD_COLUMNS, 0)


@dataclass
class _Section:
    start: int
    version: str = ""
    test: str = ""
    test_line: int = 0
    header_line: int = 0  # "# nThread" or "# Using devices"
    threads: int | None = None
    gpus_per_thread: int | None = None
    command: str = ""
    command_line: int = 0
    ranks: list[RankLine] = field(default_factory=list)
    layout: _Layout = STANDARD_LAYOUT
    rows: list[Row] = field(default_factory=list)
    last_line: int = 0
    truncated_ranks: bool = False


def op_from_name(name: str) -> str | None:
    """The operation a name stands for: 'all_reduce_perf', 'allreduce', 'a100_all_gather.txt', ..."""
    squashed = re.sub(r"[^a-z0-9]", "", name.lower())
    for key, op in _NAME_KEYS:
        if key in squashed:
            return op
    return None


def _test_op(program: str) -> str | None:
    """nccl-tests' program name -> operation; None for names that are not nccl-tests programs."""
    base = re.sub(r"(_perf)?(_mpi)?$", "", Path(program).name)
    return TEST_OPS.get(base)


def _number(text: str, kind: type) -> float | int | None:
    try:
        value = kind(text)
    except ValueError:
        return None
    return value


def _program_of(command: str) -> str:
    """The nccl-tests program a kept command line runs ("all_reduce_perf"): a line is kept as the command only
    when it names one."""
    m = _PROGRAM.search(command)
    assert m is not None
    return m.group(1) + "_perf"


def _command_gpus(command: str) -> int | None:
    """GPUs a launch command asks for: processes (mpirun/srun -np/-n/--ntasks) × threads (-t) × GPUs (-g)."""
    tokens = command.split()
    prog = next((i for i, t in enumerate(tokens) if _PROGRAM.search(" " + t)), None)
    if prog is None:
        return None

    def option(parts: list[str], shorts: tuple[str, ...], longs: tuple[str, ...]) -> int | None:
        for i, t in enumerate(parts):
            for s in shorts:
                if t == s and i + 1 < len(parts) and parts[i + 1].isdigit():
                    return int(parts[i + 1])
                if t.startswith(s) and not t.startswith("--") and t[len(s) :].isdigit():
                    return int(t[len(s) :])
            for lo in longs:
                if t == lo and i + 1 < len(parts) and parts[i + 1].isdigit():
                    return int(parts[i + 1])
                if t.startswith(lo + "=") and t[len(lo) + 1 :].isdigit():
                    return int(t[len(lo) + 1 :])
        return None

    launcher, args = tokens[:prog], tokens[prog + 1 :]
    procs = option(launcher, ("-np", "-n"), ("--np", "--ntasks")) if launcher else 1
    threads = option(args, ("-t",), ("--nthreads",)) or 1
    gpus = option(args, ("-g",), ("--ngpus",)) or 1
    return (procs or 1) * threads * gpus


def _timing(
    tokens: list[str], block: tuple[int, int, int, int | None], where: str, layout: _Layout, problems: list[str]
) -> Timing | None:
    ti, ai, bi, wi = block
    values = []
    for i in (ti, ai, bi):
        v = _number(tokens[i], float)
        if v is None or math.isnan(v):
            problems.append(f"{layout.columns[i]} ({where}) is not a number: {tokens[i]!r}")
        values.append(v)
    wrong = tokens[wi] if wi is not None else "N/A"
    if wi is not None and wrong != "N/A" and _number(wrong, float) is None:
        problems.append(f"{layout.columns[wi]} ({where}) is neither a number nor N/A: {wrong!r}")
    known = [v for v in values if v is not None]
    if len(known) < len(values) or any(math.isnan(v) for v in known):
        return None
    return Timing(known[0], known[1], known[2], wrong)


def _parse_row(tokens: list[str], layout: _Layout, lineno: int) -> Row | list[str]:
    if len(tokens) != layout.tokens:
        where = f"the column header on line {layout.line}" if layout.line else "nccl-tests' standard layout"
        return [
            f"a result row needs {layout.tokens} columns ({where}), this one has {len(tokens)} (truncated or mangled?)"
        ]
    problems: list[str] = []
    ints = {}
    for name in ("size", "count", "root"):
        i = layout.index(name)
        if i is None:
            ints[name] = -1
            continue
        v = tokens[i] if _INT.match(tokens[i]) else None
        if v is None:
            problems.append(f"{name} is not an integer: {tokens[i]!r}")
        ints[name] = int(v) if v is not None else 0
    oop_block, ip_block = layout.block(0), layout.block(1)
    oop = _timing(tokens, oop_block, "out-of-place", layout, problems) if oop_block else None
    ip = _timing(tokens, ip_block, "in-place", layout, problems) if ip_block else None
    if problems:
        return problems
    if oop is None:
        return ["the column header has no time / algbw / busbw columns"]
    ti, ri = layout.index("type"), layout.index("redop")
    return Row(
        ints["size"],
        ints["count"],
        tokens[ti] if ti is not None else "",
        tokens[ri] if ri is not None else "",
        ints["root"],
        oop,
        ip,
        lineno,
    )


def _looks_like_row(tokens: list[str]) -> bool:
    """Two leading integers (size, count), or a lone integer (a row cut short). Noise such as Open MPI's
    "8 more processes have sent help message ..." has a word second."""
    if not tokens or not _INT.match(tokens[0]):
        return False
    return len(tokens) == 1 or bool(_INT.match(tokens[1]))


def _split_sections(text: str, where: str, problems: list[Problem]) -> list[_Section]:
    sections: list[_Section] = []
    cur = _Section(start=1)
    row_problems = 0

    def new_section_if_used(lineno: int) -> None:
        nonlocal cur
        if cur.rows:
            sections.append(cur)
            cur = _Section(start=lineno)

    lines = text.splitlines()
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if m := _VERSION.match(line):
                new_section_if_used(lineno)
                cur.version = m.group(1)
            elif m := _STARTING.match(line):
                new_section_if_used(lineno)
                cur.test, cur.test_line = m.group(1), lineno
            elif m := _NTHREAD.match(line):
                new_section_if_used(lineno)
                cur.threads, cur.gpus_per_thread = int(m.group(1)), int(m.group(2))
                cur.header_line = cur.header_line or lineno
            elif _USING.match(line):
                cur.header_line = cur.header_line or lineno
            elif m := _RANK.match(line):
                rank = RankLine(
                    int(m.group(1)),
                    int(m.group(2) or 0),
                    int(m.group(3)),
                    m.group(4),
                    int(m.group(5)),
                    m.group(6),
                    m.group(7),
                    lineno,
                )
                if rank.gpu_name.endswith("..."):  # the process's 2,048-character buffer ran out here
                    cur.truncated_ranks = True
                    rank = replace(rank, gpu_name=rank.gpu_name[:-3].rstrip())
                cur.ranks.append(rank)
            elif line.rstrip().endswith("...") and cur.ranks and not cur.rows:
                cur.truncated_ranks = True
            elif _CONCLUDED.match(line):
                cur.last_line = lineno
                new_section_if_used(lineno + 1)
            else:
                tokens = line[1:].split()
                if tokens[:2] == ["size", "count"]:
                    cur.layout = _Layout(tuple(tokens), lineno)
            continue
        tokens = line.split()
        if _looks_like_row(tokens):
            parsed = _parse_row(tokens, cur.layout, lineno)
            if isinstance(parsed, Row):
                cur.rows.append(parsed)
                cur.last_line = lineno
            else:
                row_problems += 1
                if row_problems <= 10:
                    problems.extend(Problem(f"{where}:{lineno}", p) for p in parsed)
            continue
        if not cur.command and not cur.rows and _PROGRAM.search(line):
            cur.command, cur.command_line = line, lineno
    if row_problems > 10:
        problems.append(Problem(where, f"... {row_problems - 10} more bad rows"))
    cur.last_line = cur.last_line or len(lines)
    if cur.rows or not sections:
        sections.append(cur)
    return sections


def _resolve_op(sec: _Section, where: str, op: str | None) -> tuple[str, str]:
    """(operation, where it came from): the "Collective test starting" line, else the echoed command,
    else `op` (the --op flag), else the file name."""
    for program, origin in (
        (sec.test, f"line {sec.test_line}: Collective test starting"),
        (_program_of(sec.command) if sec.command else "", f"line {sec.command_line}: the command"),
    ):
        if not program:
            continue
        found = _test_op(program)
        base = re.sub(r"(_perf)?(_mpi)?$", "", Path(program).name)
        if found is None:
            reason = "the cost model has no" if base in UNMODELLED_TESTS else "not a known nccl-tests program:"
            raise InputError(
                Problem(
                    f"{where}:{sec.test_line or sec.command_line}",
                    f"{reason} {program} (calibration reads {', '.join(k + '_perf' for k in TEST_OPS)})",
                )
            )
        if op is not None and op != found:
            raise InputError(Problem("--op", f"{where} says it ran {program} ({found}), not {op}"))
        return found, origin
    if op is not None:
        return op, "--op"
    found = op_from_name(Path(where).name)
    if found is not None:
        return found, "the file name"
    raise InputError(
        Problem(
            "--op",
            f"{where}: cannot tell which collective ran (no 'Collective test starting' "
            "line, no command line, nothing in the file name); pass --op, e.g. "
            "--op allreduce",
        )
    )


def _finish(sec: _Section, where: str, op: str | None, gpus_per_server: int) -> NcclTestsRun:
    notes: list[str] = []
    if not sec.rows:
        at = sec.layout.line or sec.header_line or sec.last_line or 1
        raise InputError(
            Problem(
                f"{where}:{at}", "no result rows (the output is truncated, or the test failed before its first size)"
            )
        )
    first_row = sec.rows[0].line
    op_name, op_from = _resolve_op(sec, where, op)
    seen: dict[int, RankLine] = {}
    for r in sec.ranks:
        if r.rank in seen:
            raise InputError(
                Problem(
                    f"{where}:{r.line}",
                    f"rank {r.rank} appears twice (also line "
                    f"{seen[r.rank].line}): the processes did not form one communicator "
                    "(nccl-tests built without MPI=1?), so each ran alone",
                )
            )
        seen[r.rank] = r
    if sec.ranks:
        gpus = len(sec.ranks)
        per_proc = (sec.threads or 1) * (sec.gpus_per_thread or 1)
        procs = len({(r.host, r.pid) for r in sec.ranks})
        if sec.truncated_ranks and procs * per_proc > gpus:
            notes.append(f'rank lines cut short by nccl-tests ("..."): {procs} processes × {per_proc} GPUs')
            gpus = procs * per_proc
        hosts = Counter(r.host for r in sec.ranks)
        nodes, per_node = len(hosts), max(hosts.values())
        if gpus > len(sec.ranks):
            per_node = max(per_node, math.ceil(gpus / nodes))
        names = Counter(r.gpu_name for r in sec.ranks)
        gpu_name = names.most_common(1)[0][0]
        if len(names) > 1:
            notes.append("mixed GPUs: " + ", ".join(f"{k} × {v}" for k, v in names.items()))
    elif sec.header_line:
        raise InputError(
            Problem(
                f"{where}:{sec.header_line}",
                "the header has no '#  Rank ... device ...' lines: cannot tell how many GPUs ran (truncated header?)",
            )
        )
    elif sec.command and (from_cmd := _command_gpus(sec.command)):
        gpus, gpu_name = from_cmd, ""
        per_node = min(gpus, gpus_per_server)
        nodes = math.ceil(gpus / per_node)
        notes.append(
            f"no rank lines (partial output): {gpus} GPUs from the command on line {sec.command_line}, "
            f"{nodes} node(s) of up to {per_node} (--gpus-per-server)"
        )
    else:
        raise InputError(
            Problem(
                f"{where}:{first_row}",
                "no '#  Rank ... device ...' lines and no command line before the rows: cannot tell how many GPUs ran",
            )
        )
    top = max(sec.rows, key=lambda r: r.size_bytes).best
    factor = busbw_factor(op_name, gpus)
    if top.algbw_gBps >= 1.0 and factor > 0 and abs(top.busbw_gBps / top.algbw_gBps / factor - 1) > 0.02:
        notes.append(
            f"busbw / algbw = {top.busbw_gBps / top.algbw_gBps:.3f}, but {op_name} on {gpus} GPUs gives "
            f"{factor:.3f}: the GPU count may be wrong"
        )
    wrong = [
        r.size_bytes
        for r in sec.rows
        for t in (r.out_of_place, r.in_place)
        if t is not None and t.wrong not in ("N/A", "0") and _number(t.wrong, float)
    ]
    if wrong:
        notes.append(f"nccl-tests reported wrong results at {len(wrong)} size(s), e.g. {wrong[0]} B")
    return NcclTestsRun(
        where,
        op_name,
        op_from,
        sec.test or (_program_of(sec.command) if sec.command else ""),
        sec.version,
        tuple(sec.ranks),
        gpus,
        nodes,
        per_node,
        gpu_name,
        tuple(sec.rows),
        tuple(notes),
        sec.start,
    )


def parse_text(
    text: str, where: str = "<text>", *, op: str | None = None, gpus_per_server: int = 8
) -> list[NcclTestsRun]:
    """Every test in one nccl-tests output. `op`: the operation when the text does not say (`op_from_name`
    names accepted); `gpus_per_server`: GPUs per node when there are no rank lines (partial outputs).
    Raises InputError naming `where` and the line."""
    if op is not None:
        resolved = op_from_name(op)
        if resolved is None:
            raise InputError(
                Problem("--op", f"unknown operation {op!r}; one of {', '.join(k.replace('_', '') for k in TEST_OPS)}")
            )
        op = resolved
    problems: list[Problem] = []
    sections = _split_sections(text, where, problems)
    if problems:
        raise InputError(problems)
    runs: list[NcclTestsRun] = []
    for sec in sections:
        try:
            runs.append(_finish(sec, where, op, gpus_per_server))
        except InputError as exc:
            problems.extend(exc.problems)
    if problems:
        raise InputError(problems)
    return runs


def parse_file(path: str | Path, *, op: str | None = None, gpus_per_server: int = 8) -> list[NcclTestsRun]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(Problem(str(p), f"cannot read: {exc.strerror or exc}")) from None
    return parse_text(text, str(p), op=op, gpus_per_server=gpus_per_server)
