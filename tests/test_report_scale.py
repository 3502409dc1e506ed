"""Reports of LLM-training runs: idle and pipeline-bubble segments per rank, traffic matrices per network and
parallel dimension, and the limits that keep large runs' reports small (Gantt ranks, trace events, flows.csv).

Two small runs (4 servers x 8 H100, GPT-3 1.3B, tensor-parallel 8): with two pipeline stages and two
data-parallel replicas, and without pipeline (four replicas)."""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from aifabric.analysis import (
    BUBBLE_K,
    COMM_K,
    COMPUTE_K,
    IDLE_K,
    KINDS,
    bytes_by_dimension,
    flows,
    rank_segments,
    rank_timeline,
    traffic_matrix,
)
from aifabric.engines.taskgraph import TRANSFER
from aifabric.report import build_html, build_summary, build_trace, write_tables
from aifabric.report import html as html_mod
from aifabric.report import tables as tables_mod
from aifabric.report import trace as trace_mod
from aifabric.scenario.load import parse_scenario
from aifabric.simulate import simulate
from aifabric.workload.from_spec import resolve_plan
from aifabric.workload.ranks import RankLayout

PP = {
    "name": "gpt3-1.3b-tp8-pp2-dp2",
    "seed": 1,
    "cluster": {"gpu": "H100", "servers": 4, "gpus_per_server": 8, "nic_speed_gbps": 400},
    "fabric": {"topology": "rail-optimized", "link_speed_gbps": 400},
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
    "engine": "flow",
}
WORLD = 32
STAGE_STRIDE = 16  # rank order tp-cp-dp-pp: tp 8 x dp 2 ranks per pipeline stage


def _no_pipeline() -> dict:
    d = copy.deepcopy(PP)
    d["name"] = "gpt3-1.3b-tp8-dp4"
    d["workload"]["parallelism"].update(pp=1, dp=4)
    return d


@pytest.fixture(scope="module")
def pp_run():
    return simulate(parse_scenario(PP))


@pytest.fixture(scope="module")
def nopp_run():
    return simulate(parse_scenario(_no_pipeline()))


def _timeline(run):
    return rank_timeline(run.graph, run.timeline, run.fabric.world_size, run.workload.iterations)


# --- idle and bubble -------------------------------------------------------------------------------


def test_pipeline_run_has_idle_and_bubble_segments(pp_run):
    rt = _timeline(pp_run)
    assert rt.pipeline
    assert {COMPUTE_K, COMM_K, BUBBLE_K} <= set(np.unique(rt.kind).tolist()) <= {COMPUTE_K, COMM_K, IDLE_K, BUBBLE_K}
    assert rt.bubble_s.min() >= 0 and rt.bubble_s.max() > 0
    # the textbook bubble of 1F1B, (p - 1) / (m + p - 1) of the iteration (p = 2 stages, m = 8 micro-batches):
    # the last stage is close to it; the first waits longer (the last stage also computes the LM head and loss)
    textbook = (2 - 1) / (8 + 2 - 1) * pp_run.results.iteration_time_s
    assert rt.bubble_s[STAGE_STRIDE:] == pytest.approx(textbook, rel=0.25)
    assert np.all(rt.bubble_s[:STAGE_STRIDE] >= rt.bubble_s[STAGE_STRIDE:].max())
    assert np.all(rt.bubble_s[:STAGE_STRIDE] < 2 * textbook)
    assert np.all(rt.bubble_s <= rt.idle_s + 1e-15)


def test_no_pipeline_no_bubble(nopp_run):
    rt = _timeline(nopp_run)
    assert not rt.pipeline
    assert not (rt.kind == BUBBLE_K).any()
    assert np.all(rt.bubble_s == 0)
    s = build_summary(nopp_run)
    assert s["bubble_time_s"] == 0 and s["pipeline_bubble_fraction"] == 0
    assert all(r["bubble_s"] == 0 for r in s["ranks"])


@pytest.mark.parametrize("which", ["pp_run", "nopp_run"])
def test_idle_is_what_compute_and_exposed_communication_leave(which, request):
    run = request.getfixturevalue(which)
    rt, r = _timeline(run), run.results
    # per rank: compute + exposed communication + idle = iteration time
    np.testing.assert_allclose(rt.idle_s, r.iteration_time_s - r.rank_compute_s - r.rank_exposed_s, atol=1e-12)
    quiet = (rt.kind == IDLE_K) | (rt.kind == BUBBLE_K)
    for rank in range(WORLD):
        mine = rt.rank == rank
        gaps = sorted(zip(rt.start_s[mine & quiet], rt.end_s[mine & quiet]))
        busy = sorted(zip(rt.start_s[mine & ~quiet], rt.end_s[mine & ~quiet]))
        assert sum(b - a for a, b in gaps) == pytest.approx(rt.idle_s[rank] * rt.iterations, abs=1e-12)
        # an idle or bubble segment overlaps no compute or communication segment of its rank
        starts = np.array([a for a, _ in busy])
        ends = np.array([b for _, b in busy])
        for a, b in gaps:
            assert not np.any((starts < b - 1e-15) & (ends > a + 1e-15)), (rank, a, b)


