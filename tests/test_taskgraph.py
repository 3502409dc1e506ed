"""The task graph's dependency bookkeeping, shared by the engines' event loops (engines/executor.py and
engines/packet.py each built it themselves before `TaskGraph.dependency_counts`)."""

from __future__ import annotations

import pytest

from aifabric.engines import lower
from aifabric.engines.taskgraph import COMPUTE, TRANSFER, Readiness, TaskGraph
from aifabric.scenario import ch14_scenario
from aifabric.simulate import build_fabric, build_workload


def _as_the_engines_built_it(graph: TaskGraph) -> tuple[list[int], list[list[int]]]:
    waiting = [len(d) for d in graph.deps]
    dependents: list[list[int]] = [[] for _ in range(len(graph))]
    for t, deps in enumerate(graph.deps):
        for d in deps:
            dependents[d].append(t)
    return waiting, dependents


def test_dependency_counts_on_a_small_graph():
    g = TaskGraph()
    a = g.add(COMPUTE, 0, -1, "a", [])
    b = g.add(COMPUTE, 0, -1, "b", [a])
    c = g.add(COMPUTE, 1, -1, "c", [a])
    g.add(COMPUTE, 1, -1, "d", [c, b])
    assert g.dependency_counts() == ([0, 1, 1, 2], [[1, 2], [3], [3], []])


def test_dependency_counts_as_the_engines_built_them_on_chapter_14():
    s = ch14_scenario()
    fabric, router = build_fabric(s)
    graph = lower(build_workload(s), fabric, router)
    assert len(graph) > 400 and any(len(d) > 1 for d in graph.deps)
    assert graph.dependency_counts() == _as_the_engines_built_it(graph)


def test_readiness_releases_each_task_once_all_it_waits_for_finished():
    """Readiness, what the reference loop and the packet engine count down: finishing the tasks in any order that
    respects the dependencies releases every task exactly once, when its last dependency finishes."""
    from aifabric.engines.taskgraph import Readiness

    s = ch14_scenario()
    fabric, router = build_fabric(s)
    graph = lower(build_workload(s), fabric, router)
    ready = Readiness(graph)
    frontier = ready.initial()
    assert frontier == [t for t in range(len(graph)) if not graph.deps[t]]
    finished: set[int] = set()
    released = list(frontier)
    while frontier:
        t = frontier.pop()  # last in, first out: another order than the task order
        assert all(d in finished for d in graph.deps[t])
        finished.add(t)
        for d in ready.finished(t):
            assert all(x in finished for x in graph.deps[d])
            released.append(d)
            frontier.append(d)
    assert sorted(released) == list(range(len(graph)))


def test_lowering_reports_its_progress_in_ops(monkeypatch):
    """lower(progress=...) reports the ops passed so far, growing, and ends at every op of every rank (the CLI's
    bar while a large plan lowers)."""
    import aifabric.engines.tasks as tasks

    s = ch14_scenario()
    fabric, router = build_fabric(s)
    workload = build_workload(s)
    program = workload.ranks
    heard: list[tuple[int, int]] = []
    monkeypatch.setattr(tasks, "PROGRESS_OPS", 3)
    graph = lower(workload, fabric, router, progress=lambda done, total: heard.append((done, total)))
    total = sum(len(program[r]) for r in range(len(program)))
    assert len(heard) > 3 and {n for _, n in heard} == {total}
    assert [d for d, _ in heard] == sorted(d for d, _ in heard) and heard[-1] == (total, total)
    assert graph.dependency_counts() == lower(workload, fabric, router).dependency_counts()  # the same graph


def _two_sends(drain: bool) -> TaskGraph:
    """A GPU's two sends on one 1 GB/s link, 1 MB each with 50 us of latency; the second waits for the first."""
    g = TaskGraph()
    g.add(TRANSFER, 0, 1, "send 1", [], size_bytes=1e6, route=(0,), latency_s=50e-6)
    g.add(TRANSFER, 0, 1, "send 2", [0], size_bytes=1e6, route=(0,), latency_s=50e-6)
    if drain:
        g.drain_deps[1] = (0,)
    return g


@pytest.mark.parametrize("loop", ["reference", "compiled"])
def test_a_send_released_at_drain_starts_when_the_last_ones_bytes_have_left(loop):
    from types import SimpleNamespace

    from aifabric.engines import bound, executor, fastloop

    if loop == "compiled" and not fastloop.AVAILABLE:
        pytest.skip("numba not installed")
    fabric = SimpleNamespace(links=[SimpleNamespace(rate_bytes_per_s=1e9)])
    run = executor.run_reference if loop == "reference" else fastloop.run
    waits = run(_two_sends(False), fabric, "flow")
    drains = run(_two_sends(True), fabric, "flow")
    # waiting for arrival: 1 ms of bytes + 50 us, twice; released at drain, the second send's latency is all
    # that the first one's adds
    assert waits.start_s[1] == pytest.approx(1.05e-3) and waits.makespan_s == pytest.approx(2.1e-3)
    assert drains.start_s[1] == pytest.approx(1.0e-3) and drains.makespan_s == pytest.approx(2.05e-3)
    assert bound.longest_path_s(_two_sends(True), fabric) == pytest.approx(2.05e-3)
    assert bound.longest_path_s(_two_sends(False), fabric) == pytest.approx(2.1e-3)


def test_drain_dependencies_on_what_has_no_bytes_wait_for_its_end():
    g = TaskGraph()
    g.add(COMPUTE, 0, -1, "c", [], duration_s=1.0)
    g.add(TRANSFER, 0, 1, "empty", [], size_bytes=0.0, latency_s=2.0)
    g.add(TRANSFER, 0, 1, "x", [0, 1], size_bytes=1.0, route=(0,))
    g.drain_deps[2] = (0, 1)
    assert g.drain_pairs() == []
    readiness = Readiness(g, drains=True)
    assert readiness.dependents[0] == [2] and readiness.dependents[1] == [2]
