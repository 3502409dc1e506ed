"""The task graph's dependency bookkeeping, shared by the engines' event loops (engines/executor.py and
engines/packet.py each built it themselves before `TaskGraph.dependency_counts`)."""

from __future__ import annotations

from aifabric.engines import lower
from aifabric.engines.taskgraph import COMPUTE, TaskGraph
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
