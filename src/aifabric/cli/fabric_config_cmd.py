"""`aifabric fabric config`: NX-OS or SONiC configuration per switch, from the plan and the QoS profile; and
`--import` of an NX-OS QoS configuration back into a `fabric.qos` profile."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape

from ..errors import InputError, Problem
from .console import make_console
from .fabric_cmd import check_out, fabric_app, load_hardware

console = make_console()
FORMATS = ("nxos", "sonic")
SHOWN = 12  # switches listed in the summary table


def _layout():
    from .outdir import Layout

    return Layout(
        "fabric-config.json",
        ("name", "format", "switches"),
        r"fabric-config\.json|[\w.-]+\.(cfg|json)",
        what="the configuration",
    )


def _headroom(hw) -> int:
    from ..fabric.design import resolve
    from ..scenario.checks_qos import headroom_needed_bytes

    f = hw.fabric
    d = resolve(hw.cluster, f)
    speeds = [f.link_speed_gbps, d.host_speed_gbps] + (
        [f.superspine_link_speed_gbps] if f.superspine_link_speed_gbps else []
    )
    return headroom_needed_bytes(f.qos, f.link_latency_ns, f.switch_latency_ns, max(speeds))


@fabric_app.command("config")
def config_cmd(
    file: Path = typer.Argument(None, help="scenario or cluster+fabric YAML file"),
    fmt: str = typer.Option("nxos", "--format", "-f", help="nxos (Cisco NX-OS CLI) | sonic (config_db.json)"),
    out: Path = typer.Option(
        None,
        "--out",
        "-o",
        help="write one file per switch (<switch>.cfg or <switch>.json) and fabric-config.json here",
    ),
    switch: list[str] = typer.Option(
        None, "--switch", "-s", help="print this switch's configuration (repeatable; default: a table of the switches)"
    ),
    import_: Path = typer.Option(
        None, "--import", help="read an NX-OS QoS configuration and print it as a fabric.qos profile (YAML)"
    ),
    force: bool = typer.Option(
        False, "--force", help="write into an --out folder that holds files aifabric did not write there"
    ),
) -> int:
    """Switch configuration from the plan: the QoS profile in the six steps of Deep Learning for Network Engineers,
    Chapter 11 (classification, QoS groups, queuing with WRED/ECN, network-qos with MTU and PFC, system qos,
    interfaces with PFC and its watchdog), Dynamic Load Balancing (Chapter 12), the rail VLANs and gateways, the
    inter-switch links, BGP with each rail switch's aggregate."""
    problems = []
    if fmt not in FORMATS:
        problems.append(Problem("--format", f"one of: {', '.join(FORMATS)} (got {fmt!r})"))
    if import_ is not None and (file is not None or switch or fmt != "nxos"):
        problems.append(Problem("--import", "reads an NX-OS file alone: no FILE, --switch or --format with it"))
    if import_ is None and file is None:
        problems.append(Problem("FILE", "give a scenario or cluster+fabric file (or --import an NX-OS file)"))
    if problems:
        raise InputError(problems)
    if import_ is not None:
        return _import(import_, out)
    check_out(out, "dir")
    if out is not None:
        from .outdir import check_folder

        out = check_folder(out, force, _layout())
    from ..fabric import build
    from ..fabric.switch_config import nxos, sonic, switch_plans

    hw = load_hardware(file)
    if hw.fabric.topology == "custom":
        raise InputError(Problem("FILE", f"{file}: a custom topology has no addressing plan to configure"))
    f = build(hw.cluster, hw.fabric, hw.name)
    plans = switch_plans(f, hw.fabric)
    by_id = {s.id: s for s in plans} | {s.hostname: s for s in plans}
    unknown = [s for s in switch or [] if s not in by_id]
    if unknown:
        names = ", ".join(s.id for s in plans[:8]) + (" ..." if len(plans) > 8 else "")
        raise InputError(Problem("--switch", f"no switch {unknown[0]!r} in {hw.name} ({names})"))
    headroom = _headroom(hw)

    def render(sw) -> str:
        if fmt == "nxos":
            return nxos(sw, hw.fabric.qos, hw.fabric, headroom, title=hw.name)
        return json.dumps(sonic(sw, hw.fabric.qos, hw.fabric, headroom), indent=2) + "\n"

    for name in switch or []:
        console.print(render(by_id[name]), highlight=False, markup=False, soft_wrap=True, end="")
    if not switch:
        from rich.table import Table

        t = Table(title=f"{escape(hw.name)}: {len(plans)} switches ({fmt})", title_justify="left")
        for col in ("switch", "role", "ASN", "host ports", "uplinks", "VLANs", "aggregate"):
            t.add_column(col, justify="right" if col in ("host ports", "uplinks") else "left")
        for sw in plans[:SHOWN]:
            t.add_row(
                escape(sw.id),
                sw.role,
                str(sw.asn),
                str(sum(p.kind == "host" for p in sw.ports)),
                str(len(sw.uplinks())),
                ", ".join(str(v) for v, _ in sw.svis) or "-",
                ", ".join(map(str, sw.aggregates)) or "-",
            )
        console.print(t)
        if len(plans) > SHOWN:
            console.print(f"  ... {len(plans) - SHOWN:,} more (all written with --out)")
        q = hw.fabric.qos
        console.print(
            f"QoS: WRED {q.wred.min_kb:g}/{q.wred.max_kb:g} KB on queues {q.wred.queues}, PFC on CoS "
            f"{q.pfc.priorities} xON {q.pfc.xon_kb:g} KB / xOFF {q.pfc.xoff_kb:g} KB, MTU {q.mtu_bytes}",
            highlight=False,
        )
    if out is not None:
        from ..report.files import write_atomic, write_json
        from .outdir import claim_out

        ext = "cfg" if fmt == "nxos" else "json"
        folder = claim_out(out, True, layout=_layout())
        try:
            for sw in plans:
                write_atomic(folder.staging / f"{sw.hostname}.{ext}", render(sw))
            write_json(
                folder.staging / "fabric-config.json",
                {
                    "name": hw.name,
                    "format": fmt,
                    "switches": [
                        {
                            "id": sw.id,
                            "file": f"{sw.hostname}.{ext}",
                            "role": sw.role,
                            "asn": sw.asn,
                            "loopback": str(sw.loopback),
                            "ports": len(sw.ports),
                        }
                        for sw in plans
                    ],
                },
            )
            folder.publish()
        finally:
            folder.discard()
        console.print(f"wrote {out}/: {len(plans)} {fmt} configurations and fabric-config.json")
    return 0


