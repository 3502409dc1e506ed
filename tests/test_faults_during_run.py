"""Faults during the run (aifabric.faults, engines/fabric_events.py): events of the flow engine's loop. Links stop or
slow down at their time, routing converges after detection and convergence and re-hashes only the transfers that
crossed the failure, stopped flows resume at their QP's next retransmission with what they had left, or the job fails.
Properties (hypothesis): any fault timeline runs to the end or fails the job, every byte of every transfer is
delivered once, no link carries anything while it is down, a failure never makes the iteration faster."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aifabric import load_scenario, simulate
from aifabric.engines import lower
from aifabric.engines.executor import run_reference
from aifabric.engines.fabric_events import FabricEvent, FabricTimeline, JobFailed, Rerouter
from aifabric.errors import InputError
from aifabric.faults import network_cables, resolve_faults
from aifabric.scenario import demo_scenario
from aifabric.scenario.faults_spec import FaultSpec
from aifabric.simulate import build_fabric, build_workload

SEGMENTS = {"servers_per_segment": 2}  # two segments: data-parallel traffic between them crosses the spines
SPINE_CABLE = "seg0/rail0--spine2"  # carries data-parallel traffic without faults


def scenario(faults, **fabric):
    data = demo_scenario().model_dump(mode="json", exclude_unset=True)
    data["fabric"].update(fabric or SEGMENTS)
    data["faults"] = faults
    return load_scenario(data)


class Case:
    """The demo's fabric, router and task graph, lowered once; each timeline runs on it."""

    def __init__(self):
        s = scenario([])
        self.fabric, self.router = build_fabric(s)
        self.graph = lower(build_workload(s), self.fabric, self.router, **s.lowering_options())
        self.base = run_reference(self.graph, self.fabric)
        self.cables = network_cables(self.fabric)
        self.transfer = np.asarray(self.graph.kind) == 1

    def run(self, faults: list[FaultSpec]):
        fx = resolve_faults(self.fabric, faults)
        tl = FabricTimeline(
            [FabricEvent(*e) for e in fx.events()],
            Rerouter(self.graph, self.fabric, self.router),
            fx.retransmit_timeout_s,
            fx.retry_count,
        )
        return fx, run_reference(self.graph, self.fabric, faults=tl)


def in_flight(case: Case, cable: str) -> float:
    """A time when the longest transfer over `cable` is half done in the fault-free run."""
    a, b = (x.strip() for x in cable.split("--"))
    links = {li for li, link in enumerate(case.fabric.links) if {link.src, link.dst} == {a, b}}
    over = [t for t in np.flatnonzero(case.transfer).tolist() if links & set(case.graph.route[t])]
    t = max(over, key=lambda t: case.base.end_s[t] - case.base.start_s[t])
    return round(float(case.base.start_s[t] + case.base.end_s[t]) / 2, 9)


@pytest.fixture(scope="module")
def case():
    return Case()


def _t(lo: float, hi: float):
    return st.floats(lo, hi).map(lambda x: round(x, 6))  # times to the microsecond (the schema refuses 1e-300)


def _faults(draw, case: Case, makespan_s: float):
    out = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["link_down", "link_down", "link_degraded", "switch_down", "nic_down"]))
        at = draw(_t(0.0, makespan_s))
        up = draw(st.one_of(st.none(), _t(1e-4, makespan_s)))
        f = {
            "kind": kind,
            "at_s": at,
            "up_at_s": None if up is None else at + up,
            "detection_s": draw(_t(0.0, 0.05)),
            "convergence_s": draw(_t(0.0, 0.05)),
            "nccl_ib_timeout": draw(st.integers(12, 18)),
        }
        if kind in ("link_down", "link_degraded"):
            f["target"] = draw(st.sampled_from(case.cables))
        elif kind == "switch_down":
            f["target"] = draw(st.sampled_from(["spine0", "spine1", "spine2", "spine3", "seg1/rail3"]))
        else:
            f["target"] = draw(st.sampled_from(["s0/nic0", "s3/nic5"]))
        if kind == "link_degraded":
            f["factor"] = draw(_t(0.05, 0.95))
        if kind == "nic_down" or f["target"] == "seg1/rail3":  # its ranks' only way out: mostly back in time
            f["up_at_s"] = at + draw(_t(1e-4, 0.05))
        if at == 0 and f["up_at_s"] is None:
            f["at_s"] = 1e-6  # during the run
        out.append(f)
    timeouts = {f["nccl_ib_timeout"] for f in out}
    for f in out:  # the job's QPs have one setting
        f["nccl_ib_timeout"] = max(timeouts)
    return [FaultSpec(**f) for f in out]


