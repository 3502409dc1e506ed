"""`aifabric compare`: variants from files or from one varied field; differences that follow from physics."""

from __future__ import annotations

import json

import pytest

from aifabric.cli import run_app
from aifabric.cli.app import app


def test_slower_nic_gives_a_slower_iteration(ch14_data, write_scenario, tmp_path, capsys):
    base = write_scenario(ch14_data)
    out = tmp_path / "cmp"
    assert run_app(app, ["compare", str(base), "--vary", "cluster.nic_speed_gbps=200,400", "--out", str(out)]) == 0
    rows = json.loads((out / "compare.json").read_text())["variants"]
    assert [r["label"] for r in rows] == ["cluster.nic_speed_gbps=200", "cluster.nic_speed_gbps=400"]
    slow, fast = rows
    # communication is bound by the network path: a 200 Gb/s NIC carries 24.5 GB/s of RoCE payload, a 400 Gb/s
    # one is held to 48 GB/s by PCIe Gen5 (75 % of x16): 1.96 x the bandwidth, less the fixed latencies
    assert 1.8 < slow["exposed_communication_s"] / fast["exposed_communication_s"] < 1.96
    # the same compute on both (summed in the order tasks finish, so equal to the last few bits)
    assert slow["compute_time_s"] == pytest.approx(fast["compute_time_s"], rel=1e-12)
    page = (out / "compare.html").read_text()
    assert "<table class='m'>" in page and "<svg" in page and len(page) < 1_000_000
    assert "iteration_time_s" in capsys.readouterr().out


def test_two_files(ch14_data, write_scenario, tmp_path):
    a = write_scenario(ch14_data, "a.yaml")
    ch14_data["workload"]["precision"] = "fp32"
    b = write_scenario(ch14_data, "b.yaml")
    out = tmp_path / "cmp"
    assert run_app(app, ["compare", str(a), str(b), "--out", str(out)]) == 0
    ra, rb = json.loads((out / "compare.json").read_text())["variants"]
    assert rb["network_bytes"] == 2 * ra["network_bytes"]  # fp32 gradients are twice the bf16 bytes


def test_bad_requests(ch14_data, write_scenario, capsys):
    a = write_scenario(ch14_data)
    assert run_app(app, ["compare", str(a)]) == 2
    assert run_app(app, ["compare", str(a), "--vary", "fabric.nope=1"]) == 2
    assert run_app(app, ["compare", str(a), "--vary", "cluster.servers=0"]) == 2
    err = capsys.readouterr().err
    assert "two or more scenarios" in err and "no such field" in err and "cluster.servers: must be >= 1" in err


def test_vary_load_balancing_spreads_spine_load(ch14_data, write_scenario, tmp_path):
    """ECMP vs spraying on a fabric whose rings cross spines: the same bytes, spread over every spine
    uplink under spraying (max spine utilization falls); a field derived at validation (spines from the
    oversubscription ratio) is derived again for each variant."""
    from aifabric.compare import variants
    from aifabric.simulate import simulate

    ch14_data["cluster"].update(servers=8, gpus_per_server=8)
    ch14_data["fabric"].pop("spines")
    ch14_data["fabric"].update(servers_per_segment=2, leaf_oversubscription=1)
    path = write_scenario(ch14_data)
    vs = variants([path], "fabric.load_balancing=ecmp,spray")
    runs = [simulate(v.scenario).results for v in vs]
    spine = [[link for link in r.links if link.tier == "spine"] for r in runs]
    assert sum(link.bytes for link in spine[0]) == pytest.approx(sum(link.bytes for link in spine[1]))
    used = [sum(1 for link in s if link.bytes > 0) for s in spine]
    assert used[1] > used[0]
    up: dict[str, list[float]] = {}  # spraying: every uplink of a rail switch that sends up carries the same
    for link in spine[1]:
        if link.src.split("/")[-1].startswith("rail"):
            up.setdefault(link.src, []).append(link.bytes)
    busy = [b for b in up.values() if max(b) > 0]
    assert busy and all(min(b) == pytest.approx(max(b)) for b in busy)
    assert max(link.utilization for link in spine[1]) < max(link.utilization for link in spine[0])


def test_several_fields_vary_together(write_scenario, tmp_path, capsys):
    """TP 8 vs TP 4 on the 3D demo needs dp to follow: two --vary options, zipped."""
    from aifabric.compare import variants
    from aifabric.scenario import demo_scenario_text

    path = write_scenario(demo_scenario_text())
    vs = variants([path], ["workload.parallelism.tp=8,4", "workload.parallelism.dp=2,4"])
    assert [(v.scenario.workload.parallelism.tp, v.scenario.workload.parallelism.dp) for v in vs] == [(8, 2), (4, 4)]
    assert (
        run_app(
            app,
            [
                "compare",
                str(path),
                "--vary",
                "workload.parallelism.tp=8,4",
                "--vary",
                "workload.parallelism.dp=2",
                "--out",
                str(tmp_path),
            ],
        )
        == 2
    )
    assert "same number of values" in capsys.readouterr().err


def test_a_qos_field_is_noted_as_the_packet_engines(ch14_data):
    """fabric.qos acts on the packet engine alone: compare says so when the runs are on another engine."""
    from aifabric.compare import Variant, inert_notes
    from aifabric.scenario import load_scenario

    s = load_scenario(ch14_data)
    vs = [Variant("a", s, (("fabric.qos.wred.max_kb", 2000),)), Variant("b", s, (("fabric.qos.wred.max_kb", 3000),))]
    notes = inert_notes(vs, [{}, {}])
    assert any("fabric.qos.wred.max_kb" in n and "packet engine" in n for n in notes)
    assert not any("fabric.qos" in n for n in inert_notes(vs, [{}, {}], engine="packet"))
