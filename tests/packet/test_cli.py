"""`aifabric packet`: scenarios run, narrate, write JSON and pcap; bad input exits 2."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from aifabric.cli import run_app
from aifabric.cli.app import app

runner = CliRunner()


def test_packet_pfc_cascade_explains_and_writes_outputs(tmp_path):
    res = runner.invoke(app, ["packet", "pfc-cascade", "--explain", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "PFC pause" in res.output and "quanta 0" in res.output
    data = json.loads((tmp_path / "packet-stats.json").read_text())
    assert data["scenario"] == "pfc-cascade" and data["runs"]["pfc-cascade"]["totals"]["pfc_pause_frames"] > 0
    assert (tmp_path / "pfc-cascade.pcap").stat().st_size > 0
    page = (tmp_path / "packet.html").read_text()
    assert "PFC frames sent" in page and "Egress queue depth" in page


def test_unknown_scenario_and_bad_option_exit_2(capsys):
    assert run_app(app, ["packet", "nope"]) == 2
    out = capsys.readouterr()
    assert "scenario" in out.out + out.err
    assert run_app(app, ["packet", "incast", "--lb", "random"]) == 2
    out = capsys.readouterr()
    assert "--lb" in out.out + out.err


def test_packet_trace_events_for_perfetto():
    from aifabric.packet.config import PacketConfig
    from aifabric.packet.scenarios import run_scenario
    from aifabric.packet.trace import (
        DCQCN_PID,
        PFC_PID,
        QUEUES_PID,
        packet_trace_events,
    )

    r = run_scenario("incast", PacketConfig())
    ev = packet_trace_events(r.stats)
    json.dumps(ev)
    assert any(e["pid"] == QUEUES_PID and e["ph"] == "C" and e["name"] == "railA->host2/E1 q3" for e in ev)
    assert any(e["pid"] == DCQCN_PID and e["ph"] == "C" and e["args"]["Gb/s"] < 200 for e in ev)
    pauses = [e for e in ev if e["pid"] == PFC_PID and e["ph"] == "i"]
    assert len(pauses) == r.stats.total_pauses() + sum(r.stats.pfc_resume_sent.values())


def test_packet_runs_a_scenario_file(tmp_path, capsys):
    import yaml

    from aifabric.scenario import ch14_scenario

    data = ch14_scenario().model_dump(mode="json", exclude_none=True)
    data["workload"]["model"]["layer_widths"] = [256, 512, 256]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    assert run_app(app, ["packet", str(path), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "iteration time" in out
    data = json.loads((tmp_path / "o" / "packet-stats.json").read_text())
    assert data["iteration_time_s"] > 0 and data["packet_hops"] > 0
    assert run_app(app, ["packet", str(tmp_path / "missing.yaml")]) == 2


def test_simulate_engine_packet_reports_the_fabric(ch14_data, write_scenario, tmp_path):
    """`aifabric simulate --engine packet`: the run's report carries the packet engine's statistics."""
    ch14_data["workload"]["model"]["layer_widths"] = [512, 1024, 512]  # ~1 M parameters: a fast test
    path = write_scenario(ch14_data)
    out = tmp_path / "out"
    res = runner.invoke(app, ["simulate", str(path), "--engine", "packet", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "packet engine" in res.output and "ECN marks" in res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["engine"] == "packet" and summary["complete"] is True
    packet = summary["packet"]
    assert packet["packet_hops"] > 0 and "pfc_pause_frames" in packet["totals"]
    transfers = summary["flows"]["count"]
    assert len(packet["flows"]) == transfers
    trace = json.loads((out / "trace.json").read_text())
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert "queues (KB)" in names
    assert "Egress queue depth" in (out / "report.html").read_text()
    # the same scenario on the flow engine: no packet section
    res = runner.invoke(app, ["simulate", str(path), "--out", str(tmp_path / "flow")])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "flow" / "summary.json").read_text())["packet"] is None


def test_scenario_engine_packet_validates_and_bad_engine_names_the_field(ch14_data, write_scenario, capsys):
    ch14_data["engine"] = "packet"
    assert run_app(app, ["validate", str(write_scenario(ch14_data))]) == 0
    ch14_data["engine"] = "ns3"
    assert run_app(app, ["validate", str(write_scenario(ch14_data))]) == 2
    out = capsys.readouterr()
    assert "engine" in out.out + out.err and "packet" in out.out + out.err
