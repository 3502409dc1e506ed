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
