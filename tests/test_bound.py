"""The iteration's lower bound a flow run's progress line counts towards (engines/bound.py): the analytic engine's
iteration without its event loop, never more than the flow engine's."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from test_fastloop import _fabric, task_graphs

from aifabric.engines import bound, executor
from aifabric.engines.taskgraph import COMPUTE, TRANSFER, TaskGraph


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(task_graphs())
def test_longest_path_is_the_analytic_iteration_and_bounds_the_flow_one(case):
    graph, caps = case
    fabric = _fabric(caps)
    lower = bound.longest_path_s(graph, fabric)
    analytic = executor.run_reference(graph, fabric, "analytic").makespan_s
    flow = executor.run_reference(graph, fabric, "flow").makespan_s
    assert math.isclose(lower, analytic, rel_tol=1e-9, abs_tol=1e-12)
    assert lower <= flow * (1 + 1e-9) + 1e-12


def test_the_compiled_loop_and_the_python_one_agree(monkeypatch):
    g = TaskGraph()
    a = g.add(COMPUTE, 0, -1, "a", [], duration_s=1.0)
    x = g.add(TRANSFER, 0, 1, "x", [a], size_bytes=4.0, route=(0, 1), latency_s=0.5)
    y = g.add(TRANSFER, 1, 0, "y", [a], size_bytes=2.0, route=(1,), latency_s=0.0)
    g.route_weight[y] = (0.5,)
    g.add(COMPUTE, 1, -1, "b", [x, y], duration_s=0.25)
    fabric = _fabric([2.0, 1.0])
    compiled = bound.longest_path_s(g, fabric)
    monkeypatch.setattr(bound, "compiled", lambda fn: None)
    assert bound.longest_path_s(g, fabric) == compiled == pytest.approx(1.0 + 4.0 + 0.5 + 0.25)


def test_dependencies_on_later_tasks_are_followed():
    """Tasks added after those that wait for them (the first iteration's connection setup) come first anyway."""
    g = TaskGraph()
    g.add(COMPUTE, 0, -1, "waits", [1], duration_s=1.0)
    g.add(COMPUTE, 0, -1, "first", [], duration_s=2.0)
    assert bound.longest_path_s(g, _fabric([1.0])) == 3.0


def test_the_engine_tells_a_callback_that_asks(monkeypatch):
    monkeypatch.setattr(executor, "BOUND_MIN_TASKS", 1)
    g = TaskGraph()
    g.add(COMPUTE, 0, -1, "a", [], duration_s=1.0)
    g.add(TRANSFER, 0, 1, "x", [0], size_bytes=3.0, route=(0,))
    heard = []

    def progress(done, total, t_s=None, iteration_bound_s=None):
        heard.append(iteration_bound_s)

    executor.run(g, _fabric([1.0]), "flow", progress)
    assert heard[0] == 4.0 and heard[-1] is None
    heard.clear()
    executor.run(g, _fabric([1.0]), "flow", lambda done, total: heard.append(done))
    assert heard and all(isinstance(h, int) for h in heard)
