"""The terminal summary: rich tables in the layouts people know (nccl-tests for collectives)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..collectives.cost import busbw_factor
from ..fabric.graph import RAIL, SPINE, SUPERSPINE
from ..simulate import Run
from ..units import bytes_per_s_to_gbps
from .caveats import caveats

FAULT_EVENTS_SHOWN = 12  # the terminal's table of the faults' events; summary.json and report.html hold them all


def fmt_time(t_s: float) -> str:
    if t_s >= 1:
        return f"{t_s:.3f} s"
    if t_s >= 1e-3:
        return f"{t_s * 1e3:.3f} ms"
    return f"{t_s * 1e6:.1f} µs"


def fmt_bytes(n: float) -> str:
    for unit, size in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def fmt_hours(t_s: float) -> str:
    """2.9 h, 38 min, 45 s, 4.75 s, 0.297 s (not '0 s' for a checkpoint written in a third of a second)."""
    if t_s >= 3600:
        return f"{t_s / 3600:.1f} h"
    if t_s >= 60:
        return f"{t_s / 60:.0f} min"
    if t_s >= 10:
        return f"{t_s:.0f} s"
    return f"{t_s:.3g} s"


def reliability_line(rel: dict) -> str:
    """One line of summary.json `reliability`: failures, MTBF, checkpoint interval, the run's lost fraction."""
    interval = "as set" if rel["checkpoint_interval_given"] else "the interval that loses least"
    lost = rel["lost_fraction"]
    return (
        f"{rel['failures_per_day']:.3g} failures/day (MTBF {fmt_hours(rel['mtbf_s'])}); checkpoint of "
        f"{fmt_bytes(rel['checkpoint_bytes'])} in {fmt_hours(rel['checkpoint_s'])} every "
        f"{fmt_hours(rel['checkpoint_interval_s'])} ({interval}): {100 * lost['total']:.1f} % of the run lost "
        f"(checkpoints {100 * lost['checkpointing']:.1f}, redone work {100 * lost['rework']:.1f}, restarts "
        f"{100 * lost['restart']:.1f})"
    )


def connection_setup_line(cs: dict) -> str:
    """One line of summary.json `connection_setup`: the job's one-time RDMA connection setup."""
    if not cs["connections"]:
        return "no RDMA connection (every transfer stays inside a server)"
    when = (
        "all at once; this first iteration sets each connection up before its first use, in its time"
        if cs.get("in_iteration")
        else "once, before the first collective (not in the iteration time)"
    )
    return (
        f"{fmt_time(cs['time_s'])} {when}: "
        f"{cs['connections']:,} connections ({cs['queue_pairs']:,} QPs) over {cs['nics']} NICs, "
        f"{fmt_time(cs['per_connection_s'])} each (QPs created, INIT -> RTR -> RTS, CM REQ -> REP -> RTU); busiest NIC {cs['busiest_nic']} sets up "
        f"{cs['busiest_nic_connections']}, {'one' if cs['concurrency'] == 1 else cs['concurrency']} at a time"
    )


def _n(count: int, word: str) -> str:
    """'1 transfer', '3 transfers'."""
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def fault_when(f: dict) -> str:
    """When a fault of summary.json `faults.faults` holds: ' at 90.000 ms, back at 92.000 ms (3 times, 50.000 ms
    apart)'; '' from the start."""
    if f.get("at_s") is None:
        return ""
    out = f" at {fmt_time(f['at_s'])}"
    if f.get("up_at_s") is not None:
        out += f", back at {fmt_time(f['up_at_s'])}"
    if f.get("flaps", 1) > 1:
        out += f" ({f['flaps']} times, {fmt_time(f['flap_period_s'])} apart)"
    return out


def faults_line(faults: dict) -> str:
    """One line of summary.json `faults`."""
    what = ", ".join(f"{f['kind'].replace('_', ' ')} {f['target']}{fault_when(f)}" for f in faults["faults"][:4])
    more = f" and {len(faults['faults']) - 4} more" if len(faults["faults"]) > 4 else ""
    return (
        f"{what}{more}: iteration {fmt_time(faults['iteration_time_s'])} against "
        f"{fmt_time(faults['fault_free_iteration_time_s'])} without ({100 * (faults['slowdown'] - 1):+.1f} %); "
        f"{fmt_bytes(faults['bytes_rerouted_per_iteration'])} rerouted per iteration, {_n(faults['qps_rerouted'], 'QP')} "
        "on a new path" + _during_run(faults.get("during_run"))
    )


