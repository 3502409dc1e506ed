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


def test_unknown_scenario_and_bad_option_exit_2(capsys):
    assert run_app(app, ["packet", "nope"]) == 2
    out = capsys.readouterr()
    assert "scenario" in out.out + out.err
    assert run_app(app, ["packet", "incast", "--lb", "random"]) == 2
    out = capsys.readouterr()
    assert "--lb" in out.out + out.err