def conserved(case: Case, fx, tl) -> None:
    """Every task ran once; every transfer's bytes were delivered once; each link carried what flowed over it;
    nothing crossed a link while it was down."""
    g = case.graph
    assert not np.isnan(tl.end_s).any() and (tl.end_s >= tl.start_s).all()
    size = np.asarray(g.size_bytes, dtype=float)
    # every transfer's bytes delivered once: no more, no less
    np.testing.assert_allclose(tl.delivered_bytes[case.transfer], size[case.transfer], rtol=1e-9, atol=1e-3)
    # what each link is said to have carried is what flowed over it, time step by time step
    starts, ends, links, rates = tl.link_load.segments()
    carried = np.zeros(len(case.fabric.links))
    for a, b, ls, rs in zip(starts, ends, links, rates, strict=True):
        np.add.at(carried, ls, rs * (b - a))
    np.testing.assert_allclose(tl.link_bytes, carried, rtol=1e-6, atol=1.0)
    # nothing crosses a link while it is down
    for f in fx.timed:
        if f.fraction:
            continue
        for a, b in f.intervals:
            for s0, s1, ls, rs in zip(starts, ends, links, rates, strict=True):
                if s0 >= a and s1 <= b and s1 > s0:
                    on = np.isin(ls, f.links)
                    assert not (rs[on] > 0).any(), (f.label(), s0, s1)


@st.composite
def timelines(draw, case):
    return _faults(draw, case, case.base.makespan_s)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_fault_timelines_deliver_every_byte_once_or_fail_the_job(case, data):
    faults = data.draw(timelines(case))
    try:
        fx, tl = case.run(faults)
    except JobFailed as exc:  # reported: which transfer, since when, until when
        assert exc.t_s >= exc.stalled_at_s and exc.timeline is not None
        assert exc.timeline.fault_log.failed["task"] == exc.task
        return
    conserved(case, fx, tl)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=_t(0.0, 1.0), cable=st.integers(0, 10_000), up=st.one_of(st.none(), _t(1e-3, 2.0)))
def test_a_failed_link_never_makes_the_iteration_faster(case, at, cable, up):
    # NCCL's own retransmission settings: a flow that loses its path waits at least one ACK timeout (4.3 s)
    target = case.cables[cable % len(case.cables)]
    fault = FaultSpec(
        kind="link_down",
        target=target,
        at_s=at * case.base.makespan_s + 1e-6,
        up_at_s=None if up is None else at * case.base.makespan_s + 1e-6 + up,
    )
    try:
        _, tl = case.run([fault])
    except JobFailed:
        return
    assert tl.makespan_s >= case.base.makespan_s * (1 - 1e-12)