def _during_run(d: dict | None) -> str:
    """Faults during the run: what stopped, for how long, what moved."""
    if not d:
        return ""
    n = len(d["events"])
    return (
        f"; during the run: {_n(n, 'event')}, {_n(d['transfers_stopped'], 'transfer')} stopped (traffic "
        f"stalled {fmt_time(d['stalled_s'])} of the run, the longest stop {fmt_time(d['longest_stall_s'])}), "
        f"{d['transfers_rerouted']:,} moved ({fmt_bytes(d['bytes_rerouted'])} on other paths)"
        + (f"; {d['engine_path']}" if str(d.get("engine_path", "")).startswith("reference:") else "")
    )


def fault_events(faults: dict) -> list[tuple[str, str, str]]:
    """Each event of summary.json `faults.during_run` as (when, what, what it did then)."""
    d = faults.get("during_run") or {}
    rows = []
    for e in d.get("events", []):
        did = []
        if e.get("transfers_stopped"):
            did.append(f"{_n(e['transfers_stopped'], 'transfer')} stopped, the bytes in flight lost")
        if "transfers_rerouted" in e:
            did.append(f"{_n(e['transfers_rerouted'], 'transfer')} (in flight or to come) moved by routing")
        if e.get("compute_tasks_repaced"):
            did.append(f"{_n(e['compute_tasks_repaced'], 'compute task')} running there at the new pace")
        rows.append((fmt_time(e["t_s"]), e["what"], "; ".join(did) or "-"))
    return rows


def fmt_usd(x: float) -> str:
    """$2.52 M, $607,680, $19.20, $3.57e-05."""
    if abs(x) >= 1e6:
        return f"${x / 1e6:,.2f} M"
    if abs(x) >= 100:
        return f"${x:,.0f}"
    if abs(x) >= 0.01:
        return f"${x:,.2f}"
    return f"${x:.3g}"


def fmt_watts(w: float) -> str:
    """17.50 MW, 15.4 kW, 826 W."""
    if w >= 1e6:
        return f"{w / 1e6:,.2f} MW"
    if w >= 1e3:
        return f"{w / 1e3:,.1f} kW"
    return f"{w:,.0f} W"


def fmt_energy_kwh(kwh: float) -> str:
    return f"{kwh / 1e3:,.1f} MWh" if kwh >= 1e3 else f"{kwh:,.3g} kWh"


def power_line(c: dict) -> str:
    """A costs dict's power: IT power by part, facility power at its PUE."""
    p, kinds = c["power"], c["power"]["by_kind_w"]
    return (
        f"{fmt_watts(p['it_w'])} IT (GPUs {fmt_watts(kinds.get('gpu', 0.0))}, servers "
        f"{fmt_watts(kinds.get('server', 0.0))}, network {fmt_watts(p['network_w'])}); "
        f"{fmt_watts(p['facility_w'])} at PUE {c['inputs']['pue']:g}"
    )


def cost_lines(c: dict) -> list[tuple[str, str]]:
    """A run's costs dict (summary.json `costs`) as (label, text) rows for the terminal and the report."""
    cap, it, tr = c["capital"], c.get("per_iteration"), c.get("training")
    rows = [
        ("power", power_line(c)),
        (
            "capital",
            f"{fmt_usd(cap['total_usd'])} (network {fmt_usd(cap['network_usd'])}: NICs, switches, "
            f"optics, cables; {100 * cap['network_usd'] / cap['total_usd']:.0f}%)"
            if cap["total_usd"]
            else fmt_usd(0.0),
        ),
    ]
    if it is not None:
        rows.append(
            (
                "cost per iteration",
                f"{fmt_usd(it['total_usd'])} (energy {fmt_energy_kwh(it['energy_kwh'])} "
                f"= {fmt_usd(it['energy_usd'])} at ${c['inputs']['price_per_kwh']:.2f}/kWh, capital "
                f"{fmt_usd(it['capital_usd'])} over {c['inputs']['amortization_years']:g} years); "
                f"{c['tokens_per_s']:,.0f} {c['unit']}/s",
            )
        )
    if tr is not None:
        rows.append(
            (
                "training run",
                f"{tr['tokens']:.3g} {c['unit']}, {tr['iterations']:,.0f} iterations, "
                f"{tr['hours']:,.1f} h: energy {fmt_energy_kwh(tr['energy_mwh'] * 1e3)} = {fmt_usd(tr['energy_usd'])}, "
                f"capital share {fmt_usd(tr['capital_usd'])}, total {fmt_usd(tr['total_usd'])} "
                f"({tr['basis']})",
            )
        )
    return rows


