"""The main job: scenario -> fabric + workload -> task graph -> engine -> results."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from . import collector
from .catalog import gpu
from .engines import ENGINES, Interrupted, TaskGraph, Timeline, lower, run
from .engines.fabric_events import JobFailed
from .engines.flowlet import flowlet_gap_s
from .engines.progress import stage_reporter
from .fabric import Fabric, Router, build
from .results import Results, summarize
from .scenario.schema import Scenario
from .workload import Workload, build_data_parallel

if TYPE_CHECKING:
    from .analysis import Flows, RankTimeline

NVLS_GPUS = frozenset({"H100", "H200", "B200", "GB200"})  # NVSwitch with NVLink SHARP (NCCL_NVLS_ENABLE auto)


@dataclass
class Run:
    scenario: Scenario
    fabric: Fabric
    workload: Workload
    graph: TaskGraph
    timeline: Timeline
    results: Results
    packet_stats: Any = None  # packet.stats.PacketStats when the packet engine ran (None otherwise)
    packet_network: Any = None  # packet.network.Network of a packet-engine run: captured packets, events log
    faults: dict | None = None  # aifabric.faults.report: what broke and what it cost (None: no faults)
    packet_windows: list | None = None  # the hybrid engine's windows (engines/hybrid.PacketWindow), else None

    @cached_property
    def rank_timeline(self) -> RankTimeline:
        """Every rank's compute, communication, idle and bubble segments (analysis.rank_timeline), computed once
        per run: the summary, the tables, the trace and the report all read it."""
        from .analysis import rank_timeline

        return rank_timeline(self.graph, self.timeline, self.fabric.world_size, self.workload.iterations)

    @cached_property
    def flows(self) -> Flows:
        """Every transfer that ran and the folded collectives' bytes (analysis.flows), computed once per run."""
        from .analysis import flows

        return flows(self.graph, self.fabric, self.timeline)

    @cached_property
    def costs(self) -> dict:
        """Power and cost of the cluster, per iteration and per training run (aifabric.costs; summary.json
        `costs`)."""
        from .costs.model import run_costs

        return run_costs(self).to_dict()

    @cached_property
    def connection_setup(self) -> dict:
        """The job's RDMA connections set up once before its first collective: queue pairs, CM exchanges, time
        (packet/job_connections.py; summary.json `connection_setup`); part of the iteration time only when the scenario
        simulates the first iteration (`iteration: first`: engines/setup_tasks.py)."""
        from .packet.job_connections import job_connection_setup

        out = job_connection_setup(self.graph, self.fabric).to_dict()
        out["in_iteration"] = self.scenario.iteration == "first"  # scenario `iteration: first`
        return out

    @cached_property
    def reliability(self) -> dict:
        """Failures by component, the job's MTBF, the best checkpoint interval and the fraction of a training run
        lost to failures (aifabric.reliability; summary.json `reliability`)."""
        from .reliability import reliability

        return reliability(self.fabric, self.workload.params, self.scenario.reliability).to_dict()


def _refuse(problems: list, s: Scenario) -> None:
    if problems:
        from .errors import InputError

        raise InputError(problems, f"<scenario {s.name}>")


def build_fabric(s: Scenario) -> tuple[Fabric, Router]:
    """The scenario's fabric (by `fabric.topology`), its links' achievable rates (fabric/achievable.py: the RoCE
    path MTU's headers, the scenario's calibration), and its router (ECMP seeds, QP numbers, PXN). The fabric's
    checks run first (ports against radix, ...): InputError names the fields."""
    from .fabric.achievable import apply_achievable
    from .scenario.checks_fabric import check_fabric

    _refuse(check_fabric(s), s)

    fabric = apply_achievable(
        build(s.cluster, s.fabric, name=s.name),
        gpu(s.cluster.gpu),
        s.fabric.transport,
        s.calibration,
        s.fabric.qos.roce_mtu_bytes,
        s.cluster.cpu_vendor or "",
    )
    fabric.nvls = s.cluster.nvls if s.cluster.nvls is not None else s.cluster.gpu in NVLS_GPUS
    pxn = True if s.fabric.pxn or s.fabric.topology == "rail-only" else None
    router = Router(
        fabric, hash_seed=s.fabric.ecmp_hash_seed, per_switch_seed=s.fabric.per_switch_hash_seed, seed=s.seed, pxn=pxn
    )
    return fabric, router


