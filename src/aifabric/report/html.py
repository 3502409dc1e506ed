"""report.html: one self-contained file (plotly.js embedded), readable offline.

Sections: headline figures, rank timeline (Gantt), link utilization over time by tier (heatmaps),
traffic matrix, flow-size and flow-completion-time CDFs, collective breakdown, topology drawing,
and the scenario itself. Large runs are cut to what a page can show, and the page says so.
"""

from __future__ import annotations

import html
from collections import defaultdict

import numpy as np
import plotly.graph_objects as go
import yaml
from plotly.offline import get_plotlyjs

from ..analysis import cdf, flows, rank_segments, traffic_matrix
from ..fabric.graph import TIERS
from ..simulate import Run
from .terminal import fmt_bytes, fmt_time

MAX_GANTT_RANKS = 64
MAX_HEATMAP_LINKS = 48
MAX_MATRIX = 128
TIME_BINS = 120
PALETTE = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6", "#9D755D", "#BAB0AC"]


def _fig_html(fig: go.Figure, div_id: str) -> str:
    fig.update_layout(margin=dict(l=60, r=20, t=40, b=40), template="plotly_white")
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False})


def gantt(run: Run) -> tuple[go.Figure, str]:
    segs = rank_segments(run.graph, run.timeline)
    world = run.fabric.world_size
    shown = min(world, MAX_GANTT_RANKS)
    note = "" if shown == world else f"first {shown} of {world} ranks shown"
    by_name: dict[tuple[str, str], list] = defaultdict(list)
    for s in segs:
        if s.rank < shown:
            label = s.name.split("/", 1)[-1]
            by_name[(s.kind, label)].append(s)
    fig = go.Figure()
    for i, ((kind, label), ss) in enumerate(sorted(by_name.items())):
        fig.add_trace(go.Bar(
            name=f"{label} ({kind})",
            y=[f"rank {s.rank}" for s in ss],
            x=[(s.end_s - s.start_s) * 1e3 for s in ss],
            base=[s.start_s * 1e3 for s in ss],
            orientation="h",
            marker_color=PALETTE[i % len(PALETTE)],
            hovertemplate="%{y}: " + label + "<br>start %{base:.4f} ms<br>duration %{x:.4f} ms<extra></extra>",
        ))
    fig.update_layout(barmode="overlay", title="Timeline per rank (compute and collectives)",
                      xaxis_title="time (ms)", height=max(300, 22 * shown + 120),
                      yaxis=dict(autorange="reversed", categoryorder="array",
                                 categoryarray=[f"rank {r}" for r in range(shown)]))
    return fig, note


def link_heatmaps(run: Run) -> list[tuple[go.Figure, str]]:
    tl, fabric = run.timeline, run.fabric
    edges, bytes_ = tl.link_load.binned(len(fabric.links), tl.makespan_s, TIME_BINS)
    width = edges[1] - edges[0] if len(edges) > 1 else 1.0
    cap = np.array([link.capacity_bytes_per_s for link in fabric.links])
    util = 100 * bytes_ / (cap[:, None] * width) if width > 0 else bytes_
    figs = []
    for tier in TIERS:
        idx = [link.index for link in fabric.links if link.tier == tier and tl.link_bytes[link.index] > 0]
        if not idx:
            continue
        idx.sort(key=lambda i: -tl.link_bytes[i])
        note = "" if len(idx) <= MAX_HEATMAP_LINKS else f"busiest {MAX_HEATMAP_LINKS} of {len(idx)} loaded links"
        idx = sorted(idx[:MAX_HEATMAP_LINKS], key=lambda i: fabric.links[i].id)
        fig = go.Figure(go.Heatmap(
            z=util[idx], x=(edges[:-1] + width / 2) * 1e3, y=[fabric.links[i].id for i in idx],
            zmin=0, zmax=100, colorscale="Viridis", colorbar=dict(title="%"),
            hovertemplate="%{y}<br>t=%{x:.3f} ms<br>%{z:.1f}%<extra></extra>",
        ))
        fig.update_layout(title=f"Link utilization over time — {tier} tier", xaxis_title="time (ms)",
                          height=max(260, 16 * len(idx) + 120))
        figs.append((fig, note))
    return figs


def matrix(run: Run) -> tuple[go.Figure, str]:
    f = flows(run.graph, run.fabric, run.timeline)
    world = run.fabric.world_size
    group, unit = (1, "rank") if world <= MAX_MATRIX else (run.fabric.gpus_per_server, "server")
    m = traffic_matrix(f, world, group)
    labels = [f"{unit} {i}" for i in range(m.shape[0])]
    fig = go.Figure(go.Heatmap(z=m / 1e6, x=labels, y=labels, colorscale="Blues", colorbar=dict(title="MB"),
                               hovertemplate="%{y} → %{x}<br>%{z:.2f} MB<extra></extra>"))
    fig.update_layout(title=f"Traffic matrix (bytes per {unit} pair, source → destination)",
                      xaxis_title="destination", yaxis_title="source", yaxis_autorange="reversed",
                      height=min(900, max(360, 14 * m.shape[0] + 160)))
    return fig, "" if group == 1 else f"{world} ranks grouped by server"


