"""Fidelity choices (engines/fold.py, ring edges): folding scale-up collectives into GPU time and merging
ring steps give the same iteration as simulating every transfer when nothing contends, with far fewer
tasks; merged tasks are exact."""

from __future__ import annotations

import numpy as np
import pytest

from aifabric.analysis import bytes_by_dimension, flows, traffic_matrix
from aifabric.engines import lower, run
from aifabric.scenario import load_scenario
from aifabric.scenario.schema import FidelitySpec, Scenario
from aifabric.simulate import build_fabric, build_workload, simulate

LLM = {
    "name": "gpt-small",
    "seed": 1,
    "cluster": {"gpu": "H100", "servers": 4, "gpus_per_server": 8, "nic_speed_gbps": 400},
    "fabric": {"topology": "rail-optimized", "spines": 4, "link_speed_gbps": 400},
    "workload": {
        "kind": "llm-training",
        "model": "gpt3-1.3b",
        "parallelism": {
            "tp": 8,
            "pp": 2,
            "dp": 2,
            "schedule": "1f1b",
            "micro_batch_size": 1,
            "sequence_parallel": True,
        },
        "global_batch_size": 16,
        "seq_len": 2048,
        "precision": "bf16",
    },
}


def _scenario(up: str, ring: str, **changes) -> Scenario:
    data = {**LLM, **changes, "fidelity": {"scale_up_collectives": up, "ring_steps": ring}}
    return load_scenario(data)  # every check, as the CLI


@pytest.fixture(scope="module")
def runs():
    return {(up, ring): simulate(_scenario(up, ring)) for up in ("flows", "analytic") for ring in ("each", "merged")}


def test_llm_defaults_fold_and_merge_and_data_parallel_defaults_do_not():
    assert _scenario("analytic", "merged").lowering_options() == {"fold_scale_up": True, "merge_ring_steps": True}
    s = load_scenario(LLM)
    assert s.fidelity == FidelitySpec() and s.lowering_options() == {"fold_scale_up": True, "merge_ring_steps": True}
    from aifabric.scenario import ch14_scenario

    assert ch14_scenario().lowering_options() == {"fold_scale_up": False, "merge_ring_steps": False}


def test_every_fidelity_gives_the_same_iteration_within_2_percent(runs):
    full = runs[("flows", "each")].results
    for key, run_ in runs.items():
        r = run_.results
        assert r.iteration_time_s == pytest.approx(full.iteration_time_s, rel=0.02), key
        assert r.compute_time_s == pytest.approx(full.compute_time_s, rel=0.02), key
        assert r.communication_time_s == pytest.approx(full.communication_time_s, rel=0.02), key
        assert r.exposed_communication_s == pytest.approx(full.exposed_communication_s, rel=0.02), key


def test_folding_cuts_tasks_by_orders_of_magnitude(runs):
    full = len(runs[("flows", "each")].graph)
    folded = len(runs[("analytic", "merged")].graph)
    assert folded * 100 < full


def test_folded_bytes_land_on_the_same_links_pairs_and_dimensions(runs):
    a, b = runs[("flows", "merged")], runs[("analytic", "merged")]
    np.testing.assert_allclose(a.timeline.link_bytes, b.timeline.link_bytes, rtol=1e-9)
    fa, fb = flows(a.graph, a.fabric, a.timeline), flows(b.graph, b.fabric, b.timeline)
    da, db = bytes_by_dimension(fa), bytes_by_dimension(fb)
    assert set(da) == set(db) == {"tp", "pp", "dp"}
    for dim in da:
        assert db[dim] == pytest.approx(da[dim]), dim
    world = a.fabric.world_size
    for dim in ("tp", "pp", "dp"):
        np.testing.assert_allclose(traffic_matrix(fa, world, dim=dim), traffic_matrix(fb, world, dim=dim))
    assert b.results.scale_up_bytes == pytest.approx(a.results.scale_up_bytes)
    assert b.results.flow_bytes == pytest.approx(a.results.flow_bytes)