def kernel_model(s: Scenario):
    """The compute model of the scenario's GPU at its precision, with the user's GEMM and attention tables if it
    has them."""
    from .kernels.attention_calibration import load_attention_table
    from .kernels.calibration import load_gemm_table
    from .kernels.model import KernelModel

    table = load_gemm_table(s.calibration.gemm) if s.calibration.gemm else None
    attention = load_attention_table(s.calibration.attention)[0] if s.calibration.attention else None
    software = s.workload.software
    km = KernelModel(gpu(s.cluster.gpu), s.workload.precision, software=software)
    if table is not None or attention is not None:
        gemms = table.with_model(km.gemm_time_s) if table is not None else None
        km = KernelModel(gpu(s.cluster.gpu), s.workload.precision, gemms, software, attention)
    return km


def build_workload(s: Scenario, progress: Callable[[int, int], None] | None = None) -> Workload:
    """The scenario's workload: data-parallel feed-forward (the demo) or LLM training (model + plan). The
    workload's checks against the cluster run first (batch against ranks, plan against GPUs, memory, ...).
    `progress(ranks built, ranks)` while an LLM plan's ranks are built."""
    from .scenario.checks_workload import check_workload

    _refuse(check_workload(s), s)
    km = kernel_model(s) if s.workload.compute_efficiency is None else None
    if s.workload.kind == "llm-training":
        from .errors import InputError
        from .workload.from_spec import resolve_plan
        from .workload.llm import build_llm_training

        model, plan, problems = resolve_plan(s)
        if problems:
            raise InputError(problems)
        workload = build_llm_training(model, plan, gpu(s.cluster.gpu), s.name, s.workload.iterations, km, progress)
        return replace(workload, layout=plan.layout)  # the plan travels with the workload (the report's Gantt)
    return build_data_parallel(s, km)


def add_folded_bytes(graph: TaskGraph, timeline: Timeline) -> None:
    """The collectives folded at lowering (engines/fold.py) onto their links: bytes, peak rates, and load
    over time (each task's folded bytes spread evenly over the time the task ran)."""
    folded = graph.folded
    if folded.link_bytes is not None:
        timeline.link_bytes = timeline.link_bytes + folded.link_bytes
    if folded.link_peak is not None:
        timeline.link_peak_bytes_per_s = np.maximum(timeline.link_peak_bytes_per_s, folded.link_peak)
    items = []
    for t, parts in folded.task_bytes.items():
        a, b = float(timeline.start_s[t]), float(timeline.end_s[t])
        if not b > a:  # did not run (interrupted) or took no time
            continue
        if len(parts) == 1:
            items.append((a, b, parts[0][0], parts[0][1]))
        else:  # one entry per link: a task merged over a whole run holds thousands of parts on the same links
            links, inv = np.unique(np.concatenate([p[0] for p in parts]), return_inverse=True)
            items.append((a, b, links, np.bincount(inv, weights=np.concatenate([p[1] for p in parts]))))
    if items:
        timeline.link_load.add_spread(items)


