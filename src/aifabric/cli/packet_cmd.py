"""`aifabric packet`: the seeds' packet-level scenarios (Ch. 10-12) on the packet engine."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from ..errors import InputError, Problem
from ..packet.config import LB_MODES, TRANSPORTS, LbConfig, PacketConfig
from ..packet.scenarios import SCENARIOS, run_scenario
from ..report import write_json
from .app import app
from .console import make_console

console = make_console()

HELP = ("incast (Fig. 10-2) | polarization (Fig. 10-5) | pfc-cascade (Figs. 11-4..11-6) | dcqcn (Fig. 11-7) | "
        "spraying (Figs. 12-6/12-7) | a scenario YAML file (its training iteration, packet by packet)")


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.1f}"
    return "-" if v is None else str(v)


@app.command()
def packet(
    scenario: str = typer.Argument(..., help=HELP),
    explain: bool = typer.Option(False, "--explain", help="narrate the events in time order"),
    pcap: Path = typer.Option(None, "--pcap", help="write the traced flows' packets, CNPs, ACKs and PFC frames to FILE"),
    flows: list[int] = typer.Option(None, "--flow", help="flow number to trace into the pcap (repeatable; default 0)"),
    out: Path = typer.Option(None, "--out", "-o", help="write packet-stats.json, packet.html and the pcap into DIR"),
    lb: str = typer.Option(None, "--lb", help="load balancing: " + " | ".join(LB_MODES) + " (incast, dcqcn, pfc-cascade)"),
    transport: str = typer.Option(None, "--transport", help="rc (RoCEv2) | uet (Ultra Ethernet, spraying)"),
    write_only: bool = typer.Option(False, "--write-only", help="RDMA Write Only: a RETH in every packet"),
    size_mb: float = typer.Option(None, "--size-mb", help="bytes per flow, MB (default: the scenario's)"),
    seed: int = typer.Option(0, "--seed", help="seed of the WRED marking draws"),
    max_events: int = typer.Option(400, "--max-events", help="narrated events printed with --explain"),
) -> None:
    """Run one of the seeds' packet-level scenarios; print what happened, optionally narrated and captured."""
    problems = []
    if scenario.endswith((".yaml", ".yml")) or Path(scenario).is_file():
        _run_file(Path(scenario), out, lb, explain, max_events)
        return
    if scenario not in SCENARIOS:
        problems.append(Problem("scenario", f"unknown scenario {scenario!r}; one of: {', '.join(SCENARIOS)}"))
    if lb is not None and lb not in LB_MODES:
        problems.append(Problem("--lb", f"one of: {', '.join(LB_MODES)}"))
    if transport is not None and transport not in TRANSPORTS:
        problems.append(Problem("--transport", f"one of: {', '.join(TRANSPORTS)}"))
    if size_mb is not None and not size_mb > 0:
        problems.append(Problem("--size-mb", "must be positive"))
    if out is not None and out.exists() and not out.is_dir():
        problems.append(Problem("--out", f"{out} exists and is not a directory"))
    if problems:
        raise InputError(problems)
    if flows and any(f < 0 for f in flows):
        raise InputError(Problem("--flow", "flow numbers are 0, 1, 2, ..."))
    traced = tuple(flows) if flows else (0,)
    cfg = PacketConfig(explain=explain, seed=seed, trace_flows=traced if (pcap or out) else (),
                       trace_pfc=bool(pcap or out))
    if lb is not None:
        cfg = cfg.with_(lb=LbConfig(mode=lb))
    if transport is not None or write_only:
        cfg = cfg.with_(nic=cfg.nic.__class__(transport=transport or "rc", write_only=write_only))
    kw = {"size_mb": size_mb} if size_mb is not None else {}
    run = run_scenario(scenario, cfg, **kw)

    console.rule(f"[bold]{run.title}")
    if explain:
        for label, net, _ in run.runs:
            if len(run.runs) > 1:
                console.print(f"\n[bold]{label}[/]")
            log = net.events_log
            for t, cat, text in log[:max_events]:
                console.print(f"[dim]{t * 1e6:11.3f} us[/] [cyan]{cat:9}[/] {text}", highlight=False)
            more = len(log) - max_events + net.log_dropped
            if more > 0:
                console.print(f"[dim]... {more} more events[/]")
        console.print()
    if run.table:
        table = Table(show_header=True, header_style="bold")
        keys = list(run.table[0])
        for k in keys:
            table.add_column(k, justify="left" if isinstance(run.table[0][k], str) else "right")
        for row in run.table:
            table.add_row(*(_fmt(row[k]) for k in keys))
        console.print(table)
    for line in run.findings:
        console.print(f"- {line}", highlight=False)
    files = []
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        from ..packet.figures import packet_html
        from ..report import write_atomic

        write_json(out / "packet-stats.json", run.to_dict())
        write_atomic(out / "packet.html", packet_html(run.title, run.findings, [(lb_, st) for lb_, _, st in run.runs]))
        files.append(str(out / "packet-stats.json"))
        files.append(str(out / "packet.html"))
        if pcap is None:
            pcap = out / f"{scenario}.pcap"
    if pcap is not None:
        from ..packet.pcap import write_pcap

        n = write_pcap(pcap, run.net.captured, run.net)
        files.append(f"{pcap} ({n} frames)")
    if files:
        console.print("\nwrote " + ", ".join(files))


def _run_file(path: Path, out: Path | None, lb: str | None, explain: bool, max_events: int) -> None:
    """A scenario file's workload on the packet engine: iteration time and what the fabric did."""
    from ..engines.packet import simulate_packet
    from ..scenario import load_scenario

    s = load_scenario(path)
    if lb is not None:
        if lb not in LB_MODES:
            raise InputError(Problem("--lb", f"one of: {', '.join(LB_MODES)}"))
    console.print(f"simulating [bold]{s.name}[/] packet by packet ...")
    run, stats = simulate_packet(s, cfg=PacketConfig(explain=explain), lb=lb)
    if stats is None:
        console.print("interrupted")
        raise typer.Exit(130)
    res = run.results
    console.rule(f"[bold]{s.name}: packet engine")
    console.print(f"iteration time {res.iteration_time_s * 1e3:.3f} ms; {stats.packet_hops:,} packet hops, "
                  f"{stats.events:,} events", highlight=False)
    table = Table(show_header=True, header_style="bold")
    tot = stats.to_dict(series=False)["totals"]
    for k in tot:
        table.add_column(k, justify="right")
    table.add_row(*(str(v) for v in tot.values()))
    console.print(table)
    fcts = sorted((f["fct_s"] for f in stats.flows if f["fct_s"] is not None), reverse=True)
    if fcts:
        console.print(f"transfers: {len(fcts)}, slowest {fcts[0] * 1e6:.1f} us, median "
                      f"{fcts[len(fcts) // 2] * 1e6:.1f} us", highlight=False)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "packet-stats.json", {"scenario": s.name, "iteration_time_s": res.iteration_time_s,
                                               **stats.to_dict(series=False)})
        console.print(f"\nwrote {out / 'packet-stats.json'}")
