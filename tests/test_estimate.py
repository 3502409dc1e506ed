"""Issue 18, item 3: honest progress and estimates. The packet engine's run estimated before it starts (growing with
the plan), a warning past a threshold (never a question), progress with the simulated time and a time left that is
never negative, the same run with or without progress reports, and a Ctrl-C during a packet run still exits 130 with
its partial results. No assertion on wall-clock durations: the thresholds are set, the clock is the test's."""

from __future__ import annotations

import json

import numpy as np
import pytest

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.engines.progress import reporter, takes_sim_time
from aifabric.estimate import (
    MIN_WALL_S,
    RunProgress,
    estimate_packet_run,
    packet_warning,
    warn_threshold_s,
)
from aifabric.scenario import ch14_scenario_text, load_scenario


def _small(widths=(1024, 2048, 1024), servers: int = 2) -> str:
    """The Ch. 14 scenario, smaller: a packet run of a second or two."""
    text = ch14_scenario_text()
    text = text.replace("layer_widths: [4096, 8192, 8192, 4096]", f"layer_widths: [{', '.join(map(str, widths))}]")
    return text.replace("servers: 2", f"servers: {servers}")


def test_the_estimate_grows_with_the_plan():
    sizes = [((512, 1024, 512), 2), ((1024, 2048, 1024), 2), ((1024, 2048, 1024), 4), ((2048, 4096, 2048), 4)]
    ests = [estimate_packet_run(load_scenario(_small(w, n))) for w, n in sizes]
    walls = [e.wall_s for e in ests]
    packets = [e.work.packets for e in ests]
    assert walls == sorted(walls) and len(set(walls)) == len(walls), walls
    assert packets == sorted(packets) and len(set(packets)) == len(packets), packets
    for e in ests:
        assert e.iteration_s > 0 and e.work.packet_hops >= 2 * e.work.packets  # NIC -> switch -> NIC at least
        assert e.fraction_at(0.0) == 0.0 and e.fraction_at(e.iteration_s) == pytest.approx(1.0)
        f = [e.fraction_at(t) for t in np.linspace(0, e.iteration_s, 50)]
        assert f == sorted(f)  # the work done only grows with the simulated time


def test_warning_past_the_threshold_and_not_below():
    est = estimate_packet_run(load_scenario(_small()))
    text = packet_warning(est, threshold_s=0.001)
    assert text is not None and "--engine flow" in text and "--engine analytic" in text and "packets" in text
    assert packet_warning(est, threshold_s=1e9) is None


def test_the_threshold_from_the_environment(monkeypatch):
    monkeypatch.setenv("AIFABRIC_WARN_S", "0.5")
    assert warn_threshold_s() == 0.5
    monkeypatch.setenv("AIFABRIC_WARN_S", "soon")
    assert warn_threshold_s() == 180.0


@pytest.mark.parametrize("threshold, warned", [("0", True), ("1e9", False)])
def test_the_command_warns_on_stderr_before_the_run(tmp_path, monkeypatch, capsys, threshold, warned):
    import sys

    import aifabric.simulate  # noqa: F401 - the module, patched through sys.modules (the package exports the function)

    simulate_module = sys.modules["aifabric.simulate"]

    def stop(*args, **kwargs):  # the warning comes before any of the run's work: stop at its first stage
        raise KeyboardInterrupt

    monkeypatch.setattr(simulate_module, "simulate", stop)
    monkeypatch.setenv("AIFABRIC_WARN_S", threshold)
    path = tmp_path / "s.yaml"
    path.write_text(_small())
    assert run_app(app, ["simulate", str(path), "--engine", "packet", "--out", str(tmp_path / "run")]) == 130
    err = capsys.readouterr().err
    assert ("warning:" in err and "--engine flow" in err) is warned
    assert "Traceback" not in err


@pytest.mark.parametrize("threshold, warned", [("0", True), ("1e9", False)])
def test_packet_file_warns_too(tmp_path, monkeypatch, capsys, threshold, warned, packet_interrupted_at_once):
    monkeypatch.setenv("AIFABRIC_WARN_S", threshold)
    path = tmp_path / "s.yaml"
    path.write_text(_small())
    assert run_app(app, ["packet", str(path)]) == 130
    err = capsys.readouterr().err
    assert ("warning:" in err and "--engine flow" in err) is warned


def test_a_large_flow_run_is_announced_from_the_plan(monkeypatch, capsys):
    from aifabric.cli.estimate import check_work
    from aifabric.cli.run_cmds import warn_if_long
    from aifabric.scenario import embedded_scenario

    s = embedded_scenario("demo")
    est = check_work(s, "flow")
    monkeypatch.setenv("AIFABRIC_WARN_S", "0")
    assert warn_if_long(s, "flow", est, None) is None  # nothing to follow: the flow engine's bar counts tasks
    err = capsys.readouterr().err
    assert "warning:" in err and "flow engine would take" in err and "Faster:" in err
    monkeypatch.setenv("AIFABRIC_WARN_S", "1e9")
    warn_if_long(s, "flow", est, None)
    assert capsys.readouterr().err == ""