def flow_cdfs(run: Run) -> go.Figure:
    f = flows(run.graph, run.fabric, run.timeline)
    fig = go.Figure()
    for name, mask in (("NVLink", f.scale_up), ("network", ~f.scale_up)):
        if mask.any():
            x, y = cdf(f.size_bytes[mask])
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line_shape="hv", name=f"size, {name}"))
            x, y = cdf(f.completion_s[mask] * 1e6)
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line_shape="hv", name=f"completion time (µs), {name}",
                                     xaxis="x2"))
    fig.update_layout(title="Flow sizes and flow completion times (CDF)", yaxis_title="fraction of flows",
                      xaxis=dict(title="flow size (bytes)", type="log", domain=[0, 0.45]),
                      xaxis2=dict(title="completion time (µs)", type="log", domain=[0.55, 1], anchor="y"),
                      height=380)
    return fig


def collective_breakdown(run: Run) -> go.Figure:
    cs = run.results.collectives
    fig = go.Figure(go.Bar(
        x=[c.key for c in cs], y=[c.time_s * 1e3 for c in cs],
        customdata=[[c.op, c.algorithm, c.group_size, c.size_bytes / 1e6, c.algbw_bytes_per_s / 1e9,
                     c.busbw_bytes_per_s / 1e9] for c in cs],
        hovertemplate="%{x}<br>%{customdata[0]} (%{customdata[1]}), %{customdata[2]} ranks, %{customdata[3]:.2f} MB"
                      "<br>%{y:.3f} ms, algbw %{customdata[4]:.2f} GB/s, busbw %{customdata[5]:.2f} GB/s<extra></extra>",
        marker_color=PALETTE[1],
    ))
    fig.update_layout(title="Collectives: time per instance", yaxis_title="time (ms)", height=360)
    return fig


def topology_svg(run: Run) -> str:
    try:  # the fabric package's drawing, when it has one
        from ..fabric.draw import fabric_svg  # type: ignore[attr-defined]

        return fabric_svg(run.fabric)
    except Exception:  # noqa: BLE001 - a report without a drawing is still a report
        return ""


def _headline(run: Run) -> str:
    r, s = run.results, run.scenario
    rows = [
        ("scenario", s.name),
        ("cluster", f"{s.cluster.servers} servers × {s.cluster.gpus_per_server} {s.cluster.gpu} = "
                    f"{run.fabric.world_size} GPUs"),
        ("fabric", f"{s.fabric.topology}, {s.fabric.spines} spines, {s.fabric.link_speed_gbps:g} Gb/s"),
        ("workload", run.workload.description),
        ("engine", r.engine),
        ("iteration time", fmt_time(r.iteration_time_s)),
        ("compute", fmt_time(r.compute_time_s)),
        ("communication", fmt_time(r.communication_time_s)),
        ("exposed communication", fmt_time(r.exposed_communication_s)),
        ("MFU", f"{100 * r.mfu:.1f}%"),
        ("transfers", f"{r.flow_count:,} ({fmt_bytes(r.flow_bytes)}; NVLink {fmt_bytes(r.scale_up_bytes)}, "
                      f"network {fmt_bytes(r.scale_out_bytes)})"),
    ]
    if not r.complete:
        rows.append(("status", "interrupted — partial results"))
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table class='head'>{body}</table>"


CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1200px;color:#222}
h1{font-size:22px} h2{font-size:17px;margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
table.head th{text-align:left;padding:2px 16px 2px 0;color:#555} .note{color:#777;font-size:13px}
pre{background:#f6f6f6;padding:12px;overflow:auto;font-size:12px} #js-errors{color:#b00;white-space:pre}
.topology svg{max-width:100%;height:auto}
"""


def build_html(run: Run) -> str:
    parts = [f"<h1>aifabric report — {html.escape(run.scenario.name)}</h1>", _headline(run)]
    figures: list[tuple[str, go.Figure, str]] = []
    fig, note = gantt(run)
    figures.append(("Timeline", fig, note))
    for fig, note in link_heatmaps(run):
        figures.append(("", fig, note))
    fig, note = matrix(run)
    figures.append(("Traffic matrix", fig, note))
    figures.append(("Flows", flow_cdfs(run), ""))
    if run.results.collectives:
        figures.append(("Collectives", collective_breakdown(run), ""))
    if run.packet_stats is not None:  # the packet engine: queues, DCQCN rates, PFC frames
        from ..packet.figures import packet_figures

        figures.extend(packet_figures(run.packet_stats))
    for k, (title, fig, note) in enumerate(figures):
        if title:
            parts.append(f"<h2>{html.escape(title)}</h2>")
        if note:
            parts.append(f"<p class='note'>{html.escape(note)}</p>")
        parts.append(_fig_html(fig, f"plot{k}"))
    svg = topology_svg(run)
    if svg:
        parts.append(f"<h2>Topology</h2><div class='topology'>{svg}</div>")
    scenario_yaml = yaml.safe_dump(run.scenario.model_dump(mode="json"), sort_keys=False)
    parts.append(f"<h2>Scenario</h2><pre>{html.escape(scenario_yaml)}</pre>")
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>aifabric — {html.escape(run.scenario.name)}</title><style>{CSS}</style>"
        "<script>window.addEventListener('error',function(e){var d=document.getElementById('js-errors');"
        "if(d){d.textContent+=String(e.message)+'\\n';}});</script>"
        f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
        "<div id='js-errors'></div>"
        + "\n".join(parts)
        + f"<p class='note'>{len(figures)} plots</p></body></html>"
    )
