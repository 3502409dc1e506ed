"""The topology as an SVG drawing a network engineer recognizes, written by hand (no dependency).

Rows from the top: super-spines, spines, rail switches, servers (GPUs coloured by rail, NICs wired
to their rail switch). Link speeds are written on each tier. Large fabrics are drawn collapsed: the
first pods, segments, servers and switches in full, the rest as a dashed box saying how many
("× 126 servers"). Custom topologies are drawn by tier from the graph.

`fabric_svg(x)` takes a `Fabric`, a `Design`, or a `Scenario`; the HTML report embeds its output.
"""

from __future__ import annotations

from html import escape

from ..units import bytes_per_s_to_gbps
from .design import Design, resolve
from .graph import NIC, SWITCH_LEVEL, Fabric

RAIL_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
SWITCH_FILL = {"superspine": "#5b3a8c", "spine": "#2b5d8c", "rail": "#3a7d44"}
SHOW_PODS, SHOW_SEGMENTS, SHOW_SERVERS, SHOW_LEAFS, SHOW_SPINES, SHOW_SUPERSPINES, SHOW_GPUS = 2, 2, 3, 8, 6, 8, 8
FONT = "font-family='Helvetica,Arial,sans-serif'"
ROW_LEAF, ROW_SERVER = 320, 460  # only their difference matters: rail switches to servers
SW_W, SW_H, GPU_W = 64, 26, 13


def _fmt_gbps(gbps: float) -> str:
    return f"{gbps / 1000:g}T" if gbps >= 1000 and gbps % 100 == 0 else f"{gbps:g}G"


class _Svg:
    def __init__(self) -> None:
        self.back: list[str] = []  # lines, drawn first
        self.front: list[str] = []

    def line(
        self, x1: float, y1: float, x2: float, y2: float, color: str = "#999", width: float = 1.0, dash: bool = False
    ) -> None:
        extra = " stroke-dasharray='4 3'" if dash else ""
        self.back.append(
            f"<line x1='{x1:.1f}' y1='{y1:.1f}' x2='{x2:.1f}' y2='{y2:.1f}' stroke='{color}' "
            f"stroke-width='{width}'{extra}/>"
        )

    def frame(self, x: float, y: float, w: float, h: float) -> None:
        """A background panel (under lines and boxes)."""
        self.back.insert(
            0,
            f"<rect x='{x:.1f}' y='{y:.1f}' width='{w:.1f}' height='{h:.1f}' rx='6' fill='#f3f6f9' stroke='#c9d3dd'/>",
        )

    def box(
        self,
        x: float,
        y: float,
        w: float,
        h: float,
        fill: str,
        label: str = "",
        color: str = "#fff",
        size: int = 10,
        dashed: bool = False,
        title: str = "",
    ) -> None:
        stroke = "stroke='#555' stroke-dasharray='5 3' fill-opacity='0.15'" if dashed else "stroke='#333'"
        tip = f"<title>{escape(title)}</title>" if title else ""
        self.front.append(
            f"<g><rect x='{x:.1f}' y='{y:.1f}' width='{w:.1f}' height='{h:.1f}' rx='4' fill='{fill}' {stroke}/>{tip}"
        )
        if label:
            self.front.append(
                f"<text x='{x + w / 2:.1f}' y='{y + h / 2 + size / 3:.1f}' text-anchor='middle' "
                f"font-size='{size}' fill='{color}' {FONT}>{escape(label)}</text>"
            )
        self.front.append("</g>")

    def text(
        self, x: float, y: float, s: str, size: int = 11, anchor: str = "start", color: str = "#222", bold: bool = False
    ) -> None:
        weight = " font-weight='bold'" if bold else ""
        self.front.append(
            f"<text x='{x:.1f}' y='{y:.1f}' text-anchor='{anchor}' font-size='{size}' "
            f"fill='{color}'{weight} {FONT}>{escape(s)}</text>"
        )

    def render(self, width: float, height: float, title: str) -> str:
        return (
            f"<svg xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height:.0f}' "
            f"viewBox='0 0 {width:.0f} {height:.0f}' role='img' aria-label='{escape(title)}'>"
            f"<rect width='100%' height='100%' fill='#fff'/>" + "".join(self.back) + "".join(self.front) + "</svg>\n"
        )


def _shown(n: int, limit: int) -> int:
    """How many of n to draw in full: all, unless more than one would be left out."""
    return n if n <= limit + 1 else limit


def _spread(n: int, x0: float, x1: float) -> list[float]:
    if n <= 0:
        return []
    if n == 1:
        return [(x0 + x1) / 2]
    step = (x1 - x0) / n
    return [x0 + step * (i + 0.5) for i in range(n)]


