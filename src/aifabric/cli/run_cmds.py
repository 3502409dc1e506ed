"""demo, validate, simulate: the main job."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape

from ..report.write import write_report  # the library's; train and compare take it from here
from .app import app
from .console import make_console
from .errors import Interrupted
from .outdir import out_path

if TYPE_CHECKING:
    from rich.progress import TaskID

    from ..scenario.schema import Scenario

console = make_console()
err_console = Console(stderr=True)

OUT_HELP = "output directory (default: a new aifabric-run-<time> folder in the current directory)"
FOLDER_FORCE_HELP = (
    "write into an --out folder that holds files aifabric did not write there (files of the same "
    "names are replaced, others kept)"
)
FORCE_HELP = FOLDER_FORCE_HELP[:-1] + "), and simulate a scenario whose estimated memory is past what this machine has"
PROGRESS_MIN_TASKS = 20_000
STAGE_WORDS = {
    "workload": "building the workload",
    "task graph": "lowering to a task graph",
    "report": "writing the report",
}
STAGE_UNITS = {"workload": "ranks", "task graph": "ops"}
# the least work a stage's bar is shown for (others: PROGRESS_MIN_TASKS); the report's bar is asked for by the run's
# size (simulate_into), its work counted in parts of 100 (report/write.py REPORT_PARTS)
STAGE_MIN = {"workload": 1024, "report": 1}


def run_and_report(
    scenario: Scenario,
    out: str | Path | None,
    engine: str | None,
    scenario_text: str | None,
    force: bool = False,
    pcap: Path | None = None,
    pcap_max_packets: int = 0,
    hybrid: dict | None = None,
) -> int:
    """Simulate, print the summary, write the folder. `hybrid`: the hybrid engine's `packet_windows` and
    `packet_max_s` (`simulate`'s keywords)."""
    from ..report import print_summary

    opts = None
    if pcap is not None:  # every RDMA transfer's packets, CNPs, ACKs and the PFC frames, up to the cap
        from ..packet.config import PacketConfig

        opts = PacketConfig(trace_all=True, trace_pfc=True, trace_max_packets=pcap_max_packets)
    run, out_dir = simulate_into(scenario, out, engine, scenario_text, force, packet_options=opts, hybrid=hybrid)
    print_summary(run, console)
    console.print(
        f"\nwrote {escape(str(out_dir))}/: summary.json, trace.json, links/collectives/ranks/flows.csv, scenario.yaml"
    )
    if pcap is not None and run.packet_network is not None:
        from .packet_cmd import write_capture

        console.print(f"wrote {escape(write_capture(pcap, run.packet_network))}", highlight=False)
    console.print(f"report: [bold]{escape(str(out_dir / 'report.html'))}[/]")
    if not run.results.complete:
        raise Interrupted(f"partial results written to {out_dir}")
    return 0


def simulate_into(
    scenario: Scenario,
    out: str | Path | None,
    engine: str | None,
    scenario_text: str | None,
    force: bool = False,
    workload=None,
    packet_options=None,
    hybrid: dict | None = None,
):
    """Simulate and write the run's folder (staged, moved into --out when complete): (run, folder). A Ctrl-C in
    the event loop stops it and the partial results are written (`run.results.complete` false); anywhere else
    (building, lowering, summarizing, writing) the folder gets scenario.yaml, the files already complete and a
    summary.json with `complete: false` and `stopped_in`, and Interrupted is raised (exit 130)."""
    import time

    from ..simulate import simulate
    from .estimate import check_work, describe
    from .outdir import claim_out

    # refused before any work: a scenario past this machine's memory (its estimate), a folder of the user's files
    est = check_work(scenario, engine, force) if workload is None else None
    # announced before any work: a run estimated past a few minutes, and what a faster engine would give
    bar = ProgressLine(engine or scenario.engine, warn_if_long(scenario, engine or scenario.engine, est, workload))

    # a large cluster takes a while to build: say what is being done, and how long each stage took
    t0 = time.perf_counter()
    verbose = scenario.cluster.total_gpus >= 256

    words = {
        "fabric": f"building the fabric of {scenario.cluster.total_gpus:,} GPUs ...",
        "workload": "building the workload ...",
        "task graph": "lowering it to a task graph ...",
        "results": "summarizing ...",
        "report": "writing the report ...",
        "done": "done",
        "fault-free run": "the same iteration without the faults (what they cost) ...",
        "packet windows": "the flow run is done; its packet windows, packet by packet ...",
    }

    stage = ["starting"]
    if verbose and est is not None:
        err_console.print(f"[dim]estimated: {describe(est)}[/]", highlight=False)

    def on_phase(name: str) -> None:
        stage[0] = name
        if (verbose or name in ("fault-free run", "packet windows")) and name in words:  # the event loop has its bar
            err_console.print(f"[dim]{time.perf_counter() - t0:7.1f} s[/] {words[name]}", highlight=False)

    folder = claim_out(out, force)
    out_dir = folder.target
    try:
        try:
            try:
                run = simulate(
                    scenario,
                    engine,
                    bar.on_progress,
                    workload=workload,
                    phase=on_phase,
                    packet_options=packet_options,
                    **(hybrid or {}),
                )
            finally:
                bar.stop()
            on_phase("report")
            try:  # complete files, then moved into place; a bar past PROGRESS_MIN_TASKS tasks
                if len(run.graph) >= PROGRESS_MIN_TASKS:
                    write_report(run, folder.staging, scenario_text, progress=bar.on_progress)
                else:
                    write_report(run, folder.staging, scenario_text)
            finally:
                bar.stop()
            folder.publish()
        except KeyboardInterrupt:  # outside the event loop (which stops itself and returns what it has)
            from .outdir import held_interrupts

            with held_interrupts():  # a second Ctrl-C waits until the files are in place
                written = _write_stopped(folder.staging, scenario, scenario_text, stage[0])
                folder.publish()
            raise Interrupted(
                f"stopped in stage {stage[0]!r}; wrote {out_dir}/: {', '.join(written)} (summary.json: complete false)"
            ) from None
    finally:
        folder.discard()
    on_phase("done")
    return run, out_dir


class ProgressLine:
    """The event loop's progress on stderr (the engines' `progress(done, total, t_s=...)`): simulated time against
    the iteration's estimate, the bar of the work done, tasks, elapsed and the wall time left at the run's pace
    (aifabric.estimate.RunProgress). Shown from the first task on the packet engine, past PROGRESS_MIN_TASKS on the
    others; transient (gone once the run ends)."""

    def __init__(self, engine: str, run_est=None) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        from ..estimate import RunProgress

        self.bar = Progress(
            TextColumn("{task.fields[sim]}"),
            BarColumn(),
            TextColumn("{task.fields[tasks]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[left]}"),
            console=err_console,
            transient=True,
        )
        self.pace = RunProgress(run_est)
        # the packet engine spends long on each transfer (every packet of it): a bar from the first task
        self.min_tasks = 1 if engine == "packet" else PROGRESS_MIN_TASKS
        self.task_id: TaskID | None = None
        self.shown = 0
        self.window: tuple[int, int] | None = None  # the hybrid engine's packet window being reported
        self.stage: str | None = None  # the stage before the event loop being reported (lowering)
        self.stage_pace = RunProgress()

    def on_progress(
        self,
        done: int,
        total: int,
        t_s: float | None = None,
        window=None,
        stage=None,
        iteration_bound_s: float | None = None,
    ) -> None:
        if iteration_bound_s is not None and self.pace.est is None:  # a flow run's: what its simulated time goes to
            from ..estimate import RunProgress

            self.pace = RunProgress(iteration_s=iteration_bound_s, lower_bound=True)
        if iteration_bound_s is not None:  # told before the loop starts: its own first report starts the bar,
            return  # so "simulating" (and a Ctrl-C after it) comes when the loop can stop itself and keep its results
        if window is not None:  # a hybrid run's packet window: its own bar, against the window's horizon
            self._on_window(done, total, t_s, window)
            return
        if stage is not None:  # a stage before the event loop (the lowering): its ops
            self._on_stage(done, total, stage)
            return
        if total < self.min_tasks:
            return
        if self.task_id is None:
            err_console.print(f"simulating {total:,} tasks (Ctrl-C stops and writes the results so far)")
            from ..engines.executor import compiles_first

            if compiles_first(total):
                err_console.print("compiling the event loop for this installation first (about a minute, once)")
            self.bar.start()
            self.task_id = self.bar.add_task("sim", total=1000, sim="simulating", tasks="", left="")
        if done - self.shown >= 1000 or done == total or self.min_tasks == 1:
            assert self.task_id is not None
            view = self.pace.update(done, total, t_s)
            self.bar.update(
                self.task_id,
                completed=round(1000 * view.fraction),
                sim=view.words(),
                tasks=f"{done:,}/{total:,} tasks",
                left=view.left(),
            )
            self.shown = done

    def _on_window(self, done: int, total: int, t_s: float | None, window) -> None:
        """A packet window's report (engines/progress.py, PacketWindowProgress): the bar restarts for each window
        and shows the simulated time inside the window against what it should run packet by packet."""
        from ..estimate import RunProgress

        if self.window != (window.index, window.count):
            self.window = (window.index, window.count)
            self.pace = RunProgress(iteration_s=window.horizon_s)
            if self.task_id is None:
                self.bar.start()
                self.task_id = self.bar.add_task("sim", total=1000, sim="", tasks="", left="")
        assert self.task_id is not None
        view = self.pace.update(done, total, t_s)
        self.bar.update(
            self.task_id,
            completed=round(1000 * view.fraction),
            sim=f"window {window.index}/{window.count} ({window.label}), packets: "
            f"{_window_time(view.t_s, window.horizon_s)}",
            tasks=f"{done:,}/{total:,} tasks",
            left=view.left(),
        )

    def _on_stage(self, done: int, total: int, stage: str) -> None:
        """A stage before the event loop (engines/progress.py `stage_reporter`: building the workload, lowering it):
        its work done against all, with the time left at its pace; shown from STAGE_MIN (ranks) or
        PROGRESS_MIN_TASKS (ops) on. The next stage's or the event loop's bar starts afresh after it."""
        from ..estimate import RunProgress

        if total < STAGE_MIN.get(stage, PROGRESS_MIN_TASKS):
            return
        if self.stage != stage:
            self.stage = stage
            self.stage_pace = RunProgress()
            if self.task_id is not None:  # the event loop's bar, before the report's
                self.bar.remove_task(self.task_id)
            self.bar.start()  # again after the event loop's bar stopped (does nothing while it runs)
            self.task_id = self.bar.add_task("sim", total=1000, sim="", tasks="", left="")
        assert self.task_id is not None
        view = self.stage_pace.update(done, total)
        unit = STAGE_UNITS.get(stage)
        self.bar.update(
            self.task_id,
            completed=round(1000 * view.fraction),
            sim=STAGE_WORDS.get(stage, stage),
            tasks=f"{done:,}/{total:,} {unit}" if unit else f"{round(100 * view.fraction)} %",
            left=view.left(),
        )
        if done >= total:  # the event loop's bar, when it comes, begins again
            self.bar.remove_task(self.task_id)
            self.task_id = None

    def stop(self) -> None:
        self.bar.stop()


def _window_time(t_s: float, horizon_s: float) -> str:
    """`t of ~horizon` inside a packet window, both in the horizon's unit: milliseconds, or microseconds below one."""
    scale, unit = (1e3, "ms") if horizon_s >= 1e-3 else (1e6, "µs")
    return f"{t_s * scale:.3g} {unit} of ~{horizon_s * scale:.3g} {unit}"


def warn_if_long(scenario: Scenario, engine: str, est, workload):
    """Before a run estimated past a few minutes (estimate.WARN_S, or AIFABRIC_WARN_S seconds), a warning on stderr
    with what a faster choice gives; never a question (scripts must not wait). The packet engine's estimate
    (aifabric.estimate: the flow engine's run of the same task graph, the packets it has to move), which the
    progress line then follows; None for the other engines, or when it cannot be made (simulate names why)."""
    from ..estimate import duration, estimate_packet_run, packet_warning, warn_threshold_s

    if engine == "packet":
        from ..engines.executor import Interrupted as RunInterrupted

        try:
            run_est = estimate_packet_run(scenario, workload)
        except RunInterrupted:  # a Ctrl-C in the estimate's flow run: the command stops, as anywhere before the run
            raise KeyboardInterrupt from None
        except Exception:  # noqa: BLE001 - the estimate is advice: the run goes on, and simulate names any problem
            return None
        text = packet_warning(run_est)
        if text is not None:
            err_console.print(f"[yellow]warning:[/] {escape(text)}", highlight=False)
        return run_est
    if est is not None and est.seconds > warn_threshold_s():
        err_console.print(
            f"[yellow]warning:[/] the {escape(engine)} engine would take about {duration(est.seconds)} "
            f"on this scenario ({est.tasks:,} tasks: {escape(est.counted)}). Faster: {escape(est.reduce)}."
            " Ctrl-C during the run stops it and writes the results so far",
            highlight=False,
        )
    return None


def _write_stopped(staging: Path, scenario: Scenario, scenario_text: str | None, stage: str) -> list[str]:
    """What a run stopped outside the event loop leaves: its scenario, the files already complete, and a
    summary.json saying where it stopped (`complete: false`)."""
    from .. import __version__
    from ..report.files import write_atomic, write_json
    from ..report.summary import SUMMARY_SCHEMA_VERSION

    if scenario_text is not None and not (staging / "scenario.yaml").exists():
        write_atomic(staging / "scenario.yaml", scenario_text)
    write_json(
        staging / "summary.json",
        {
            "schema_version": SUMMARY_SCHEMA_VERSION,
            "aifabric_version": __version__,
            "complete": False,
            "stopped_in": stage,
            "scenario": scenario.applicable_dump(),
        },
    )
    return sorted(p.name for p in staging.iterdir() if not p.name.startswith("."))


ENGINE_HELP = (
    "flow | analytic | packet | hybrid (the flow engine with windows packet by packet: --packet-window) "
    "(default: the scenario's)"
)
WINDOW_HELP = (
    "hybrid engine: a span of the iteration simulated packet by packet: START:END (0.80s:0.95s, "
    "800ms:950ms), a parallel dimension's network traffic (dp, pp, ep or moe, cp, tp), or auto (where "
    "traffic crosses the NICs at its peak; the default). Repeat for several windows"
)
PACKET_MAX_HELP = (
    "hybrid engine: of each window, at most this much simulated time packet by packet (e.g. 1ms, "
    "500us; all: whole windows); a transfer still in flight then finishes at the goodput its packets "
    "reached"
)


def hybrid_options(engine: str, windows: list[str] | None, packet_max: str) -> dict | None:
    """`simulate`'s hybrid keywords from --packet-window and --packet-max; InputError naming the option."""
    from ..engines.hybrid import parse_duration, parse_window
    from ..errors import InputError

    try:  # read whatever the engine: a bad value is refused, not ignored
        max_s = None if packet_max.strip().lower() == "all" else parse_duration(packet_max)
    except ValueError as exc:
        raise InputError(f"--packet-max: {exc}") from None
    try:
        for w in windows or ():
            parse_window(w)
    except ValueError as exc:
        raise InputError(f"--packet-window: {exc}") from None
    if engine != "hybrid":
        if windows:
            raise InputError("--packet-window: only with --engine hybrid (the flow engine with packet windows)")
        return None
    return {"packet_windows": list(windows or ["auto"]), "packet_max_s": max_s}


SCENARIO_HELP = (
    "embedded scenario: demo (GPT-3 13B in 3D parallelism, 4 x 8 H100) | fabric (data-parallel "
    "replicas across a spine tier: ECMP vs spraying and the spine oversubscription decide the "
    "iteration time) | ch14 (the Chapter 14 cluster of the book Deep Learning for Network Engineers: "
    "data-parallel on 2 x 4 GPUs)"
)


@app.command()
def demo(
    out: Path = typer.Option(None, "--out", "-o", help=OUT_HELP, parser=out_path),
    engine: str = typer.Option(None, "--engine", "-e", help=ENGINE_HELP),
    name: str = typer.Option("demo", "--scenario", "-s", help=SCENARIO_HELP),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
    packet_window: list[str] = typer.Option(None, "--packet-window", help=WINDOW_HELP),
    packet_max: str = typer.Option("1ms", "--packet-max", help=PACKET_MAX_HELP),
) -> int:
    """Run an embedded scenario end to end and write its report (no arguments, no network)."""
    from ..scenario import embedded_scenario, embedded_scenario_text

    text = embedded_scenario_text(name)
    scenario = embedded_scenario(name)
    if engine:
        scenario = scenario.model_copy(update={"engine": _engine(engine)})
    hybrid = hybrid_options(engine or scenario.engine, packet_window, packet_max)
    return run_and_report(scenario, out, engine, text, force, hybrid=hybrid)


@app.command()
def validate(file: Path = typer.Argument(..., help="scenario YAML file")) -> int:
    """Check a scenario: exit 0, or exit 2 with every problem listed by field path."""
    from ..scenario import load_scenario

    s = load_scenario(file)
    if s.faults:  # their targets are the fabric's elements: checked on the fabric, with near names
        from ..faults import resolve_faults
        from ..simulate import build_fabric

        resolve_faults(build_fabric(s)[0], s.faults)
        if s.engine == "hybrid":  # as simulate refuses it
            from ..simulate import refuse_faults_on_hybrid

            refuse_faults_on_hybrid(s)
    console.print(
        f"[green]ok[/] {escape(str(file))}: {s.cluster.total_gpus} GPUs, {s.workload.kind}, {s.engine} engine"
    )
    _print_unused(s, s.engine)
    return 0


def _print_unused(s: Scenario, engine: str, lb: str | None = None) -> None:
    """Settings the run would not use (`fabric.flowlet_gap_us` without flowlets, the switch profile on the flow
    engine), said on stderr rather than ignored in silence."""
    from ..scenario.checks_qos import unused_settings

    for note in unused_settings(s, engine, lb):
        err_console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)


