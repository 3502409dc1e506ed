"""A log-log SVG of how wall time and peak memory grow with GPUs (docs/performance.md shows it).

    python bench/growth_svg.py results.jsonl docs/img/iteration-growth.svg

Each line of results.jsonl is one row of `bench_iteration.py --jsonl` (gpus, plan, total_s, peak_rss_mb, ...).
Plain SVG, no plotting library: two panels (seconds, GB), one line per plan.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

COLORS = {"gpt3": "#1f77b4", "llama3": "#d62728", "1t": "#2ca02c"}
W, H, PAD_L, PAD_B, PAD_T, GAP = 360, 260, 56, 40, 28, 40


def _ticks(lo: float, hi: float) -> list[float]:
    out, k = [], math.floor(math.log10(lo))
    while 10**k <= hi * 1.0001:
        for m in (1, 2, 5):
            v = m * 10**k
            if lo / 1.0001 <= v <= hi * 1.0001:
                out.append(v)
        k += 1
    return out


def _panel(rows: list[dict], key: str, scale: float, title: str, x0: float) -> list[str]:
    gpus = [r["gpus"] for r in rows]
    vals = [r[key] * scale for r in rows]
    xlo, xhi = min(gpus) / 1.3, max(gpus) * 1.3
    ylo, yhi = min(vals) / 1.5, max(vals) * 1.5
    pw, ph = W - PAD_L - 12, H - PAD_B - PAD_T

    def px(g: float) -> float:
        return x0 + PAD_L + pw * (math.log(g) - math.log(xlo)) / (math.log(xhi) - math.log(xlo))

    def py(v: float) -> float:
        return PAD_T + ph * (1 - (math.log(v) - math.log(ylo)) / (math.log(yhi) - math.log(ylo)))

    out = [
        f'<text x="{x0 + PAD_L + pw / 2:.0f}" y="16" text-anchor="middle" font-weight="bold">{title}</text>',
        f'<rect x="{x0 + PAD_L}" y="{PAD_T}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>',
    ]
    for v in _ticks(ylo, yhi):
        out.append(f'<line x1="{x0 + PAD_L}" x2="{x0 + PAD_L + pw}" y1="{py(v):.1f}" y2="{py(v):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{x0 + PAD_L - 4}" y="{py(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for g in sorted(set(gpus)):
        out.append(f'<text x="{px(g):.1f}" y="{H - PAD_B + 16}" text-anchor="middle">{g:,}</text>')
    out.append(f'<text x="{x0 + PAD_L + pw / 2:.0f}" y="{H - 6}" text-anchor="middle">GPUs</text>')
    for plan in sorted({r["plan"] for r in rows}):
        pts = sorted((r["gpus"], r[key] * scale) for r in rows if r["plan"] == plan)
        color = COLORS.get(plan, "#555")
        path = " ".join(f"{px(g):.1f},{py(v):.1f}" for g, v in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        out += [f'<circle cx="{px(g):.1f}" cy="{py(v):.1f}" r="3" fill="{color}"/>' for g, v in pts]
    return out


def svg(rows: list[dict]) -> str:
    body = _panel(rows, "total_s", 1.0, "wall time, s (simulate + report)", 0)
    body += _panel(rows, "peak_rss_mb", 1 / 1024, "peak memory, GB", W + GAP)
    plans = sorted({r["plan"] for r in rows})
    for i, plan in enumerate(plans):
        y = PAD_T + 14 + 16 * i
        body.append(f'<rect x="{PAD_L + 8}" y="{y - 9}" width="10" height="10" fill="{COLORS.get(plan, "#555")}"/>')
        body.append(f'<text x="{PAD_L + 22}" y="{y}">{plan}</text>')
    width = 2 * W + GAP
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{H}" '
        f'font-family="sans-serif" font-size="11">\n' + "\n".join(body) + "\n</svg>\n"
    )


def main() -> None:
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    rows = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    dst.write_text(svg(rows))
    print(f"wrote {dst} ({len(rows)} points)")


if __name__ == "__main__":
    main()