def test_a_failed_spine_moves_exactly_the_transfers_that_crossed_it(case):
    g = case.graph
    spine_links = {li for li, link in enumerate(case.fabric.links) if "spine1" in (link.src, link.dst)}
    at = 0.3 * case.base.makespan_s
    fault = FaultSpec(
        kind="switch_down", target="spine1", at_s=at, detection_s=0.0, convergence_s=0.0, nccl_ib_timeout=10
    )
    fx, tl = case.run([fault])
    crossed = {t for t in np.flatnonzero(case.transfer).tolist() if spine_links & set(g.route[t])}
    moved = {t for _, t in tl.fault_log.moves}
    # routing converged at the failure (no detection, no convergence time): every transfer that crossed the spine
    # and had not completed then moved; none that avoided it did
    assert moved == {t for t in crossed if tl.end_s[t] > at}
    assert len(moved) > 0 and len(crossed - moved) > 0
    for t in moved:
        assert not spine_links & set(tl.fault_log.routes[t])
    assert tl.makespan_s >= case.base.makespan_s


def test_resume_at_the_first_retransmission_after_convergence(case):
    # a cable that carries traffic fails mid-run; routing converges 1.3 s later (0.3 s BFD + 1 s eBGP, the
    # defaults); NCCL's ACK timeout is 4.29 s: the stopped flows resume 4.29 s after they stopped, on a new path
    at = in_flight(case, SPINE_CABLE)
    fx, tl = case.run([FaultSpec(kind="link_down", target=SPINE_CABLE, at_s=at)])
    log = tl.fault_log
    assert log.events[0]["transfers_stopped"] > 0  # in flight when the cable failed
    assert log.bytes_rerouted > 0
    conserved(case, fx, tl)
    rto = fx.retransmit_timeout_s
    assert rto == pytest.approx(4.096e-6 * 2**20)
    for a, b, _ in log.stall_intervals:
        assert b - a == pytest.approx(rto)
    assert tl.makespan_s > case.base.makespan_s + rto * 0.5
    # convergence slower than the ACK timeout: the second retransmission gets through
    fx, tl = case.run([FaultSpec(kind="link_down", target=SPINE_CABLE, at_s=at, detection_s=0.5, convergence_s=4.0)])
    for a, b, _ in tl.fault_log.stall_intervals:
        assert b - a == pytest.approx(2 * rto)


def test_a_degraded_link_changes_rate_at_its_time(case):
    at = 0.2 * case.base.makespan_s
    fx, tl = case.run([FaultSpec(kind="link_degraded", target=SPINE_CABLE, factor=0.1, at_s=at)])
    links = fx.timed[0].links
    starts, ends, ls, rs = tl.link_load.segments()
    cap = np.array([case.fabric.links[li].rate_bytes_per_s for li in links])
    for a, _b, l_, r_ in zip(starts, ends, ls, rs, strict=True):
        on = np.isin(l_, links)
        if a >= at and on.any():
            assert (r_[on] <= 0.1 * cap.max() * (1 + 1e-9)).all()
    assert tl.makespan_s >= case.base.makespan_s * (1 - 1e-12)
    assert tl.fault_log.transfers_stopped == 0


def test_a_nic_lost_mid_run_fails_the_job_after_the_retries(tmp_path, capsys):
    import yaml

    from aifabric.cli import run_app
    from aifabric.cli.app import app

    s = scenario([{"kind": "nic_down", "target": "s0/nic0", "at_s": 0.01}])
    with pytest.raises(InputError) as e:
        simulate(s)
    msg = str(e.value)
    assert "the job fails at" in msg and "s0/nic0" in msg and "NCCL_IB_RETRY_CNT" in msg and "Chapter 10" in msg
    t_fail = float(msg.split("the job fails at ")[1].split(" s")[0])
    assert t_fail == pytest.approx(8 * 4.096e-6 * 2**20, rel=0.01)  # from the stop: 1 + 7 ACK timeouts
    # the command line: exit 2, the reason, and no report written
    data = s.model_dump(mode="json", exclude_unset=True)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    assert run_app(app, ["simulate", str(path), "--out", str(out)]) == 2
    assert "the job fails" in capsys.readouterr().err
    assert not (out / "summary.json").exists()


