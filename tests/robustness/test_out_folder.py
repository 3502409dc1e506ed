"""Issue 16, item 1: an output folder never destroys what the user wrote there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.scenario import ch14_scenario_text


def _user_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "scenario.yaml").write_text("# my hand-edited scenario\nname: mine\n")
    (folder / "summary.json").write_text('{"my": "notes"}\n')
    (folder / "links.csv").write_text("a,b\n1,2\n")
    return folder


def _scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "other.yaml"
    path.write_text(ch14_scenario_text())
    return path


def test_simulate_refuses_a_folder_of_user_files(tmp_path, capsys):
    folder = _user_folder(tmp_path)
    before = {p.name: p.read_text() for p in folder.iterdir()}
    assert run_app(app, ["simulate", str(_scenario_file(tmp_path)), "--out", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "scenario.yaml" in err and "--force" in err
    assert {p.name: p.read_text() for p in folder.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging folder left


def test_force_replaces_same_names_and_keeps_the_rest(tmp_path):
    folder = _user_folder(tmp_path)
    (folder / "notes.txt").write_text("keep me")
    assert run_app(app, ["demo", "--scenario", "ch14", "--out", str(folder), "--force"]) == 0
    assert (folder / "notes.txt").read_text() == "keep me"
    assert json.loads((folder / "summary.json").read_text())["complete"] is True
    assert "my hand-edited" not in (folder / "scenario.yaml").read_text()


def test_a_previous_run_folder_is_reused_and_an_empty_out_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run"
    assert run_app(app, ["demo", "--scenario", "ch14", "--out", str(run)]) == 0
    (run / "flows.parquet").unlink(missing_ok=True)
    assert run_app(app, ["demo", "--scenario", "ch14", "--out", str(run)]) == 0  # aifabric's own: replaced
    assert json.loads((run / "summary.json").read_text())["complete"] is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # nothing written beside it
    assert run_app(app, ["demo", "--scenario", "ch14", "--out", ""]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_failed_write_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    run = tmp_path / "run"
    assert run_app(app, ["demo", "--scenario", "ch14", "--out", str(run)]) == 0
    before = {p.name: p.read_bytes() for p in run.iterdir()}

    def boom(run, out_dir, scenario_text):  # the disk fills half way through writing
        (Path(out_dir) / "summary.json").write_text("{")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("aifabric.cli.run_cmds.write_report", boom)
    assert run_app(app, ["demo", "--scenario", "ch14", "--out", str(run)]) == 1
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def _stop_in(stage: str):
    """simulate() that reports its stages up to `stage`, then meets a Ctrl-C."""

    def fake(scenario, engine=None, on_progress=None, phase=None, **kw):
        for name in ("fabric", "workload", "task graph", "results"):
            phase(name)
            if name == stage:
                raise KeyboardInterrupt
        raise AssertionError("no such stage")

    return fake


@pytest.mark.parametrize("stage", ["fabric", "workload", "task graph", "results", "report"])
def test_ctrl_c_in_any_stage_leaves_a_readable_folder(tmp_path, monkeypatch, capsys, stage):
    import sys

    run = tmp_path / "run"
    if stage == "report":

        def half(run_, out_dir, scenario_text):
            (Path(out_dir) / "links.csv").write_text("id\n")
            raise KeyboardInterrupt

        monkeypatch.setattr("aifabric.cli.run_cmds.write_report", half)
    else:
        monkeypatch.setattr(sys.modules["aifabric.simulate"], "simulate", _stop_in(stage))
    assert run_app(app, ["simulate", str(_scenario_file(tmp_path)), "--out", str(run)]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "summary.json" in err and "Traceback" not in err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["complete"] is False and summary["stopped_in"] == stage
    assert (run / "scenario.yaml").read_text() == ch14_scenario_text()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("name", ["file.txt"])
def test_out_naming_a_file_is_refused(tmp_path, name, capsys):
    path = tmp_path / name
    path.write_text("x")
    assert run_app(app, ["demo", "--scenario", "ch14", "--out", str(path)]) == 2
    assert "--out" in capsys.readouterr().err and path.read_text() == "x"


def test_replay_refuses_a_folder_of_user_files(tmp_path, capsys):
    from .test_replay_traces import _records

    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(json.dumps(x) for x in _records()) + "\n")
    folder = _user_folder(tmp_path)
    before = {p.name: p.read_text() for p in folder.iterdir()}
    args = ["replay", str(trace), "--scenario", str(_scenario_file(tmp_path)), "--out", str(folder)]
    assert run_app(app, args) == 2
    assert "--force" in capsys.readouterr().err
    assert {p.name: p.read_text() for p in folder.iterdir()} == before
    assert run_app(app, [*args, "--force"]) == 0
    assert json.loads((folder / "summary.json").read_text())["complete"] is True


def test_compare_refuses_a_folder_of_user_files_and_reuses_its_own(tmp_path, capsys):
    scenario = _scenario_file(tmp_path)
    folder = _user_folder(tmp_path)
    before = {p.name: p.read_text() for p in folder.iterdir()}
    args = ["compare", str(scenario), "--vary", "fabric.spines=1,2"]
    assert run_app(app, [*args, "--out", str(folder)]) == 2
    assert "--force" in capsys.readouterr().err
    assert {p.name: p.read_text() for p in folder.iterdir()} == before
    mine = tmp_path / "cmp"
    assert run_app(app, [*args, "--out", str(mine)]) == 0
    assert run_app(app, [*args, "--out", str(mine)]) == 0  # its own earlier comparison: written over


def test_compare_stops_at_a_cut_off_variant(tmp_path, monkeypatch, capsys):
    """A variant whose event loop Ctrl-C stopped (results.complete false) ends the comparison: exit 130, no
    compare.json presenting it as a finished run, no further variant simulated."""
    import sys
    from dataclasses import replace

    module = sys.modules["aifabric.simulate"]
    real = module.simulate
    calls = []

    def cut_off(scenario, engine=None, *args, **kwargs):
        calls.append(scenario)
        run = real(scenario, engine, *args, **kwargs)
        return replace(run, results=replace(run.results, complete=False))

    monkeypatch.setattr(module, "simulate", cut_off)
    out = tmp_path / "cmp"
    args = ["compare", str(_scenario_file(tmp_path)), "--vary", "fabric.spines=1,2", "--out", str(out)]
    assert run_app(app, args) == 130
    assert "cut off" in capsys.readouterr().err
    assert len(calls) == 1 and not (out / "compare.json").exists()