def test_progress_reports_the_simulated_time_and_a_time_left_never_negative():
    from aifabric.simulate import simulate

    scenario = load_scenario(_small())
    est = estimate_packet_run(scenario)
    wall = [0.0]
    pace = RunProgress(est, clock=lambda: wall[0])
    seen = []

    def on_progress(done, total, t_s=None):
        wall[0] += 0.05  # the test's clock: 50 ms a report
        seen.append((done, t_s, pace.update(done, total, t_s)))

    run = simulate(scenario, "packet", on_progress)
    times = [t for _, t, _ in seen]
    assert None not in times and times == sorted(times) and times[-1] > 0
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)
    views = [v for _, _, v in seen]
    assert all(v.left_s is None or v.left_s >= 0 for v in views)
    assert views[0].left_s is None and views[0].left() == "left: estimating…"  # nothing to go on yet
    assert any(v.left_s is not None for v in views) and wall[0] > MIN_WALL_S
    assert views[-1].fraction == 1.0 and views[-1].left_s == 0.0
    assert "of ~" in views[-1].words() and "simulated" in views[-1].words()
    # the same run without progress reports: slices of the event heap change nothing
    quiet = simulate(scenario, "packet")
    assert np.array_equal(quiet.timeline.end_s, run.timeline.end_s)
    assert quiet.timeline.rate_recomputations == run.timeline.rate_recomputations
    assert quiet.results.iteration_time_s == run.results.iteration_time_s


def test_time_left_from_the_pace_so_far():
    wall = [0.0]
    pace = RunProgress(iteration_s=1.0, clock=lambda: wall[0])
    assert pace.update(0, 10, 0.0).left_s is None
    wall[0] = 10.0
    view = pace.update(5, 10, 0.25)  # a quarter of the iteration in 10 s: 30 s left at that pace
    assert view.left_s == pytest.approx(30.0) and view.words() == "0.25 s of ~1 s simulated"
    wall[0] = 20.0
    view = pace.update(9, 10, 1.5)  # past the estimate: no made-up figure
    assert view.past_estimate and view.left_s is None and "unknown" in view.left()
    assert pace.update(10, 10, 1.6).left_s == 0.0


def test_a_callback_of_done_and_total_alone_still_works():
    calls = []

    def two(done, total, count=[0]):  # noqa: B006 - a default third argument is not the simulated time
        calls.append((done, total, count))

    assert not takes_sim_time(two) and takes_sim_time(lambda done, total, t_s=None: None)
    assert takes_sim_time(lambda *a, **k: None)
    report = reporter(two)
    assert report is not None
    report(1, 2, 0.5)
    assert calls == [(1, 2, [0])]


def test_the_reference_loop_reports_the_simulated_time():
    from aifabric.engines import lower
    from aifabric.engines.executor import run_reference
    from aifabric.simulate import build_fabric, build_workload

    s = load_scenario(_small())
    fabric, router = build_fabric(s)
    graph = lower(build_workload(s), fabric, router, **s.lowering_options())
    seen = []
    timeline = run_reference(graph, fabric, "flow", lambda done, total, t_s=None: seen.append(t_s))
    assert seen and None not in seen and seen == sorted(seen) and seen[-1] == pytest.approx(timeline.makespan_s)