def fabric_headline(fabric, topology: str) -> str:
    """'rail-optimized, 8 rail switches, 2 spines': the switches the fabric really has, by tier."""
    names = {
        RAIL: ("rail switch", "rail switches"),
        SPINE: ("spine", "spines"),
        SUPERSPINE: ("super-spine", "super-spines"),
    }
    if topology == "single-switch":
        names[RAIL] = ("switch", "switches")
    parts = []
    for kind, (one, many) in names.items():
        n = len(fabric.nodes_of_kind(kind))
        if n:
            parts.append(f"{n} {one if n == 1 else many}")
    return ", ".join([topology, *parts])


KIND_NAMES = {
    "gemm": "GEMM",
    "attention": "attention",
    "memory": "memory-bound",
    "optimizer": "optimizer",
    "launch": "launch/gaps",
    "all": "compute_efficiency override",
}


def compute_breakdown(by_kind) -> str:
    """'GEMM 71%, attention 9%, memory-bound 17%, ...' of a rank's compute time by kernel kind."""
    total = sum(s for _, s in by_kind)
    if total <= 0:
        return ""
    return ", ".join(f"{KIND_NAMES.get(k, k)} {100 * s / total:.0f}%" for k, s in by_kind if s >= 0.005 * total)


def throughput_line(r) -> str:
    return (
        f"MFU {100 * r.mfu:.1f}%, HFU {100 * r.hfu:.1f}%; {r.model_flops_per_gpu_s / 1e12:.0f} model / "
        f"{r.hardware_flops_per_gpu_s / 1e12:.0f} hardware TFLOP/s per GPU"
    )


def collective_groups(collectives) -> list[list]:
    """Instances alike (operation, label, ranks, size, algorithm) in one group; groups by total time."""
    groups: dict[tuple, list] = {}
    for c in collectives:
        groups.setdefault((c.op, c.label, c.group_size, c.size_bytes, c.algorithm), []).append(c)
    return sorted(groups.values(), key=lambda g: -sum(x.time_s * x.count for x in g))


