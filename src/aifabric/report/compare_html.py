"""compare.html: several runs side by side in one small, self-contained page (no script).

The metrics table (each run's value, its difference to the first run, the metrics that differ first), one
bar chart per metric drawn as inline SVG, the notes (fields that cannot change anything), and a link to
each run's own report.html (written beside it by `aifabric compare`). A few kilobytes per run.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from .metric_format import delta_pct, format_metric

PALETTE = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6", "#9D755D", "#BAB0AC"]
BAR_W, BAR_H, LABEL_W, VALUE_W = 360, 18, 180, 150

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1200px;color:#222}
h1{font-size:22px} h2{font-size:17px;margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
table.m{border-collapse:collapse;font-size:14px} table.m th,table.m td{padding:3px 12px;border-bottom:1px solid #eee}
table.m td{text-align:right} table.m th{text-align:left} tr.same td,tr.same th{color:#999}
.up{color:#b00} .down{color:#070} .note{color:#555;font-size:14px} .charts{display:flex;flex-wrap:wrap;gap:18px}
.chart{border:1px solid #eee;padding:8px} .chart h3{font-size:14px;margin:0 0 6px 0}
"""

# metrics where more is better (a rise is good news): their changes are colored the other way
HIGHER_IS_BETTER = ("mfu", "min_busbw_gBps", "tokens_per_s", "tokens_per_s_per_musd")


@dataclass(frozen=True)
class RunRow:
    title: str  # column title (the varied value, or the file's stem)
    label: str  # full label: field=value, ...
    report: str  # the run's report.html, relative to compare.html
    metrics: dict[str, float]


def _delta_html(key: str, d: float | None) -> str:
    if d is None:
        return ""
    if abs(d) < 0.05:
        return " <span>(±0.0%)</span>"
    if key.startswith("max_util") or key.endswith("_bytes"):  # neither good nor bad news in itself
        return f" <span>({d:+.1f}%)</span>"
    worse = (d > 0) != (key in HIGHER_IS_BETTER)
    return f" <span class='{'up' if worse else 'down'}'>({d:+.1f}%)</span>"


def differs(values: list[float | None]) -> bool:
    present = [v for v in values if v is not None]
    return len(set(present)) > 1 or len(present) != len(values)


def ordered_keys(rows: list[RunRow]) -> list[str]:
    """Every metric, those that differ between the runs first (each group in the metrics' own order)."""
    keys = list(dict.fromkeys(k for r in rows for k in r.metrics))
    diff = [k for k in keys if differs([r.metrics.get(k) for r in rows])]
    return diff + [k for k in keys if k not in diff]


def metrics_table(rows: list[RunRow]) -> str:
    head = "".join(f"<th><a href='{html.escape(r.report)}'>{html.escape(r.title)}</a></th>" for r in rows)
    body = []
    base = rows[0].metrics
    for k in ordered_keys(rows):
        values = [r.metrics.get(k) for r in rows]
        cells = []
        for i, v in enumerate(values):
            cell = html.escape(format_metric(k, v))
            if i:
                cell += _delta_html(k, delta_pct(v, base.get(k)))
            cells.append(f"<td>{cell}</td>")
        cls = "" if differs(values) else " class='same'"
        body.append(f"<tr{cls}><th>{html.escape(k)}</th>{''.join(cells)}</tr>")
    return (
        f"<table class='m'><tr><th>metric</th>{head}</tr>{''.join(body)}</table>"
        "<p class='note'>Δ relative to the first run; grey rows: the same in every run.</p>"
    )


def bar_chart(key: str, rows: list[RunRow]) -> str:
    """One metric, one horizontal bar per run, as inline SVG."""
    values = [r.metrics.get(key) for r in rows]
    top = max((abs(v) for v in values if v is not None), default=0.0) or 1.0
    height = BAR_H * len(rows) + 8
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{LABEL_W + BAR_W + VALUE_W}' height='{height}' "
        f"role='img' aria-label='{html.escape(key)}'>"
    ]
    for i, (r, v) in enumerate(zip(rows, values)):
        y = 4 + i * BAR_H
        w = 0 if v is None else max(1, round(BAR_W * abs(v) / top))
        parts.append(
            f"<text x='{LABEL_W - 6}' y='{y + 13}' font-size='12' text-anchor='end'>{html.escape(r.title[:28])}</text>"
        )
        parts.append(
            f"<rect x='{LABEL_W}' y='{y + 2}' width='{w}' height='{BAR_H - 4}' "
            f"fill='{PALETTE[i % len(PALETTE)]}'><title>{html.escape(r.label)}: "
            f"{html.escape(format_metric(key, v))}</title></rect>"
        )
        parts.append(
            f"<text x='{LABEL_W + w + 6}' y='{y + 13}' font-size='12'>{html.escape(format_metric(key, v))}</text>"
        )
    parts.append("</svg>")
    return f"<div class='chart'><h3>{html.escape(key)}</h3>{''.join(parts)}</div>"


def build_compare_html(title: str, rows: list[RunRow], notes: list[str]) -> str:
    keys = ordered_keys(rows)
    changed = [k for k in keys if differs([r.metrics.get(k) for r in rows])]
    parts = [f"<h1>aifabric compare — {html.escape(title)}</h1>"]
    if notes:
        parts.append("".join(f"<p class='note'><b>note:</b> {html.escape(n)}</p>" for n in notes))
    parts.append("<h2>Metrics</h2>" + metrics_table(rows))
    parts.append(
        "<h2>Per metric</h2><div class='charts'>" + "".join(bar_chart(k, rows) for k in changed or keys) + "</div>"
    )
    if changed and len(changed) < len(keys):
        parts.append(
            f"<p class='note'>{len(keys) - len(changed)} metrics are the same in every run (grey in "
            "the table) and not charted.</p>"
        )
    parts.append(
        "<h2>Runs</h2><ul>"
        + "".join(
            f"<li><a href='{html.escape(r.report)}'>{html.escape(r.label)}</a>: its own report (timeline, link "
            "load, traffic matrices, collectives)</li>"
            for r in rows
        )
        + "</ul>"
    )
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>aifabric compare — {html.escape(title)}</title><style>{CSS}</style></head><body>"
        + "\n".join(parts)
        + "</body></html>"
    )
