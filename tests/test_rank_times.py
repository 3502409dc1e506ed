"""Per-rank compute, communication and exposed communication (results.summarize, vectorized) equal the
interval-by-interval definition on runs with every kind of task: lockstep groups with folded collectives (adding
to the compute, or beside it), point-to-point pipeline transfers, lowered collectives, compute on single ranks."""

from __future__ import annotations

import numpy as np
import pytest

from aifabric.engines.taskgraph import COMPUTE, TRANSFER
from aifabric.scenario import ch14_scenario, demo_scenario
from aifabric.scenario.schema import Scenario
from aifabric.simulate import simulate


def _union_length(intervals):
    total, cur = 0.0, None
    for a, b in sorted(intervals):
        if cur is None or a > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return total + (cur[1] - cur[0] if cur is not None else 0.0)


def reference(run):
    """The definition, one interval at a time."""
    g, tl, world = run.graph, run.timeline, run.workload.world_size
    compute = [[] for _ in range(world)]
    comm = [[] for _ in range(world)]
    for t in range(len(g)):
        if np.isnan(tl.end_s[t]):
            continue
        a, b = float(tl.start_s[t]), float(tl.end_s[t])
        if g.kind[t] == COMPUTE:
            c = g.comm_s.get(t, 0.0)
            h = g.hidden_s.get(t, 0.0)  # folded collectives beside the compute: at its end, at most its length
            for r in g.ranks_of(t):
                compute[r].append((a, b - c))
                if c:
                    comm[r].append((b - c, b))
                if h:
                    comm[r].append((max(a, b - c - h), b - c))
        elif g.collective[t] < 0:
            comm[g.rank[t]].append((a, b))
            comm[g.dst[t]].append((a, b))
    for inst in g.collectives:
        per_rank = {}
        for t in inst.tasks:
            if g.kind[t] != TRANSFER or np.isnan(tl.end_s[t]):
                continue
            for r in (g.rank[t], g.dst[t]):
                lo, hi = per_rank.get(r, (np.inf, -np.inf))
                per_rank[r] = (min(lo, tl.start_s[t]), max(hi, tl.end_s[t]))
        for r, iv in per_rank.items():
            comm[r].append(iv)
    its = run.workload.iterations
    c = np.array([_union_length(iv) for iv in compute]) / its
    m = np.array([_union_length(iv) for iv in comm]) / its
    x = np.array([_union_length(comm[r] + compute[r]) - _union_length(compute[r]) for r in range(world)]) / its
    return c, m, x


def _pipeline() -> Scenario:
    s = ch14_scenario().model_dump(mode="json", exclude_unset=True)
    s["cluster"].update(servers=4, gpus_per_server=8)
    s["workload"] = {
        "kind": "llm-training",
        "model": "gpt3-1.3b",
        "global_batch_size": 16,
        "seq_len": 512,
        "parallelism": {"tp": 4, "pp": 4, "dp": 2, "micro_batch_size": 1},
        "precision": "bf16",
    }
    return Scenario.model_validate(s)


@pytest.mark.parametrize("make", [demo_scenario, ch14_scenario, _pipeline])
def test_rank_times_follow_their_definition(make):
    run = simulate(make())
    c, m, x = reference(run)
    r = run.results
    assert len(r.rank_compute_s) == run.workload.world_size
    np.testing.assert_allclose(r.rank_compute_s, c, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(r.rank_comm_s, m, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(r.rank_exposed_s, x, rtol=1e-9, atol=1e-9)
    assert m.max() > 0 and c.max() > 0
    if make is _pipeline:  # the backward's tensor-parallel AllReduces beside the weight gradients' GEMMs
        assert run.graph.hidden_s