def print_summary(run: Run, console: Console, top_links: int = 8) -> None:
    r = run.results
    s = run.scenario
    head = Table(title=f"aifabric · {escape(s.name)} · {r.engine} engine", show_header=False, title_justify="left")
    head.add_column(style="bold")
    head.add_column()
    head.add_row(
        "cluster",
        f"{s.cluster.servers} servers × {s.cluster.gpus_per_server} {s.cluster.gpu}"
        f" = {run.fabric.world_size} GPUs, {fabric_headline(run.fabric, s.fabric.topology)}",
    )
    head.add_row("workload", run.workload.description)
    head.add_row("iteration time", fmt_time(r.iteration_time_s))
    split = compute_breakdown(r.compute_by_kind_s)
    head.add_row("compute", fmt_time(r.compute_time_s) + (f" ({split})" if split else ""))
    head.add_row("communication", fmt_time(r.communication_time_s))
    exposed_pct = 100 * r.exposed_communication_s / r.iteration_time_s if r.iteration_time_s else 0
    head.add_row(
        "exposed communication", f"{fmt_time(r.exposed_communication_s)} ({exposed_pct:.0f}% of the iteration)"
    )
    rt = run.rank_timeline
    if len(rt.idle_s) and r.iteration_time_s:
        n = len(r.rank_compute_s)
        idle, bubble = float(rt.idle_s[:n].mean()), float(rt.bubble_s[:n].mean())
        idle_max, bubble_max = float(rt.idle_s[:n].max()), float(rt.bubble_s[:n].max())
        it = r.iteration_time_s
        head.add_row(
            "GPU idle",
            f"mean {fmt_time(idle)} per rank ({100 * idle / it:.0f}%), max {fmt_time(idle_max)}"
            " (summary.json: idle_time_mean_s, idle_time_s)",
        )
        if rt.pipeline:
            head.add_row(
                "of which pipeline bubble",
                f"mean {fmt_time(bubble)} ({100 * bubble / it:.0f}%), max {fmt_time(bubble_max)}",
            )
    head.add_row("throughput", throughput_line(r))
    head.add_row(
        "transfers",
        f"{r.flow_count:,} ({fmt_bytes(r.flow_bytes)}; NVLink {fmt_bytes(r.scale_up_bytes)},"
        f" network {fmt_bytes(r.scale_out_bytes)})",
    )
    head.add_row("connection setup", connection_setup_line(run.connection_setup))
    fl = run.timeline.flowlets
    if fl is not None:
        head.add_row(
            "flowlets",
            f"{fl['flowlets']:,} on {fl['connections']:,} connections (gap {fmt_time(fl['gap_s'])}),"
            f" {fl['switches']:,} moved to another path",
        )
    for label, text in cost_lines(run.costs):
        head.add_row(label, text)
    head.add_row("reliability", reliability_line(run.reliability))
    for text in caveats(s):
        head.add_row("[yellow]accuracy", escape(text))
    if run.faults:
        head.add_row("[yellow]faults", faults_line(run.faults))
    for w in run.packet_windows or ():
        head.add_row(f"packet window {w.spec.text}", packet_window_line(w))
    if run.packet_stats is not None:
        tot = run.packet_stats.to_dict(series=False)["totals"]
        head.add_row(
            "fabric (packet engine)" if run.packet_windows is None else "fabric (packet windows)",
            f"ECN marks {tot['ecn_marks']:,}, CNPs {tot['cnps']:,},"
            f" PFC pauses {tot['pfc_pause_frames']:,}, drops {tot['drops']:,},"
            f" retransmissions {tot['retransmissions']:,}",
        )
    if not r.complete:
        head.add_row("[red]status", "[red]interrupted: partial results")
    console.print(head)
    events = fault_events(run.faults) if run.faults else []
    if events:
        table = Table(title="faults during the run (summary.json faults.during_run)", title_justify="left")
        for col in ("time", "what", "then"):
            table.add_column(col, justify="right" if col == "time" else "left")
        for row in events[:FAULT_EVENTS_SHOWN]:
            table.add_row(*(escape(x) for x in row))
        if len(events) > FAULT_EVENTS_SHOWN:
            table.add_row("", f"and {len(events) - FAULT_EVENTS_SHOWN} more (summary.json)", "")
        console.print(table)

    groups = collective_groups(r.collectives)
    coll = Table(
        title="collectives, alike instances in one row, by total time (time per instance; nccl-tests' "
        "busbw = size / time × 2(n−1)/n for AllReduce)",
        title_justify="left",
    )
    for col in ("collective", "count", "op", "ranks", "size", "algorithm", "mean", "max", "busbw GB/s"):
        coll.add_column(
            col,
            justify="right" if col not in ("collective", "op", "algorithm") else "left",
            no_wrap=True,
            max_width=30 if col == "collective" else None,
        )
    for g in groups[:20]:
        c = g[0]
        count = sum(x.count for x in g)
        mean = sum(x.time_s * x.count for x in g) / count
        worst = max(x.time_s for x in g)
        algbw = c.size_bytes / mean if mean > 0 else 0.0
        if c.algorithm == "folded":  # key "<dim>:<op> (folded)"
            name = f"{c.key.split(':')[0]} {c.label} (folded)"
        else:
            name = c.key if len(g) == 1 else (c.label or c.key)
        coll.add_row(
            name,
            f"{count:,}",
            c.op,
            str(c.group_size),
            fmt_bytes(c.size_bytes),
            c.algorithm,
            fmt_time(mean),
            fmt_time(worst),
            f"{algbw * busbw_factor(c.op, c.group_size) / 1e9:.2f}",
        )
    if len(groups) > 20:
        coll.caption = f"... and {len(groups) - 20} more kinds; every instance in summary.json and collectives.csv"
    console.print(coll)

    links = Table(title=f"busiest links (top {top_links} by utilization)", title_justify="left")
    for col in ("link", "tier", "capacity Gb/s", "bytes", "utilization", "peak Gb/s"):
        links.add_column(col, justify="left" if col in ("link", "tier") else "right")
    for link in sorted(r.links, key=lambda x: -x.utilization)[:top_links]:
        links.add_row(
            link.id,
            link.tier,
            f"{bytes_per_s_to_gbps(link.capacity_bytes_per_s):.0f}",
            fmt_bytes(link.bytes),
            f"{100 * link.utilization:.1f}%",
            f"{bytes_per_s_to_gbps(link.peak_bytes_per_s):.1f}",
        )
    console.print(links)


def packet_window_line(w) -> str:
    """One hybrid-engine window (engines/hybrid.PacketWindow) in words."""
    if not w.transfers:
        return f"nothing packet by packet: {w.note}"
    span = f"{fmt_time(w.t0_s)}-{fmt_time(w.t1_s)}"
    cap = f", the first {fmt_time(w.packet_s)} of it" if w.extrapolated else ""
    moved = w.packet_end_s - w.flow_end_s
    line = (
        f"{span}{cap}: {w.transfers:,} transfers ({fmt_bytes(w.bytes)}) packet by packet"
        f"{f', {w.extrapolated:,} of them finished at the goodput their packets reached' if w.extrapolated else ''};"
        f" they end {fmt_time(abs(moved))} {'later' if moved >= 0 else 'earlier'} than on the flow engine"
    )
    return line