def simulate(
    s: Scenario | str | os.PathLike | Mapping[str, Any],
    engine: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    workload: Workload | None = None,
    phase: Callable[[str], None] | None = None,
    packet_options: Any = None,
    packet_windows: Sequence[str] | None = None,
    packet_max_s: float | None = 1e-3,
    *,
    lb: str | None = None,
    seed: int | None = None,
    keep_network: bool | None = None,
) -> Run:
    """Run a scenario: a Scenario, or anything `load_scenario` takes (a file's path, YAML text, a mapping), on any
    engine, through one path: fabric, workload, task graph, event loop, results (and, with faults, the same
    iteration without them). Whatever it is given goes through every check first (`scenario.checks.checked`, once
    per Scenario object): InputError names each field to change.

    `engine` (flow | analytic | packet | hybrid) overrides the scenario's; `workload` replaces the one the scenario
    describes (e.g. a replayed trace). `progress(done, total)` follows the event loop (with the simulated time
    reached, `t_s=`, when the callback takes it; and the lowering's ops with `stage="task graph"` when it takes
    `stage`: engines/progress.py); `phase(name)` is told when each stage begins
    ("fabric", "workload", "task graph", "event loop", "results", "fault-free run").
    Packet engine: `packet_options` (a packet.config.PacketConfig: explain, tracing, capture, transport) under the
    scenario's switch profile; `lb` overrides `fabric.load_balancing` (also "adaptive"), `seed` the seed of the WRED
    draws; `keep_network` (default: when `packet_options` is given) keeps the simulated network in the Run
    (`packet_network`: captured packets, events log); `Run.packet_stats` holds queues, ECN, CNPs, DCQCN, PFC, drops,
    retransmissions and FCTs.
    Hybrid engine: `packet_windows` (default `auto`): spans of the iteration simulated packet by packet, as
    engines/hybrid.parse_window reads them (`0.80s:0.95s`, `dp`, `pp`, `auto`); of each, at most `packet_max_s` of
    simulated time runs packet by packet (None: all of it); `Run.packet_windows` says what each did."""
    from .errors import InputError, Problem
    from .scenario.load import load_scenario

    s = load_scenario(s)
    if engine is not None and engine not in ENGINES:
        raise InputError(Problem("engine", f"must be one of {', '.join(ENGINES)} (got {engine!r})"))
    phase = phase or (lambda name: None)
    engine = engine or s.engine
    specs = _hybrid_windows(s, packet_windows, packet_max_s) if engine == "hybrid" else []
    with _collector_held(engine):  # one pause for every stage: their objects walked once, after the run
        phase("fabric")
        fabric, router = build_fabric(s)
        fx = None
        if s.faults:
            from .faults import apply_to_fabric, resolve_faults

            fx = resolve_faults(fabric, s.faults, seed=s.seed)
            if engine == "packet":  # cable states are the packet network's own; routing has converged around those down
                if fx.down:
                    router.fail(fx.down)
            else:
                apply_to_fabric(fabric, router, fx)
        if workload is None:
            phase("workload")
            with collector.paused():
                workload = build_workload(s, stage_reporter(progress, "workload"))
        phase("task graph")
        # the flow and analytic engines spread sprayed transfers over every path (fluid); the packet engine balances
        # packet by packet; the hybrid engine does both, on routes of its own for each
        sprayed = s.fabric.load_balancing != "ecmp" or s.fabric.qos.dlb.mode != "off"
        # but flowlets on the flow engine: each transfer on its flowlet's path, chosen at run time (engines/flowlet.py)
        gap_s = flowlet_gap_s(s.fabric) if engine == "flow" else None
        try:
            graph = lower(
                workload,
                fabric,
                router,
                **s.lowering_options(),
                spread_paths=sprayed and engine in ("flow", "analytic") and gap_s is None,
                progress=stage_reporter(progress, "task graph"),
            )
        except ValueError as exc:
            if fx is None or "reach" not in str(exc) and "no switch path" not in str(exc):
                raise
            from .faults import unreachable

            raise unreachable(fabric, fx, exc) from None
        if s.iteration == "first":  # the job's first iteration: each RDMA connection set up before its first use
            from .engines.setup_tasks import add_connection_setup

            # the packet engine's --cm sends the CM exchange itself: the tasks then hold the QPs' own work alone
            wire = engine == "packet" and bool(getattr(getattr(packet_options, "nic", None), "cm_setup", False))
            add_connection_setup(graph, fabric, cm_on_wire=wire)
        if fx is not None:
            from .faults import slow_down

            slow_down(graph, fx.slow)
        phase("event loop")
        ran = _EngineRun()
        try:
            if engine == "packet":
                _run_packet(ran, s, graph, fabric, router, fx, progress, packet_options, lb, seed)
            elif engine == "hybrid":
                _run_hybrid(
                    ran, s, graph, fabric, router, progress, specs, packet_options, packet_max_s, sprayed, phase
                )
            else:
                with collector.paused():  # the packet engine's long runs keep the collector
                    _run_flow(ran, s, graph, fabric, router, fx, engine, progress, gap_s)
        except Interrupted as exc:
            ran.timeline, ran.complete = exc.timeline, False
        except JobFailed as exc:  # a QP ran out of retransmissions: the job ends, no results
            from .faults import job_failed

            assert fx is not None
            raise job_failed(fx, exc) from None
        timeline = ran.timeline
        if fx is not None and fx.lost and ran.complete:  # a GPU lost during the run: the job fails (NCCL's watchdog)
            from .faults import gpu_lost_failure

            lost = gpu_lost_failure(fx, graph, timeline)
            if lost is not None:
                raise lost
        phase("results")
        with collector.paused():
            add_folded_bytes(graph, timeline)
            peak = gpu(s.cluster.gpu).peak_flops(s.workload.precision)
            results = summarize(engine, workload, graph, fabric, timeline, ran.complete, peak_flops_per_gpu=peak)
        keep = packet_options is not None if keep_network is None else keep_network
        out = Run(
            s,
            fabric,
            workload,
            graph,
            timeline,
            results,
            packet_stats=ran.stats,
            packet_network=ran.network if keep else None,
            packet_windows=ran.windows,
        )
    if fx is not None and ran.complete:
        from .faults import report

        phase("fault-free run")  # the same iteration without the faults: what they cost
        base_opts = None
        if engine == "packet":
            base_opts = replace(ran.cfg, explain=False, trace_flows=(), trace_pfc=False, trace_all=False)
        baseline = simulate(
            s.model_copy(update={"faults": []}),
            engine=engine,
            workload=workload,
            packet_options=base_opts,
            lb=lb,
            seed=seed,
            keep_network=False,
        )
        if engine == "packet":
            moved = (
                {(int(graph.rank[t]), int(graph.dst[t])) for _, t in timeline.fault_log.moves}
                if timeline.fault_log is not None
                else None
            )
            out.faults = report(fx, out, baseline, router, moved, engine_path="packet")
        else:
            moved = set().union(*(r.rerouted for r in ran.during.rerouter._routers.values())) if ran.during else None
            out.faults = report(fx, out, baseline, router, moved, engine_path=_fault_loop(graph))
    return out


