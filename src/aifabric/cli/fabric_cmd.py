"""`aifabric fabric`: plan, polarization, draw, rail-map — the questions asked before buying switches.

FILE is a scenario, or a file with only `cluster:` and `fabric:` sections.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from ..errors import InputError, Problem
from .app import app
from .console import make_console

if TYPE_CHECKING:
    from ..fabric.design import Design
    from ..scenario.fabric_spec import HardwareSpec
    from ..scenario.schema import Scenario

console = make_console()
fabric_app = typer.Typer(
    help="Build, plan and draw a fabric: bill of materials, capacity, failure domains, "
    "cabling, addressing, ECMP polarization.",
    no_args_is_help=True,
)
app.add_typer(fabric_app, name="fabric")

ADDRESS_ROWS_SHOWN = 16
HIST_FLOWS = 6


def load_hardware(path: Path) -> HardwareSpec:
    """A scenario (validated in full) or a hardware-only file (cluster + fabric)."""
    return load_hardware_and_scenario(path)[0]


def load_hardware_and_scenario(path: Path) -> tuple[HardwareSpec, Scenario | None]:
    """`load_hardware`'s hardware, and the whole scenario when the file is one (else None)."""
    from pydantic import ValidationError

    from ..scenario.checks_fabric import check_fabric_spec
    from ..scenario.fabric_spec import HardwareSpec
    from ..scenario.load import load_scenario, problems_from_validation, read_yaml, resolve_costs

    if not path.exists():
        raise InputError(f"{path}: no such file", str(path))
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a YAML file", str(path))
    from ..scenario.safe_yaml import YamlLimit, read_text_bounded

    try:
        text = read_text_bounded(path)
    except YamlLimit as exc:
        raise InputError(f"{path}: refused: {exc}", str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}", str(path)) from None
    data = read_yaml(text, str(path))
    if isinstance(data, dict) and "workload" in data:
        s = load_scenario(path)
        return HardwareSpec(
            name=s.name, seed=s.seed, cluster=s.cluster, fabric=s.fabric, costs=s.costs, reliability=s.reliability
        ), s
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping with cluster: and fabric: sections", str(path))
    data = resolve_costs({k: v for k, v in data.items() if k != "engine"}, path.parent, str(path))
    try:
        hw = HardwareSpec.model_validate(data)
    except ValidationError as exc:
        raise InputError(problems_from_validation(exc), str(path)) from None
    problems = check_fabric_spec(hw.cluster, hw.fabric)
    if problems:
        raise InputError(problems, str(path))
    return hw, None


def check_out(out: Path | None, kind: str) -> None:
    """--out before any work: a folder to write into (kind "dir"), or a file to write (kind "file")."""
    if out is None:
        return
    if kind == "dir" and out.exists() and not out.is_dir():
        raise InputError(Problem("--out", f"{out} exists and is not a directory"))
    if kind == "file" and out.is_dir():
        raise InputError(Problem("--out", f"{out} is a directory; give the file to write"))
    from .outdir import probe_out

    probe_out(out, kind)


def _tbps(gbps: float) -> str:
    return f"{gbps / 1000:,.1f} Tb/s" if gbps >= 1000 else f"{gbps:,.0f} Gb/s"