def _row_of_switches(svg: _Svg, n_total: int, n_show: int, xs: list[float], y: float, kind: str, name) -> list[float]:
    """Draw up to n_show switches at xs (the last slot becomes '× more' when collapsed); return their x."""
    shown = []
    for i, x in enumerate(xs):
        if n_total > n_show and i == len(xs) - 1:
            svg.box(
                x - SW_W / 2,
                y,
                SW_W,
                SW_H,
                SWITCH_FILL[kind],
                f"× {n_total - n_show + 1}",
                "#222",
                dashed=True,
                title=f"{n_total - n_show + 1} more {kind} switches",
            )
        else:
            svg.box(x - SW_W / 2, y, SW_W, SW_H, SWITCH_FILL[kind], name(i), title=name(i))
            shown.append(x)
    return shown


def _design_svg(d: Design, title: str) -> str:
    svg = _Svg()
    pods = _shown(d.pods, SHOW_PODS)
    segs = _shown(d.segments_per_pod, SHOW_SEGMENTS)
    servers = _shown(d.servers_per_segment, SHOW_SERVERS)
    gpus = min(d.gpus_per_server, SHOW_GPUS)
    server_w = gpus * (GPU_W + 2) + 14
    leafs_seg = d.leafs_per_segment
    leafs_show = min(leafs_seg, SHOW_LEAFS)
    more_servers = d.servers_per_segment > servers
    seg_w = max(leafs_show * (SW_W + 10), (servers + (1 if more_servers else 0)) * (server_w + 16)) + 20
    pod_w = segs * seg_w + (90 if d.segments_per_pod > segs else 0) + 20
    more_pods = d.pods > pods
    width = 40 + pods * (pod_w + 20) + (150 if more_pods else 0)
    width = max(width, 640)
    has_spines = d.spines_per_pod > 0
    y = 56
    row_ss = y
    if d.superspines:
        y += 120
    row_spine = y
    if has_spines:
        y += 130
    row_leaf = y
    row_server = row_leaf + (ROW_SERVER - ROW_LEAF)
    height = row_server + 128
    svg.text(20, 22, title, 14, bold=True)

    leaf_x: dict[tuple[int, int, int], float] = {}  # (pod, seg, leaf in segment) -> x
    spine_x: dict[tuple[int, int], float] = {}
    x = 30.0
    for p in range(pods):
        px0 = x
        label = f"Pod {p + 1}" if d.pods > 1 else ("Pod" if has_spines else "Segment")
        svg.text(
            px0 + 4,
            row_leaf - 14 if not has_spines else row_spine - 10,
            f"{label}: {d.servers_per_pod * d.gpus_per_server:,} GPUs",
            11,
            bold=True,
        )
        for s in range(segs):
            sx0 = x + s * seg_w
            svg.frame(sx0 + 2, row_leaf - 8, seg_w - 8, row_server - row_leaf + 88)
            lx = _spread(leafs_show, sx0, sx0 + seg_w - 10)
            for i, lxi in enumerate(lx):
                plane, group = divmod(i, d.groups_per_plane)
                if leafs_seg > leafs_show and i == len(lx) - 1:
                    svg.box(
                        lxi - SW_W / 2,
                        row_leaf,
                        SW_W,
                        SW_H,
                        SWITCH_FILL["rail"],
                        f"× {leafs_seg - leafs_show + 1}",
                        "#222",
                        dashed=True,
                    )
                    continue
                first = group * d.rails_per_switch + 1
                last = min((group + 1) * d.rails_per_switch, d.rails)
                name = (
                    "Switch"
                    if d.topology == "single-switch"
                    else f"Rail-{first}"
                    if first == last
                    else f"Rails {first}-{last}"
                )
                if d.planes > 1:
                    name += f" {'ABCD'[plane]}"
                svg.box(
                    lxi - SW_W / 2,
                    row_leaf,
                    SW_W,
                    SW_H,
                    SWITCH_FILL["rail"],
                    name,
                    size=9,
                    title=f"{name}: {d.leaf_host_ports} host ports, {d.leaf_up_ports} uplinks, radix {d.leaf_radix}",
                )
                leaf_x[p, s, i] = lxi
            # servers
            srv_xs = _spread(servers + (1 if more_servers else 0), sx0, sx0 + seg_w - 10)
            for k, cx in enumerate(srv_xs):
                bx = cx - server_w / 2
                if more_servers and k == len(srv_xs) - 1:
                    svg.box(
                        bx,
                        row_server,
                        server_w,
                        56,
                        "#ccc",
                        f"× {d.servers_per_segment - servers} servers",
                        "#222",
                        11,
                        dashed=True,
                    )
                    continue
                srv = p * d.servers_per_pod + s * d.servers_per_segment + k
                kind = "NVL72 rack" if d.scale_up == "nvl72" else "server"
                svg.box(bx, row_server, server_w, 56, "#e8e8e8", title=f"{kind} {srv}")
                svg.text(
                    cx,
                    row_server + 50,
                    f"{kind} {srv + 1}" + (f" ({d.gpus_per_server} GPUs)" if d.gpus_per_server > gpus else ""),
                    9,
                    "middle",
                )
                svg.box(bx + 5, row_server + 24, server_w - 10, 10, "#76b900", "NVSwitch", "#fff", 7)
                for g in range(gpus):
                    gx = bx + 7 + g * (GPU_W + 2)
                    nic = d.nic_of_gpu(g)
                    color = RAIL_COLORS[nic % len(RAIL_COLORS)]
                    svg.box(gx, row_server + 6, GPU_W, 14, color, str(g), "#fff", 7, title=f"GPU {g}, rail {nic + 1}")
                    if d.nic_layout == "shared" and g != d.gpus_per_server * nic // d.nics_per_server:
                        continue
                    group = nic // d.rails_per_switch
                    for plane in range(d.planes):
                        i = plane * d.groups_per_plane + group
                        target = leaf_x.get((p, s, i))
                        if target is not None:
                            svg.line(gx + GPU_W / 2, row_server + 6, target, row_leaf + SW_H, color, 1.0)
        if d.segments_per_pod > segs:
            mx = x + segs * seg_w
            svg.box(
                mx + 4,
                row_leaf,
                76,
                row_server - row_leaf + 56,
                "#ddd",
                f"× {d.segments_per_pod - segs} segments",
                "#222",
                9,
                dashed=True,
            )
        # spines of this pod
        if has_spines:
            n_show = min(d.spines_per_pod, SHOW_SPINES)
            xs = _spread(n_show, px0, px0 + pod_w - 20)
            shown = _row_of_switches(svg, d.spines_per_pod, n_show, xs, row_spine, "spine", lambda i: f"Spine-{i + 1}")
            for j, sxj in enumerate(shown):
                spine_x[p, j] = sxj
                for (pp, seg, i), lxv in leaf_x.items():
                    if pp != p:
                        continue
                    if d.partial_mesh:
                        pos = seg * d.leafs_per_segment + i
                        if (j - pos) % d.spines_per_pod >= d.spines_per_leaf:
                            continue
                    svg.line(lxv, row_leaf, sxj, row_spine + SW_H, "#888", 0.8)
        x += pod_w + 20
    if more_pods:
        svg.box(
            x,
            row_spine if has_spines else row_leaf,
            130,
            row_server - row_spine + 56,
            "#ddd",
            f"× {d.pods - pods} more pods",
            "#222",
            11,
            dashed=True,
        )
    if d.superspines:
        n_show = min(d.superspines, SHOW_SUPERSPINES)
        xs = _spread(n_show, 30, width - 30)
        shown = _row_of_switches(svg, d.superspines, n_show, xs, row_ss, "superspine", lambda i: f"Super-Spine-{i + 1}")
        per_plane = d.superspines_per_plane
        for k, xk in enumerate(shown):
            plane = k // per_plane if per_plane else 0
            for (_p, j), sxj in spine_x.items():
                if j % d.superspine_planes == plane:
                    svg.line(sxj, row_spine, xk, row_ss + SW_H, "#a58cc9", 0.8)
    # tier speed labels
    label_x = width - 12
    svg.text(
        label_x,
        row_leaf + SW_H + 40,
        f"host links {_fmt_gbps(d.host_speed_gbps)}" + (f" × {d.nic_ports} ports per NIC" if d.nic_ports > 1 else ""),
        10,
        "end",
    )
    if has_spines:
        svg.text(
            label_x,
            row_spine + SW_H + 40,
            f"rail–spine {_fmt_gbps(d.spine_speed_gbps)} × {d.links_per_spine}"
            + (" (partial mesh)" if d.partial_mesh else " (full mesh)"),
            10,
            "end",
        )
    if d.superspines:
        svg.text(
            label_x,
            row_ss + SW_H + 40,
            f"spine–super-spine {_fmt_gbps(d.superspine_speed_gbps)} × {d.links_per_superspine}",
            10,
            "end",
        )
    # legend: rails
    ly = height - 30
    svg.text(20, ly, "rails:", 10)
    for r in range(min(d.rails, len(RAIL_COLORS))):
        svg.box(56 + r * 52, ly - 10, 12, 12, RAIL_COLORS[r])
        svg.text(72 + r * 52, ly, f"Rail-{r + 1}", 9)
    nic_text = "shared NIC" if d.nic_layout == "shared" else "NIC per GPU"
    svg.text(
        20,
        height - 10,
        f"{d.servers:,} servers × {d.gpus_per_server} {d.gpu} = {d.gpus:,} GPUs · {nic_text}"
        f" · {d.leafs:,} rail switches · {d.spines:,} spines · {d.superspines:,} super-spines",
        10,
    )
    return svg.render(width, height, title)


