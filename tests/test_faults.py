"""Faults during an iteration (aifabric.faults): links, switches and NICs down, degraded cables, slow GPUs; the
fabric's reaction (converged routing, resilient ECMP, a dual-port NIC's LAG) and what each costs the job."""

from __future__ import annotations

import numpy as np
import pytest

from aifabric import load_scenario, simulate
from aifabric.errors import InputError
from aifabric.scenario import demo_scenario
from aifabric.simulate import build_fabric


def scenario(faults, **fabric):
    data = demo_scenario().model_dump(mode="json", exclude_unset=True)
    data["fabric"].update(fabric)
    data["faults"] = faults
    return load_scenario(data)


# two segments of two servers: data-parallel traffic between segments crosses the spines
SEGMENTS = {"servers_per_segment": 2}


def test_names_are_checked_with_near_names():
    with pytest.raises(InputError) as e:
        scenario([{"kind": "link_down", "target": "rail0--spne0"}]).model_dump()
        simulate(scenario([{"kind": "link_down", "target": "rail0--spne0"}]))
    assert "faults[0].target" in str(e.value) and "rail0--spine0" in str(e.value)
    for bad in (
        {"kind": "gpu_slow", "target": 3},
        {"kind": "link_degraded", "target": "rail0--spine0", "factor": 2},
        {"kind": "link_down", "target": "rail0--spine0", "at_s": 1.0, "up_at_s": 0.5},
        {"kind": "gpu_slow", "target": 3, "factor": 2, "at_s": 1.0, "up_at_s": 0.5},
        {"kind": "draw", "window_s": 1.0, "target": "spine0"},
        {"kind": "draw"},
        {"kind": "switch_down", "target": "spine0", "factor": 0.5},
    ):
        with pytest.raises(InputError) as e:
            scenario([bad])
        assert "faults" in str(e.value)
    with pytest.raises(InputError, match="no GPU"):
        simulate(scenario([{"kind": "gpu_slow", "target": 999, "factor": 2}]))


def test_a_straggler_holds_back_the_iteration():
    base = simulate(scenario([]))
    slow = simulate(scenario([{"kind": "gpu_slow", "target": 5, "factor": 1.5}]))
    t, t0 = slow.results.iteration_time_s, base.results.iteration_time_s
    assert slow.faults["fault_free_iteration_time_s"] == pytest.approx(t0)
    # every collective rank 5 is in waits for it: slower, but never more than its own slowdown
    assert t0 < t <= 1.5 * t0 * (1 + 1e-9)
    assert slow.faults["slowdown"] == pytest.approx(t / t0)
    same = simulate(scenario([{"kind": "gpu_slow", "target": 5, "factor": 1.0}]))
    assert same.results.iteration_time_s == pytest.approx(t0, rel=1e-12)


def test_a_straggler_shows_in_every_collective_it_joins():
    """Rank 5 computes twice as slowly: no collective it is in can end before rank 5 has done, at its pace, every
    compute task that comes before it (its tensor-parallel group in lockstep with it), and each ends later than
    without the straggler."""
    base = simulate(scenario([]))
    slow = simulate(scenario([{"kind": "gpu_slow", "target": 5, "factor": 2}]))
    g = slow.graph  # durations scaled by the straggler's factor
    chain = [t for t in range(len(g)) if g.kind[t] == 0 and 5 in g.ranks_of(t)]  # its compute, in program order
    position = {t: k for k, t in enumerate(chain)}
    before = np.full(len(g), -1)  # the last of rank 5's compute tasks each task waits for (directly or not)
    for t in range(len(g)):
        for d in g.deps[t]:
            assert d < t  # tasks are numbered in an order that respects their dependencies
            before[t] = max(before[t], before[d], position.get(d, -1))
    done_by = np.cumsum([g.duration_s[t] for t in chain])
    joined = [c for c in g.collectives if 5 in c.group and c.tasks]
    assert len(joined) > 10
    for c in joined:
        k = max(before[t] for t in c.tasks)
        assert k >= 0
        end_slow = np.nanmax(slow.timeline.end_s[c.tasks])
        assert end_slow >= done_by[k] * (1 - 1e-12), c.key
        assert end_slow > np.nanmax(base.timeline.end_s[c.tasks]), c.key


def test_a_spine_cable_down_moves_only_the_flows_that_used_it():
    cable = "seg0/rail0--spine2"  # carries data-parallel traffic without the fault
    run = simulate(scenario([{"kind": "link_down", "target": cable}], **SEGMENTS))
    f = run.fabric
    down = [li for li, link in enumerate(f.links) if {link.src, link.dst} == {"seg0/rail0", "spine2"}]
    assert len(down) == 2 and all(run.timeline.link_bytes[li] == 0 for li in down)
    assert run.faults["bytes_rerouted_per_iteration"] > 0 and run.faults["qps_rerouted"] > 0
    assert run.results.iteration_time_s >= run.faults["fault_free_iteration_time_s"] * (1 - 1e-9)
    # resilient hashing: every QP whose fault-free path avoided the cable keeps its path
    _, healthy = build_fabric(scenario([], **SEGMENTS))
    router = run_router(run)
    kept = moved = 0
    for key, route in router._routes.items():
        before = healthy.route(*key).links
        if set(before) & set(down):
            assert route.links != before
            moved += 1
        else:
            assert route.links == before, key
            kept += 1
    assert kept > 0 and moved > 0


