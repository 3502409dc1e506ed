"""trace.json in Chrome's trace-event format (opens in Perfetto and chrome://tracing).

One process per server; per rank three threads: "rank r" (its GPU's compute stream: compute, folded
scale-up collectives, pipeline bubbles; idle time is the gaps), "rank r comm" (its part in each
collective, its pipeline sends and receives: these overlap compute, hence their own track) and
"rank r sends" (the transfers it sends, with bytes and route); a "links" process with one counter track
per loaded link (Gb/s over time). Timestamps in
microseconds, as the format requires, rounded to the nanosecond.

Large runs: every rank's track is complete up to `MAX_SEGMENT_EVENTS` events in all (beyond that,
whole tracks of evenly spaced ranks); per-transfer events are capped at `MAX_TRANSFER_EVENTS`
(collective transfers first, then pipeline sends in time order); `otherData` says what was left out.
The bulk is encoded to JSON text straight from numpy columns (`Trace.json_chunks`), one event per line; the rank
segments (millions at 3.5 million tasks) by a compiled loop into one byte buffer (report/_fast.py), the same bytes
as the f-string per line that AIFABRIC_PURE_PYTHON=1 (or a small run) uses.

The file is strict JSON that Perfetto loads: an event whose time is not a finite number (a run cut off by Ctrl-C
leaves unfinished tasks; no event has an `inf` or `NaN` time or duration) is left out and counted in
`otherData.left_out_not_finite`; any other non-finite number is written as null.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ..analysis import BESIDE, BUBBLE_K, COMM_K, COMPUTE_K, FOLDED, KINDS
from ..engines.taskgraph import TRANSFER
from ..simulate import Run
from ..units import bytes_per_s_to_gbps
from . import _fast

LINKS_PID = 1_000_000
MAX_COUNTER_LINKS = 64
SEND_TID_OFFSET = 100_000
COMM_TID_OFFSET = 200_000
MAX_TRANSFER_EVENTS = 20_000
MAX_SEGMENT_EVENTS = 2_500_000
CHUNK = 50_000

_enc = json.encoder.encode_basestring_ascii


_compact = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode  # json.dumps' own, made once


def _dumps(obj: Any) -> str:
    """Compact strict JSON: NaN and Infinity (which Python would write, and no JSON reader takes) become null."""
    try:
        return _compact(obj)
    except ValueError:
        from .files import _finite

        return _compact(_finite(obj))


def _finite_spans(start_s: np.ndarray, end_s: np.ndarray) -> np.ndarray:
    """The spans that can be drawn: both ends finite, the end not before the start."""
    start_s, end_s = np.asarray(start_s, dtype=float), np.asarray(end_s, dtype=float)
    return np.isfinite(start_s) & np.isfinite(end_s) & (end_s >= start_s)


def _left_out(other: dict[str, Any], what: str, n: int) -> None:
    if n:
        other.setdefault("left_out_not_finite", {})[what] = int(n)


def _us(x: np.ndarray) -> list[float]:
    """Seconds -> microseconds rounded to the nanosecond, as Python floats (short JSON numbers)."""
    return np.round(np.asarray(x, dtype=float) * 1e6, 3).tolist()


def _span_us(start_s: np.ndarray, end_s: np.ndarray) -> tuple[list[float], list[float]]:
    """(ts, dur) in microseconds from rounded ends: back-to-back spans stay back to back."""
    a, b = np.round(start_s * 1e6, 3), np.round(end_s * 1e6, 3)
    return a.tolist(), np.round(b - a, 3).tolist()


class Block:
    """Events already encoded: `n` JSON objects joined by ",\\n", as ASCII bytes (a numpy uint8 array or bytes)."""

    __slots__ = ("data", "n")

    def __init__(self, data, n: int):
        self.data, self.n = data, n

    @property
    def text(self) -> str:
        return memoryview(self.data).tobytes().decode("ascii")

    def __len__(self) -> int:
        return self.n


class Trace(Mapping):
    """The trace: small events as dicts (metadata, counters, the packet engine's tracks) and the bulk as
    pre-encoded JSON: lists of lines, or `Block`s of lines already joined. `json_chunks()` streams the file; as a
    mapping it reads like the JSON object (`trace["traceEvents"]` decodes the bulk on first use: fine for small
    runs and tests)."""

    def __init__(self, head: list[dict], bulk: list[list[str] | Block], tail: list[dict], other: dict[str, Any]):
        self.head, self.bulk, self.tail, self.other = head, bulk, tail, other
        self._dict: dict[str, Any] | None = None

    @property
    def n_events(self) -> int:
        return len(self.head) + sum(len(b) for b in self.bulk) + len(self.tail)

    def json_chunks(self) -> Iterator[str]:
        for piece in self.json_pieces():
            yield piece if isinstance(piece, str) else piece.tobytes().decode("ascii")

    def json_pieces(self) -> Iterator[str | memoryview]:
        """The file's text in pieces: strings, and the `Block`s' bytes as they are (files.write_atomic writes both)."""
        yield '{"traceEvents":[\n'
        first = True
        for part in ([_dumps(e) for e in self.head], *self.bulk, [_dumps(e) for e in self.tail]):
            if isinstance(part, Block):
                if part.n:
                    if not first:
                        yield ",\n"
                    yield memoryview(part.data)
                    first = False
                continue
            for k in range(0, len(part), CHUNK):
                yield ("" if first else ",\n") + ",\n".join(part[k : k + CHUNK])
                first = False
        yield '\n],"displayTimeUnit":"ns","otherData":' + _dumps(self.other) + "}\n"

    def to_dict(self) -> dict[str, Any]:
        if self._dict is None:
            self._dict = json.loads("".join(self.json_chunks()))
        return self._dict

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self):
        return iter(("traceEvents", "displayTimeUnit", "otherData"))

    def __len__(self) -> int:
        return 3


def _segment_lines_python(
    names: list[str], kinds: list[int], cats: list[str], pid: list[int], tid: list[int], ts: np.ndarray, dur: np.ndarray
) -> list[str]:
    """The rank-timeline segments' lines, one f-string each (the definition; report/_fast.py writes the same
    text compiled)."""
    cache: dict[str, str] = {}

    def q(s: str) -> str:
        out = cache.get(s)
        if out is None:
            out = cache[s] = _enc(s)
        return out

    return [
        f'{{"ph":"X","name":{q(n)},"cat":{cats[k]},"pid":{p},"tid":{r},"ts":{a},"dur":{d}}}'
        for n, k, p, r, a, d in zip(names, kinds, pid, tid, ts.tolist(), dur.tolist())
    ]


def _segment_lines(run: Run, other: dict[str, Any]) -> list[str] | Block:
    fabric = run.fabric
    rt = run.rank_timeline
    keep = rt.kind != 2  # idle: the gaps of the track
    drawable = _finite_spans(rt.start_s, rt.end_s)
    _left_out(other, "rank_segments", int((keep & ~drawable).sum()))
    keep &= drawable
    kept_ranks = None
    if keep.sum() > MAX_SEGMENT_EVENTS:
        stride = int(np.ceil(keep.sum() / MAX_SEGMENT_EVENTS))
        keep &= rt.rank % stride == 0
        kept_ranks = stride
    idx = np.flatnonzero(keep)
    pid = rt.rank[idx] // fabric.gpus_per_server
    kinds = rt.kind[idx]
    folded = rt.category[idx] == FOLDED
    tid = rt.rank[idx] + np.where((kinds == COMM_K) & ~folded, COMM_TID_OFFSET, 0)
    # names: compute and collectives by their task or key; folded collectives and bubbles by their kind
    names = rt.name[idx].copy()
    names[folded] = "folded collectives"
    names[rt.category[idx] == BESIDE] = BESIDE  # on the rank's communication track, beside its compute
    names[kinds == BUBBLE_K] = "bubble"
    cats = [_enc(KINDS[k]) for k in range(len(KINDS))]
    a, b = np.round(rt.start_s[idx] * 1e6, 3), np.round(rt.end_s[idx] * 1e6, 3)
    d = np.round(b - a, 3)  # as _span_us: back-to-back spans stay back to back
    lines: list[str] | Block | None = None
    if _fast.use_compiled(len(idx)):
        ts_k, dur_k = _fast.exact_thousandths(a), _fast.exact_thousandths(d)
        if ts_k is not None and dur_k is not None:
            data = _fast.segment_bytes(names.tolist(), kinds, cats, pid, tid, ts_k, dur_k, _enc)
            lines = Block(data, len(idx))
    if lines is None:
        lines = _segment_lines_python(names.tolist(), kinds.tolist(), cats, pid.tolist(), tid.tolist(), a, d)
    other["rank_tracks"] = {
        "kinds": [KINDS[COMPUTE_K], KINDS[COMM_K], KINDS[BUBBLE_K]],
        "idle": "the gaps of a rank's track (ranks.csv and summary.json give idle_s per rank)",
        "events": len(lines),
        "complete": kept_ranks is None,
    }
    if kept_ranks is not None:
        other["rank_tracks"]["note"] = (
            f"more than {MAX_SEGMENT_EVENTS:,} events: segments of every "
            f"{kept_ranks}th rank (rank % {kept_ranks} == 0) only"
        )
    return lines


def _transfer_lines(run: Run, other: dict[str, Any]) -> list[str]:
    g, tl, fabric = run.graph, run.timeline, run.fabric
    n = len(g)
    kind = np.fromiter(g.kind, dtype=np.int8, count=n)
    sizes = np.fromiter(g.size_bytes, dtype=float, count=n)
    done = (kind == TRANSFER) & ~np.isnan(tl.end_s[:n])
    drawable = _finite_spans(tl.start_s[:n], tl.end_s[:n]) & np.isfinite(sizes)
    _left_out(other, "transfers", int((done & ~drawable).sum()))
    ids = np.flatnonzero(done & drawable)
    total = len(ids)
    coll = np.fromiter(g.collective, dtype=np.int64, count=n)
    if total > MAX_TRANSFER_EVENTS:
        # collective transfers first, then point-to-point (pipeline) sends, each in time order
        order = np.lexsort((tl.start_s[ids], coll[ids] < 0))
        ids = np.sort(ids[order[:MAX_TRANSFER_EVENTS]])
        p2p = coll[ids] < 0
        last = float(tl.start_s[ids][p2p].max()) if p2p.any() else 0.0
        other["transfer_events"] = {
            "total": total,
            "written": len(ids),
            "limit": MAX_TRANSFER_EVENTS,
            "rule": "every collective transfer first, then pipeline sends in order of start time "
            f"(those starting up to {last * 1e3:.3f} ms); every transfer is in flows.csv",
        }
    else:
        other["transfer_events"] = {"total": total, "written": total, "limit": MAX_TRANSFER_EVENTS}
    link_json = [_enc(link.id) for link in fabric.links]
    src = np.fromiter(g.rank, dtype=np.int64, count=n)[ids]
    dst = np.fromiter(g.dst, dtype=np.int64, count=n)[ids]
    gps = fabric.gpus_per_server
    size = sizes[ids].tolist()
    ts, dur = _span_us(tl.start_s[ids], tl.end_s[ids])
    return [
        f'{{"ph":"X","name":"→ rank {d}","cat":"transfer","pid":{s // gps},"tid":{SEND_TID_OFFSET + s},'
        f'"ts":{a},"dur":{u},"args":{{"bytes":{b!r},"op":{_enc(g.name[t])},'
        f'"route":[{",".join(link_json[li] for li in g.route[t])}]}}}}'
        for t, s, d, a, u, b in zip(ids.tolist(), src.tolist(), dst.tolist(), ts, dur, size)
    ]


def _counter_lines(run: Run) -> list[str]:
    """Per loaded link (the `MAX_COUNTER_LINKS` that carried most bytes over time), an event whenever its
    rate changes, and a 0 when it stops carrying anything; encoded (every time and value finite)."""
    tl, fabric = run.timeline, run.fabric
    load = tl.link_load
    seg_starts, seg_ends, links, rates = load.segments()
    if not len(seg_starts):
        return []
    starts, ends = np.asarray(seg_starts, dtype=float), np.asarray(seg_ends, dtype=float)
    lens = np.fromiter(map(len, links), dtype=np.int64, count=len(links))
    seg = np.repeat(np.arange(len(starts)), lens)
    li = np.concatenate(links).astype(np.int64)
    rate = np.concatenate(rates).astype(float)
    per_link = np.bincount(li, weights=rate * (ends - starts)[seg], minlength=len(fabric.links))
    top = np.argsort(-per_link, kind="stable")[:MAX_COUNTER_LINKS]
    top = top[per_link[top] > 0]
    m = np.isin(li, top)
    seg, li, rate = seg[m], li[m], rate[m]
    order = np.lexsort((seg, li))
    seg, li, rate = seg[order], li[order], rate[order]
    same_prev = np.zeros(len(li), dtype=bool)
    same_prev[1:] = (li[1:] == li[:-1]) & (seg[1:] == seg[:-1] + 1) & (starts[seg[1:]] == ends[seg[:-1]])
    changed = ~same_prev
    changed[1:] |= same_prev[1:] & (rate[1:] != rate[:-1])
    stops = np.ones(len(li), dtype=bool)
    stops[:-1] = ~same_prev[1:]
    t = np.concatenate((starts[seg[changed]], ends[seg[stops]]))
    v = np.concatenate((rate[changed], np.zeros(int(stops.sum()))))
    lk = np.concatenate((li[changed], li[stops]))
    order = np.lexsort((np.concatenate((np.ones(int(changed.sum())), np.zeros(int(stops.sum())))), t, lk))
    names = [_enc(link.id) for link in fabric.links]
    # each line as _dumps writes the event {"ph": "C", "name": ..., "pid": ..., "ts": a, "args": {"Gb/s": g}}
    return [
        f'{{"ph":"C","name":{names[k]},"pid":{LINKS_PID},"ts":{a!r},"args":{{"Gb/s":{g!r}}}}}'
        for k, a, g in zip(lk[order].tolist(), _us(t[order]), bytes_per_s_to_gbps(v[order]).tolist())
        if math.isfinite(a) and math.isfinite(g)
    ]


def _has_finite_times(event: dict[str, Any]) -> bool:
    """An event Perfetto can place: its `ts` and `dur` (when it has them) finite numbers, `dur` not negative."""
    for key in ("ts", "dur"):
        v = event.get(key)
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v)):
            return False
    return not event.get("dur", 0) < 0


def build_trace(run: Run) -> Trace:
    fabric = run.fabric
    gps = fabric.gpus_per_server
    head: list[dict[str, Any]] = []
    servers = sorted({fabric.server_of(r) for r in range(fabric.world_size)})
    for s in servers:
        head.append({"ph": "M", "name": "process_name", "pid": s, "args": {"name": f"server {s}"}})
        head.append({"ph": "M", "name": "process_sort_index", "pid": s, "args": {"sort_index": s}})
    for r in range(fabric.world_size):
        pid = fabric.server_of(r)
        for k, (tid, name) in enumerate(
            (
                (r, f"rank {r} (gpu{r % gps})"),
                (COMM_TID_OFFSET + r, f"rank {r} comm"),
                (SEND_TID_OFFSET + r, f"rank {r} sends"),
            )
        ):
            head.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
            head.append(
                {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": 3 * r + k}}
            )
    head.append({"ph": "M", "name": "process_name", "pid": LINKS_PID, "args": {"name": "links (Gb/s)"}})
    other: dict[str, Any] = {"scenario": run.scenario.name, "engine": run.results.engine}
    bulk = [_segment_lines(run, other), _transfer_lines(run, other), _counter_lines(run)]
    tail: list[dict[str, Any]] = []
    other["counter_links"] = {
        "limit": MAX_COUNTER_LINKS,
        "note": "the links that carried most bytes as transfers (collectives folded "
        "into GPU time have no load over time)",
    }
    if run.packet_stats is not None:  # queue depth, DCQCN rate and PFC counters of the packet engine
        from ..packet.trace import packet_trace_events

        tail.extend(packet_trace_events(run.packet_stats))
    kept = [e for e in tail if _has_finite_times(e)]
    _left_out(other, "counters", len(tail) - len(kept))
    return Trace(head, bulk, kept, other)