def _fault_loop(graph: TaskGraph) -> str:
    """Which event loop ran the faults during the run (summary.json `faults.during_run.engine_path`): the reference
    loop, whose events they are; said in full where the graph would otherwise have run on the compiled loop."""
    from .engines.executor import uses_compiled_loop

    if uses_compiled_loop(len(graph)):
        return (
            f"reference: without faults these {len(graph):,} tasks would run on the compiled loop, which has no fault "
            "events, so faults during the run take the reference loop (the same definition, slower)"
        )
    return "reference"


def _collector_held(engine: str):
    """The garbage collector paused from the fabric to the results on the flow and analytic engines (aifabric.collector):
    each stage's millions of objects are not walked at the end of every stage (a fifth of a second each at 1,024 GPUs),
    nor as young objects once the run is over (`collector.paused(promote=True)`); the packet engine's long runs keep it."""
    return collector.paused(promote=True) if engine in ("flow", "analytic") else nullcontext()


@dataclass
class _EngineRun:
    """What an engine's event loop left: the timeline (partial when interrupted) and each engine's extras."""

    timeline: Any = None
    complete: bool = True
    stats: Any = None  # packet.stats.PacketStats: the packet engine's, or the hybrid engine's windows'
    network: Any = None  # the packet engine's simulated network
    windows: list | None = None  # the hybrid engine's windows
    cfg: Any = None  # the packet configuration run
    during: Any = None  # engines.fabric_events.FabricTimeline: the flow engine's faults during the run


