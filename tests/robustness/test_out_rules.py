"""Issue 16, item 1, for every command that writes a folder or a file: a folder (or file) of the user's is refused
with exit 2 naming --out (--force writes anyway), the output is staged and moved in when complete, and an odd or
unwritable --out is exit 2 naming it, never an OS error (exit 1)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.scenario import ch14_scenario_text


def _user_folder(tmp_path: Path, name: str = "mine") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "notes.txt").write_text("my notes\n")
    (folder / "summary.json").write_text('{"my": "summary"}\n')
    return folder


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def _scenario(tmp_path: Path) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(ch14_scenario_text())
    return path


def _no_staging_left(tmp_path: Path) -> None:
    assert [p.name for p in tmp_path.iterdir() if ".partial-" in p.name] == []


# ---------------------------------------------------------------- packet

def test_packet_refuses_a_folder_of_user_files(tmp_path, capsys):
    folder = _user_folder(tmp_path)
    before = _contents(folder)
    assert run_app(app, ["packet", "incast", "--out", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "notes.txt" in err and "--force" in err
    assert _contents(folder) == before
    assert run_app(app, ["packet", "incast", "--out", str(folder), "--force"]) == 0
    assert (folder / "notes.txt").read_text() == "my notes\n" and (folder / "packet-stats.json").exists()


def test_packet_reuses_its_own_folder_and_writes_no_temporary_files(tmp_path):
    out = tmp_path / "p"
    assert run_app(app, ["packet", "incast", "--out", str(out)]) == 0
    assert run_app(app, ["packet", "incast", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["incast.pcap", "packet-stats.json", "packet.html"]


def test_packet_pcap_to_a_directory_is_refused_before_the_run(tmp_path, capsys, monkeypatch):
    import aifabric.packet.scenarios as scenarios

    monkeypatch.setattr(scenarios, "run_scenario", lambda *a, **k: pytest.fail("ran"))
    assert run_app(app, ["packet", "incast", "--pcap", str(tmp_path)]) == 2
    assert "--pcap" in capsys.readouterr().err