def _import(path: Path, out: Path | None) -> int:
    import yaml
    from pydantic import ValidationError

    from ..fabric.switch_config import NxosParseError, parse_nxos_qos
    from ..scenario.checks_qos import check_qos
    from ..scenario.load import problems_from_validation
    from ..scenario.qos_spec import QosSpec
    from ..scenario.safe_yaml import YamlLimit, read_text_bounded

    if not path.is_file():
        raise InputError(Problem("--import", f"{path}: no such file"))
    try:
        text = read_text_bounded(path)
    except (YamlLimit, OSError, UnicodeDecodeError) as exc:
        raise InputError(Problem("--import", f"{path}: cannot read: {exc}")) from None
    try:
        data = parse_nxos_qos(text)
        qos = QosSpec.model_validate(data)
    except NxosParseError as exc:
        raise InputError(Problem("--import", f"{path}: {exc}")) from None
    except ValidationError as exc:
        probs = [
            Problem(f"fabric.qos.{p.path}" if p.path else "fabric.qos", p.message)
            for p in problems_from_validation(exc)
        ]
        raise InputError(probs, str(path)) from None
    problems = check_qos(qos)
    if problems:
        raise InputError(problems, str(path))
    text_out = yaml.safe_dump({"fabric": {"qos": data}}, sort_keys=False)
    if out is not None:
        from ..report.files import write_atomic

        check_out(out, "file")
        write_atomic(out, f"# from {path.name} by aifabric fabric config --import\n" + text_out)
        console.print(f"wrote {out}")
    else:
        console.print(text_out, highlight=False, markup=False, soft_wrap=True, end="")
    return 0