@fabric_app.command("plan")
def plan_cmd(
    file: Path = typer.Argument(..., help="scenario or cluster+fabric YAML file"),
    out: Path = typer.Option(None, "--out", "-o", help="write plan.json, bom.csv, cabling.csv, addressing.csv here"),
    prices: Path = typer.Option(
        None,
        "--prices",
        help="a price table (YAML) over the documented defaults "
        "(costs/prices.py; the file's entries replace the scenario's costs.prices)",
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="write into an --out folder that holds files aifabric did "
        "not write there (files of the same names are replaced, others kept)",
    ),
) -> int:
    """Bill of materials, capacity per tier (non-blocking or not), failure domains, power and cost, cabling and
    addressing."""
    check_out(out, "dir")
    if out is not None:  # a folder of the user's files is refused before any work (--force)
        from .outdir import PLAN, check_folder

        out = check_folder(out, force, PLAN)
    from rich.table import Table

    from ..fabric import build
    from ..fabric.addressing import AddressPlan
    from ..fabric.plan import TIER_NAMES, make_plan

    hw, scenario = load_hardware_and_scenario(file)
    if prices is not None:
        from ..costs.prices import load_prices

        table = load_prices(prices)
        hw = hw.model_copy(update={"costs": hw.costs.model_copy(update={"prices": table})})
    f = build(hw.cluster, hw.fabric, hw.name)
    d: Design = f.design  # type: ignore[assignment]
    plan = make_plan(f)
    console.print(f"[bold]{escape(hw.name)}[/]: {escape(d.describe())}")

    bom = Table(title="Bill of materials: switches", title_justify="left")
    for col in ("tier", "switches", "radix", "ports used", "ports free", "busiest switch uses"):
        bom.add_column(col, justify="left" if col == "tier" else "right")
    for t in plan.bom.switch_tiers:
        bom.add_row(
            TIER_NAMES[t.kind],
            f"{t.switches:,}",
            str(t.radix),
            f"{t.ports_used:,}",
            f"{t.ports_free:,}",
            f"{t.fullest_ports_used}",
        )
    console.print(bom)
    cables = Table(title="Cables and optics", title_justify="left")
    for col in ("tier", "speed", "cables", "transceivers"):
        cables.add_column(col, justify="left" if col == "tier" else "right")
    for c in plan.bom.cables:
        cables.add_row(c.tier, f"{c.speed_gbps:g}G", f"{c.cables:,}", f"{c.transceivers:,}")
    console.print(cables)
    console.print(f"NICs: {plan.bom.nics:,} ({plan.bom.nic_ports:,} ports)")
    costs = _print_costs(plan.bom, hw)

    cap = plan.capacity
    tiers = Table(title="Capacity per tier (per direction)", title_justify="left")
    for col in ("tier", "switches", "down / switch", "up / switch", "down total", "up total", "oversubscription"):
        tiers.add_column(col, justify="left" if col == "tier" else "right")
    for tc in cap.tiers:
        ratio = "top tier" if tc.oversubscription is None else f"{tc.oversubscription:.2f}:1"
        tiers.add_row(
            TIER_NAMES[tc.kind],
            f"{tc.switches:,}",
            _tbps(tc.down_gbps),
            _tbps(tc.up_gbps) if tc.up_gbps else "—",
            _tbps(tc.total_down_gbps),
            _tbps(tc.total_up_gbps) if tc.total_up_gbps else "—",
            ratio,
        )
    console.print(tiers)
    console.print(
        f"per GPU: {cap.per_gpu_scale_out_gbps:g} Gb/s scale-out (PCIe {cap.per_gpu_pcie_gbps:g} Gb/s; "
        f"bottleneck: {cap.bottleneck}); bisection {_tbps(cap.bisection_gbps)} of "
        f"{_tbps(cap.full_bisection_gbps)} for full bisection"
    )
    for note in cap.notes:
        console.print(f"  note: {note}")
    color = "green" if cap.non_blocking else "yellow"
    console.print(f"[bold {color}]{cap.verdict}[/]")

    fd = Table(title="Failure domains: losing one ...", title_justify="left")
    for col in ("element", "example", "GPUs cut off", "GPUs partitioned", "GPUs degraded", "effect"):
        fd.add_column(col, justify="right" if col.startswith("GPUs") else "left")
    for x in plan.failures:
        fd.add_row(
            x.element, x.example, f"{x.gpus_cut_off:,}", f"{x.gpus_partitioned:,}", f"{x.gpus_degraded:,}", x.effect
        )
    console.print(fd)
    reliability = _print_reliability(f, hw, _model_params(scenario))

    if d.topology != "custom":
        ap = AddressPlan.from_spec(d, hw.fabric)
        addr = Table(
            title=f"Addressing: a /{ap.subnet_prefix} per {'rail' if ap.per_rail else 'rail switch'} "
            f"per segment, aggregated per rail switch",
            title_justify="left",
        )
        for col in ("pod", "segment", "rails", "VLAN", "subnet", "gateway", "aggregate (BGP)"):
            addr.add_column(col)
        rows = list(ap.rows(limit=ADDRESS_ROWS_SHOWN))
        for s, agg in rows:
            pod, seg, _ = s.switch_group
            addr.add_row(
                str(pod + 1),
                str(seg + 1),
                ", ".join(str(r + 1) for r in s.rails),
                str(s.vlan),
                str(s.network),
                str(s.gateway),
                str(agg),
            )
        console.print(addr)
        total = ap.switch_groups * ap.subnets_per_switch
        if total > len(rows):
            console.print(f"  … {total - len(rows):,} more subnets (all in addressing.csv with --out)")
        if d.leaf_host_ports and d.servers_per_segment > 0:
            _print_rail_map(d, hw.fabric.port_layout)
    if out is not None:
        from .outdir import PLAN, claim_out

        folder = claim_out(out, True, layout=PLAN)  # checked above; staged, moved in when every file is written
        try:
            _write_plan_files(folder.staging, hw, f, plan, d, costs, reliability)
            folder.publish()
        finally:
            folder.discard()
        console.print(
            f"wrote {out}/: plan.json, bom.csv, cabling.csv" + (", addressing.csv" if d.topology != "custom" else "")
        )
    return 0