def _run_flow(
    ran: _EngineRun,
    s: Scenario,
    graph: TaskGraph,
    fabric: Fabric,
    router: Router,
    fx,
    engine: str,
    progress,
    gap_s: float | None = None,
) -> None:
    if fx is not None and fx.timed:  # faults during the run: events of the event loop (engines/fabric_events.py)
        from .engines.fabric_events import FabricEvent, FabricTimeline, Rerouter

        ran.during = FabricTimeline(
            [FabricEvent(*e) for e in fx.events()],
            Rerouter(graph, fabric, router, spread=s.fabric.load_balancing != "ecmp"),
            fx.retransmit_timeout_s,
            fx.retry_count,
        )
    flowlets = None
    if gap_s is not None:  # flowlet switching: each connection's paths, its flowlets' chosen as the loop runs
        from .engines.flowlet import flowlet_paths

        flowlets = flowlet_paths(graph, fabric, router, gap_s)
    ran.timeline = run(graph, fabric, engine, progress, faults=ran.during, flowlets=flowlets)


def _run_packet(
    ran: _EngineRun,
    s: Scenario,
    graph: TaskGraph,
    fabric: Fabric,
    router: Router,
    fx,
    progress,
    packet_options,
    lb: str | None,
    seed: int | None,
) -> None:
    from .engines.packet import packet_config, packet_faults, run_packet

    cfg = packet_config(s, packet_options, seed)
    if lb is not None:
        cfg = cfg.with_(lb=replace(cfg.lb, mode=lb))
    faults = None
    if fx is not None:
        # the QPs' ACK timeout and retry count: NCCL's (NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT), as on the flow engine
        cfg = cfg.with_(nic=replace(cfg.nic, rto_s=fx.retransmit_timeout_s, retry_cnt=fx.retry_count))
        faults = packet_faults(s, graph, fabric, router, fx)
    ran.cfg = cfg
    pr = run_packet(
        graph,
        fabric,
        cfg,
        progress,
        hash_seed=s.fabric.ecmp_hash_seed,
        per_switch_seed=s.fabric.per_switch_hash_seed,
        queue_pairs=router.queue_pairs(),
        faults=faults,
    )
    ran.timeline, ran.stats, ran.network = pr.timeline, pr.stats, pr.network


def _hybrid_windows(s: Scenario, windows: Sequence[str] | None, packet_max_s: float | None) -> list:
    """The hybrid engine's windows, read; InputError naming what is wrong (faults are not run there)."""
    from .engines.hybrid import parse_window
    from .errors import InputError, Problem

    try:
        specs = [parse_window(w) for w in windows or ["auto"]]
    except ValueError as exc:
        raise InputError(Problem("packet_windows", str(exc))) from None
    if packet_max_s is not None and not packet_max_s > 0:
        raise InputError(
            Problem(
                "packet_max_s", f"must be a positive time in seconds, or None for whole windows (got {packet_max_s!r})"
            )
        )
    refuse_faults_on_hybrid(s)
    return specs


def refuse_faults_on_hybrid(s: Scenario) -> None:
    """InputError when the scenario has faults: the hybrid engine does not run them (`validate` says so too)."""
    from .errors import InputError, Problem

    if s.faults:
        raise InputError(
            Problem(
                "faults",
                "faults (from the start or during the run) are simulated on the flow, analytic and packet "
                "engines; the hybrid engine runs without them (remove faults: or choose --engine flow or packet)",
            )
        )


def _run_hybrid(
    ran: _EngineRun,
    s: Scenario,
    graph: TaskGraph,
    fabric: Fabric,
    router: Router,
    progress,
    specs: list,
    packet_options,
    packet_max_s: float | None,
    sprayed: bool,
    phase: Callable[[str], None],
) -> None:
    from .engines.hybrid import run_hybrid
    from .engines.packet import packet_config
    from .engines.tasks import spread_over_paths

    packet_routes = None
    if sprayed:  # the flow runs spread over every path; the windows' packets balance themselves on the lowered routes
        packet_routes = list(graph.route)
        spread_over_paths(graph, fabric, router)
    hr = run_hybrid(
        graph,
        fabric,
        specs,
        packet_config(s, packet_options),
        packet_routes=packet_routes,
        hash_seed=s.fabric.ecmp_hash_seed,
        per_switch_seed=s.fabric.per_switch_hash_seed,
        queue_pairs=router.queue_pairs(),
        packet_max_s=packet_max_s,
        progress=progress,
        phase=phase,
    )
    ran.timeline, ran.stats, ran.windows = hr.timeline, hr.stats, hr.windows
