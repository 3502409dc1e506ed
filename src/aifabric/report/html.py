"""report.html: one self-contained file (plotly.js embedded), readable offline.

Sections: headline figures, rank timeline (Gantt: compute, communication, idle, pipeline bubble), link
utilization over time by tier (heatmaps), traffic matrices per network and parallel dimension,
flow-size and flow-completion-time CDFs, collective breakdown, topology drawing, and the scenario
itself. Large runs are cut to what a page can show, and the page says so: the Gantt shows at most
`MAX_GANTT_RANKS` ranks (chosen along the parallelism plan), heatmaps the busiest links, matrices per
server (or group of servers), CDFs through quantiles. Numeric arrays are embedded as typed arrays
(plotly's base64 "bdata"), and every figure holds few traces, so writing stays fast at 1,000+ GPUs.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, replace

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import yaml
from _plotly_utils.utils import convert_to_base64
from plotly.offline import get_plotlyjs

from ..analysis import BESIDE, FOLDED, NETWORKS, P2P, Flows, RankTimeline, cdf, traffic_matrix
from ..compiled import pure_python
from ..fabric.graph import TIERS
from ..simulate import Run
from .caveats import caveats
from .terminal import (
    compute_breakdown,
    cost_lines,
    fault_events,
    faults_line,
    fmt_bytes,
    fmt_time,
    fmt_usd,
    fmt_watts,
    reliability_line,
    throughput_line,
)

MAX_GANTT_RANKS = 64
MAX_HEATMAP_LINKS = 48
MAX_MATRIX = 128
MAX_CDF_POINTS = 2000
TIME_BINS = 120
PALETTE = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6", "#9D755D", "#BAB0AC"]
# Gantt colors by category; "<dim> collectives" not listed take the palette in turn
GANTT_COLORS = {
    "compute": "#4C78A8",
    FOLDED: "#F2B880",
    BESIDE: "#C9A227",
    P2P: "#54A24B",
    "dp collectives": "#F58518",
    "idle": "#D5D5D5",
    "bubble": "#E45756",
}
NETWORK_LABELS = {"all": "all networks", "scale-up": "NVLink (scale-up)", "scale-out": "scale-out network"}


def _fig_html(fig: go.Figure, div_id: str, full: Full | None = None) -> str:
    m = fig.layout.margin  # defaults where the figure did not set its own
    fig.update_layout(
        margin={k: getattr(m, k) if getattr(m, k) is not None else v for k, v in dict(l=60, r=20, t=40, b=40).items()},
        template="plotly_white",
    )
    config = {"displaylogo": False}
    if not full:
        return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=config)
    # the dict fig.to_html would build, with each stand-in replaced by its full array as the trace's own validator
    # and to_dict's base64 step leave it
    d = fig.to_dict()
    for (i, prop), value in full.items():
        v = {prop: fig.data[i]._get_validator(prop).validate_coerce(value)}
        convert_to_base64(v)
        d["data"][i][prop] = v[prop]
    return pio.to_html(d, full_html=False, include_plotlyjs=False, div_id=div_id, config=config, validate=False)


Full = dict[tuple[int, str], object]
"""Large arrays of a figure's traces, by (trace index, property), held outside the figure: plotly validates and
deep-copies every value it holds, several times (the Gantt of 64 ranks at 3.5 million tasks: seconds). The figure
holds one-element stand-ins in their place (so each property keeps its place in the trace), `_fig_html` puts
the arrays into the figure's dict: the same page, byte for byte."""


def _hold(full: Full | None, trace: int, prop: str, value):
    """`value` for the figure (full is None), or a one-element stand-in, `value` kept in `full`."""
    if full is None or len(value) < 2:
        return value
    full[(trace, prop)] = value
    return value[:1]


@dataclass
class _Context:
    """What several figures use, computed once per report."""

    run: Run
    flows: Flows
    timeline: RankTimeline


def _context(run: Run) -> _Context:
    return _Context(run, run.flows, run.rank_timeline)