def test_bubbles_are_pipeline_fill_drain_and_waits_for_other_stages(pp_run):
    """Bubble: idle before the rank's first and after its last compute of the iteration, or idle that ends
    where a pipeline transfer to the rank starts; any other idle stays idle."""
    rt = _timeline(pp_run)
    g, tl = pp_run.graph, pp_run.timeline
    recv_starts = {
        (g.dst[t], float(tl.start_s[t])) for t in range(len(g)) if g.kind[t] == TRANSFER and g.collective[t] < 0
    }
    schedule = np.array([n.startswith("it0/") for n in rt.name], dtype=bool)  # not the optimizer step
    waits = 0
    for rank in range(WORLD):
        mine = rt.rank == rank
        comp = mine & (rt.kind == COMPUTE_K) & schedule
        first, last = rt.start_s[comp].min(), rt.end_s[comp].max()
        for a, b in zip(rt.start_s[mine & (rt.kind == BUBBLE_K)], rt.end_s[mine & (rt.kind == BUBBLE_K)]):
            inside = a >= first and b <= last
            assert not inside or (rank, float(b)) in recv_starts
            waits += inside
        for a, b in zip(rt.start_s[mine & (rt.kind == IDLE_K)], rt.end_s[mine & (rt.kind == IDLE_K)]):
            assert a >= first and b <= last and (rank, float(b)) not in recv_starts
    assert waits > 0  # 1F1B: the first stage waits mid-iteration for its first backward


def test_rank_segments_are_the_timeline_as_objects(pp_run):
    segs = rank_segments(pp_run.graph, pp_run.timeline, WORLD)
    rt = _timeline(pp_run)
    assert len(segs) == len(rt)
    assert {"compute", "communication", "bubble"} <= {s.kind for s in segs} <= set(KINDS)
    assert all(s.end_s >= s.start_s for s in segs)


# --- traffic matrices -------------------------------------------------------------------------------