def _model_params(s: Scenario | None) -> float | None:
    """The parameters of a scenario's transformer (its checkpoint's size), or None for a hardware-only file or
    another workload."""
    if s is None or s.workload.kind != "llm-training":
        return None
    from ..workload.from_spec import resolve_model

    return float(resolve_model(s.workload.model).params)


def _print_reliability(f, hw: HardwareSpec, params: float | None) -> dict:
    """Failures by component on this fabric, the job's MTBF, and with the model's size the checkpoint interval that
    loses least and the fraction of a training run lost (aifabric.reliability); plan.json `reliability`."""
    from rich.table import Table

    from ..reliability import reliability
    from ..report.terminal import fmt_bytes, fmt_hours

    r = reliability(f, params or 0.0, hw.reliability)
    t = Table(
        title="Reliability: failures of a job using every GPU (rates per component-hour: Llama 3 405B's "
        "breakdown, Dubey et al. 2024, Table 5, unless the file's reliability: sets them)",
        title_justify="left",
    )
    for col in ("component", "count", "failures / hour each", "failures / day"):
        t.add_column(col, justify="left" if col == "component" else "right")
    for c in r.components:
        t.add_row(c.kind.replace("_", " "), f"{c.count:,}", f"{c.rate_per_hour:.3g}", f"{c.failures_per_day:.3g}")
    console.print(t)
    out = r.to_dict()
    line = f"the job: {out['failures_per_day']:.3g} failures/day, one every {fmt_hours(r.mtbf_s)}"
    if params:
        lost = out["lost_fraction"]
        line += (
            f"; a checkpoint of {fmt_bytes(r.checkpoint_bytes)} takes {fmt_hours(r.checkpoint_s)}: every "
            f"{fmt_hours(r.interval_s)} of work loses least (Young {fmt_hours(r.young_interval_s)}, Daly "
            f"{fmt_hours(r.daly_interval_s)}), {100 * lost['total']:.1f} % of the run lost"
        )
    else:
        for k in (
            "checkpoint_bytes",
            "checkpoint_s",
            "checkpoint_interval_s",
            "young_interval_s",
            "daly_interval_s",
            "lost_fraction",
            "effective_training_fraction",
        ):
            out.pop(k, None)
        line += "; the checkpoint interval and the run's lost fraction need the model (a scenario with a workload)"
    console.print(line)
    return out