def _graph_svg(f: Fabric, title: str) -> str:
    """Custom topologies: switches by tier, servers at the bottom, every cable (up to a limit)."""
    svg = _Svg()
    tiers: dict[int, list[str]] = {}
    for n, node in f.nodes.items():
        level = SWITCH_LEVEL.get(node.kind)
        if level:
            tiers.setdefault(level, []).append(n)
    servers = sorted({f.server_of(r) for r in range(f.world_size)})
    shown_servers = servers[:8]
    width = max(640, 90 * max([len(v[:16]) for v in tiers.values()] + [len(shown_servers) + 1]) + 60)
    rows = sorted(tiers, reverse=True)
    y_of = {lvl: 50 + i * 120 for i, lvl in enumerate(rows)}
    server_y = 50 + len(rows) * 120
    pos: dict[str, tuple[float, float]] = {}
    for lvl, ids in tiers.items():
        show = ids[:16]
        for x, n in zip(_spread(len(show), 20, width - 20), show, strict=True):
            kind = f.nodes[n].kind
            svg.box(x - SW_W / 2, y_of[lvl], SW_W, SW_H, SWITCH_FILL[kind], n[:12], size=9, title=n)
            pos[n] = (x, y_of[lvl])
        if len(ids) > 16:
            svg.text(width - 20, y_of[lvl] - 6, f"+ {len(ids) - 16} more", 10, "end")
    for x, s in zip(_spread(len(shown_servers), 20, width - 20), shown_servers, strict=True):
        svg.box(x - 40, server_y, 80, 30, "#e8e8e8", f"server {s}", "#222", 9)
        pos[f"s{s}"] = (x, server_y)
    drawn = 0
    speed_gbps: dict[int, set[float]] = {}  # per switch level: the speeds of the links into it
    for li in range(0, len(f.links), 2):
        link = f.links[li]
        a, b = link.src, link.dst
        if f.nodes[a].kind == NIC:
            a = f"s{f.nodes[a].server}"
        if a in pos and b in pos and drawn < 2000:
            (x1, y1), (x2, y2) = pos[a], pos[b]
            up, low = ((x1, y1), (x2, y2 + SW_H)) if y1 > y2 else ((x2, y2), (x1, y1 + SW_H))
            svg.line(up[0], up[1], low[0], low[1], "#888", 0.8)
            drawn += 1
        if f.is_switch(link.dst):
            level = max(f.level(link.src), f.level(link.dst))
            speed_gbps.setdefault(level, set()).add(bytes_per_s_to_gbps(link.capacity_bytes_per_s))
    for level, gbps in speed_gbps.items():
        y = (y_of[level] + SW_H + 50) if level > 1 else server_y - 40
        svg.text(
            width - 20,
            y,
            " / ".join(_fmt_gbps(g) for g in sorted(gbps)) + (" host links" if level == 1 else " links"),
            10,
            "end",
        )
    if len(servers) > len(shown_servers):
        svg.text(width - 20, server_y + 50, f"× {len(servers)} servers", 11, "end")
    svg.text(20, 22, title, 14, bold=True)
    return svg.render(width, server_y + 70, title)


def fabric_svg(x, title: str | None = None) -> str:
    """An SVG of a `Fabric`, a `Design` or a `Scenario`."""
    # imported here: the fabric package does not import the scenario at module level
    from ..scenario.schema import Scenario

    if isinstance(x, Scenario):
        if x.fabric.topology == "custom":
            from .build import build

            return _graph_svg(build(x.cluster, x.fabric, x.name), title or x.name)
        return _design_svg(resolve(x.cluster, x.fabric), title or f"{x.name}: {x.fabric.topology}")
    if isinstance(x, Design):
        return _design_svg(x, title or x.topology)
    if isinstance(x, Fabric):
        d = x.design
        if isinstance(d, Design) and d.topology != "custom":
            return _design_svg(d, title or f"{x.name}: {d.topology}")
        return _graph_svg(x, title or x.name)
    raise TypeError(f"cannot draw a {type(x).__name__}")
