"""The compiled event loop (engines/fastloop.py) gives the reference loop's timeline, bit for bit."""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aifabric.engines import executor, fastloop
from aifabric.engines.executor import Interrupted
from aifabric.engines.linkload import LinkLoad
from aifabric.engines.taskgraph import COMPUTE, TRANSFER, TaskGraph

pytestmark = pytest.mark.skipif(not fastloop.AVAILABLE, reason="numba not installed")


def _fabric(capacities) -> SimpleNamespace:
    """What the loops use of a Fabric: each link's achievable rate."""
    return SimpleNamespace(links=[SimpleNamespace(rate_bytes_per_s=float(c)) for c in capacities])


@contextmanager
def _small_linkload(max_entries: int, max_bins: int):
    """Every LinkLoad created inside starts with these limits (so small runs exercise the time grid)."""
    saved = LinkLoad.__init__.__defaults__
    LinkLoad.__init__.__defaults__ = (max_entries, max_bins)
    try:
        yield
    finally:
        LinkLoad.__init__.__defaults__ = saved


def assert_same_linkload(a: LinkLoad, b: LinkLoad) -> None:
    """The same recorded state: exact segments, or the time grid with each bin's arrays as LinkLoad keeps them."""
    assert (a.bin_s, a._t_last, a._entries, a._start, a._end) == (b.bin_s, b._t_last, b._entries, b._start, b._end)
    assert len(a._links) == len(b._links)
    for x, y, u, v in zip(a._links, b._links, a._rates, b._rates):
        np.testing.assert_array_equal(x, y)
        assert x.dtype == y.dtype == np.int32
        np.testing.assert_array_equal(u, v)
    assert list(a._bins) == list(b._bins)
    for k in a._bins:
        (la, va), (lb, vb) = a._bins[k], b._bins[k]
        assert len(la) == len(lb), k
        for x, y in zip(la, lb):
            np.testing.assert_array_equal(x, y)
        for x, y in zip(va, vb):
            np.testing.assert_array_equal(x, y)
    assert a._dirty == b._dirty
    for x, y in zip(a.segments(), b.segments()):
        assert len(x) == len(y)
        for u, v in zip(x, y):
            np.testing.assert_array_equal(u, v)