def _print_costs(bom, hw: HardwareSpec):
    """Power and capital of the bill of materials, line by line with their sources; per hour of running."""
    from rich.table import Table

    from ..costs.model import fabric_costs
    from ..report.terminal import fmt_usd, fmt_watts, power_line

    fc = fabric_costs(bom, hw.cluster.gpu, hw.costs)
    t = Table(
        title="Power and capital (each figure's source in plan.json; change them in costs: or with --prices)",
        title_justify="left",
    )
    for col in ("item", "count", "W each", "power", "USD each", "capital"):
        t.add_column(col, justify="left" if col == "item" else "right")
    power = {(x.kind, x.item): x for x in fc.power}
    capital = {(x.kind, x.item): x for x in fc.capital}
    for key in dict.fromkeys([*capital, *power]):  # the capital bill's order; power has no cable lines
        pw, usd = power.get(key), capital.get(key)
        line = pw or usd
        assert line is not None  # the key came from one of the two bills
        t.add_row(
            line.item,
            f"{line.count:,}",
            fmt_watts(pw.each) if pw else "",
            fmt_watts(pw.total) if pw else "",
            fmt_usd(usd.each) if usd else "",
            fmt_usd(usd.total) if usd else "",
        )
    t.add_row("[bold]total", "", "", f"[bold]{fmt_watts(fc.it_power_w)}", "", f"[bold]{fmt_usd(fc.capex_usd)}")
    console.print(t)
    sources = dict.fromkeys(f"{x.kind}: {x.source}" for x in fc.power if x.source)
    console.print("power figures: " + "; ".join(sources), highlight=False, style="dim", soft_wrap=True)
    console.print(f"prices: {fc.price_source}", highlight=False, style="dim", soft_wrap=True)
    data = fc.to_dict()
    hour = data["per_hour"]
    console.print(f"power: {power_line(data)}")
    console.print(
        f"capital: {fmt_usd(fc.capex_usd)}, of which the network {fmt_usd(fc.network_capex_usd)} "
        f"({100 * fc.network_capex_usd / fc.capex_usd:.0f}%)"
        if fc.capex_usd
        else "capital: $0"
    )
    console.print(
        f"an hour of running: {hour['energy_kwh']:,.1f} kWh = {fmt_usd(hour['energy_usd'])} at "
        f"${hw.costs.price_per_kwh:.2f}/kWh, plus {fmt_usd(hour['capital_usd'])} of capital over "
        f"{hw.costs.amortization_years:g} years; per iteration and per training run: `aifabric simulate`"
    )
    if hw.costs.training_hours:
        e, cap = fc.over(hw.costs.training_hours)
        console.print(
            f"a training run of {hw.costs.training_hours:,g} h: {e.energy_mwh:,.1f} MWh = "
            f"{fmt_usd(e.cost_usd)} of energy, {fmt_usd(cap)} of capital"
        )
    return data


def _print_rail_map(d: Design, layout: str) -> None:
    from rich.table import Table

    from ..fabric.cabling import layout_used, rail_interfaces

    if d.rails_per_switch * d.ports_per_nic_per_plane < 2:
        return
    used = layout_used(d, layout)
    figure = {
        "interleaved": "Figure 13-6 interleave",
        "host-major": "Figure 13-4, by host",
        "rail-major": "Figures 13-11/13-12, by rail",
    }[used]
    note = "" if used == layout else f"; port_layout {layout} does not fit this switch"
    console.print(
        f"[italic]Rail -> interfaces on each {d.leaf_radix}-port rail switch, {d.servers_per_segment} hosts "
        f"(port_layout: {used}, {figure}{note}; as in cabling.csv)[/]"
    )
    t = Table()
    t.add_column("rail")
    t.add_column("interfaces")
    for r, ports in rail_interfaces(d, layout).items():
        t.add_row(f"Rail-{r + 1}", ", ".join(map(str, ports)))
    console.print(t)