def test_matrices_per_dimension_sum_to_bytes_by_dimension(pp_run):
    f = flows(pp_run.graph, pp_run.fabric, pp_run.timeline)
    by_dim = bytes_by_dimension(f)
    assert {"tp", "pp", "dp"} <= set(by_dim)
    assert by_dim["tp"]["scale_out_bytes"] == 0 and by_dim["tp"]["scale_up_bytes"] > 0  # inside a server
    assert by_dim["pp"]["scale_out_bytes"] > 0 and by_dim["dp"]["scale_out_bytes"] > 0  # across servers
    for group in (1, 8, 16):
        total = 0.0
        for d, b in by_dim.items():
            up = traffic_matrix(f, WORLD, group, "scale-up", d).sum()
            out = traffic_matrix(f, WORLD, group, "scale-out", d).sum()
            assert up == pytest.approx(b["scale_up_bytes"], rel=1e-12)
            assert out == pytest.approx(b["scale_out_bytes"], rel=1e-12)
            m = traffic_matrix(f, WORLD, group, "all", d)
            assert m.shape == (-(-WORLD // group),) * 2
            assert m.sum() == pytest.approx(up + out, rel=1e-12)
            total += m.sum()
        assert total == pytest.approx(traffic_matrix(f, WORLD, group).sum(), rel=1e-12)
        assert total == pytest.approx(pp_run.results.flow_bytes, rel=1e-9)
    # scale-out traffic never stays inside a server: nothing on the per-server diagonal
    assert np.trace(traffic_matrix(f, WORLD, 8, "scale-out")) == 0


def test_traffic_matrix_rejects_unknown_network(pp_run):
    f = flows(pp_run.graph, pp_run.fabric, pp_run.timeline)
    with pytest.raises(ValueError):
        traffic_matrix(f, WORLD, 1, "nvlink")


def test_report_has_a_matrix_per_dimension_and_network(pp_run):
    fig, note = html_mod.matrix(pp_run)
    names = [t.name for t in fig.data]
    for d in ("tp", "pp", "dp"):
        assert any(n.startswith(f"{d} · ") for n in names), names
    assert "all dimensions · all networks" in names
    assert sum(bool(t.visible) for t in fig.data) == 1
    buttons = fig.layout.updatemenus[0].buttons
    assert len(buttons) == len(fig.data)
    for i, b in enumerate(buttons):  # each entry shows its own matrix and only it
        assert b.args[0]["visible"] == [j == i for j in range(len(fig.data))]
    tp_up = next(t for t in fig.data if t.name == "tp · NVLink (scale-up)")
    assert np.asarray(tp_up.z).sum() > 0


# --- the Gantt ----------------------------------------------------------------------------------------


def test_gantt_shows_idle_and_bubble(pp_run):
    fig, note = html_mod.gantt(pp_run)
    names = {t.name for t in fig.data}
    assert {"compute", "bubble"} <= names
    assert "Bubble" in note
    assert len(fig.data) <= 10  # a few traces, one per category, whatever the run's size


def test_gantt_rank_count_is_capped(pp_run, monkeypatch):
    monkeypatch.setattr(html_mod, "MAX_GANTT_RANKS", 4)
    ranks, labels, note = html_mod.gantt_ranks(pp_run)
    assert ranks == [0, 16, 8, 24]  # tensor-parallel rank 0 of both stages, replicas 0 and 1
    fig, note = html_mod.gantt(pp_run)
    rows = set()
    shown = set()
    for t in fig.data:
        rows |= set(np.asarray(t.y).tolist())
        shown |= set(np.asarray(t.customdata).tolist())
    assert rows == {0, 1, 2, 3}
    assert shown == {0, 8, 16, 24}
    assert list(fig.layout.yaxis.ticktext) == labels and len(labels) == 4
    assert "4 of 32 ranks" in note


def test_gantt_ranks_at_1024_gpus():
    d = copy.deepcopy(PP)
    d["cluster"]["servers"] = 128
    d["fabric"] = {"topology": "rail-optimized", "servers_per_segment": 32, "link_speed_gbps": 400, "switch_radix": 64}
    d["workload"].update(model="gpt3-175b", global_batch_size=1536)
    d["workload"]["parallelism"].update(pp=8, dp=16)
    s = parse_scenario(d)
    _, plan, problems = resolve_plan(s)  # the plan the LLM workload carries (simulate.build_workload)
    assert not problems
    run = SimpleNamespace(
        scenario=s,
        workload=SimpleNamespace(layout=plan.layout),
        fabric=SimpleNamespace(world_size=1024, gpus_per_server=8),
    )
    ranks, labels, note = html_mod.gantt_ranks(run)
    assert len(ranks) == html_mod.MAX_GANTT_RANKS == 64 and len(set(ranks)) == 64
    lay = RankLayout(tp=8, pp=8, dp=16)
    coords = [lay.coords(r) for r in ranks]
    assert {c["tp"] for c in coords} == {0}
    assert {c["pp"] for c in coords} == set(range(8))
    assert {c["dp"] for c in coords} == set(range(8))
    assert "64 of 1024 ranks" in note and "pipeline stages" in note


def test_gantt_ranks_without_a_plan_spread_over_servers():
    run = SimpleNamespace(
        scenario=SimpleNamespace(workload=SimpleNamespace(kind="data-parallel")),
        workload=SimpleNamespace(layout=None),
        fabric=SimpleNamespace(world_size=2048, gpus_per_server=8),
    )
    ranks, labels, note = html_mod.gantt_ranks(run)
    assert len(ranks) == 64 and ranks[0] == 0 and ranks[-1] == 2040
    assert all(r % 8 == 0 for r in ranks)


# --- trace.json ---------------------------------------------------------------------------------------


def _trace(run) -> dict:
    return json.loads("".join(build_trace(run).json_chunks()))


def test_trace_keeps_every_rank_and_caps_transfer_events(pp_run, monkeypatch):
    monkeypatch.setattr(trace_mod, "MAX_TRANSFER_EVENTS", 10)
    trace = _trace(pp_run)
    events = trace["traceEvents"]
    transfers = [e for e in events if e.get("cat") == "transfer"]
    assert len(transfers) == 10
    info = trace["otherData"]["transfer_events"]
    assert info["total"] == pp_run.results.flow_count > 10 and info["written"] == 10 and "rule" in info
    threads = {e["tid"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    compute_tids = {e["tid"] for e in events if e.get("cat") == "compute"}
    assert compute_tids == set(range(WORLD)) <= threads
    comm_tids = {e["tid"] for e in events if e.get("cat") == "communication" and e["name"] != "folded collectives"}
    assert comm_tids == {trace_mod.COMM_TID_OFFSET + r for r in range(WORLD)} and comm_tids <= threads
    bubbles = {e["tid"] for e in events if e.get("cat") == "bubble"}
    rt = _timeline(pp_run)
    assert bubbles == {r for r in range(WORLD) if rt.bubble_s[r] > 0} >= set(range(STAGE_STRIDE, WORLD))
    assert trace["otherData"]["rank_tracks"]["complete"] is True


def test_trace_compute_tracks_do_not_overlap(pp_run):
    """A rank's GPU track (compute, folded collectives, bubble) is a sequence: Perfetto nests or drops overlaps."""
    events = [e for e in _trace(pp_run)["traceEvents"] if e["ph"] == "X" and e["tid"] < WORLD]
    for rank in range(WORLD):
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e["tid"] == rank)
        assert spans
        for (a0, b0), (a1, _) in zip(spans, spans[1:]):
            assert a1 >= b0 - 1e-6, (rank, a0, b0, a1)


def test_trace_counters_carry_each_links_bytes(pp_run):
    """Integrating a link's counter track (Gb/s over time) gives the bytes its load over time says."""
    run = pp_run
    events = [e for e in _trace(run)["traceEvents"] if e["ph"] == "C"]
    assert events
    _, per_bin = run.timeline.link_load.binned(len(run.fabric.links), run.timeline.makespan_s, 1)
    expected = {link.id: per_bin[link.index, 0] for link in run.fabric.links}
    by_link: dict[str, list] = {}
    for e in events:
        by_link.setdefault(e["name"], []).append((e["ts"], e["args"]["Gb/s"]))
    assert len(by_link) <= trace_mod.MAX_COUNTER_LINKS
    for name, points in by_link.items():
        points.sort()
        assert points[-1][1] == 0  # every track ends at zero
        carried = sum((t1 - t0) * 1e-6 * g * 1e9 / 8 for (t0, g), (t1, _) in zip(points, points[1:]))
        assert carried == pytest.approx(expected[name], rel=1e-4), name


def test_trace_object_reads_like_the_json(pp_run):
    t = build_trace(pp_run)
    assert set(t) == {"traceEvents", "displayTimeUnit", "otherData"}
    assert len(t["traceEvents"]) == t.n_events


# --- tables and summary.json -------------------------------------------------------------------------


def test_flows_table_cap_is_stated_in_the_summary(pp_run, monkeypatch, tmp_path):
    monkeypatch.setattr(tables_mod, "MAX_FLOW_ROWS", 7)
    write_tables(pp_run, tmp_path)
    with open(tmp_path / "flows.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 7
    s = build_summary(pp_run)
    assert s["flows"]["table_rows"] == 7 and s["flows"]["count"] == pp_run.results.flow_count > 7
    # collective transfers come first, then pipeline sends
    coll = {t for c in pp_run.graph.collectives for t in c.tasks}
    assert all(int(r["task"]) in coll for r in rows)


def test_summary_and_ranks_csv_report_idle_and_bubble_per_rank(pp_run, tmp_path):
    s = build_summary(pp_run)
    assert s["schema_version"] == 2
    assert [r["rank"] for r in s["ranks"]] == list(range(WORLD))
    idle = np.array([r["idle_s"] for r in s["ranks"]])
    bubble = np.array([r["bubble_s"] for r in s["ranks"]])
    assert s["idle_time_s"] == idle.max() and s["bubble_time_s"] == bubble.max() > 0
    assert 0 < s["pipeline_bubble_fraction"] < 1
    assert s["pipeline_bubble_fraction"] == pytest.approx(bubble.mean() / s["iteration_time_s"])
    for r in s["ranks"]:
        assert r["compute_s"] + r["exposed_communication_s"] + r["idle_s"] == pytest.approx(s["iteration_time_s"])
    json.dumps(s)
    write_tables(pp_run, tmp_path)
    with open(tmp_path / "ranks.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [float(r["idle_s"]) for r in rows] == pytest.approx(idle.tolist())
    assert [float(r["bubble_s"]) for r in rows] == pytest.approx(bubble.tolist())


def test_schema_doc_lists_the_new_fields():
    doc = (Path(__file__).parents[1] / "docs" / "summary-schema.md").read_text()
    s_keys = (
        "`idle_time_s`",
        "`bubble_time_s`",
        "`pipeline_bubble_fraction`",
        "`ranks[]`",
        "`ranks[].idle_s`",
        "`flows.table_rows`",
    )
    for k in s_keys:
        assert k in doc, k


def test_html_report_of_a_pipeline_run(pp_run):
    text = build_html(pp_run)
    assert "pipeline bubble (mean over ranks)" in text
    assert '"bdata"' in text  # numeric arrays embedded as typed arrays
    assert "<script src=" not in text