def test_the_link_back_up_brings_the_moved_transfers_back(case):
    at = round(0.05 * case.base.makespan_s, 9)  # before most of the data-parallel traffic
    fx, tl = case.run(
        [
            FaultSpec(
                kind="link_down",
                target=SPINE_CABLE,
                at_s=at,
                up_at_s=at + 0.01,
                detection_s=0.0,
                convergence_s=0.001,
                nccl_ib_timeout=10,
            )
        ]
    )
    whats = [e["what"] for e in tl.fault_log.events]
    assert any("routing converged around it" in w for w in whats) and any("converged back" in w for w in whats)
    back = [e for e in tl.fault_log.events if "converged back" in e["what"]][0]
    assert back["transfers_rerouted"] > 0
    conserved(case, fx, tl)
    g = case.graph
    # transfers that started after routing came back run on their own routes
    later = [t for t in np.flatnonzero(case.transfer).tolist() if tl.start_s[t] > back["t_s"]]
    assert later and all(tl.fault_log.routes.get(t, g.route[t]) == g.route[t] for t in later)


def test_drawn_faults_are_deterministic_for_a_seed():
    fabric, _ = build_fabric(scenario([]))
    draw = [FaultSpec(kind="draw", window_s=10.0, rates={"network_cable": 200.0, "nic": 50.0}, down_s=0.5)]
    a = resolve_faults(fabric, draw, seed=7).applied
    b = resolve_faults(fabric, draw, seed=7).applied
    c = resolve_faults(fabric, draw, seed=8).applied
    assert a == b and a != c and len(a) > 0
    assert all(f["drawn"] and 0 <= f["at_s"] < 10.0 and f["up_at_s"] == pytest.approx(f["at_s"] + 0.5) for f in a)
    # the mean count is the rate x components x window: 200 / h x cables x 10 s
    n_cables = len(network_cables(fabric))
    counts = [
        sum(1 for f in resolve_faults(fabric, draw, seed=s).applied if f["kind"] == "link_down") for s in range(40)
    ]
    assert np.mean(counts) == pytest.approx(200 * n_cables * 10 / 3600, rel=0.3)
    # none at the default rates (Llama 3's: a cable fails about once in 70 years) in 10 s
    quiet = [FaultSpec(kind="draw", window_s=10.0)]
    assert resolve_faults(fabric, quiet, seed=7).applied == []


def test_simulate_reports_what_the_faults_did_and_cost():
    run = simulate(
        scenario(
            [
                {
                    "kind": "link_down",
                    "target": SPINE_CABLE,
                    "at_s": 0.1,
                    "nccl_ib_timeout": 12,
                    "detection_s": 0.01,
                    "convergence_s": 0.05,
                }
            ]
        )
    )
    d = run.faults["during_run"]
    assert d["transfers_stopped"] > 0 and d["bytes_rerouted"] > 0 and d["stalled_s"] > 0
    assert run.faults["iteration_time_s"] > run.faults["fault_free_iteration_time_s"]
    assert d["events"][0]["t_s"] == pytest.approx(0.1) and "down" in d["events"][0]["what"]
    assert "reference" in d["engine_path"]
    import json

    json.dumps(run.faults)  # summary.json takes it as it is
    # the terminal and report.html say what happened, when, and what it cost
    from rich.console import Console

    from aifabric.report.html import fault_events_table
    from aifabric.report.terminal import print_summary

    console = Console(width=200, record=True)
    print_summary(run, console)
    text = console.export_text()
    assert f"{SPINE_CABLE} at 100.000 ms" in text and "faults during the run" in text
    assert "100.000 ms │ faults[0] link_down" in text and "transfers stopped" in text
    assert "(in flight or to come) moved by routing" in text  # routing converged, 60 ms later
    page = fault_events_table(run.faults)
    assert "Faults during the run" in page and "160.000 ms" in page and "converged" in page
    from aifabric.report.html import build_html

    html = build_html(run, plotly_src="")
    shaded = '"text":"link down ' + SPINE_CABLE.replace("/", "\\u002f") + '","x":100.0'  # on the timeline (ms)
    assert "Faults during the run" in html and shaded in html


