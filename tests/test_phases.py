"""simulate() tells a caller when each stage begins (the CLI prints them for large clusters)."""

from __future__ import annotations

from aifabric.scenario import ch14_scenario
from aifabric.simulate import simulate


def test_stages_are_announced_in_order():
    seen = []
    simulate(ch14_scenario(), phase=seen.append)
    assert seen == ["fabric", "workload", "task graph", "event loop", "results"]


def test_a_given_workload_skips_its_build():
    s = ch14_scenario()
    first = simulate(s)
    seen = []
    again = simulate(s, workload=first.workload, phase=seen.append)
    assert "workload" not in seen and seen[0] == "fabric"
    assert again.results.iteration_time_s == first.results.iteration_time_s