def test_folded_collectives_are_reported_per_kind_with_their_count(runs):
    a, b = runs[("flows", "merged")].results, runs[("analytic", "merged")].results
    folded = [c for c in b.collectives if c.algorithm == "folded"]
    # sequence parallelism; the AllReduces of the vocabulary-parallel cross-entropy
    assert folded and {c.op for c in folded} == {"all-gather", "reduce-scatter", "all-reduce"}
    n_tp = sum(1 for c in a.collectives if c.group_size == 8 and c.op in ("all-gather", "reduce-scatter", "all-reduce"))
    assert n_tp > 0 and sum(c.count for c in folded) == n_tp
    # the time of one folded instance is what the flow engine gave each of them
    for c in folded:
        times = [x.time_s for x in a.collectives if x.op == c.op and x.group_size == 8 and x.size_bytes == c.size_bytes]
        assert c.time_s == pytest.approx(float(np.median(times)), rel=1e-6)


def test_ring_edges_carry_the_steps_bytes_and_latency():
    """One transfer per ring edge with all its steps: on its own it takes the ring's alpha-beta time."""
    from aifabric.scenario import ch14_scenario

    s = ch14_scenario()
    fabric, router = build_fabric(s)
    w = build_workload(s)
    each = lower(w, fabric, router)
    merged = lower(w, fabric, router, merge_ring_steps=True)
    n = fabric.world_size
    ring = [t for t in range(len(merged)) if merged.collective[t] >= 0]
    assert len(ring) == n * 4  # one per edge of each of the 4 rings (one per NIC)
    bytes_each = sum(each.size_bytes[t] for t in range(len(each)) if each.collective[t] >= 0)
    assert sum(merged.size_bytes[t] for t in ring) == pytest.approx(bytes_each)
    t_each = run(each, fabric, "flow").makespan_s
    t_merged = run(merged, fabric, "flow").makespan_s
    assert t_merged == pytest.approx(t_each, rel=0.02)


def test_merged_tasks_are_exact_for_data_parallel_computes():
    """Merging consecutive compute ops keeps every bucket's start: the iteration is unchanged."""
    from aifabric.scenario import ch14_scenario

    s = ch14_scenario()
    fabric, router = build_fabric(s)
    w = build_workload(s)
    plain = run(lower(w, fabric, router), fabric, "flow").makespan_s
    folded = run(lower(w, fabric, router, fold_scale_up=True), fabric, "flow").makespan_s
    assert folded == pytest.approx(plain, rel=1e-9)


def test_unequal_members_do_not_merge():
    """A group whose members compute different amounts between rendezvous gets separate tasks, and the
    rendezvous waits for the slowest: the fold keeps the barrier semantics."""
    from aifabric.workload.ops import Collective, Compute, Workload

    s = _scenario("analytic", "merged")
    fabric, router = build_fabric(s)
    group = (0, 1)
    ranks = [
        [
            Compute("a", 0, 1e-3),
            Collective("c1", "all-reduce", group, 1 << 20, 2, dim="tp"),
            Compute("b", 0, d),
            Collective("c2", "all-reduce", group, 1 << 20, 2, dim="tp"),
        ]
        for d in (1e-3, 3e-3)
    ]
    w = Workload("t", ranks, params=0, iterations=1, flops_per_iteration=0.0)
    g = lower(w, fabric, router, fold_scale_up=True)
    tl = run(g, fabric, "flow")
    t_coll = g.folded.kinds[("all-reduce", "tp", 2, 2 << 20, "")].time_s
    assert tl.makespan_s == pytest.approx(1e-3 + t_coll + 3e-3 + t_coll, rel=1e-9)
    assert len(g.members) == 2  # one group task per collective: the second could not extend the first


