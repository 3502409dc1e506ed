"""Packet statistics as Chrome trace events, to add to trace.json (Perfetto): queue depths, DCQCN rates,
PFC frames. Timestamps in microseconds, like report/trace.py.

- process "queues (KB)": one counter track per switch egress queue that held traffic;
- process "DCQCN (Gb/s)": one counter track per QP whose rate changed;
- process "PFC": an instant event per pause / resume frame sent, on the track of the port carrying it.
"""

from __future__ import annotations

from typing import Any

QUEUES_PID = 1_000_001
DCQCN_PID = 1_000_002
PFC_PID = 1_000_003
MAX_TRACKS = 256


def packet_trace_events(stats) -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": QUEUES_PID, "args": {"name": "queues (KB)"}},
        {"ph": "M", "name": "process_name", "pid": DCQCN_PID, "args": {"name": "DCQCN (Gb/s)"}},
        {"ph": "M", "name": "process_name", "pid": PFC_PID, "args": {"name": "PFC frames"}},
    ]
    tracks = 0
    for port in sorted(stats.ports, key=lambda p: -max((q["max_depth_bytes"] for q in p["queues"]), default=0)):
        for q in port["queues"]:
            if not q["depth_series"] or tracks >= MAX_TRACKS:
                continue
            tracks += 1
            name = f"{port['port']} q{q['queue']}"
            ev.extend(
                {"ph": "C", "name": name, "pid": QUEUES_PID, "ts": t * 1e6, "args": {"KB": d / 1e3}}
                for t, d in q["depth_series"]
            )
    for f in stats.flows[:MAX_TRACKS]:
        rates = f.get("rate_gbps") or []
        if len(rates) > 1:
            ev.extend(
                {
                    "ph": "C",
                    "name": f"{f['name']} (QP {f['qpn']:#x})",
                    "pid": DCQCN_PID,
                    "ts": t * 1e6,
                    "args": {"Gb/s": r},
                }
                for t, r in rates
            )
    tids: dict[str, int] = {}
    for t, name, prio, quanta in stats.pfc_frames:
        if name not in tids:
            tids[name] = len(tids)
            ev.append({"ph": "M", "name": "thread_name", "pid": PFC_PID, "tid": tids[name], "args": {"name": name}})
        tid = tids[name]
        ev.append(
            {
                "ph": "i",
                "s": "t",
                "name": f"{'pause' if quanta else 'resume'} p{prio}",
                "pid": PFC_PID,
                "tid": tid,
                "ts": t * 1e6,
                "args": {"priority": prio, "quanta": quanta},
            }
        )
    return ev
