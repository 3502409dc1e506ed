"""sweep.html: many runs on two Pareto fronts, and every case in a table.

- Capital cost against iteration time: the designs no other beats on both (cheaper and faster) joined by
  the front's line.
- Capital cost against tokens per second per million dollars of capital (throughput bought per dollar).

Points are coloured by one varied field at a time (the menu switches field); a click opens that run's
report.html. The table lists the Pareto-optimal cases first, then the others, then those that failed with
their error. plotly.js comes from the sweep folder's one copy (`plotly_src`), or inline.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from .compare_html import PALETTE
from .html import plotly_script

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1200px;color:#222}
h1{font-size:22px} h2{font-size:17px;margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
table.cases{border-collapse:collapse;font-size:13px} table.cases th,table.cases td{padding:2px 8px;
border-bottom:1px solid #eee;text-align:right} table.cases td.l,table.cases th.l{text-align:left}
.note{color:#555;font-size:14px} tr.front td{font-weight:600} .bad{color:#b00}
"""
MAX_COLOR_VALUES = len(PALETTE) * 2

# (metric, axis title, scale) of the table's columns after the varied fields
TABLE_METRICS = (
    ("iteration_time_s", "iteration time (ms)", 1e3),
    ("capex_usd", "capital ($M)", 1e-6),
    ("network_capex_usd", "network ($M)", 1e-6),
    ("it_power_w", "IT power (kW)", 1e-3),
    ("tokens_per_s", "tokens/s", 1.0),
    ("tokens_per_s_per_musd", "tokens/s per $M", 1.0),
    ("training_cost_usd", "training run ($)", 1.0),
    ("mfu", "MFU (%)", 100.0),
)


def pareto(points: list[tuple[float, float]], maximize_x: bool = False) -> list[int]:
    """Indices of the points no other point beats on both coordinates (y minimized; x minimized, or maximized
    with `maximize_x`), in order of x."""
    sign = -1.0 if maximize_x else 1.0
    order = sorted(range(len(points)), key=lambda i: (sign * points[i][0], points[i][1]))
    front, best_y = [], float("inf")
    for i in order:
        if points[i][1] < best_y:
            front.append(i)
            best_y = points[i][1]
    return front


def _fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e3 else f"{v:,.0f}"
    return str(v)


def _scatter(
    rows: list[dict],
    varied: list[str],
    x_key: str,
    x_scale: float,
    x_title: str,
    maximize_x: bool,
    title: str,
    div_id: str,
) -> tuple[str, list[int]]:
    """A figure of capital ($M) against `x_key`, a trace per value of each varied field (one field shown at a
    time), the Pareto front as a line; and the indices of the front's rows."""
    pts = [(r[x_key] * x_scale, r["capex_usd"] / 1e6) for r in rows]
    front = pareto(pts, maximize_x)
    fig = go.Figure()
    groups: list[tuple[str, int, int]] = []  # (field, first trace, trace count)
    for field in varied or ["case"]:
        values = list(dict.fromkeys(str(r.get(field)) for r in rows))
        if len(values) > MAX_COLOR_VALUES:
            values = values[: MAX_COLOR_VALUES - 1] + ["other"]
        first = len(fig.data)
        for k, value in enumerate(values):
            members = [
                i
                for i, r in enumerate(rows)
                if (str(r.get(field)) == value or (value == "other" and str(r.get(field)) not in values))
            ]
            fig.add_trace(
                go.Scatter(
                    x=[pts[i][0] for i in members],
                    y=[pts[i][1] for i in members],
                    mode="markers",
                    name=f"{field.split('.')[-1]}={value}",
                    visible=field == (varied or ["case"])[0],
                    marker={
                        "size": 9,
                        "color": PALETTE[k % len(PALETTE)],
                        "symbol": "circle" if k < len(PALETTE) else "diamond",
                        "line": {"width": [2 if i in front else 0 for i in members], "color": "#000"},
                    },
                    customdata=[rows[i].get("report", "") for i in members],
                    hovertext=[f"case {rows[i]['case']}: {rows[i]['label']}" for i in members],
                    hovertemplate="%{hovertext}<br>" + x_title + " %{x:.4g}<br>capital $%{y:.4g} M<extra></extra>",
                )
            )
        groups.append((field, first, len(fig.data) - first))
    fig.add_trace(
        go.Scatter(
            x=[pts[i][0] for i in front],
            y=[pts[i][1] for i in front],
            mode="lines",
            line={"shape": "hv", "color": "#888", "dash": "dot"},
            name="Pareto front",
            hoverinfo="skip",
        )
    )
    n = len(fig.data)
    if len(groups) > 1:
        buttons = []
        for field, first, count in groups:
            visible = [first <= t < first + count for t in range(n - 1)] + [True]
            buttons.append({"label": f"colour by {field}", "method": "restyle", "args": [{"visible": visible}]})
        fig.update_layout(
            updatemenus=[{"buttons": buttons, "x": 1.0, "xanchor": "right", "y": 1.02, "yanchor": "bottom"}]
        )
    fig.update_layout(
        title={"text": title, "x": 0, "xanchor": "left", "y": 0.97},
        xaxis_title=x_title,
        yaxis_title="capital cost ($M)",
        height=500,
        margin={"t": 110},
        legend={"title": "click a point: its report"},
    )
    post = (
        "var d=document.getElementById('{plot_id}');d.on('plotly_click',function(e){var u=e.points[0]"
        ".customdata;if(u){window.open(u,'_blank');}});"
    )
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, post_script=post), front