def test_folded_traffic_is_on_the_links_over_time_with_its_peak(runs):
    """Folded bytes are spread over the time their merged task ran: the link load over time integrates to
    every link's bytes, as when every transfer is simulated; NVLink peaks are the collectives' own."""
    a, b = runs[("flows", "merged")], runs[("analytic", "merged")]
    for run_ in (a, b):
        tl = run_.timeline
        integral = np.zeros(len(run_.fabric.links))
        for start, end, links, rates in zip(*tl.link_load.segments()):
            np.add.at(integral, links, rates * (end - start))
        np.testing.assert_allclose(integral, tl.link_bytes, rtol=1e-6, atol=1.0)
    nvlink = [link.index for link in b.fabric.links if link.tier == "nvlink"]
    np.testing.assert_allclose(
        b.timeline.link_peak_bytes_per_s[nvlink], a.timeline.link_peak_bytes_per_s[nvlink], rtol=1e-9
    )
    assert b.timeline.link_peak_bytes_per_s[nvlink].max() > 0


def test_a_ctrl_c_while_a_collective_is_timed_for_folding_stops_the_lowering(monkeypatch):
    """The folder times each collective shape on the flow engine, inside the lowering; a Ctrl-C there (the engine
    turns it into Interrupted) leaves the lowering as a KeyboardInterrupt, which the command line answers with
    'stopped in stage task graph' and exit 130, not as a run's Interrupted ('internal error', exit 1)."""
    import aifabric.engines.executor as executor
    from aifabric.engines import lower
    from aifabric.engines.executor import Interrupted
    from aifabric.scenario import demo_scenario
    from aifabric.simulate import build_fabric, build_workload

    s = demo_scenario()  # GPT-3 13B, TP 8 inside each server: its TP collectives fold
    fabric, router = build_fabric(s)
    workload = build_workload(s)

    def stopped(graph, fabric, engine="flow", *args, **kwargs):
        raise Interrupted(None)

    monkeypatch.setattr(executor, "run", stopped)
    with pytest.raises(KeyboardInterrupt):
        lower(workload, fabric, router, **s.lowering_options())


def test_a_task_folding_thousands_of_collectives_spreads_one_entry_per_link():
    """A group that runs in lockstep for a whole run (8 GPUs, expert and data parallelism inside one server) is one
    merged task holding every folded collective's bytes, thousands of parts on the same links: spread over the
    task, they load each link as the parts would one by one (the same bytes per bin), but as one entry per link
    (the parts' 195,072 entries of Qwen3 30B-A3B on 8 B200 took 14.6 GB before, spread over 1,910 bins)."""
    from types import SimpleNamespace

    from aifabric.engines.linkload import LinkLoad
    from aifabric.simulate import add_folded_bytes

    rng = np.random.default_rng(0)
    parts = [(rng.choice(12, size=4, replace=False), rng.uniform(1.0, 2.0, 4)) for _ in range(3000)]

    class Recording(LinkLoad):
        entries = 0  # the most (link, bytes) entries one interval brought

        def add_spread(self, items, chunk_entries=4_000_000):
            self.entries = max([self.entries] + [len(x[2]) for x in items])
            return super().add_spread(items, chunk_entries)

    def timeline():
        return SimpleNamespace(
            start_s=np.array([0.5, 2.0]),
            end_s=np.array([9.5, 3.0]),
            link_bytes=np.zeros(12),
            link_peak_bytes_per_s=np.zeros(12),
            link_load=Recording(max_bins=64),
        )

    folded = SimpleNamespace(link_bytes=None, link_peak=None, task_bytes={0: parts, 1: parts[:1]})
    merged = timeline()
    add_folded_bytes(SimpleNamespace(folded=folded), merged)
    one_by_one = timeline()
    one_by_one.link_load.add_spread([(0.5, 9.5, links, values) for links, values in parts] + [(2.0, 3.0, *parts[0])])
    got, want = merged.link_load.binned(12, 9.5, 19), one_by_one.link_load.binned(12, 9.5, 19)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-9)
    assert got[1].sum() == pytest.approx(sum(v.sum() for _, v in parts) + parts[0][1].sum(), rel=1e-12)
    assert merged.link_load.entries <= 12  # one entry per link, not 12,000