def assert_same_timeline(a, b) -> None:
    for field in ("start_s", "end_s", "link_bytes", "link_peak_bytes_per_s"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert a.makespan_s == b.makespan_s
    assert a.rate_recomputations == b.rate_recomputations
    assert_same_linkload(a.link_load, b.link_load)


@st.composite
def task_graphs(draw):
    """Random DAGs of compute and transfer tasks over a few links: shared links, equal and unequal capacities
    (ties), zero-size and routeless transfers, sprayed transfers with weights, zero durations and latencies, and
    dependencies released when a transfer's bytes have left (drain_deps, on any kind of task: those on compute
    tasks and empty transfers count as ordinary ones)."""
    n_links = draw(st.integers(1, 6))
    caps = draw(
        st.lists(
            st.sampled_from([1.0, 2.0, 3.0, 1e9, 1.5e9]) | st.floats(0.5, 1e10), min_size=n_links, max_size=n_links
        )
    )
    n = draw(st.integers(1, 40))
    g = TaskGraph()
    times = st.sampled_from([0.0, 1e-6, 1.0, 2.0]) | st.floats(0, 5)
    for t in range(n):
        deps = sorted(draw(st.sets(st.integers(0, t - 1), max_size=3))) if t else []
        early = tuple(d for d in deps if draw(st.integers(0, 2)) == 0)
        if early:
            g.drain_deps[t] = early
        if draw(st.booleans()):
            g.add(COMPUTE, 0, -1, f"c{t}", deps, duration_s=draw(times))
        else:
            route = tuple(draw(st.lists(st.integers(0, n_links - 1), max_size=n_links, unique=True)))
            size = draw(st.sampled_from([0.0, 1.0, 4.0, 1e9]) | st.floats(0.1, 1e10))
            g.add(TRANSFER, 0, 1, f"x{t}", deps, size_bytes=size, route=route, latency_s=draw(times))
            if route and draw(st.integers(0, 3)) == 0:
                g.route_weight[t] = tuple(draw(st.sampled_from([0.25, 0.5, 1.0]) | st.floats(0.1, 1.0)) for _ in route)
    return g, caps


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(task_graphs(), st.sampled_from(["flow", "analytic"]), st.sampled_from([(8_000_000, 2048), (3, 4), (12, 2)]))
def test_compiled_loop_equals_the_reference(case, engine, limits):
    graph, caps = case
    with _small_linkload(*limits):
        ref = executor.run_reference(graph, _fabric(caps), engine)
        fast = fastloop.run(graph, _fabric(caps), engine)
    assert_same_timeline(ref, fast)
    # what comes after the loop (folded collectives spread over the grid) finds the same state
    items = [(0.0, ref.makespan_s + 1.0, np.array([0], dtype=np.int32), np.array([5.0]))]
    ref.link_load.add_spread(items)
    fast.link_load.add_spread(items)
    assert_same_linkload(ref.link_load, fast.link_load)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(task_graphs())
def test_whole_water_filling_every_time_gives_the_same(case):
    graph, caps = case
    ref = executor.run_reference(graph, _fabric(caps), "flow")
    saved = fastloop.INCREMENTAL
    fastloop.INCREMENTAL = False
    try:
        fast = fastloop.run(graph, _fabric(caps), "flow")
    finally:
        fastloop.INCREMENTAL = saved
    assert_same_timeline(ref, fast)


def test_components_whose_levels_nearly_tie_are_computed_together():
    """The reference saturates every link within 1e-12 of the round's level: two separate links whose fair
    shares differ by less than that are coupled. The incremental computation must notice and fall back."""
    g = TaskGraph()
    g.add(TRANSFER, 0, 1, "a", [], size_bytes=10.0, route=(0,))
    c = g.add(COMPUTE, 0, -1, "wait", [], duration_s=1.0)
    g.add(TRANSFER, 0, 1, "b", [c], size_bytes=10.0, route=(1,))
    fabric = _fabric([1.0, 1.0 + 1e-13])
    ref = executor.run_reference(g, fabric, "flow")
    fast = fastloop.run(g, fabric, "flow")
    assert_same_timeline(ref, fast)
    assert fastloop.stats["fallbacks"] >= 1
    # b went at a's level while a ran (1.0, not its own link's 1 + 1e-13), and at its own after
    assert fastloop.stats["full"] >= 2
    assert 10.99 < ref.end_s[2] < 11.0


def test_finish_tolerances_agree():
    assert fastloop.FINISH_RTOL == executor.FINISH_RTOL


@pytest.mark.parametrize("name", ["demo_scenario", "ch14_scenario"])
def test_demo_scenarios_give_the_same_results_both_ways(name, monkeypatch):
    import aifabric.scenario as scenarios
    from aifabric.simulate import simulate

    s = getattr(scenarios, name)()
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
    np.testing.assert_array_equal(compiled.timeline.link_bytes, pure.timeline.link_bytes)
    assert_same_timeline(pure.timeline, compiled.timeline)


def _chain_graph(n: int = 400) -> tuple[TaskGraph, SimpleNamespace]:
    """Rings of transfers sharing two links, with compute between: many loop turns."""
    g = TaskGraph()
    prev: list[int] = []
    for step in range(n):
        a = g.add(TRANSFER, 0, 1, f"a{step}", prev, size_bytes=1e6 * (1 + step % 3), route=(0, 1), latency_s=1e-6)
        b = g.add(TRANSFER, 1, 0, f"b{step}", prev, size_bytes=2e6, route=(1,), latency_s=2e-6)
        c = g.add(COMPUTE, 0, -1, f"c{step}", [a], duration_s=1e-4)
        prev = [b, c]
    return g, _fabric([1e9, 2e9])


def test_ctrl_c_mid_run_gives_the_timeline_so_far(monkeypatch):
    graph, fabric = _chain_graph()
    turns = 57

    def stop_reference(done, n, count=[0]):  # noqa: B006 - a counter kept across calls; the reference reports progress once per turn of its loop
        count[0] += 1
        if count[0] == turns:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted) as ref:
        executor.run_reference(graph, fabric, "flow", stop_reference)

    def stop(done, n):
        raise KeyboardInterrupt

    monkeypatch.setattr(fastloop, "FIRST_CHUNK", turns)
    monkeypatch.setattr(fastloop, "_after_chunk", stop)
    seen = []
    with pytest.raises(Interrupted) as fast:
        fastloop.run(graph, fabric, "flow", lambda done, n: seen.append((done, n)))
    partial = fast.value.timeline
    assert seen and seen[-1][1] == len(graph)
    assert 0 < np.isfinite(partial.end_s).sum() < len(graph)
    assert_same_timeline(ref.value.timeline, partial)