def _csv(header, rows) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def _write_plan_files(out: Path, hw: HardwareSpec, f, plan, d: Design, costs: dict, reliability: dict) -> None:
    from ..fabric.addressing import AddressPlan
    from ..fabric.cabling import HEADER, cabling_rows
    from ..fabric.plan import TIER_NAMES
    from ..report.files import write_atomic, write_json

    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "cabling.csv", _csv(HEADER, cabling_rows(f, hw.fabric.port_layout)))
    bom_rows: list[tuple[str, str, str | float, int]] = [
        ("switch", TIER_NAMES[t.kind], "", t.switches) for t in plan.bom.switch_tiers
    ]
    bom_rows += [("cable", c.tier, c.speed_gbps, c.cables) for c in plan.bom.cables]
    bom_rows += [("transceiver", c.tier, c.speed_gbps, c.transceivers) for c in plan.bom.cables]
    bom_rows += [("nic", "host", d.host_speed_gbps, plan.bom.nics)]
    write_atomic(out / "bom.csv", _csv(("item", "tier", "speed_gbps", "count"), bom_rows))
    if d.topology != "custom":
        ap = AddressPlan.from_spec(d, hw.fabric)
        rows = [
            (
                s.switch_group[0] + 1,
                s.switch_group[1] + 1,
                " ".join(str(r + 1) for r in s.rails),
                s.vlan,
                s.network,
                s.gateway,
                agg,
            )
            for s, agg in ap.rows()
        ]
        write_atomic(
            out / "addressing.csv", _csv(("pod", "segment", "rails", "vlan", "subnet", "gateway", "aggregate"), rows)
        )
    write_json(
        out / "plan.json",
        {"name": hw.name, "design": d.__dict__, **plan.to_dict(), "costs": costs, "reliability": reliability},
    )