def test_the_run_says_when_faults_leave_the_compiled_loop(monkeypatch):
    """A graph large enough for the compiled loop runs its faults on the reference loop: the summary and the terminal
    say so (a small graph runs there anyway: just "reference")."""
    import importlib

    from aifabric.engines import executor
    from aifabric.report.terminal import faults_line

    run = simulate(scenario([{"kind": "link_degraded", "target": SPINE_CABLE, "factor": 0.5, "at_s": 0.1}]))
    assert run.faults["during_run"]["engine_path"] == "reference"
    assert "compiled" not in faults_line(run.faults)
    monkeypatch.setattr(executor, "uses_compiled_loop", lambda n: True)  # as numba would for a large graph
    path = importlib.import_module("aifabric.simulate")._fault_loop(run.graph)
    assert path.startswith("reference: ") and "compiled loop" in path and f"{len(run.graph):,} tasks" in path
    faults = copy.deepcopy(run.faults)
    faults["during_run"]["engine_path"] = path
    assert path in faults_line(faults)


def test_flows_in_flight_move_with_their_remaining_bytes(case):
    # the cable fails under a transfer, routing converges at once, the flows resume on other spines at their
    # next retransmission (NCCL_IB_TIMEOUT 8: 1 ms); the cable is back half a timeout later and the flows, still in
    # flight, return to it with what they have left
    at = in_flight(case, SPINE_CABLE)
    rto = 4.096e-6 * 2**8
    fx, tl = case.run(
        [
            FaultSpec(
                kind="link_down",
                target=SPINE_CABLE,
                at_s=at,
                up_at_s=at + 1.5 * rto,
                detection_s=0.0,
                convergence_s=0.0,
                nccl_ib_timeout=8,
            )
        ]
    )
    around, back = tl.fault_log.events[0], tl.fault_log.events[-1]
    assert around["transfers_stopped"] > 0 and around["transfers_rerouted"] > 0
    assert "converged back" in back["what"] and back["transfers_rerouted"] > 0
    moved = {t for _, t in tl.fault_log.moves}
    size = sum(case.graph.size_bytes[t] for t in moved)
    assert 0 < tl.fault_log.bytes_rerouted < size  # part of their bytes went round, the rest on their own routes
    conserved(case, fx, tl)


def test_a_straggler_during_the_run_stretches_what_it_computes_then(case):
    from aifabric.faults import slow_down

    # slow from (almost) the start to the end: the same as a straggler from the start (faults with at_s 0)
    fx, tl = case.run([FaultSpec(kind="gpu_slow", target=5, factor=1.5, at_s=1e-9)])
    static = copy.deepcopy(case.graph)
    slow_down(static, {5: 1.5})
    whole = run_reference(static, case.fabric)
    assert tl.makespan_s == pytest.approx(whole.makespan_s, rel=1e-6)
    assert tl.makespan_s > case.base.makespan_s
    # slow for a while only: slower than without, faster than slow throughout
    a, b = 0.2 * case.base.makespan_s, 0.5 * case.base.makespan_s
    fx, tl = case.run([FaultSpec(kind="gpu_slow", target=5, factor=1.5, at_s=round(a, 9), up_at_s=round(b, 9))])
    assert case.base.makespan_s < tl.makespan_s < whole.makespan_s
    assert [e["what"].rsplit(": ", 1)[1] for e in tl.fault_log.events] == ["slow", "its own pace again"]
    assert tl.fault_log.events[0]["compute_tasks_repaced"] >= 0
    conserved(case, fx, tl)