def test_a_real_sigint_during_a_chunk_lands_after_it(monkeypatch):
    """SIGINT sent while compiled code runs (numba does not see it) is noted, the chunk completes, and the run
    stops with the timeline of the turns done: the same as the reference's after as many turns."""
    import os
    import signal

    graph, fabric = _chain_graph()
    first = 40
    real_chunk = fastloop.run_chunk
    calls = []

    def chunk_with_signal(mode, incremental, budget, G, S, R):
        calls.append(budget)
        if len(calls) == 2:  # as if Ctrl-C came while this chunk runs
            os.kill(os.getpid(), signal.SIGINT)
        return real_chunk(mode, incremental, 25 if len(calls) == 2 else budget, G, S, R)

    monkeypatch.setattr(fastloop, "FIRST_CHUNK", first)
    monkeypatch.setattr(fastloop, "run_chunk", chunk_with_signal)
    with pytest.raises(Interrupted) as fast:
        fastloop.run(graph, fabric, "flow")
    assert len(calls) == 2  # no third chunk: the signal stopped the run right after the second

    def stop_reference(done, n, count=[0]):  # noqa: B006 - a counter kept across calls; the reference reports progress once per turn of its loop
        count[0] += 1
        if count[0] == first + 25:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted) as ref:
        executor.run_reference(graph, fabric, "flow", stop_reference)
    assert_same_timeline(ref.value.timeline, fast.value.timeline)


def test_progress_is_reported_between_chunks(monkeypatch):
    graph, fabric = _chain_graph(200)
    monkeypatch.setattr(fastloop, "FIRST_CHUNK", 10)
    monkeypatch.setattr(fastloop, "CHUNK_S", 0.0)  # every later chunk as short as allowed (100 turns)
    seen = []
    tl = fastloop.run(graph, fabric, "flow", lambda done, n: seen.append(done))
    assert len(seen) >= 3 and seen == sorted(seen) and seen[-1] == len(graph)
    assert_same_timeline(executor.run_reference(graph, fabric, "flow"), tl)


def test_executor_dispatch(monkeypatch):
    graph, fabric = _chain_graph(50)
    used = []
    real = fastloop.run
    monkeypatch.setattr(fastloop, "run", lambda *a, **k: used.append(1) or real(*a, **k))
    monkeypatch.setattr(executor, "COMPILED_MIN_TASKS", 0)
    executor.run(graph, fabric)
    assert used == [1]
    monkeypatch.setenv("AIFABRIC_PURE_PYTHON", "1")  # forced onto the reference
    executor.run(graph, fabric)
    assert used == [1]
    monkeypatch.delenv("AIFABRIC_PURE_PYTHON")
    monkeypatch.setattr(executor, "COMPILED_MIN_TASKS", 10**9)  # small graphs stay on the reference
    executor.run(graph, fabric)
    monkeypatch.setattr(executor, "COMPILED_MIN_TASKS", 0)
    monkeypatch.setattr(fastloop, "AVAILABLE", False)  # numba missing
    executor.run(graph, fabric)
    assert used == [1]


def test_a_cycle_is_reported():
    g = TaskGraph()
    g.add(COMPUTE, 0, -1, "a", [1], duration_s=1.0)
    g.add(COMPUTE, 0, -1, "b", [0], duration_s=1.0)
    with pytest.raises(RuntimeError, match="cycle"):
        fastloop.run(g, _fabric([1.0]))


# -- the link-load recorder on its own: random record sequences, against LinkLoad.set_sparse ---------------
@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0.0, 1e-9, 1e-4]) | st.floats(0, 0.3),
            st.dictionaries(st.integers(0, 99), st.sampled_from([0.0, 1.0, 2.5]) | st.floats(0, 1e9), max_size=12),
        ),
        min_size=1,
        max_size=80,
    ),
    st.sampled_from([(8_000_000, 2048), (0, 4), (10, 3), (40, 16), (25, 1)]),
)
def test_recorder_equals_linkload(records, limits):
    n_links = 100
    ref = LinkLoad(*limits)
    R = fastloop.new_recorder(n_links, *limits)
    bits = np.zeros((n_links + 63) // 64, dtype=np.uint64)
    load = np.zeros(n_links)
    now = 0.0
    for dt, loads in records:
        now += dt
        R = fastloop.rec_close(now, bits, int(np.count_nonzero(load)), load, R)
        links = np.array(sorted(loads), dtype=np.int64)
        rates = np.array([loads[k] for k in sorted(loads)])
        ref.set_sparse(now, links, rates)
        bits[:] = 0
        load[:] = 0.0
        for k, v in loads.items():
            bits[k >> 6] |= np.uint64(1) << np.uint64(k & 63)
            load[k] = v
        fastloop.rec_open(now, R)
    now += 0.01
    ref.close(now)
    R = fastloop.rec_close(now, bits, len(records[-1][1]), load, R)
    mine = LinkLoad(*limits)
    fastloop.install(mine, R)
    assert_same_linkload(ref, mine)