@fabric_app.command("polarization")
def polarization_cmd(
    file: Path = typer.Argument(..., help="scenario or cluster+fabric YAML file"),
    pattern: str = typer.Option("permutation", "--pattern", "-p", help="permutation | incast | ring | all-to-all"),
    trials: int = typer.Option(100, "--trials", "-n", help="Monte Carlo trials (fresh QP source ports each)"),
    seed: int = typer.Option(0, "--seed", help="seed of the trials"),
    target: int = typer.Option(0, "--target", help="incast: the receiving rank"),
    out: Path = typer.Option(None, "--out", "-o", help="also write the figures as JSON to this file"),
    force: bool = typer.Option(False, "--force", help="replace an --out file aifabric did not write"),
    same_index: int = typer.Option(
        None,
        "--same-index",
        help="instead: the spine each leaf picks when every leaf's "
        "hash gives this index for flows to --target's leaf (the book's Chapter 13 case), "
        "full mesh vs partial mesh",
    ),
) -> int:
    """Load on uplinks under ECMP (identical and per-switch hash seeds) vs an ideal spread."""
    from dataclasses import asdict

    import numpy as np
    from rich.table import Table

    from ..fabric import Router, build
    from ..fabric.polarization import PATTERNS, analyze
    from ..report.files import write_json

    problems = []
    if pattern not in PATTERNS:
        problems.append(Problem("--pattern", f"must be one of {', '.join(PATTERNS)} (got {pattern!r})"))
    if trials < 1:
        problems.append(Problem("--trials", f"must be >= 1 (got {trials})"))
    if seed < 0:
        problems.append(Problem("--seed", f"must be >= 0 (got {seed})"))
    if same_index is not None and same_index < 0:
        problems.append(Problem("--same-index", f"must be >= 0 (got {same_index})"))
    if same_index is not None and out is not None:
        problems.append(
            Problem(
                "--same-index",
                "prints the leaf -> spine table; --out writes the Monte Carlo's figures: give one of them",
            )
        )
    if out is not None and out.is_dir():
        problems.append(Problem("--out", f"{out} is a directory; give the JSON file to write"))
    if problems:
        raise InputError(problems)
    check_out(out, "file")
    if out is not None:  # never over a file of the user's
        from .outdir import claim_file

        claim_file(out, force, json_keys=("name", "pattern", "trials", "variants"))
    hw = load_hardware(file)
    f = build(hw.cluster, hw.fabric, hw.name)
    if not 0 <= target < f.world_size:
        raise InputError(Problem("--target", f"must be a rank in 0..{f.world_size - 1} (got {target})"))
    if same_index is not None:
        from .fabric_polarization_view import print_same_index

        return print_same_index(hw, f, target, same_index, console)
    if pattern == "all-to-all" and f.world_size > 512:
        raise InputError(
            Problem(
                "--pattern",
                f"all-to-all over {f.world_size} ranks is "
                f"{f.world_size * (f.world_size - 1):,} flows per trial: at most 512 ranks",
            )
        )
    fs = hw.fabric
    pxn = True if fs.pxn or fs.topology == "rail-only" else None
    variants = [
        (
            "scenario's hash seeds" + (" (per switch)" if fs.per_switch_hash_seed else " (identical)"),
            fs.per_switch_hash_seed,
        )
    ]
    variants.append(
        (
            "per-switch hash seeds" if not fs.per_switch_hash_seed else "identical hash seeds",
            not fs.per_switch_hash_seed,
        )
    )
    table = Table(
        title=f"{pattern}: offered load on uplinks, {trials} trials of random QP source ports", title_justify="left"
    )
    for col in (
        "policy",
        "busiest uplink (mean)",
        "p95",
        "worst",
        "mean uplink",
        "max/mean",
        "idle uplinks",
        "overloaded uplinks",
    ):
        table.add_column(col, justify="left" if col == "policy" else "right")
    reports = []
    for label, per_switch in variants:
        router = Router(f, hash_seed=fs.ecmp_hash_seed, per_switch_seed=per_switch, seed=hw.seed, pxn=pxn)
        report = analyze(router, pattern, trials, np.random.default_rng(seed), target=target)
        reports.append((label, report))
        st = report.ecmp
        table.add_row(
            f"ECMP, {label}",
            _tbps(st.max_gbps),
            _tbps(st.max_p95_gbps),
            _tbps(st.worst_gbps),
            _tbps(st.mean_gbps),
            f"{st.imbalance:.2f}",
            f"{st.idle_fraction:.0%}",
            f"{st.overloaded_fraction:.0%}",
        )
    st = report.ideal
    table.add_row(
        "ideal spread (spraying)",
        _tbps(st.max_gbps),
        _tbps(st.max_p95_gbps),
        _tbps(st.worst_gbps),
        _tbps(st.mean_gbps),
        f"{st.imbalance:.2f}",
        f"{st.idle_fraction:.0%}",
        f"{st.overloaded_fraction:.0%}",
    )
    console.print(
        f"[bold]{escape(hw.name)}[/]: {report.flows:,} flows ({report.network_flows:,} through the network) at "
        f"{report.rate_gbps:g} Gb/s each, {report.uplinks:,} uplinks"
    )
    if report.uplinks == 0:
        console.print("no uplinks in this fabric (no spine): nothing to polarize")
        return 0
    console.print(table)
    hist = Table(title="Distribution: share of uplinks carrying k flows (ECMP, all trials)", title_justify="left")
    hist.add_column("policy")
    top = HIST_FLOWS
    for k in range(top):
        hist.add_column(str(k), justify="right")
    hist.add_column(f"{top}+", justify="right")
    for label, rep in reports:
        counts = np.zeros(top + 1)
        for load_gbps, n in rep.histogram_gbps:
            counts[min(top, round(load_gbps / rep.rate_gbps))] += n
        share = counts / counts.sum()
        hist.add_row(f"ECMP, {label}", *(f"{x:.1%}" for x in share))
    console.print(hist)
    if out is not None:
        write_json(
            out,
            {
                "name": hw.name,
                "pattern": pattern,
                "trials": trials,
                "seed": seed,
                "variants": [
                    {
                        "label": label,
                        **asdict(rep),
                        "ecmp_imbalance": rep.ecmp.imbalance,
                        "ideal_imbalance": rep.ideal.imbalance,
                    }
                    for label, rep in reports
                ],
            },
        )
        console.print(f"wrote {out}")
    return 0


@fabric_app.command("draw")
def draw_cmd(
    file: Path = typer.Argument(..., help="scenario or cluster+fabric YAML file"),
    out: Path = typer.Option(Path("topology.svg"), "--out", "-o", help="SVG file to write"),
    force: bool = typer.Option(False, "--force", help="replace an --out file aifabric did not write"),
) -> int:
    """An SVG of the topology: servers, rails, spines, super-spines, link speeds (large fabrics collapsed)."""
    check_out(out, "file")
    from .outdir import claim_file

    claim_file(out, force, DRAW_HEAD)  # never over a file of the user's (the default name is topology.svg)
    from ..fabric import build
    from ..fabric.draw import fabric_svg
    from ..report.files import write_atomic

    hw = load_hardware(file)
    if hw.fabric.topology == "custom":
        svg = fabric_svg(build(hw.cluster, hw.fabric, hw.name), hw.name)
    else:
        from ..fabric.design import resolve

        svg = fabric_svg(resolve(hw.cluster, hw.fabric), f"{hw.name}: {hw.fabric.topology}")
    write_atomic(out, f"{DRAW_HEAD} -->\n{svg}")
    console.print(f"wrote {out}")
    return 0


