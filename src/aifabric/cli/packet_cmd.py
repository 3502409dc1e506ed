"""`aifabric packet`: the packet-level stories of Deep Learning for Network Engineers (Ch. 10-12), or a
scenario file's training iteration, on the packet engine.

Every flag works in both forms or is refused naming itself: `--size-mb` sizes the stories' flows (a
scenario's transfers are sized by its workload); `--lb` is refused by the stories that compare load
balancing themselves (polarization, spraying), `--transport` and `--write-only` by spraying, which compares
those too. In the file form `--flow N` is the N-th RDMA transfer of the iteration (NVLink ones not counted).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from ..errors import InputError, Problem
from ..packet.config import LB_MODES, TRANSPORTS
from .app import app
from .console import make_console

if TYPE_CHECKING:
    from ..packet.network import Network

console = make_console()

STORIES = (
    "incast",
    "polarization",
    "pfc-cascade",
    "dcqcn",
    "spraying",
    "hol-blocking",
    "ecmp-uplink",
    "connect",
    "pfc-storm",
    "pfc-deadlock",
    "pfc-deadlock-loop",
)
MAX_SIZE_MB = 1024  # per flow of a story
HELP = (
    "incast (Fig. 10-2) | polarization (Fig. 10-5) | pfc-cascade (Figs. 11-4..11-6) | dcqcn (Fig. 11-7) | "
    "spraying (Figs. 12-6/12-7) | hol-blocking (Fig. 10-4) | ecmp-uplink (Figs. 12-4/12-5) | connect (Ch. 9: "
    "memory registration, QPs, CM exchange, one RDMA Write, its completion) | pfc-storm (Ch. 11's PFC watchdog: a NIC "
    "that keeps sending pauses) | pfc-deadlock (a cycle of PFC pauses after link failures, the watchdog breaks it) "
    "| pfc-deadlock-loop (a routing loop while routing converges deadlocks) | a scenario YAML file (its training "
    "iteration, packet by packet)"
)
# flags a story overrides itself (it compares their values): refused there rather than ignored
OVERRIDDEN = {"polarization": ("--lb",), "ecmp-uplink": ("--lb",), "spraying": ("--lb", "--transport", "--write-only")}


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.1f}"
    return "-" if v is None else str(v)


@app.command()
def packet(
    scenario: str = typer.Argument(..., help=HELP),
    explain: bool = typer.Option(False, "--explain", help="narrate the events in time order"),
    pcap: Path = typer.Option(
        None, "--pcap", help="write the traced flows' packets, CNPs, ACKs and PFC frames to FILE"
    ),
    flows: list[int] = typer.Option(
        None,
        "--flow",
        help="flow to trace into the pcap (repeatable; default 0); with "
        "a scenario file, the N-th RDMA transfer of the iteration",
    ),
    out: Path = typer.Option(
        None, "--out", "-o", help="write packet-stats.json (stories: and packet.html) and the pcap into DIR"
    ),
    lb: str = typer.Option(
        None,
        "--lb",
        help="load balancing: " + " | ".join(LB_MODES) + " (not polarization, spraying: they compare these)",
    ),
    transport: str = typer.Option(
        None,
        "--transport",
        help="rc (RoCEv2 RC) | uc | ud (datagrams up to the path MTU) | uet (Ultra Ethernet, spraying)",
    ),
    write_only: bool = typer.Option(False, "--write-only", help="RDMA Write Only: a RETH in every packet"),
    size_mb: float = typer.Option(
        None, "--size-mb", help="bytes per flow, MB (the stories only; default: the story's)"
    ),
    seed: int = typer.Option(
        None,
        "--seed",
        help="seed of the WRED marking draws (default: 0 for the stories, the scenario's seed for a file)",
    ),
    max_events: int = typer.Option(400, "--max-events", help="narrated events printed with --explain"),
    force: bool = typer.Option(
        False, "--force", help="write into an --out folder that holds files aifabric did not write there"
    ),
    qos: Path = typer.Option(
        None,
        "--qos",
        help="run a story on the switch QoS profile (fabric.qos) of this "
        "scenario or cluster+fabric file (a scenario file's own profile is "
        "always used)",
    ),
    cm: bool = typer.Option(
        False,
        "--cm",
        help="set each queue pair up on the wire first: CM REQ -> REP -> RTU to "
        "QP1 before its first Write (in the pcap and in the timing)",
    ),
    pkey: str = typer.Option(
        None,
        "--pkey",
        help="the P_Key of every queue pair, e.g. 0x8012 (default 0xFFFF, the "
        "default partition; not the connect story, which uses the book's)",
    ),
    bad_rkey: bool = typer.Option(
        False,
        "--bad-rkey",
        help="connect: the Write carries an R_Key the server never issued (NAK remote access error)",
    ),
    bad_pkey: bool = typer.Option(
        False,
        "--bad-pkey",
        help="connect: the client's QP is left on the default partition 0xFFFF (the server drops and counts)",
    ),
) -> None:
    """Run a packet-level story of Deep Learning for Network Engineers (Ch. 10-12), or a scenario file's
    iteration, on the packet engine; print what happened, optionally narrated and captured."""
    from dataclasses import replace

    from ..packet.config import PacketConfig

    is_file = scenario.endswith((".yaml", ".yml")) or Path(scenario).is_file()
    problems = []
    if not is_file and scenario not in STORIES:
        problems.append(
            Problem("scenario", f"unknown story {scenario!r}; one of: {', '.join(STORIES)}, or a scenario YAML file")
        )
    if lb is not None and lb not in LB_MODES:
        problems.append(Problem("--lb", f"one of: {', '.join(LB_MODES)}"))
    if transport is not None and transport not in TRANSPORTS:
        problems.append(Problem("--transport", f"one of: {', '.join(TRANSPORTS)}"))
    if size_mb is not None and not 0 < size_mb <= MAX_SIZE_MB:  # NaN and inf too
        problems.append(
            Problem(
                "--size-mb",
                f"must be a number > 0 and <= {MAX_SIZE_MB:,} (every packet is simulated: "
                f"1 GB takes about 20 s) (got {size_mb:g})",
            )
        )
    if size_mb is not None and is_file:
        problems.append(
            Problem("--size-mb", "sizes the stories' flows; a scenario's transfers are sized by its workload")
        )
    if seed is not None and seed < 0:
        problems.append(Problem("--seed", f"must be >= 0 (got {seed})"))
    if max_events < 0:
        problems.append(Problem("--max-events", f"must be >= 0 (got {max_events})"))
    if flows and any(f < 0 for f in flows):
        problems.append(Problem("--flow", "flow numbers are 0, 1, 2, ..."))
    elif flows and pcap is None and out is None:
        problems.append(Problem("--flow", "chooses the flows traced into --pcap or --out: give one of them"))
    if out is not None and out.exists() and not out.is_dir():
        problems.append(Problem("--out", f"{out} exists and is not a directory"))
    if pcap is not None and pcap.is_dir():
        problems.append(Problem("--pcap", f"{pcap} is a directory"))
    given = {"--lb": lb is not None, "--transport": transport is not None, "--write-only": write_only}
    for flag in OVERRIDDEN.get(scenario, ()):
        if given[flag]:
            problems.append(Problem(flag, f"the {scenario} story compares the values of {flag} itself"))
    if qos is not None and is_file:
        problems.append(Problem("--qos", "a scenario file runs on its own fabric.qos profile"))
    for flag, on in (("--bad-rkey", bad_rkey), ("--bad-pkey", bad_pkey)):
        if on and scenario != "connect":
            problems.append(Problem(flag, "shows the responder's checks in the connect story only"))
    pkey_value = None
    if pkey is not None:
        try:
            pkey_value = int(pkey, 0)
        except ValueError:
            pkey_value = -1
        if not 0 < pkey_value <= 0xFFFF or not pkey_value & 0x7FFF:
            problems.append(
                Problem("--pkey", f"a 16-bit P_Key with a non-zero partition number, e.g. 0x8012 (got {pkey!r})")
            )
        elif scenario == "connect":
            problems.append(Problem("--pkey", "the connect story uses the book's P_Key 0x8012"))
    if cm and scenario == "connect":
        problems.append(Problem("--cm", "the connect story always sets its queue pair up on the wire"))
    if problems:
        raise InputError(problems)
    from .outdir import PACKET, check_folder, probe_out

    if out is not None:  # a folder of the user's files is refused before the run (--force)
        out = check_folder(out, force, PACKET)
    probe_out(out, "dir")  # before the run: an OS error after it was exit 1
    probe_out(pcap, "file", "--pcap")
    traced = tuple(flows) if flows else (0,)
    capture = pcap is not None or out is not None
    cfg = PacketConfig(
        explain=explain,
        seed=seed or 0,
        trace_flows=traced if capture else (),
        trace_pfc=capture,
        trace_by="rdma" if is_file else "flow",
    )
    if qos is not None:
        from ..packet.profile import apply_qos
        from .fabric_cmd import load_hardware

        hw_fabric = load_hardware(qos).fabric
        profile = hw_fabric.qos
        beside = [k for k in ("load_balancing", "flowlet_gap_us") if k in hw_fabric.model_fields_set]
        if hw_fabric.load_balancing == "ecmp" and "load_balancing" in beside:  # the stories' own default
            beside.remove("load_balancing")
        if beside:  # the story's own fabric and --lb choose its paths
            from rich.console import Console

            Console(stderr=True).print(
                f"[yellow]note:[/] --qos takes {escape(str(qos))}'s fabric.qos alone; its fabric."
                f"{', fabric.'.join(beside)} {'is' if len(beside) == 1 else 'are'} not used (the story's paths: "
                "its own load balancing, or --lb)",
                highlight=False,
            )
        if profile.dlb.mode != "off" and "--lb" in OVERRIDDEN.get(scenario, ()):
            raise InputError(
                Problem(
                    "--qos",
                    f"{qos}: fabric.qos.dlb.mode {profile.dlb.mode}: the {scenario} story compares the load "
                    "balancings itself (its flowlet and adaptive rows are DLB's flowlet and per-packet modes); "
                    "give a profile with dlb.mode: off",
                )
            )
        cfg = apply_qos(cfg, profile)
    if lb is not None:
        cfg = cfg.with_(lb=replace(cfg.lb, mode=lb))
    if transport is not None or write_only:
        cfg = cfg.with_(nic=replace(cfg.nic, transport=transport or "rc", write_only=write_only))
    if cm:
        cfg = cfg.with_(nic=replace(cfg.nic, cm_setup=True))
    if pkey_value is not None:
        cfg = cfg.with_(nic=replace(cfg.nic, pkey=pkey_value))
    if is_file:
        _run_file(Path(scenario), cfg, out, pcap, lb, seed, traced if capture else (), max_events)
    else:
        extra = {"bad_rkey": bad_rkey, "bad_pkey": bad_pkey} if scenario == "connect" else {}
        _run_story(scenario, cfg, out, pcap, size_mb, traced if capture else (), max_events, extra)


def _narrate(runs: list[tuple[str, Network]], max_events: int) -> None:
    for label, net in runs:
        if len(runs) > 1:
            console.print(f"\n[bold]{label}[/]")
        log = net.events_log
        if not log:
            console.print(
                "[dim]no events to narrate: no queue crossed its WRED minimum, no ECN mark, CNP, PFC "
                "frame, drop or retransmission[/]"
            )
        for t, cat, text in log[:max_events]:
            console.print(f"[dim]{t * 1e6:11.3f} us[/] [cyan]{cat:9}[/] {text}", highlight=False)
        more = len(log) - max_events + net.log_dropped
        if more > 0:
            console.print(f"[dim]... {more} more events[/]")
    console.print()


def _check_traced(traced: tuple[int, ...], available: int, what: str) -> None:
    beyond = [f for f in traced if f >= available]
    if beyond:
        raise InputError(
            Problem(
                "--flow",
                f"the run has {available} {what} (0 .. {available - 1}); no {', '.join(map(str, beyond))}"
                if available
                else f"the run has no {what} to trace",
            )
        )


def _write_pcap(pcap: Path, net, with_note: bool = True) -> str:
    from ..packet.pcap import capture_note, write_pcap

    tmp = pcap.with_name(f".{pcap.name}.tmp")  # written beside it, then renamed: never a half-written pcap
    try:
        n = write_pcap(tmp, net.captured, net)
        tmp.replace(pcap)
    finally:
        tmp.unlink(missing_ok=True)
    note = capture_note(net) if with_note else None
    return f"{pcap} ({n} frames{'; ' + note if note else ''})"


def check_pcap_options(pcap: Path, max_packets: int, engine: str) -> None:
    """`simulate --pcap`: refused (exit 2) off the packet engine, into a directory, or with a cap below 1; the file's
    folder is probed before the run."""
    problems = []
    if engine != "packet":
        problems.append(
            Problem("--pcap", f"the packet engine writes captures (this run: the {engine} engine); add --engine packet")
        )
    if pcap.is_dir():
        problems.append(Problem("--pcap", f"{pcap} is a directory"))
    if max_packets < 1:
        problems.append(Problem("--pcap-max-packets", f"must be >= 1 (got {max_packets})"))
    if problems:
        raise InputError(problems)
    from .outdir import probe_out

    probe_out(pcap, "file", "--pcap")


def write_capture(pcap: Path, net) -> str:
    """A run's capture written to `pcap` (LLDP, the traced packets, PFC frames): the file, its frames, the cap's
    note when it was reached."""
    from ..packet.pcap import capture_note

    text = _write_pcap(pcap, net, with_note=False) + ": every RDMA transfer's packets, CNPs, ACKs and PFC frames"
    note = capture_note(net, "--pcap-max-packets")
    return text + (f"\nnote: {note}" if note else "")


def _run_story(
    name: str,
    cfg,
    out: Path | None,
    pcap: Path | None,
    size_mb: float | None,
    traced: tuple[int, ...],
    max_events: int,
    extra: dict | None = None,
) -> None:
    from rich.table import Table

    from ..packet.scenarios import run_scenario
    from ..report.files import write_json

    kw: dict = {"size_mb": size_mb} if size_mb is not None else {}
    kw.update(extra or {})
    run = run_scenario(name, cfg, **kw)
    if traced:
        _check_traced(traced, len(run.net.flows), "flows")
    console.rule(f"[bold]{run.title}")
    if cfg.explain:
        _narrate([(label, net) for label, net, _ in run.runs], max_events)
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
        from ..report.files import write_atomic

        write_json(out / "packet-stats.json", run.to_dict())
        write_atomic(out / "packet.html", packet_html(run.title, run.findings, [(lb_, st) for lb_, _, st in run.runs]))
        files += [str(out / "packet-stats.json"), str(out / "packet.html")]
        pcap = pcap or out / f"{name}.pcap"
    if pcap is not None:
        files.append(_write_pcap(pcap, run.net))
    if files:
        console.print("\nwrote " + ", ".join(files))


def _run_file(
    path: Path,
    cfg,
    out: Path | None,
    pcap: Path | None,
    lb: str | None,
    seed: int | None,
    traced: tuple[int, ...],
    max_events: int,
) -> None:
    """A scenario file's workload on the packet engine: iteration time and what the fabric did."""
    from rich.table import Table

    from ..report.files import write_json
    from ..scenario import load_scenario
    from ..simulate import simulate
    from .run_cmds import ProgressLine, _print_unused, warn_if_long

    s = load_scenario(path)
    _print_unused(s, "packet", lb)
    bar = ProgressLine("packet", warn_if_long(s, "packet", None, None))  # a long run is announced, then followed
    console.print(f"simulating [bold]{escape(s.name)}[/] packet by packet ...")
    try:
        run = simulate(s, "packet", bar.on_progress, packet_options=cfg, lb=lb, seed=seed, keep_network=True)
    finally:
        bar.stop()
    stats = run.packet_stats
    if not run.results.complete or stats is None:
        if out is not None:  # Ctrl-C: the folder says how far it got
            write_json(
                out / "packet-stats.json", {"scenario": s.name, "complete": False, "stopped_in": "packet engine"}
            )
        console.print("interrupted" + (f": wrote {out / 'packet-stats.json'} (complete: false)" if out else ""))
        raise typer.Exit(130)
    net = run.packet_network
    if traced:
        _check_traced(traced, net.rdma_flows, "RDMA transfers")
    res = run.results
    console.rule(f"[bold]{escape(s.name)}: packet engine")
    if cfg.explain:
        _narrate([("", net)], max_events)
    console.print(
        f"iteration time {res.iteration_time_s * 1e3:.3f} ms; {stats.packet_hops:,} packet hops, "
        f"{stats.events:,} events; {net.rdma_flows:,} RDMA transfers",
        highlight=False,
    )
    table = Table(show_header=True, header_style="bold")
    tot = stats.to_dict(series=False)["totals"]
    for k in tot:
        table.add_column(k, justify="right")
    table.add_row(*(str(v) for v in tot.values()))
    console.print(table)
    fcts = sorted((f["fct_s"] for f in stats.flows if f["fct_s"] is not None), reverse=True)
    if fcts:
        console.print(
            f"transfers: {len(fcts)}, slowest {fcts[0] * 1e6:.1f} us, median {fcts[len(fcts) // 2] * 1e6:.1f} us",
            highlight=False,
        )
    files = []
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_json(
            out / "packet-stats.json",
            {"scenario": s.name, "iteration_time_s": res.iteration_time_s, **stats.to_dict(series=False)},
        )
        files.append(str(out / "packet-stats.json"))
        pcap = pcap or out / "packets.pcap"
    if pcap is not None:
        files.append(
            _write_pcap(pcap, net) + f": RDMA transfer{'s' * (len(traced) > 1)} "
            f"{', '.join(map(str, traced))} and PFC frames"
        )
    if files:
        console.print("\nwrote " + ", ".join(files), highlight=False)
