"""trace.json in Chrome's trace-event format (opens in Perfetto and chrome://tracing).

One process per server, one thread per rank (its compute and its part in each collective) and one
per rank for the transfers it sends; a "links" process with one counter track per loaded link
(Gb/s over time). Timestamps in microseconds, as the format requires.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analysis import rank_segments
from ..engines.taskgraph import TRANSFER
from ..simulate import Run
from ..units import BITS_PER_BYTE

LINKS_PID = 1_000_000
MAX_COUNTER_LINKS = 256
SEND_TID_OFFSET = 100_000


def build_trace(run: Run) -> dict[str, Any]:
    g, tl, fabric = run.graph, run.timeline, run.fabric
    gps = fabric.gpus_per_server
    events: list[dict[str, Any]] = []
    servers = sorted({fabric.server_of(r) for r in range(fabric.world_size)})
    for s in servers:
        events.append({"ph": "M", "name": "process_name", "pid": s, "args": {"name": f"server {s}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": s, "args": {"sort_index": s}})
    for r in range(fabric.world_size):
        pid = fabric.server_of(r)
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": r,
                       "args": {"name": f"rank {r} (gpu{r % gps})"}})
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": SEND_TID_OFFSET + r,
                       "args": {"name": f"rank {r} sends"}})
    for seg in rank_segments(g, tl):
        events.append({"ph": "X", "name": seg.name, "cat": seg.kind, "pid": fabric.server_of(seg.rank),
                       "tid": seg.rank, "ts": seg.start_s * 1e6, "dur": (seg.end_s - seg.start_s) * 1e6})
    for t in range(len(g)):
        if g.kind[t] != TRANSFER or np.isnan(tl.end_s[t]):
            continue
        src = g.rank[t]
        events.append({"ph": "X", "name": f"→ rank {g.dst[t]}", "cat": "transfer", "pid": fabric.server_of(src),
                       "tid": SEND_TID_OFFSET + src, "ts": tl.start_s[t] * 1e6,
                       "dur": (tl.end_s[t] - tl.start_s[t]) * 1e6,
                       "args": {"bytes": g.size_bytes[t], "op": g.name[t], "route": [fabric.links[li].id for li in g.route[t]]}})
    events.append({"ph": "M", "name": "process_name", "pid": LINKS_PID, "args": {"name": "links (Gb/s)"}})
    loaded = np.argsort(-tl.link_bytes)[:MAX_COUNTER_LINKS]
    loaded = [int(i) for i in loaded if tl.link_bytes[i] > 0]
    keep = set(loaded)
    last: dict[int, float] = {}
    load = tl.link_load
    for a, b, links, rates in zip(load.t_start, load.t_end, load.links, load.rates_bytes_per_s):
        now = dict(zip(links.tolist(), rates.tolist()))
        for li in keep:
            value = now.get(li, 0.0)
            if last.get(li, 0.0) != value:
                events.append({"ph": "C", "name": fabric.links[li].id, "pid": LINKS_PID, "ts": a * 1e6,
                               "args": {"Gb/s": value * BITS_PER_BYTE / 1e9}})
                last[li] = value
    for li, value in last.items():
        if value:
            events.append({"ph": "C", "name": fabric.links[li].id, "pid": LINKS_PID, "ts": tl.makespan_s * 1e6,
                           "args": {"Gb/s": 0.0}})
    if run.packet_stats is not None:  # queue depth, DCQCN rate and PFC counters of the packet engine
        from ..packet.trace import packet_trace_events

        events.extend(packet_trace_events(run.packet_stats))
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"scenario": run.scenario.name, "engine": run.results.engine}}
