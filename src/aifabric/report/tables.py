"""Tables of a run as CSV (and Parquet when pyarrow is installed): links, collectives, ranks, flows.

Columns are built as numpy arrays / lists and written as the csv module's writer writes them: by joining strings,
or for tables of 20,000 rows or more by a compiled loop (report/_fast.py csv_rows); the csv writer itself
whenever a field needs quoting (and with AIFABRIC_PURE_PYTHON=1). flows.csv holds
at most `MAX_FLOW_ROWS` rows (every collective transfer first, then pipeline sends in order of start
time); summary.json's `flows.table_rows` says how many it holds, `flows.count` how many ran.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from ..compiled import pure_python
from ..simulate import Run
from ..units import bytes_per_s_to_gbps
from . import _fast
from .files import write_atomic

MAX_FLOW_ROWS = 1_000_000

Columns = dict[str, list]


_QUOTED = (",", '"', "\r", "\n")  # what makes the csv module quote a field (QUOTE_MINIMAL, lineterminator \r\n)


def _csv_joined(cols: Columns) -> str | None:
    """The text `_csv` writes, by joining strings: ints and floats through str (as the csv module writes them),
    strings as they are when none needs quoting; None (the csv module then writes it) when a field would be
    quoted, a value is of another type, or the table has a single column (the csv module quotes an empty field
    alone on its row)."""
    if len(cols) < 2:
        return None
    fields = []
    for values in (list(cols), *cols.values()):
        types = set(map(type, values))
        if types <= {str}:
            text = "\x00".join(values)
            if any(c in text for c in _QUOTED):
                return None
            fields.append(values)
        elif types <= {int, float}:
            fields.append(list(map(str, values)))
        else:
            return None
    header, *columns = fields
    return ",".join(header) + "\r\n" + "\r\n".join(map(",".join, zip(*columns))) + "\r\n"


def _csv_pieces(cols: Columns) -> str | list:
    """`_csv`'s text, or pieces of it (str, bytes-like) as files.write_atomic takes them: a table of
    `_fast.MIN_ROWS` rows or more is written by the compiled writer (report/_fast.py csv_rows)."""
    if cols and len(cols) > 1 and _fast.use_compiled(len(next(iter(cols.values())))):
        header = _csv_joined({k: v[:1] for k, v in cols.items()})  # the header line (and a first row)
        rows = _fast.csv_rows(list(cols.values()), _QUOTED) if header is not None else None
        if header is not None and rows is not None:
            return [header.split("\r\n", 1)[0] + "\r\n", rows.data]
    return _csv(cols)


def _csv(cols: Columns) -> str:
    if cols and len(next(iter(cols.values()))) and not pure_python():
        text = _csv_joined(cols)
        if text is not None:
            return text
    buf = io.StringIO()
    if cols and len(next(iter(cols.values()))):
        w = csv.writer(buf, lineterminator="\r\n")
        w.writerow(list(cols))
        w.writerows(zip(*cols.values()))
    return buf.getvalue()


def flow_rows(run: Run) -> np.ndarray:
    """Indices into `run.flows` (analysis.flows) of the flows flows.csv holds (all, or MAX_FLOW_ROWS chosen)."""
    f = run.flows
    if len(f.task) <= MAX_FLOW_ROWS:
        return np.arange(len(f.task))
    p2p = np.fromiter(run.graph.collective, dtype=np.int64, count=len(run.graph))[f.task] < 0
    return np.sort(np.lexsort((f.start_s, p2p))[:MAX_FLOW_ROWS])


def table_columns(run: Run) -> dict[str, Columns]:
    r = run.results
    f = run.flows
    rt = run.rank_timeline
    keep = flow_rows(run)
    names = run.graph.name
    n_ranks = len(r.rank_compute_s)
    return {
        "links": {
            "id": [x.id for x in r.links],
            "src": [x.src for x in r.links],
            "dst": [x.dst for x in r.links],
            "tier": [x.tier for x in r.links],
            "capacity_gbps": [bytes_per_s_to_gbps(x.capacity_bytes_per_s) for x in r.links],
            "bytes": [x.bytes for x in r.links],
            "utilization": [x.utilization for x in r.links],
            "peak_gbps": [bytes_per_s_to_gbps(x.peak_bytes_per_s) for x in r.links],
        },
        "collectives": {
            "key": [c.key for c in r.collectives],
            "op": [c.op for c in r.collectives],
            "algorithm": [c.algorithm for c in r.collectives],
            "group_size": [c.group_size for c in r.collectives],
            "bytes_per_rank": [c.size_bytes for c in r.collectives],
            "count": [c.count for c in r.collectives],
            "start_s": [c.start_s for c in r.collectives],
            "time_s": [c.time_s for c in r.collectives],
            "algbw_gBps": [c.algbw_bytes_per_s / 1e9 for c in r.collectives],
            "busbw_gBps": [c.busbw_bytes_per_s / 1e9 for c in r.collectives],
        },
        "ranks": {
            "rank": list(range(n_ranks)),
            "compute_s": r.rank_compute_s.tolist(),
            "communication_s": r.rank_comm_s.tolist(),
            "exposed_communication_s": r.rank_exposed_s.tolist(),
            "idle_s": rt.idle_s[:n_ranks].tolist(),
            "bubble_s": rt.bubble_s[:n_ranks].tolist(),
        },
        "flows": {
            "task": f.task[keep].tolist(),
            "name": [names[t] for t in f.task[keep].tolist()],
            "src": f.src[keep].tolist(),
            "dst": f.dst[keep].tolist(),
            "bytes": f.size_bytes[keep].tolist(),
            "start_s": f.start_s[keep].tolist(),
            "end_s": f.end_s[keep].tolist(),
            "network": np.where(f.scale_up[keep], "nvlink", "scale-out").tolist(),
            "dim": f.dim[keep].tolist(),
        },
    }


def tables(run: Run) -> dict[str, list[dict]]:
    """The tables as lists of rows (dicts)."""
    return {name: [dict(zip(cols, row)) for row in zip(*cols.values())] for name, cols in table_columns(run).items()}


def write_tables(run: Run, out_dir: Path) -> list[Path]:
    written = []
    data = table_columns(run)
    for name, cols in data.items():
        written.append(write_atomic(out_dir / f"{name}.csv", _csv_pieces(cols)))
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return written
    for name, cols in data.items():
        if cols and len(next(iter(cols.values()))):
            path = out_dir / f"{name}.parquet"
            tmp = out_dir / f".{name}.parquet.tmp"
            pq.write_table(pa.table(cols), tmp)
            tmp.replace(path)
            written.append(path)
    return written