def build_sweep_html(
    title: str, rows: list[dict], varied: list[str], total: int, plotly_src: str | None = None, extra_html: str = ""
) -> str:
    rows = sorted(rows, key=lambda r: r["case"])
    ok = [r for r in rows if r.get("status") == "ok" and r.get("capex_usd") is not None]
    bad = [r for r in rows if r.get("status") != "ok"]
    parts = [
        f"<h1>aifabric sweep — {html.escape(title)}</h1>",
        f"<p class='note'>{len(rows)} of {total} cases recorded: {len(ok)} ran, {len(bad)} failed or invalid"
        f"{'; ' + str(total - len(rows)) + ' not run yet (interrupted: --resume)' if total > len(rows) else ''}"
        f". Varied: {html.escape(', '.join(varied))}.</p>",
        extra_html,
    ]
    front_ids: set[str] = set()
    if ok:
        div, front = _scatter(
            ok,
            varied,
            "iteration_time_s",
            1e3,
            "iteration time (ms)",
            False,
            "Capital cost against iteration time (Pareto front: no design cheaper and faster)",
            "pareto-time",
        )
        front_ids = {ok[i]["case"] for i in front}
        parts += ["<h2>Cost against iteration time</h2>", div]
        div, _ = _scatter(
            ok,
            varied,
            "tokens_per_s_per_musd",
            1.0,
            "tokens per second per $M of capital",
            True,
            "Capital cost against throughput per dollar (Pareto front: no design cheaper and more tokens/s per $)",
            "pareto-value",
        )
        parts += ["<h2>Cost against tokens per second per dollar</h2>", div]
    head = (
        "<tr><th class='l'>case</th>"
        + "".join(f"<th class='l'>{html.escape(f)}</th>" for f in varied)
        + "<th class='l'>status</th>"
        + "".join(f"<th>{html.escape(t)}</th>" for _, t, _ in TABLE_METRICS)
        + "<th class='l'>report</th></tr>"
    )
    body = []
    ordered = [r for r in ok if r["case"] in front_ids] + [r for r in ok if r["case"] not in front_ids] + bad
    for r in ordered:
        is_front = r["case"] in front_ids
        cells = [f"<td class='l'>{r['case']}{' ★' if is_front else ''}</td>"]
        cells += [f"<td class='l'>{html.escape(_fmt(r.get(f)))}</td>" for f in varied]
        status = r.get("status", "")
        if status == "ok":
            cells.append("<td class='l'>ok</td>")
            for key, _, scale in TABLE_METRICS:
                v = r.get(key)
                cells.append(f"<td>{_fmt(v * scale) if isinstance(v, (int, float)) else '–'}</td>")
            link = r.get("report")
            cells.append(
                f"<td class='l'><a href='{html.escape(link, quote=True)}'>report</a></td>" if link else "<td></td>"
            )
        else:
            cells.append(
                f"<td class='l bad' colspan='{len(TABLE_METRICS) + 2}'>{html.escape(status)}: "
                f"{html.escape(str(r.get('error', '')))}</td>"
            )
        body.append(f"<tr class='{'front' if is_front else ''}'>{''.join(cells)}</tr>")
    parts += [
        "<h2>Every case</h2><p class='note'>★ on the Pareto front of cost against iteration time; the table "
        "with every metric: results.csv / results.parquet</p>",
        f"<table class='cases'>{head}{''.join(body)}</table>",
    ]
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>aifabric sweep — {html.escape(title)}</title><style>{CSS}</style>"
        f"{plotly_script(plotly_src)}</head><body>" + "\n".join(parts) + "</body></html>"
    )
