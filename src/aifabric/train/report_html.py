"""report.html of a real training run: the loss per step, step times, and every rank's traced
communication on a shared wall-clock axis (what each process waited for and when), self-contained
(plotly.js inline, works offline)."""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from .tracer import Trace

CSS = (
    "body{font-family:sans-serif;margin:24px;max-width:1200px}table{border-collapse:collapse}"
    "td{padding:2px 10px;border-bottom:1px solid #eee}.note{color:#555;font-size:90%}"
)
MAX_EVENTS = 20_000  # communication bars drawn (the rest are in trace.jsonl)


def _category(e: dict[str, Any]) -> str:
    tag = str(e.get("tag", ""))
    if tag.startswith("init"):
        return "initial broadcast"
    if e["op"] in ("send", "recv"):
        return "pipeline send/recv"
    if tag.startswith(("grad", "dp")):
        return "data-parallel gradient buckets"
    head = tag.split("/")[0]
    return {"tp": "tensor-parallel"}.get(head, f"{e['op']}")


def _fig_html(fig: go.Figure, div_id: str) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id)


def timeline(trace: Trace) -> tuple[go.Figure, str]:
    """Per rank, one bar per traced collective or send/recv, from its start to its end (wall clock)."""
    events = [e for r in sorted(trace.comms) for e in trace.comms[r]]
    t0 = min((e["start_s"] for e in events), default=0.0)
    shown = events[:MAX_EVENTS]
    by_cat: dict[str, list[dict[str, Any]]] = {}
    for e in shown:
        by_cat.setdefault(_category(e), []).append(e)
    fig = go.Figure()
    for cat, evs in sorted(by_cat.items()):
        fig.add_trace(
            go.Bar(
                name=cat,
                orientation="h",
                base=[(e["start_s"] - t0) * 1e3 for e in evs],
                x=[max((e["end_s"] - e["start_s"]) * 1e3, 1e-3) for e in evs],
                y=[f"rank {e['rank']}" for e in evs],
                customdata=[[e["op"], e.get("tag", ""), e["bytes"], e.get("step", "")] for e in evs],
                hovertemplate="%{y}: %{customdata[0]} %{customdata[1]}<br>%{customdata[2]} bytes, step "
                "%{customdata[3]}<br>%{base:.3f} ms + %{x:.3f} ms<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="overlay",
        height=180 + 28 * max(1, len(trace.comms)),
        xaxis_title="wall time (ms)",
        yaxis={"autorange": "reversed"},
        margin={"l": 80, "r": 20, "t": 30, "b": 40},
        legend={"orientation": "h"},
    )
    note = (
        "Every collective and send/recv each process issued, as measured (gloo on CPU: real waits, not a "
        "fabric's). Replay the trace on a simulated fabric with `aifabric replay`."
    )
    if len(events) > MAX_EVENTS:
        note += f" The first {MAX_EVENTS:,} of {len(events):,} events are drawn."
    return fig, note


def losses(summary: dict[str, Any]) -> go.Figure:
    fig = go.Figure()
    steps = list(range(len(summary.get("losses") or [])))
    fig.add_trace(go.Scatter(x=steps, y=summary.get("losses") or [], mode="lines+markers", name="loss"))
    fig.add_trace(
        go.Bar(
            x=list(range(len(summary.get("step_times_s") or []))),
            y=[t * 1e3 for t in summary.get("step_times_s") or []],
            name="step time (ms)",
            yaxis="y2",
            opacity=0.4,
        )
    )
    fig.update_layout(
        height=320,
        xaxis_title="step",
        yaxis_title="loss",
        yaxis2={"title": "step time (ms)", "overlaying": "y", "side": "right"},
        margin={"l": 60, "r": 60, "t": 30, "b": 40},
        legend={"orientation": "h"},
    )
    return fig


def build_train_html(summary: dict[str, Any], trace: Trace | None) -> str:
    plan = summary["plan"]
    rows = [
        ("model", summary["model"]),
        (
            "plan",
            f"dp {plan['dp']} × tp {plan['tp']} × pp {plan['pp']}"
            + (f", {plan.get('schedule')}" if plan["pp"] > 1 else ""),
        ),
        ("processes", summary["world_size"]),
        ("steps", summary["steps"]),
        ("median step time", f"{summary['median_step_time_s'] * 1e3:.1f} ms"),
        ("final loss", f"{summary['losses'][-1]:.6f}" if summary.get("losses") else "–"),
    ]
    parts = [
        f"<h1>aifabric train — {html.escape(str(summary['model']))}</h1>",
        "<table>"
        + "".join(f"<tr><td><b>{html.escape(str(k))}</b></td><td>{html.escape(str(v))}</td></tr>" for k, v in rows)
        + "</table>",
        "<h2>Loss and step time</h2>",
        _fig_html(losses(summary), "loss"),
    ]
    if trace is not None and trace.comms:
        fig, note = timeline(trace)
        parts += ["<h2>Communication per rank</h2>", f"<p class='note'>{html.escape(note)}</p>", _fig_html(fig, "comm")]
    comm = summary.get("communication") or []
    if comm:
        parts.append(
            "<h2>Communication by kind</h2><table><tr><td><b>op</b></td><td><b>tag</b></td>"
            "<td><b>count</b></td><td><b>bytes</b></td><td><b>time (all ranks)</b></td></tr>"
        )
        for c in comm:
            parts.append(
                f"<tr><td>{html.escape(str(c.get('op')))}</td><td>{html.escape(str(c.get('tag')))}</td>"
                f"<td>{c.get('count')}</td><td>{c.get('bytes'):,}</td>"
                f"<td>{c.get('time_s', 0.0) * 1e3:.1f} ms</td></tr>"
            )
        parts.append("</table>")
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>aifabric train — {html.escape(str(summary['model']))}</title><style>{CSS}</style>"
        f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>" + "\n".join(parts) + "</body></html>"
    )