def test_ctrl_c_during_a_packet_run_exits_130_with_partial_results(tmp_path, monkeypatch, capsys):
    import aifabric.estimate as estimate

    real = estimate.RunProgress.update
    calls = [0]

    def interrupted(self, done, total, t_s=None):
        calls[0] += 1
        if calls[0] == 20:  # in the middle of the event loop, from the progress report as a real Ctrl-C would
            raise KeyboardInterrupt
        return real(self, done, total, t_s)

    monkeypatch.setattr(estimate.RunProgress, "update", interrupted)
    path = tmp_path / "s.yaml"
    path.write_text(_small())
    out = tmp_path / "run"
    assert run_app(app, ["simulate", str(path), "--engine", "packet", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "Traceback" not in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False


def test_the_progress_line_of_a_large_flow_run():
    from aifabric.cli.run_cmds import PROGRESS_MIN_TASKS, ProgressLine

    bar = ProgressLine("flow")
    n = PROGRESS_MIN_TASKS
    bar.on_progress(0, n - 1, t_s=0.0)  # a small run: no bar
    assert bar.task_id is None
    try:
        for done, t in [(0, 0.0), (n // 2, 0.4), (n, 1.0)]:
            bar.on_progress(done, n, t_s=t)
        task = bar.bar.tasks[0]
        assert task.completed == 1000 and task.fields["sim"] == "1 s simulated"  # no iteration estimate: tasks' share
        assert task.fields["tasks"] == f"{n:,}/{n:,} tasks" and task.fields["left"] == "left ~0 s"
    finally:
        bar.stop()


def test_the_bound_told_before_the_loop_starts_no_bar():
    # the iteration's bound comes before the event loop has set up (and can catch a Ctrl-C itself): the line
    # "simulating ..." waits for the loop's own first report, so an interrupt after it keeps the loop's results
    from aifabric.cli.run_cmds import PROGRESS_MIN_TASKS, ProgressLine

    bar = ProgressLine("flow")
    n = PROGRESS_MIN_TASKS
    try:
        bar.on_progress(0, n, t_s=0.0, iteration_bound_s=2.0)
        assert bar.task_id is None
        bar.on_progress(n // 2, n, t_s=1.0)
        assert bar.task_id is not None and "of ~2 s" in bar.bar.tasks[-1].fields["sim"]
    finally:
        bar.stop()


def test_the_progress_line_while_a_large_plan_lowers():
    from aifabric.cli.run_cmds import PROGRESS_MIN_TASKS, ProgressLine

    bar = ProgressLine("flow")
    n = PROGRESS_MIN_TASKS
    bar.on_progress(10, n - 1, stage="task graph")  # a small plan: no bar
    assert bar.task_id is None
    try:
        bar.on_progress(n // 4, n, stage="task graph")
        task = bar.bar.tasks[0]
        assert task.fields["sim"] == "lowering to a task graph" and task.completed == 250
        assert task.fields["tasks"] == f"{n // 4:,}/{n:,} ops"
        bar.on_progress(n, n, stage="task graph")  # done: the event loop's bar begins afresh
        assert bar.task_id is None
        bar.on_progress(n // 2, n, t_s=0.5)
        assert bar.bar.tasks[-1].fields["sim"] == "0.5 s simulated" and bar.bar.tasks[-1].completed == 500
    finally:
        bar.stop()


def test_building_a_large_workload_reports_the_ranks_built():
    """simulate() tells a callback that takes `stage` how many ranks of an LLM plan are built, then how many ops are
    lowered, before the event loop's reports."""
    import sys
    from pathlib import Path

    from aifabric import simulate

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from bench_iteration import scenario

    heard: list = []
    simulate(
        scenario(128, "flow", "gpt3"),
        progress=lambda done, total, t_s=None, stage=None: heard.append((stage, done, total)),
    )
    stages = [st for st, _, _ in heard]
    assert stages.index("workload") < stages.index("task graph") < stages.index(None)
    built = [(d, n) for st, d, n in heard if st == "workload"]
    assert built[-1] == (128, 128) and [d for d, _ in built] == sorted(d for d, _ in built)
    lowered = [(d, n) for st, d, n in heard if st == "task graph"]
    assert lowered[-1][0] == lowered[-1][1] > 0


def test_the_progress_line_counts_a_flow_run_towards_its_lower_bound():
    """The flow engine's first report on a large graph is the iteration without contention (engines/bound.py): the
    simulated time goes towards it; past it (contention), the tasks' share says how far the run is."""
    from aifabric.cli.run_cmds import PROGRESS_MIN_TASKS, ProgressLine

    bar = ProgressLine("flow")
    n = PROGRESS_MIN_TASKS
    try:
        bar.on_progress(0, n, t_s=0.0, iteration_bound_s=2.0)
        bar.on_progress(n // 4, n, t_s=1.0)
        task = bar.bar.tasks[0]
        assert task.fields["sim"] == "1 s of ~2 s simulated" and task.completed == 500
        bar.on_progress(n // 2, n, t_s=2.5)
        assert task.fields["sim"] == "2.5 s simulated (past the ~2 s of no contention)" and task.completed == 500
        assert task.fields["left"] != "left: unknown (past the estimate)"
    finally:
        bar.stop()


def test_writing_the_report_of_a_large_run_shows_a_bar(tmp_path):
    """write_report tells a callback that takes `stage` its parts as it writes them (stage "report", shares of 100),
    which the progress line shows as the share written."""
    from aifabric import simulate, write_report
    from aifabric.cli.run_cmds import ProgressLine
    from aifabric.scenario import ch14_scenario_text

    run = simulate(ch14_scenario_text())
    heard: list = []
    write_report(run, tmp_path / "a", progress=lambda done, total, stage=None: heard.append((stage, done, total)))
    assert {st for st, _, _ in heard} == {"report"} and heard[0][1] == 0 and heard[-1][1] == heard[-1][2] == 100
    assert [d for _, d, _ in heard] == sorted(d for _, d, _ in heard)
    assert (tmp_path / "a" / "summary.json").exists()
    bar = ProgressLine("flow")
    try:
        bar.on_progress(36, 100, stage="report")
        task = bar.bar.tasks[0]
        assert task.fields["sim"] == "writing the report" and task.fields["tasks"] == "36 %"
    finally:
        bar.stop()
