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

    from aifabric.scenario import demo_scenario

    data = demo_scenario().model_dump(mode="json", exclude_none=True)
    data["workload"]["model"]["layer_widths"] = [256, 512, 256]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    assert run_app(app, ["packet", str(path), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "iteration time" in out
    data = json.loads((tmp_path / "o" / "packet-stats.json").read_text())
    assert data["iteration_time_s"] > 0 and data["packet_hops"] > 0
    assert run_app(app, ["packet", str(tmp_path / "missing.yaml")]) == 2