DRAW_HEAD = "<!-- aifabric fabric draw"  # an XML comment before the root element: the SVG stays valid


RAIL_MAP_DEFAULTS = {"ports": 48, "hosts": 4, "rails": 8}  # the book's Figure 13-6: a Nexus 9348D-GX2A
RAIL_MAP_MAX = {"ports": 65_536, "hosts": 131_072, "rails": 576}  # as the scenario schema (1e9 ports wanted 7.8 GB)


@fabric_app.command("rail-map")
def rail_map_cmd(
    file: Path = typer.Argument(
        None,
        help="scenario or cluster+fabric YAML file: its rail switches' ports, hosts "
        "and rails (optional; the flags override them)",
        show_default=False,
    ),
    ports: int = typer.Option(
        None,
        "--ports",
        help="switch ports (default: the file's rail-switch radix, else 48 "
        "as the Cisco Nexus 9348D-GX2A of Figure 13-6)",
        show_default=False,
    ),
    hosts: int = typer.Option(
        None,
        "--hosts",
        help="servers on the switch (default: the file's servers per segment, else 4)",
        show_default=False,
    ),
    rails: int = typer.Option(
        None, "--rails", help="rails on the switch (default: the file's rails per switch, else 8)", show_default=False
    ),
) -> int:
    """Which interfaces of a rail switch belong to which rail, uplinks in between (Deep Learning for Network
    Engineers, Ch. 13, Figure 13-6): of a scenario's rail switches, or of --ports/--hosts/--rails."""
    from rich.table import Table

    from ..fabric.cabling import rail_interface_blocks

    given = {"ports": ports, "hosts": hosts, "rails": rails}
    problems = [Problem(f"--{n}", f"must be >= 1 (got {v})") for n, v in given.items() if v is not None and v < 1]
    problems += [
        Problem(f"--{n}", f"must be <= {RAIL_MAP_MAX[n]:,} (got {v:,})")
        for n, v in given.items()
        if v is not None and v > RAIL_MAP_MAX[n]
    ]
    if problems:
        raise InputError(problems)
    source = "Figure 13-6"
    values = dict(RAIL_MAP_DEFAULTS)
    if file is not None:
        from ..fabric.design import resolve

        hw = load_hardware(file)
        if hw.fabric.topology == "custom":
            raise InputError(Problem("FILE", f"{file}: a custom topology has no rail-switch layout to map"))
        d = resolve(hw.cluster, hw.fabric)
        values = {
            "ports": d.leaf_radix,
            "hosts": d.servers_per_segment,
            "rails": d.rails_per_switch * d.ports_per_nic_per_plane,
        }
        source = f"{hw.name}: {d.topology}"
    values.update({k: v for k, v in given.items() if v is not None})
    ports, hosts, rails = values["ports"], values["hosts"], values["rails"]
    try:
        blocks = rail_interface_blocks(ports, hosts, rails)
    except ValueError as exc:
        raise InputError(
            Problem("--ports" if file is None or given["ports"] is not None else "FILE", str(exc))
        ) from None
    console.print(f"[bold]{ports}-port rail switch, {hosts} hosts x {rails} rails[/] ({escape(source)})")
    t = Table()
    t.add_column("rail")
    t.add_column("interfaces")
    for r, ifs in blocks.items():
        t.add_row(f"Rail-{r + 1}", ", ".join(map(str, ifs)))
    console.print(t)
    used = {i for v in blocks.values() for i in v}
    spare = [i for i in range(1, ports + 1) if i not in used]
    console.print(f"spare (uplink) interfaces: {', '.join(map(str, spare)) or 'none'}")
    return 0
