"""Flowlet switching in the flow engine (engines/flowlet.py): a connection idle for longer than the gap starts a new
flowlet on the least-loaded equal-cost uplink; within the gap it keeps its path, as ECMP would."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aifabric.engines import executor, fastloop
from aifabric.engines.flowlet import Flowlets, flowlet_gap_s, flowlet_paths
from aifabric.engines.taskgraph import COMPUTE, TRANSFER, TaskGraph
from aifabric.scenario import load_scenario
from aifabric.simulate import build_fabric, simulate

SIZE_BYTES = 10e6
IDLE_S = 1e-3  # between the bursts: longer than the small gaps, shorter than the huge one
STAGGER_S = 1e-6  # the second burst's second transfer starts this much after the first


def _scenario(load_balancing: str = "flowlet", **fabric) -> dict:
    """4 servers x 2 GPUs, one leaf per server (both rails), 2 spines: every transfer between servers crosses a
    leaf uplink, one of two equal-cost paths."""
    return {
        "name": "flowlet-gap",
        "seed": 1,
        "cluster": {"gpu": "H100", "servers": 4, "gpus_per_server": 2, "nic_speed_gbps": 400},
        "fabric": {
            "topology": "rail-optimized",
            "rails_per_switch": 2,
            "servers_per_segment": 1,
            "leaf_oversubscription": 1,
            "link_speed_gbps": 400,
            "switch_radix": 64,
            "link_latency_ns": 100,
            "switch_latency_ns": 600,
            "load_balancing": load_balancing,
            **fabric,
        },
        "workload": {
            "kind": "data-parallel",
            "model": {"kind": "feed-forward", "layer_widths": [256, 512, 256]},
            "global_batch_size": 64,
            "precision": "bf16",
            "iterations": 1,
        },
        "engine": "flow",
    }


@pytest.fixture(scope="module")
def fabric_router():
    return build_fabric(load_scenario(_scenario()))


def _bursts(router) -> TaskGraph:
    """Rank 0 -> 2 (A) sends alone; after IDLE_S, rank 1 -> 6 (C) starts, and A sends again STAGGER_S later. A and C
    leave the same leaf from different NICs towards different servers: they share a link only if they take the
    same uplink."""
    g = TaskGraph()

    def send(src, dst, deps, name):
        r = router.route(src, dst)
        return g.add(TRANSFER, src, dst, name, deps, size_bytes=SIZE_BYTES, route=r.links, latency_s=r.latency_s)

    a1 = send(0, 2, [], "A1")
    idle_c = g.add(COMPUTE, 1, -1, "idle C", [a1], duration_s=IDLE_S)
    idle_a = g.add(COMPUTE, 0, -1, "idle A", [a1], duration_s=IDLE_S + STAGGER_S)
    send(1, 6, [idle_c], "C")
    send(0, 2, [idle_a], "A2")
    return g


def _run(graph, fabric, router, gap_s, loop=executor.run_reference):
    g = copy.deepcopy(graph)
    tl = loop(g, fabric, "flow", flowlets=flowlet_paths(g, fabric, router, gap_s))
    return g, tl


def _uplink(fabric, route) -> int:
    (li,) = [li for li in route if fabric.links[li].tier == "spine" and fabric.links[li].src.startswith("seg0/")]
    return li


def _rates(fabric, route) -> tuple[float, float]:
    """(the route's bottleneck alone, an uplink's rate)"""
    return min(fabric.links[li].rate_bytes_per_s for li in route), fabric.links[_uplink(fabric, route)].rate_bytes_per_s


def _drained_s(graph, tl, t) -> float:
    return float(tl.end_s[t] - graph.latency_s[t] - tl.start_s[t])


def test_a_small_gap_rebalances_each_burst_a_huge_gap_pins_it(fabric_router):
    fabric, router = fabric_router
    graph = _bursts(router)
    a1, c, a2 = 0, 3, 4
    alone_bytes_per_s, uplink_bytes_per_s = _rates(fabric, graph.route[a1])  # PCIe 48 GB/s, the uplink 49.0 GB/s
    assert alone_bytes_per_s < uplink_bytes_per_s < 2 * alone_bytes_per_s  # two on one uplink: it is their bottleneck
    alone_s = SIZE_BYTES / alone_bytes_per_s
    small, tl_small = _run(graph, fabric, router, gap_s=10e-6)  # < IDLE_S: the second burst is a new flowlet
    huge, tl_huge = _run(graph, fabric, router, gap_s=1.0)  # > IDLE_S: the connection's flowlet never ends
    # the first flowlets: A alone takes the lower uplink (a tie); C, alone when it starts, takes it too
    assert _uplink(fabric, small.route[a1]) == _uplink(fabric, huge.route[a1]) == _uplink(fabric, small.route[c])
    # a small gap: A's new flowlet sees C on that uplink and takes the other; both go at their full rate
    assert _uplink(fabric, small.route[a2]) != _uplink(fabric, small.route[c])
    for t in (c, a2):
        assert _drained_s(small, tl_small, t) == pytest.approx(alone_s, rel=1e-9)
    assert tl_small.flowlets == {"gap_s": 10e-6, "connections": 2, "flowlets": 3, "switches": 1}
    # a huge gap: A stays on its first uplink (as ECMP would keep it) and shares it with C, half its rate each
    assert huge.route[a2] == huge.route[a1]
    assert _uplink(fabric, huge.route[a2]) == _uplink(fabric, huge.route[c])
    c_s = STAGGER_S + 2 * (SIZE_BYTES - alone_bytes_per_s * STAGGER_S) / uplink_bytes_per_s  # alone, then shared
    assert _drained_s(huge, tl_huge, c) == pytest.approx(c_s, rel=1e-9)
    assert tl_huge.end_s[a2] - tl_small.end_s[a2] > 0.9 * alone_s  # the iteration's last burst: nearly twice as long
    assert tl_huge.flowlets == {"gap_s": 1.0, "connections": 2, "flowlets": 2, "switches": 0}


def test_back_to_back_sends_keep_their_path(fabric_router):
    """A connection whose next transfer starts right after its last one (one route latency later, within the gap)
    keeps its path where a new flowlet would move; with a gap below that latency it moves."""
    fabric, router = fabric_router
    g = TaskGraph()

    def send(src, dst, size, deps, name):
        r = router.route(src, dst)
        return g.add(TRANSFER, src, dst, name, deps, size_bytes=size, route=r.links, latency_s=r.latency_s)

    a1 = send(0, 2, SIZE_BYTES, [], "A1")  # first: the lower uplink (a tie)
    send(1, 4, SIZE_BYTES / 4, [], "B")  # the other uplink; short, gone before A1 ends
    c = send(1, 6, 8 * SIZE_BYTES, [], "C")  # a tie again (one flow each): the lower uplink, beside A1; long
    a2 = send(0, 2, SIZE_BYTES, [a1], "A2")  # one route latency after A1's last byte
    latency_s = g.latency_s[a1]
    assert 1e-6 < latency_s < 50e-6
    alone_bytes_per_s, uplink_bytes_per_s = _rates(fabric, g.route[a1])
    kept, tl_kept = _run(g, fabric, router, gap_s=50e-6)  # > the latency: A2 is A1's flowlet still
    assert kept.route[a2] == kept.route[a1] and _uplink(fabric, kept.route[a2]) == _uplink(fabric, kept.route[c])
    assert tl_kept.flowlets["flowlets"] == 3
    assert _drained_s(kept, tl_kept, a2) == pytest.approx(2 * SIZE_BYTES / uplink_bytes_per_s, rel=1e-9)  # beside C
    moved, tl_moved = _run(g, fabric, router, gap_s=0.1e-6)  # < the latency: A2 a new flowlet, away from C
    assert _uplink(fabric, moved.route[a2]) != _uplink(fabric, moved.route[c])
    assert tl_moved.flowlets == {"gap_s": 0.1e-6, "connections": 3, "flowlets": 4, "switches": 1}
    assert _drained_s(moved, tl_moved, a2) == pytest.approx(SIZE_BYTES / alone_bytes_per_s, rel=1e-9)


def test_runs_are_deterministic_and_the_loops_agree(fabric_router):
    fabric, router = fabric_router
    graph = _bursts(router)
    for gap_s in (10e-6, 1.0):
        g1, t1 = _run(graph, fabric, router, gap_s)
        g2, t2 = _run(graph, fabric, router, gap_s)
        assert g1.route == g2.route and t1.flowlets == t2.flowlets
        np.testing.assert_array_equal(t1.end_s, t2.end_s)
        if fastloop.AVAILABLE:
            g3, t3 = _run(graph, fabric, router, gap_s, loop=fastloop.run)
            assert g3.route == g1.route and t3.flowlets == t1.flowlets
            np.testing.assert_array_equal(t3.end_s, t1.end_s)
            np.testing.assert_array_equal(t3.link_bytes, t1.link_bytes)


@st.composite
def flowlet_graphs(draw):
    """Random DAGs over a few links whose transfers belong to connections with 1-3 candidate paths of the same
    length (shared links, ties, capacities equal and not), with gaps from none to longer than the run."""
    n_links = draw(st.integers(2, 6))
    caps = draw(st.lists(st.sampled_from([1.0, 2.0, 1e9]) | st.floats(0.5, 1e10), min_size=n_links, max_size=n_links))
    n_conn = draw(st.integers(1, 4))
    conns = []
    for _ in range(n_conn):
        length = draw(st.integers(1, min(3, n_links)))
        paths = draw(
            st.lists(
                st.lists(st.integers(0, n_links - 1), min_size=length, max_size=length, unique=True).map(tuple),
                min_size=1,
                max_size=3,
                unique=True,
            )
        )
        conns.append(paths)
    n = draw(st.integers(1, 30))
    g = TaskGraph()
    conn = []
    times = st.sampled_from([0.0, 1e-6, 1.0, 2.0]) | st.floats(0, 5)
    for t in range(n):
        deps = sorted(draw(st.sets(st.integers(0, t - 1), max_size=3))) if t else []
        if draw(st.booleans()):
            g.add(COMPUTE, 0, -1, f"c{t}", deps, duration_s=draw(times))
            conn.append(-1)
        else:
            c = draw(st.integers(-1, n_conn - 1))
            route = conns[c][0] if c >= 0 else tuple(draw(st.lists(st.integers(0, n_links - 1), unique=True)))
            size = draw(st.sampled_from([0.0, 1.0, 4.0, 1e9]) | st.floats(0.1, 1e10))
            g.add(TRANSFER, 0, 1, f"x{t}", deps, size_bytes=size, route=route, latency_s=draw(times))
            conn.append(c)
    flat = [li for paths in conns for p in paths for li in p]
    ptr = np.cumsum([0] + [len(paths) * len(paths[0]) for paths in conns])[:-1]
    fl = Flowlets(
        draw(st.sampled_from([0.0, 1e-6, 0.5, 1e9])),
        np.array(conn, dtype=np.int64),
        np.array(ptr, dtype=np.int64),
        np.array([len(paths) for paths in conns], dtype=np.int64),
        np.array(flat, dtype=np.int64),
        np.array([len(paths[0]) for paths in conns], dtype=np.int64),
    )
    return g, caps, fl


def _links(caps):
    return SimpleNamespace(links=[SimpleNamespace(rate_bytes_per_s=float(c)) for c in caps])


@pytest.mark.skipif(not fastloop.AVAILABLE, reason="numba not installed")
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flowlet_graphs(), st.sampled_from(["flow", "analytic"]))
def test_compiled_loop_switches_flowlets_as_the_reference(case, engine):
    graph, caps, fl = case
    g_ref, g_fast = copy.deepcopy(graph), copy.deepcopy(graph)
    ref = executor.run_reference(g_ref, _links(caps), engine, flowlets=fl)
    fast = fastloop.run(g_fast, _links(caps), engine, flowlets=fl)
    for field in ("start_s", "end_s", "link_bytes", "link_peak_bytes_per_s"):
        np.testing.assert_array_equal(getattr(ref, field), getattr(fast, field), err_msg=field)
    assert ref.makespan_s == fast.makespan_s and ref.rate_recomputations == fast.rate_recomputations
    assert ref.flowlets == fast.flowlets
    assert g_ref.route == g_fast.route


def test_which_settings_switch_flowlets():
    spec = load_scenario(_scenario("flowlet", flowlet_gap_us=20)).fabric
    assert flowlet_gap_s(spec) == pytest.approx(20e-6)
    dlb = load_scenario(_scenario("ecmp", flowlet_gap_us=20, qos={"dlb": {"mode": "flowlet", "flowlet_aging_us": 30}}))
    assert flowlet_gap_s(dlb.fabric) == pytest.approx(30e-6)  # DLB's aging over the fabric's gap
    for lb in ("ecmp", "spray", "adaptive"):
        assert flowlet_gap_s(load_scenario(_scenario(lb)).fabric) is None  # hashed, or balanced every packet
    per_packet = load_scenario(_scenario("ecmp", qos={"dlb": {"mode": "per-packet"}}))
    assert flowlet_gap_s(per_packet.fabric) is None


def test_simulate_runs_flowlets_on_the_flow_engine_only():
    data = _scenario("flowlet", flowlet_gap_us=20)
    run = simulate(load_scenario(data), engine="flow")
    assert run.timeline.flowlets is not None and run.timeline.flowlets["connections"] > 0
    assert not run.graph.route_weight  # each transfer on the one path its flowlet took
    spine = {li for li, link in enumerate(run.fabric.links) if link.tier == "spine"}
    crossing = [r for r in run.graph.route if spine & set(r)]
    assert crossing and all(len(spine & set(r)) == 2 for r in crossing)  # one uplink, one downlink
    from aifabric.report.summary import build_summary

    assert build_summary(run)["flowlets"] == run.timeline.flowlets  # what summary.json tells the user
    import io

    from rich.console import Console

    from aifabric.report.terminal import print_summary

    out = io.StringIO()
    print_summary(run, Console(file=out, width=250))
    fl = run.timeline.flowlets
    assert f"{fl['flowlets']:,} on {fl['connections']:,} connections (gap 20" in out.getvalue()  # and the terminal
    analytic = simulate(load_scenario(data), engine="analytic")  # no contention: the even spread, as before
    assert analytic.timeline.flowlets is None and analytic.graph.route_weight
    spray = simulate(load_scenario(_scenario("spray")), engine="flow")
    assert spray.timeline.flowlets is None and spray.graph.route_weight
    assert build_summary(spray)["flowlets"] is None
    out = io.StringIO()
    print_summary(spray, Console(file=out, width=250))
    assert "flowlets" not in out.getvalue()


def test_flowlets_with_a_link_down_during_the_run():
    """A link down mid-run (the reference loop's fault events): every byte is delivered once; a new flowlet's
    choice never takes the down uplink (no capacity: never the least loaded), nothing crosses it while down."""
    from aifabric.scenario import demo_scenario

    data = demo_scenario().model_dump(mode="json", exclude_unset=True)
    data["fabric"].update(servers_per_segment=2, load_balancing="flowlet", flowlet_gap_us=1)
    at_s = 0.01
    data["faults"] = [{"kind": "link_down", "target": "seg0/rail0--spine2", "at_s": at_s, "nccl_ib_timeout": 14}]
    run = simulate(load_scenario(data))
    tl, g = run.timeline, run.graph
    assert tl.flowlets is not None and tl.flowlets["switches"] > 0
    transfer = np.asarray(g.kind) == TRANSFER
    np.testing.assert_allclose(tl.delivered_bytes[transfer], np.asarray(g.size_bytes)[transfer], rtol=1e-9, atol=1e-3)
    down = {li for li, link in enumerate(run.fabric.links) if {link.src, link.dst} == {"seg0/rail0", "spine2"}}
    starts, _, links, rates = tl.link_load.segments()
    for a, ls, rs in zip(starts, links, rates, strict=True):
        if a >= at_s:
            assert not (rs[np.isin(ls, list(down))] > 0).any()
    assert run.results.iteration_time_s >= run.faults["fault_free_iteration_time_s"]


def test_compare_notes_the_gap_on_the_analytic_engine_alone():
    from aifabric.compare import Variant, inert_notes

    s = load_scenario(_scenario("flowlet"))
    vs = [Variant(f"g{gap}", s, (("fabric.flowlet_gap_us", gap),)) for gap in (1, 1000)]
    spine = [{"spine": 1.0}, {"spine": 1.0}]  # traffic crossed the spines
    assert inert_notes(vs, spine, engine="flow") == inert_notes(vs, spine, engine="packet") == []
    (note,) = inert_notes(vs, spine, engine="analytic")
    assert note.startswith("fabric.flowlet_gap_us acts on the flow and packet engines")


@pytest.mark.skipif(not fastloop.AVAILABLE, reason="numba not installed")
@pytest.mark.parametrize("gap_us", [0.01, 50.0, 1e6])
def test_the_fabric_scenario_gives_the_same_flowlets_on_both_loops(gap_us, monkeypatch):
    """A lowered iteration (rings merged per edge, 8 spines): the compiled loop chooses every flowlet's path as the
    reference does."""
    import yaml

    from aifabric.scenario.load import embedded_scenario_text

    data = yaml.safe_load(embedded_scenario_text("fabric"))
    data["fabric"].update(load_balancing="flowlet", flowlet_gap_us=gap_us)
    s = load_scenario(data)
    monkeypatch.setenv("AIFABRIC_PURE_PYTHON", "1")
    pure = simulate(s)
    monkeypatch.delenv("AIFABRIC_PURE_PYTHON")
    monkeypatch.setattr(executor, "COMPILED_MIN_TASKS", 0)
    calls = []
    real = fastloop.run
    monkeypatch.setattr(fastloop, "run", lambda *a, **k: calls.append(1) or real(*a, **k))
    compiled = simulate(s)
    assert calls, "the compiled loop did not run"
    assert compiled.results.iteration_time_s == pure.results.iteration_time_s
    assert compiled.graph.route == pure.graph.route and compiled.timeline.flowlets == pure.timeline.flowlets
    np.testing.assert_array_equal(compiled.timeline.end_s, pure.timeline.end_s)
    np.testing.assert_array_equal(compiled.timeline.link_bytes, pure.timeline.link_bytes)
    switches = pure.timeline.flowlets["switches"]
    assert switches == 0 if gap_us == 1e6 else switches > 0  # a gap longer than the iteration: never a new flowlet


def test_a_dual_port_nic_keeps_its_hashed_port():
    """The NIC's LAG hash picks its port (it runs no flowlets); the switches' choices begin at its switch."""
    from pathlib import Path

    import yaml

    data = yaml.safe_load((Path(__file__).parents[1] / "fabric" / "designs" / "fig13-9-multipod.yaml").read_text())
    data["workload"] = _scenario()["workload"]
    data["workload"].update(global_batch_size=1024, model={"kind": "feed-forward", "layer_widths": [2048, 4096, 2048]})
    data["fabric"]["load_balancing"] = "ecmp"
    ecmp = simulate(load_scenario(data))
    data["fabric"].update(load_balancing="flowlet", flowlet_gap_us=0.01)
    flowlet = simulate(load_scenario(data))
    f = flowlet.fabric
    assert flowlet.timeline.flowlets["switches"] > 0
    moved = 0
    for a, b in zip(ecmp.graph.route, flowlet.graph.route, strict=True):
        port_a = [li for li in a if f.nodes[f.links[li].src].kind == "nic"][:1]
        port_b = [li for li in b if f.nodes[f.links[li].src].kind == "nic"][:1]
        assert port_a == port_b and len(a) == len(b)
        moved += a != b
    assert moved > 0  # the switches' choices moved some