def run_router(run):
    # the router simulate used: rebuilt the same way (same seeds, same faults) to read its routes
    from aifabric.faults import apply_to_fabric, resolve_faults

    fabric, router = build_fabric(run.scenario)
    apply_to_fabric(fabric, router, resolve_faults(fabric, run.scenario.faults))
    pairs = {
        (int(s), int(d))
        for s, d in zip(np.asarray(run.graph.rank), np.asarray(run.graph.dst))
        if d >= 0 and fabric.server_of(int(s)) != fabric.server_of(int(d))
    }
    for s, d in pairs:
        for channel in range(fabric.gpus_per_server):
            router.route(s, d, channel)
    return router


def test_a_nic_down_ends_the_job():
    with pytest.raises(InputError) as e:
        simulate(scenario([{"kind": "nic_down", "target": "s0/nic0"}]))
    assert "the job fails" in str(e.value) and "s0/nic0" in str(e.value) and "timeout" in str(e.value)


def test_a_dual_port_nic_keeps_going_on_its_other_port():
    data = demo_scenario().model_dump(mode="json", exclude_unset=True)
    data["cluster"]["nic_ports"] = 2
    fabric, _ = build_fabric(load_scenario(data))
    ports = [li for li in fabric.out_links["s0/nic0"] if fabric.is_switch(fabric.links[li].dst)]
    assert len(ports) == 2
    a = fabric.links[ports[0]]
    data["faults"] = [{"kind": "link_down", "target": f"{a.src}--{a.dst}"}]
    run = simulate(load_scenario(data))
    assert run.timeline.link_bytes[ports[0]] == 0
    assert run.timeline.link_bytes[ports[1]] > 0
    assert run.results.complete


def test_a_dual_port_nic_in_a_lag_runs_at_half_speed_on_one_port():
    """A dual-port NIC (2 x 200 Gb/s, active-active) sends 16 QPs to a peer: the LAG hashes them over both ports; with
    one port's cable down every QP is on the other and the NIC moves the same bytes in twice the time. (PCIe widened
    so that the ports, not the GPU's PCIe link, are what limits the NIC.)"""
    from aifabric.engines.executor import run_reference
    from aifabric.engines.taskgraph import TaskGraph
    from aifabric.faults import apply_to_fabric, resolve_faults

    data = demo_scenario().model_dump(mode="json", exclude_unset=True)
    data["cluster"].update(nic_ports=2, nic_speed_gbps=200, pcie_bandwidth_gBps=128)

    def nic_run(faults):
        s = load_scenario({**data, "faults": faults})
        fabric, router = build_fabric(s)
        if faults:
            apply_to_fabric(fabric, router, resolve_faults(fabric, s.faults))
        g = TaskGraph()
        for channel in range(16):  # rank 0 (s0/nic0) to rank 8 (s1/nic0), one QP per channel
            r = router.route(0, 8, channel)
            g.add_transfer(0, 8, f"qp{channel}", [], 1e9, r.links, r.latency_s, "dp")
        ports = [li for li in fabric.out_links["s0/nic0"] if fabric.is_switch(fabric.links[li].dst)]
        tl = run_reference(g, fabric)
        return tl.makespan_s, [float(tl.link_bytes[li]) for li in ports], fabric, ports

    both_s, both_bytes, fabric, ports = nic_run([])
    assert len(ports) == 2 and min(both_bytes) > 0  # the LAG spreads the QPs over both ports
    a = fabric.links[ports[0]]
    one_s, one_bytes, _, _ = nic_run([{"kind": "link_down", "target": f"{a.src}--{a.dst}"}])
    assert one_bytes[0] == 0 and one_bytes[1] == pytest.approx(16e9)
    rate = fabric.links[ports[1]].rate_bytes_per_s
    assert both_s == pytest.approx(16e9 / (2 * rate), rel=1e-3)  # both ports: the NIC's full speed
    assert one_s == pytest.approx(16e9 / rate, rel=1e-3)  # one port: half of it
    assert one_s / both_s == pytest.approx(2.0, rel=1e-3)


def test_a_degraded_cable_runs_at_its_fraction():
    run = simulate(scenario([{"kind": "link_degraded", "target": "seg0/rail0--spine0", "factor": 0.25}], **SEGMENTS))
    healthy, _ = build_fabric(scenario([], **SEGMENTS))
    for li, link in enumerate(run.fabric.links):
        ratio = link.rate_bytes_per_s / healthy.links[li].rate_bytes_per_s
        assert ratio == pytest.approx(0.25 if {link.src, link.dst} == {"seg0/rail0", "spine0"} else 1.0)
    assert run.results.iteration_time_s >= run.faults["fault_free_iteration_time_s"] * (1 - 1e-9)


def test_validate_checks_the_targets_on_the_fabric(tmp_path, capsys):
    import yaml

    from aifabric.cli import run_app
    from aifabric.cli.app import app

    data = demo_scenario().model_dump(mode="json", exclude_unset=True)
    data["faults"] = [{"kind": "switch_down", "target": "spine9"}]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    assert run_app(app, ["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "faults[0].target" in err and "spine" in err
    data["faults"] = [{"kind": "switch_down", "target": "spine1"}]
    path.write_text(yaml.safe_dump(data))
    assert run_app(app, ["validate", str(path)]) == 0
    capsys.readouterr()
    data["engine"] = "hybrid"  # simulate refuses faults on the hybrid engine: validate says so first
    path.write_text(yaml.safe_dump(data))
    assert run_app(app, ["validate", str(path)]) == 2
    assert "faults" in capsys.readouterr().err


def test_the_hybrid_engine_refuses_faults_naming_the_engines_that_run_them():
    with pytest.raises(InputError) as e:
        simulate(scenario([{"kind": "link_down", "target": "seg0/rail0--spine0"}], **SEGMENTS), engine="hybrid")
    assert "faults" in str(e.value) and "flow, analytic and packet" in str(e.value)