def test_a_dual_port_nic_loses_a_port_mid_run_and_keeps_going():
    data = demo_scenario().model_dump(mode="json", exclude_unset=True)
    data["cluster"]["nic_ports"] = 2
    data["fabric"].update(SEGMENTS)
    fabric, _ = build_fabric(load_scenario(data))
    ports = [li for li in fabric.out_links["s0/nic0"] if fabric.is_switch(fabric.links[li].dst)]
    a = fabric.links[ports[0]]
    data["faults"] = [
        {"kind": "link_down", "target": f"{a.src}--{a.dst}", "at_s": 0.01, "convergence_s": 0.1, "nccl_ib_timeout": 14}
    ]
    run = simulate(load_scenario(data))
    d = run.faults["during_run"]
    assert run.results.complete and d["transfers_stopped"] > 0 and d["bytes_rerouted"] > 0
    assert run.timeline.link_bytes[ports[1]] > 0  # the LAG's other port carries on
    assert run.results.iteration_time_s > run.faults["fault_free_iteration_time_s"]


def test_sprayed_transfers_spread_again_over_what_is_left():
    s = scenario(
        [{"kind": "link_down", "target": SPINE_CABLE, "at_s": 0.01, "convergence_s": 0.1, "nccl_ib_timeout": 14}],
        servers_per_segment=2,
        load_balancing="spray",
    )
    run = simulate(s)
    tl, g = run.timeline, run.graph
    transfer = np.asarray(g.kind) == 1
    np.testing.assert_allclose(tl.delivered_bytes[transfer], np.asarray(g.size_bytes)[transfer], rtol=1e-9, atol=1e-3)
    d = run.faults["during_run"]
    converged = next(e["t_s"] for e in d["events"] if "converged" in e["what"])
    assert d["transfers_rerouted"] > 0
    down = {li for li, link in enumerate(run.fabric.links) if {link.src, link.dst} == {"seg0/rail0", "spine2"}}
    starts, _, links, rates = tl.link_load.segments()
    for a, ls, rs in zip(starts, links, rates, strict=True):
        if a >= 0.01:  # from the failure on, the sprayed transfers' shares on the cable are gone
            assert not (rs[np.isin(ls, list(down))] > 0).any()
    assert converged == pytest.approx(0.01 + 0.3 + 0.1)


def test_a_moved_transfer_pays_its_new_routes_latency(case):
    """A transfer that finishes on a route other than its own pays that route's latency instead of its own: once for
    a transfer of one step, once per step after the move for a merged ring edge (its steps' share of the bytes)."""
    from aifabric.engines.executor import _Faults

    g, f = case.graph, case.fabric
    fx = _Faults(g, np.ones(len(f.links)), FabricTimeline([], Rerouter(g, f, case.router)))
    edges = [t for t in range(len(g)) if g.kind[t] == 1 and "/ring [" in g.name[t] and len(g.route[t]) > 2]
    t = edges[0]
    own = g.route[t]
    assert fx.extra_latency_s(t) == 0.0  # on its own route
    detour = (*own, own[-1])  # a route one cable longer (a cable into a NIC: no switch added)
    fx.routes[t] = detour
    fx.detour[t] = g.size_bytes[t] / 4  # moved with a quarter of its bytes left
    steps = g.collectives[g.collective[t]].n_steps
    assert steps > 1
    assert fx.extra_latency_s(t) == pytest.approx(f.links[own[-1]].latency_s * steps / 4)
    one = copy.deepcopy(g)  # the same transfer as one of a single step (a send/recv, an unmerged ring step)
    one.name[t], one.step[t] = "send", 0
    fx = _Faults(one, np.ones(len(f.links)), FabricTimeline([], Rerouter(one, f, case.router)))
    fx.routes[t] = (*own, own[1])  # one more cable, into a switch
    extra = f.links[own[1]].latency_s + f.switch_latency_s * f.is_switch(f.links[own[1]].dst)
    assert extra > 0 and fx.extra_latency_s(t) == pytest.approx(extra)