def _layout(run: Run):
    """The rank layout of the run's parallelism plan, as its workload carries it (None: no plan, e.g. the
    data-parallel workload or a replayed trace)."""
    lay = run.workload.layout
    return lay if lay is not None and lay.world_size == run.fabric.world_size else None


def gantt_ranks(run: Run, limit: int | None = None) -> tuple[list[int], list[str], str]:
    """The ranks the Gantt shows (at most `limit`), their row labels, and a note saying which they are.

    Small runs: every rank. LLM training: tensor-parallel rank 0 of every pipeline stage (top to bottom)
    of the first data-parallel replicas; without pipeline, tensor-parallel rank 0 of the first replicas.
    Other workloads: GPU 0 of servers spread evenly over the cluster. `limit`: MAX_GANTT_RANKS by default."""
    limit = MAX_GANTT_RANKS if limit is None else limit
    world = run.fabric.world_size
    if world <= limit:
        return list(range(world)), [f"rank {r}" for r in range(world)], ""
    lay = _layout(run)
    if lay is not None:
        stages = [int(p) for p in np.unique(np.linspace(0, lay.pp - 1, min(lay.pp, limit)).round())]
        replicas = max(1, min(lay.dp, limit // len(stages)))
        ranks = [lay.rank(dp=d, pp=p) for d in range(replicas) for p in stages]
        labels = [
            f"rank {lay.rank(dp=d, pp=p)} · dp{d} pp{p}" if lay.pp > 1 else f"rank {lay.rank(dp=d)} · dp{d}"
            for d in range(replicas)
            for p in stages
        ]
        which = (
            (
                f"every pipeline stage ({len(stages)} of {lay.pp})"
                if len(stages) < lay.pp
                else f"each of the {lay.pp} pipeline stages"
            )
            if lay.pp > 1
            else "one rank"
        )
        note = (
            f"{len(ranks)} of {world} ranks shown: {which} of data-parallel replicas 0–{replicas - 1}"
            f" (of {lay.dp}), tensor-parallel rank 0 (of {lay.tp})"
            + (", context-parallel rank 0" if lay.cp > 1 else "")
            + ". Every rank is in trace.json, ranks.csv and summary.json."
        )
        return ranks, labels, note
    gps = run.fabric.gpus_per_server
    servers = (world + gps - 1) // gps
    picked = [int(s) for s in np.unique(np.linspace(0, servers - 1, min(servers, limit)).round())]
    ranks = [s * gps for s in picked]
    note = (
        f"{len(ranks)} of {world} ranks shown: GPU 0 of {len(ranks)} servers spread over the cluster "
        f"({', '.join(f'rank {r}' for r in ranks[:4])}, …, rank {ranks[-1]}). "
        "Every rank is in trace.json, ranks.csv and summary.json."
    )
    return ranks, [f"rank {r}" for r in ranks], note


def gantt(run: Run, ctx: _Context | None = None, full: Full | None = None) -> tuple[go.Figure, str]:
    """Per shown rank: compute, communication (by kind), idle and pipeline-bubble segments, one trace per
    category (a few traces whatever the run's size). `full`: the traces' arrays are kept there, the figure
    holds stand-ins (see `Full`)."""
    ctx = ctx or _context(run)
    rt = ctx.timeline
    ranks, labels, note = gantt_ranks(run)
    row_of = np.full(rt.world, -1, dtype=np.int64)
    row_of[ranks] = np.arange(len(ranks))
    shown = np.flatnonzero(row_of[rt.rank] >= 0)  # the segments of the ranks shown, in order
    shown_cat = rt.category[shown]
    present = set(shown_cat.tolist())
    fig = go.Figure()
    cats = [c for c in ("compute", FOLDED, BESIDE, P2P) if c in present]
    cats += sorted(present - set(cats) - {"idle", "bubble"})
    cats += [c for c in ("idle", "bubble") if c in present]
    spare = iter(PALETTE[4:] * 4)
    for k, cat in enumerate(cats):
        m = shown[shown_cat == cat]
        start = rt.start_s[m] * 1e3
        dur = (rt.end_s[m] - rt.start_s[m]) * 1e3
        rows = row_of[rt.rank[m]]
        quiet = cat in ("idle", "bubble")
        fig.add_trace(
            go.Bar(
                name=cat,
                orientation="h",
                y=_hold(full, k, "y", rows.astype(np.int16)),
                x=_hold(full, k, "x", dur.astype(np.float32)),
                base=_hold(full, k, "base", start),
                customdata=_hold(full, k, "customdata", rt.rank[m].astype(np.int32)),
                hovertext=None if quiet else _hold(full, k, "hovertext", rt.name[m]),
                marker=dict(color=GANTT_COLORS.get(cat) or next(spare), line=dict(width=0)),
                hovertemplate="rank %{customdata}: "
                + ("" if quiet else "%{hovertext}<br>")
                + cat
                + "<br>start %{base:.4f} ms<br>duration %{x:.4f} ms<extra></extra>",
            )
        )
    its = rt.iterations
    bubble = f", pipeline bubble {fmt_time(float(rt.bubble_s[ranks].mean()))}" if rt.pipeline else ""
    fig.update_layout(
        barmode="overlay",
        bargap=0.15,
        legend=dict(orientation="h", y=1.02, yanchor="bottom"),
        title=dict(
            text=f"Timeline per rank — idle {fmt_time(float(rt.idle_s[ranks].mean()))}{bubble}"
            f" per rank shown and iteration{' (mean)' if len(ranks) > 1 else ''}",
            y=0.995,
            yanchor="top",
        ),
        xaxis_title="time (ms)",
        height=max(320, 20 * len(ranks) + 160),
        yaxis=dict(
            autorange="reversed",
            tickmode="array",
            tickvals=list(range(len(ranks))),
            ticktext=labels,
            range=[len(ranks) - 0.5, -0.5],
        ),
        margin=dict(t=90),
    )
    explain = (
        "Idle: the GPU neither computes nor communicates. "
        + (
            "Bubble: idle before a rank's first and after its last compute of an iteration (pipeline fill and drain). "
            if rt.pipeline
            else ""
        )
        + (
            "Folded scale-up collectives run inside their merged compute task: what they add to it is drawn at its "
            "end. "
            if FOLDED in present
            else ""
        )
        + (
            "Those that ran beside the compute (the backward's exchanges beside their GEMMs) are drawn over the "
            "compute's end, for as long as they took. "
            if BESIDE in present
            else ""
        )
        + (f"{its} iterations." if its > 1 else "")
    )
    return fig, " ".join(x for x in (note, explain) if x)


def link_heatmaps(run: Run) -> list[tuple[go.Figure, str]]:
    tl, fabric = run.timeline, run.fabric
    edges, bytes_ = tl.link_load.binned(len(fabric.links), tl.makespan_s, TIME_BINS)
    width = edges[1] - edges[0] if len(edges) > 1 else 1.0
    cap = np.array([link.capacity_bytes_per_s for link in fabric.links])
    util = 100 * bytes_ / (cap[:, None] * width) if width > 0 else bytes_
    over_time = bytes_.sum(axis=1)  # what the load over time shows (folded collectives are not in it)
    tier_of = np.array([link.tier for link in fabric.links], dtype=object)
    folded = run.graph.folded.link_bytes is not None and bool(run.graph.folded.kinds)
    figs = []
    for tier in TIERS:
        idx = np.flatnonzero((tier_of == tier) & (over_time > 0))
        if not len(idx):
            continue
        idx = idx[np.argsort(-over_time[idx], kind="stable")]
        notes = [] if len(idx) <= MAX_HEATMAP_LINKS else [f"busiest {MAX_HEATMAP_LINKS} of {len(idx)} loaded links"]
        if folded and tier == "nvlink":
            notes.append("collectives folded into GPU time are not in the load over time (they are in links.csv)")
        shown = sorted(idx[:MAX_HEATMAP_LINKS].tolist(), key=lambda i: fabric.links[i].id)
        fig = go.Figure(
            go.Heatmap(
                z=util[shown].astype(np.float32),
                x=((edges[:-1] + width / 2) * 1e3).astype(np.float32),
                y=[fabric.links[i].id for i in shown],
                zmin=0,
                zmax=100,
                colorscale="Viridis",
                colorbar=dict(title="%"),
                hovertemplate="%{y}<br>t=%{x:.3f} ms<br>%{z:.1f}%<extra></extra>",
            )
        )
        fig.update_layout(
            title=f"Link utilization over time — {tier} tier",
            xaxis_title="time (ms)",
            height=max(260, 16 * len(shown) + 120),
        )
        figs.append((fig, "; ".join(notes)))
    return figs


def matrix_grouping(world: int, gps: int) -> tuple[int, str]:
    """Ranks per matrix row and the row's name: rank, server, or k servers (at most MAX_MATRIX rows)."""
    if world <= MAX_MATRIX:
        return 1, "rank"
    servers = (world + gps - 1) // gps
    if servers <= MAX_MATRIX:
        return gps, "server"
    k = -(-servers // MAX_MATRIX)
    return gps * k, f"{k} servers"


def _flows_by_dim(f: Flows, dims: list[str]) -> dict[str, Flows]:
    """Per dimension, its flows (in their order) and every folded collective: traffic_matrix of one dimension
    gives the same sums from these as from all the flows, without comparing millions of strings per matrix."""
    index = {d: k for k, d in enumerate(dims)}
    code = np.fromiter(map(index.__getitem__, f.dim.tolist()), dtype=np.int64, count=len(f.dim))
    out = {}
    for k, d in enumerate(dims):
        i = np.flatnonzero(code == k)
        out[d] = replace(
            f,
            task=f.task[i],
            src=f.src[i],
            dst=f.dst[i],
            size_bytes=f.size_bytes[i],
            start_s=f.start_s[i],
            end_s=f.end_s[i],
            scale_up=f.scale_up[i],
            dim=f.dim[i],
        )
    return out


def matrix(run: Run, ctx: _Context | None = None) -> tuple[go.Figure, str]:
    """Traffic matrices, one per (parallel dimension, network) that carried bytes; a dropdown picks one."""
    ctx = ctx or _context(run)
    f = ctx.flows
    world = run.fabric.world_size
    group, unit = matrix_grouping(world, run.fabric.gpus_per_server)
    gps = run.fabric.gpus_per_server
    n = (world + group - 1) // group
    labels = [
        f"{unit} {i}"
        if group == 1 or unit == "server"
        else f"servers {i * group // gps}–{min(world, (i + 1) * group) // gps - 1}"
        for i in range(n)
    ]
    fig = go.Figure()
    buttons: list[tuple[str, float]] = []
    dims = f.dims
    of_dim = _flows_by_dim(f, dims)
    for dim in [None, *dims]:
        for network in NETWORKS:
            m = traffic_matrix(f if dim is None else of_dim[dim], world, group, network, dim)
            total = float(m.sum())
            if total <= 0 and (dim, network) != (None, "all"):
                continue
            label = f"{dim or 'all dimensions'} · {NETWORK_LABELS[network]}"
            unit_name, scale = next(
                ((u, x) for u, x in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)) if m.max() >= x), ("B", 1.0)
            )
            fig.add_trace(
                go.Heatmap(
                    z=(m / scale).astype(np.float32),
                    x=labels,
                    y=labels,
                    colorscale="Blues",
                    colorbar=dict(title=unit_name),
                    visible=False,
                    name=label,
                    hovertemplate="%{y} → %{x}<br>%{z:.3g} " + unit_name + "<extra>" + html.escape(label) + "</extra>",
                )
            )
            buttons.append((label, total))
    # grouped by server, everything inside a server sits on the diagonal: start with the network between them
    first = next(
        (
            i
            for i, (label, total) in enumerate(buttons)
            if group > 1 and label == f"all dimensions · {NETWORK_LABELS['scale-out']}"
        ),
        0,
    )
    fig.data[first].visible = True
    title = f"Traffic matrix per {unit} pair (source → destination)"
    fig.update_layout(
        title=dict(text=f"{title} — {buttons[first][0]}: {fmt_bytes(buttons[first][1])}", y=0.98, yanchor="top"),
        xaxis_title="destination",
        yaxis_title="source",
        yaxis_autorange="reversed",
        height=min(900, max(400, 14 * n + 200)),
        updatemenus=[
            dict(
                type="dropdown",
                x=0.0,
                xanchor="left",
                y=1.01,
                yanchor="bottom",
                showactive=True,
                active=first,
                buttons=[
                    dict(
                        label=f"{label} ({fmt_bytes(total)})",
                        method="update",
                        args=[
                            {"visible": [j == i for j in range(len(buttons))]},
                            {"title.text": f"{title} — {label}: {fmt_bytes(total)}"},
                        ],
                    )
                    for i, (label, total) in enumerate(buttons)
                ],
            )
        ],
        margin=dict(t=110),
    )
    note = (
        "The menu picks a parallel dimension and a network. Folded scale-up collectives count as NVLink traffic. "
        + ("" if group == 1 else f"{world} ranks grouped by {unit}: traffic inside a group is on the diagonal.")
    )
    return fig, note


def _quantiles(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most MAX_CDF_POINTS points of an empirical CDF (every point when there are fewer)."""
    if len(x) <= MAX_CDF_POINTS:
        return x, y
    at = np.unique(np.linspace(0, len(x) - 1, MAX_CDF_POINTS).round().astype(np.int64))
    return x[at], y[at]


def flow_cdfs(run: Run, ctx: _Context | None = None) -> tuple[go.Figure, str]:
    ctx = ctx or _context(run)
    f = ctx.flows
    fig = go.Figure()
    for name, mask in (("NVLink", f.scale_up), ("network", ~f.scale_up)):
        if mask.any():
            x, y = _quantiles(*cdf(f.size_bytes[mask]))
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line_shape="hv", name=f"size, {name}"))
            x, y = _quantiles(*cdf(f.completion_s[mask] * 1e6))
            fig.add_trace(
                go.Scatter(x=x, y=y, mode="lines", line_shape="hv", name=f"completion time (µs), {name}", xaxis="x2")
            )
    fig.update_layout(
        title="Flow sizes and flow completion times (CDF)",
        yaxis_title="fraction of flows",
        xaxis=dict(title="flow size (bytes)", type="log", domain=[0, 0.45]),
        xaxis2=dict(title="completion time (µs)", type="log", domain=[0.55, 1], anchor="y"),
        height=380,
    )
    note = (
        f"{len(f.src):,} flows; each curve drawn through at most {MAX_CDF_POINTS:,} quantiles."
        if len(f.src) > MAX_CDF_POINTS
        else ""
    )
    return fig, note


def collective_breakdown(run: Run, full: Full | None = None) -> go.Figure:
    """Time per collective instance. `full`: the arrays are kept there, the figure holds stand-ins (see `Full`)."""
    cs = run.results.collectives
    fig = go.Figure(
        go.Bar(
            x=_hold(full, 0, "x", [c.key for c in cs]),
            y=_hold(full, 0, "y", [c.time_s * 1e3 for c in cs]),
            customdata=_hold(
                full,
                0,
                "customdata",
                [
                    [
                        c.op,
                        c.algorithm,
                        c.group_size,
                        c.size_bytes / 1e6,
                        c.algbw_bytes_per_s / 1e9,
                        c.busbw_bytes_per_s / 1e9,
                        c.count,
                    ]
                    for c in cs
                ],
            ),
            hovertemplate="%{x}<br>%{customdata[0]} (%{customdata[1]}), %{customdata[2]} ranks, %{customdata[3]:.2f} MB"
            " ×%{customdata[6]}<br>%{y:.3f} ms, algbw %{customdata[4]:.2f} GB/s, busbw %{customdata[5]:.2f}"
            " GB/s<extra></extra>",
            marker_color=PALETTE[1],
        )
    )
    fig.update_layout(
        title="Collectives: time per instance (folded: one instance of the kind)", yaxis_title="time (ms)", height=360
    )
    return fig


def compute_kinds(run: Run) -> tuple[go.Figure, str]:
    """Where a rank's compute time goes, by kernel kind (the rank that computes longest)."""
    from .terminal import KIND_NAMES

    kinds = [(KIND_NAMES.get(k, k), s) for k, s in run.results.compute_by_kind_s if s > 0]
    fig = go.Figure(
        go.Bar(
            x=[s * 1e3 for _, s in kinds],
            y=[k for k, _ in kinds],
            orientation="h",
            text=[fmt_time(s) for _, s in kinds],
            textposition="auto",
        )
    )
    fig.update_layout(
        height=80 + 40 * len(kinds),
        margin=dict(l=170, r=20, t=20, b=40),
        xaxis_title="ms per iteration",
        yaxis=dict(autorange="reversed"),
    )
    r = run.results
    note = (
        f"Compute time per iteration of the rank that computes longest, by kernel kind: GEMMs from their "
        f"shapes, fused attention, memory-bound kernels over achievable HBM bandwidth, the optimizer step, "
        f"and launch/gaps (docs/validation.md). {throughput_line(r)}."
    )
    return fig, note


def topology_svg(run: Run) -> str:
    try:  # the fabric package's drawing, when it has one
        from ..fabric.draw import fabric_svg

        return fabric_svg(run.fabric)
    except Exception:  # noqa: BLE001 - a report without a drawing is still a report
        return ""


def _headline(run: Run, ctx: _Context) -> str:
    r, s, rt = run.results, run.scenario, ctx.timeline
    it = r.iteration_time_s

    def pct(x: float) -> str:
        return f" ({100 * x / it:.0f}% of the iteration)" if it > 0 else ""

    rows = [
        ("scenario", s.name),
        (
            "cluster",
            f"{s.cluster.servers} servers × {s.cluster.gpus_per_server} {s.cluster.gpu} = {run.fabric.world_size} GPUs",
        ),
        ("fabric", f"{s.fabric.topology}, {s.fabric.spines} spines, {s.fabric.link_speed_gbps:g} Gb/s"),
        ("workload", run.workload.description),
        ("engine", r.engine),
        ("iteration time", fmt_time(r.iteration_time_s)),
        (
            "compute",
            fmt_time(r.compute_time_s)
            + (f" ({compute_breakdown(r.compute_by_kind_s)})" if r.compute_by_kind_s else ""),
        ),
        ("communication", fmt_time(r.communication_time_s)),
        ("exposed communication", fmt_time(r.exposed_communication_s)),
        (
            "GPU idle (mean over ranks)",
            fmt_time(float(rt.idle_s.mean()))
            + pct(float(rt.idle_s.mean()))
            + f"; most idle rank {fmt_time(float(rt.idle_s.max(initial=0.0)))}",
        ),
    ]
    if rt.pipeline:
        rows.append(
            (
                "pipeline bubble (mean over ranks)",
                fmt_time(float(rt.bubble_s.mean()))
                + pct(float(rt.bubble_s.mean()))
                + f"; most {fmt_time(float(rt.bubble_s.max(initial=0.0)))}",
            )
        )
    rows += [
        ("throughput", throughput_line(r)),
        (
            "transfers",
            f"{r.flow_count:,} ({fmt_bytes(r.flow_bytes)}; NVLink {fmt_bytes(r.scale_up_bytes)}, "
            f"network {fmt_bytes(r.scale_out_bytes)})",
        ),
    ]
    rows += cost_lines(run.costs)
    rows.append(("reliability", reliability_line(run.reliability)))
    rows += [("accuracy", text) for text in caveats(s)]
    if run.faults:
        rows.append(("faults", faults_line(run.faults)))
    if not r.complete:
        rows.append(("status", "interrupted — partial results"))
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table class='head'>{body}</table>"


CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1200px;color:#222}
h1{font-size:22px} h2{font-size:17px;margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
table.head th{text-align:left;padding:2px 16px 2px 0;color:#555} .note{color:#777;font-size:13px}
pre{background:#f6f6f6;padding:12px;overflow:auto;font-size:12px} #js-errors{color:#b00;white-space:pre}
.topology svg{max-width:100%;height:auto} h3{font-size:15px}
table.bill{border-collapse:collapse;font-size:13px} table.bill td,table.bill th{padding:2px 10px;text-align:right}
table.bill td:first-child,table.bill th:first-child,table.bill td.note{text-align:left}
"""


def fault_events_table(faults: dict) -> str:
    """The faults during the run, event by event (summary.json `faults.during_run.events`), and what they cost."""
    head = "<tr><th>time</th><th>what</th><th>then</th></tr>"
    body = "".join(
        f"<tr><td>{html.escape(a)}</td><td class='note'>{html.escape(b)}</td><td class='note'>{html.escape(c)}</td></tr>"
        for a, b, c in fault_events(faults)
    )
    note = faults_line(faults)
    return (
        f"<h2>Faults during the run</h2><p class='note'>{html.escape(note)}</p><table class='bill'>{head}{body}</table>"
    )


def costs_tables(costs: dict) -> str:
    """The power and capital bills, line by line, each figure with its source (summary.json `costs`)."""

    def table(items: list[dict], unit: str, fmt) -> str:
        head = "<tr><th>item</th><th>count</th><th>each</th><th>total</th><th>source</th></tr>"
        body = "".join(
            f"<tr><td>{html.escape(x['item'])}</td><td>{x['count']:,}</td>"
            f"<td>{html.escape(fmt(x[unit + '_each']))}</td><td>{html.escape(fmt(x[unit]))}</td>"
            f"<td class='note'>{html.escape(x['source'])}</td></tr>"
            for x in items
        )
        return f"<table class='bill'>{head}{body}</table>"

    inputs = costs["inputs"]
    note = (
        f"Power: each component's maximum (datasheet) power, as Deep Learning for Network Engineers, Chapter 8, counts GPUs; "
        f"facility power = IT power x PUE {inputs['pue']:g}. Energy at ${inputs['price_per_kwh']:g}/kWh; capital "
        f"spread over {inputs['amortization_years']:g} years to price an iteration. Prices: "
        f"{inputs['price_source']}. Change them in the scenario's costs: section (docs/summary-schema.md)."
    )
    return (
        f"<h2>Power and cost</h2><p class='note'>{html.escape(note)}</p><h3>Power</h3>"
        + table(costs["power"]["items"], "w", fmt_watts)
        + "<h3>Capital</h3>"
        + table(costs["capital"]["items"], "usd", fmt_usd)
    )


def plotly_script(plotly_src: str | None = None) -> str:
    """plotly.js inline (the default: the page works alone, offline), or a <script src> to a copy of it beside
    the page (`plotly_src`, relative: a sweep's hundreds of reports share one copy and still work offline)."""
    if plotly_src:
        return f"<script type='text/javascript' src='{html.escape(plotly_src, quote=True)}'></script>"
    return f"<script type='text/javascript'>{get_plotlyjs()}</script>"


def build_html(run: Run, plotly_src: str | None = None) -> str:
    ctx = _context(run)
    parts = [f"<h1>aifabric report — {html.escape(run.scenario.name)}</h1>", _headline(run, ctx)]
    figures: list[tuple[str, go.Figure, str]] = []
    light = not pure_python()  # the Gantt's arrays beside the figure, not in it (same page)
    gantt_full: Full | None = {} if light else None
    fig, note = gantt(run, ctx, gantt_full)
    if run.packet_windows:  # the hybrid engine's windows, shaded on the timeline (its x axis is in ms)
        from .terminal import packet_window_line

        for w in run.packet_windows:
            if w.transfers:
                fig.add_vrect(
                    x0=w.t0_s * 1e3,
                    x1=w.t1_s * 1e3,
                    fillcolor="black",
                    opacity=0.08,
                    line_width=1,
                    line_dash="dot",
                    annotation_text=f"packet window {w.spec.text}",
                    annotation_position="top left",
                )
        parts.append(
            "<h2>Packet windows (hybrid engine)</h2><ul>"
            + "".join(
                f"<li><b>{html.escape(w.spec.text)}</b>: {html.escape(packet_window_line(w))}</li>"
                for w in run.packet_windows
            )
            + "</ul><p class='note'>The iteration ran on the flow engine; these spans "
            "of it packet by packet, their outcome folded back into the iteration time. The packet figures below "
            "are the windows' (queues, ECN, CNPs, PFC; times on the iteration's clock).</p>"
        )
    if run.faults and run.faults.get("during_run"):  # when each fault held, shaded on the timeline (ms)
        end_ms = run.faults["during_run"]["run_time_s"] * 1e3
        for f in run.faults["faults"]:
            if f.get("at_s") is None:
                continue
            flaps, period = f.get("flaps", 1), f.get("flap_period_s") or 0.0
            for k in range(flaps):
                a = (f["at_s"] + k * period) * 1e3
                b = end_ms if f.get("up_at_s") is None else (f["up_at_s"] + k * period) * 1e3
                fig.add_vrect(
                    x0=a,
                    x1=max(b, a),
                    fillcolor="red",
                    opacity=0.08,
                    line_width=1,
                    line_color="red",
                    annotation_text=f"{f['kind'].replace('_', ' ')} {f['target']}" if k == 0 else "",
                    annotation_position="top left",
                )
        note += " Shaded red: while each fault of the run held (faults during the run, below)."
    figures.append(("Timeline", fig, note))
    fulls: dict[int, Full | None] = {0: gantt_full}
    for fig, note in link_heatmaps(run):
        figures.append(("", fig, note))
    fig, note = matrix(run, ctx)
    figures.append(("Traffic matrix", fig, note))
    fig, note = flow_cdfs(run, ctx)
    figures.append(("Flows", fig, note))
    if run.results.compute_by_kind_s:
        fig, note = compute_kinds(run)
        figures.append(("Compute by kernel kind", fig, note))
    if run.results.collectives:
        coll_full: Full | None = {} if light else None
        figures.append(("Collectives", collective_breakdown(run, coll_full), ""))
        fulls[len(figures) - 1] = coll_full
    if run.packet_stats is not None:  # the packet engine: queues, DCQCN rates, PFC frames
        from ..packet.figures import packet_figures

        figures.extend(packet_figures(run.packet_stats))
    for k, (title, fig, note) in enumerate(figures):
        if title:
            parts.append(f"<h2>{html.escape(title)}</h2>")
        if note:
            parts.append(f"<p class='note'>{html.escape(note)}</p>")
        parts.append(_fig_html(fig, f"plot{k}", fulls.get(k)))
    if run.faults and run.faults.get("during_run"):
        parts.append(fault_events_table(run.faults))
    parts.append(costs_tables(run.costs))
    svg = topology_svg(run)
    if svg:
        parts.append(f"<h2>Topology</h2><div class='topology'>{svg}</div>")
    scenario_yaml = yaml.safe_dump(run.scenario.applicable_dump(), sort_keys=False)
    parts.append(f"<h2>Scenario</h2><pre>{html.escape(scenario_yaml)}</pre>")
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>aifabric — {html.escape(run.scenario.name)}</title><style>{CSS}</style>"
        "<script>window.addEventListener('error',function(e){var d=document.getElementById('js-errors');"
        "if(d){d.textContent+=String(e.message)+'\\n';}});</script>"
        f"{plotly_script(plotly_src)}</head><body>"
        "<div id='js-errors'></div>" + "\n".join(parts) + f"<p class='note'>{len(figures)} plots</p></body></html>"
    )
