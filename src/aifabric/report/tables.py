"""Tables of a run as CSV (and Parquet when pyarrow is installed): links, collectives, ranks, flows."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ..analysis import flows
from ..simulate import Run
from ..units import BITS_PER_BYTE
from .files import write_atomic


def _csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return buf.getvalue()


def tables(run: Run) -> dict[str, list[dict]]:
    r = run.results
    f = flows(run.graph, run.fabric, run.timeline)
    return {
        "links": [{"id": x.id, "src": x.src, "dst": x.dst, "tier": x.tier,
                   "capacity_gbps": x.capacity_bytes_per_s * BITS_PER_BYTE / 1e9, "bytes": x.bytes,
                   "utilization": x.utilization, "peak_gbps": x.peak_bytes_per_s * BITS_PER_BYTE / 1e9}
                  for x in r.links],
        "collectives": [{"key": c.key, "op": c.op, "algorithm": c.algorithm, "group_size": c.group_size,
                         "bytes_per_rank": c.size_bytes, "start_s": c.start_s, "time_s": c.time_s,
                         "algbw_GBps": c.algbw_bytes_per_s / 1e9, "busbw_GBps": c.busbw_bytes_per_s / 1e9}
                        for c in r.collectives],
        "ranks": [{"rank": k, "compute_s": float(r.rank_compute_s[k]), "communication_s": float(r.rank_comm_s[k]),
                   "exposed_communication_s": float(r.rank_exposed_s[k])} for k in range(len(r.rank_compute_s))],
        "flows": [{"task": int(t), "name": run.graph.name[int(t)], "src": int(s), "dst": int(d), "bytes": float(b),
                   "start_s": float(a), "end_s": float(e), "network": "nvlink" if u else "scale-out"}
                  for t, s, d, b, a, e, u in zip(f.task, f.src, f.dst, f.size_bytes, f.start_s, f.end_s, f.scale_up)],
    }


def write_tables(run: Run, out_dir: Path) -> list[Path]:
    written = []
    data = tables(run)
    for name, rows in data.items():
        written.append(write_atomic(out_dir / f"{name}.csv", _csv(rows)))
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return written
    for name, rows in data.items():
        if rows:
            path = out_dir / f"{name}.parquet"
            tmp = out_dir / f".{name}.parquet.tmp"
            pq.write_table(pa.Table.from_pylist(rows), tmp)
            tmp.replace(path)
            written.append(path)
    return written