@app.command("simulate")
def simulate_cmd(
    file: Path = typer.Argument(..., help="scenario YAML file"),
    engine: str = typer.Option(None, "--engine", "-e", help=ENGINE_HELP),
    out: Path = typer.Option(None, "--out", "-o", help=OUT_HELP, parser=out_path),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
    pcap: Path = typer.Option(
        None,
        "--pcap",
        help="packet engine: write the run's RoCEv2 packets, CNPs, ACKs and PFC "
        "frames to FILE (up to --pcap-max-packets; refused, exit 2, on the other engines, hybrid included)",
    ),
    pcap_max_packets: int = typer.Option(
        10_000, "--pcap-max-packets", min=1, help="packets kept in --pcap; the rest are counted and left out"
    ),
    packet_window: list[str] = typer.Option(None, "--packet-window", help=WINDOW_HELP),
    packet_max: str = typer.Option("1ms", "--packet-max", help=PACKET_MAX_HELP),
) -> int:
    """Simulate a scenario and write its report."""
    from ..scenario import load_scenario

    scenario = load_scenario(file)
    eng = _engine(engine) if engine else None
    if pcap is not None:
        from .packet_cmd import check_pcap_options

        check_pcap_options(pcap, pcap_max_packets, eng or scenario.engine)
    hybrid = hybrid_options(eng or scenario.engine, packet_window, packet_max)
    _print_unused(scenario, eng or scenario.engine)
    return run_and_report(
        scenario, out, eng, file.read_text(encoding="utf-8"), force, pcap, pcap_max_packets, hybrid=hybrid
    )


def _engine(name: str) -> str:
    from ..engines import ENGINES
    from ..errors import InputError

    if name not in ENGINES:
        raise InputError(f"--engine: must be one of {', '.join(ENGINES)} (got {name!r})")
    return name
