"""Plotly figures of a packet run: queue depths, DCQCN rates, PFC frames; and a small offline HTML page.

`packet_figures(stats)` returns (title, figure, note) triples in the form report/html.py uses, so the
run report can append them; `packet_html(title, findings, stats)` is the page `aifabric packet --out`
writes (plotly.js inline, works offline).
"""

from __future__ import annotations

import html

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

MAX_QUEUES = 8
MAX_QPS = 16


def queue_depths(stats) -> tuple[go.Figure, str]:
    queues = [
        (q["max_depth_bytes"], p["port"], q)
        for p in stats.ports
        if p["switch_port"]
        for q in p["queues"]
        if q["depth_series"]
    ]
    queues.sort(key=lambda x: -x[0])
    fig = go.Figure()
    for _, port, q in queues[:MAX_QUEUES]:
        t, d = zip(*q["depth_series"])
        fig.add_trace(
            go.Scatter(
                x=[x * 1e6 for x in t],
                y=[y / 1e3 for y in d],
                mode="lines",
                line_shape="hv",
                name=f"{port} q{q['queue']}",
            )
        )
    fig.update_layout(title="Egress queue depth", xaxis_title="time (µs)", yaxis_title="KB", height=380)
    note = "" if len(queues) <= MAX_QUEUES else f"the {MAX_QUEUES} deepest of {len(queues)} queues"
    return fig, note


def dcqcn_rates(stats) -> tuple[go.Figure, str]:
    flows = [f for f in stats.flows if len(f.get("rate_gbps") or []) > 1]
    fig = go.Figure()
    for f in flows[:MAX_QPS]:
        t, r = zip(*f["rate_gbps"])
        fig.add_trace(
            go.Scatter(
                x=[x * 1e6 for x in t], y=list(r), mode="lines", line_shape="hv", name=f"{f['name']} (QP {f['qpn']:#x})"
            )
        )
    fig.update_layout(title="DCQCN sending rate per QP", xaxis_title="time (µs)", yaxis_title="Gb/s", height=380)
    note = "" if len(flows) <= MAX_QPS else f"first {MAX_QPS} of {len(flows)} QPs whose rate changed"
    return fig, note


def pfc_frames(stats) -> tuple[go.Figure, str]:
    fig = go.Figure()
    for label, pick, symbol in (
        ("pause (and refreshes)", lambda q: q > 0, "square"),
        ("resume (quanta 0)", lambda q: q == 0, "circle-open"),
    ):
        rows = [(t, p, prio, q) for t, p, prio, q in stats.pfc_frames if pick(q)]
        if rows:
            fig.add_trace(
                go.Scatter(
                    x=[r[0] * 1e6 for r in rows],
                    y=[r[1] for r in rows],
                    mode="markers",
                    marker_symbol=symbol,
                    name=label,
                    hovertext=[f"priority {r[2]}, quanta {r[3]}" for r in rows],
                )
            )
    fig.update_layout(title="PFC frames sent (on the link they travel)", xaxis_title="time (µs)", height=320)
    return fig, ""


def packet_figures(stats) -> list[tuple[str, go.Figure, str]]:
    out = []
    fig, note = queue_depths(stats)
    out.append(("Queues", fig, note))
    if any(len(f.get("rate_gbps") or []) > 1 for f in stats.flows):
        fig, note = dcqcn_rates(stats)
        out.append(("DCQCN", fig, note))
    if stats.pfc_frames:
        fig, note = pfc_frames(stats)
        out.append(("PFC", fig, note))
    return out


def packet_html(title: str, findings: list[str], runs: list[tuple[str, object]]) -> str:
    """One page: the findings, then the figures of each (label, stats) run."""
    parts = [f"<h1>{html.escape(title)}</h1><ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in findings) + "</ul>"]
    k = 0
    for label, stats in runs:
        if len(runs) > 1:
            parts.append(f"<h2>{html.escape(label)}</h2>")
        for name, fig, note in packet_figures(stats):
            parts.append(f"<h3>{html.escape(name)}</h3>")
            if note:
                parts.append(f"<p>{html.escape(note)}</p>")
            parts.append(
                fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"p{k}", config={"displaylogo": False})
            )
            k += 1
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><script>{get_plotlyjs()}</script>"
        "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}</style></head><body>"
        + "".join(parts)
        + "</body></html>"
    )
