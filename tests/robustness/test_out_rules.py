"""Issue 16, item 1, for every command that writes a folder or a file: a folder (or file) of the user's is refused
with exit 2 naming --out (--force writes anyway), the output is staged and moved in when complete, and an odd or
unwritable --out is exit 2 naming it, never an OS error (exit 1)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import aifabric.simulate  # noqa: F401 - patched through sys.modules
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


# ---------------------------------------------------------------- fabric plan


def test_fabric_plan_refuses_user_files_and_a_file_as_out(tmp_path, capsys):
    scenario = _scenario(tmp_path)
    folder = _user_folder(tmp_path)
    before = _contents(folder)
    assert run_app(app, ["fabric", "plan", str(scenario), "--out", str(folder)]) == 2
    assert "--force" in capsys.readouterr().err and _contents(folder) == before
    assert run_app(app, ["fabric", "plan", str(scenario), "--out", str(folder), "--force"]) == 0
    assert (folder / "notes.txt").read_text() == "my notes\n" and (folder / "plan.json").exists()
    a_file = tmp_path / "plan.txt"
    a_file.write_text("x")
    assert run_app(app, ["fabric", "plan", str(scenario), "--out", str(a_file)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "internal error" not in err and a_file.read_text() == "x"
    mine = tmp_path / "plan"
    assert run_app(app, ["fabric", "plan", str(scenario), "--out", str(mine)]) == 0
    assert run_app(app, ["fabric", "plan", str(scenario), "--out", str(mine)]) == 0  # its own: written over
    assert "plan.json" in {p.name for p in mine.iterdir()}
    _no_staging_left(tmp_path)


# ---------------------------------------------------------------- calibrate

NCCL = Path(__file__).parents[1] / "calibration" / "data" / "a100_sxm4_80gb_8gpu_all_reduce_perf_g8.txt"


def test_calibrate_never_writes_over_a_file_of_the_user(tmp_path, capsys):
    mine = tmp_path / "calibration.yaml"
    mine.write_text("# my own calibration, by hand\ncalibration: {}\n")
    args = ["calibrate", "nccl-tests", str(NCCL), "--out", str(mine)]
    assert run_app(app, args) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "--force" in err
    assert mine.read_text().startswith("# my own")
    assert run_app(app, [*args, "--force"]) == 0
    assert mine.read_text().startswith("# aifabric calibrate nccl-tests")
    assert run_app(app, args) == 0  # its own file: replaced
    blocked = tmp_path / "a-file"
    blocked.write_text("x")
    assert run_app(app, ["calibrate", "nccl-tests", str(NCCL), "--out", str(blocked / "c.yaml")]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "internal error" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "calibration.yaml"]


def test_calibrate_gemm_checks_out_before_timing(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    import aifabric.calibration.gemm_bench as bench

    monkeypatch.setattr(bench, "measure", lambda *a, **k: pytest.fail("timed"))
    mine = tmp_path / "gemm-table.yaml"
    mine.write_text("my table\n")
    assert run_app(app, ["calibrate", "gemm", "--quick", "--out", str(mine)]) == 2
    assert "--out" in capsys.readouterr().err and mine.read_text() == "my table\n"


# ---------------------------------------------------------------- compare: staged


def test_compare_is_staged_a_failed_variant_leaves_no_folder(tmp_path, monkeypatch, capsys):
    module = sys.modules["aifabric.simulate"]
    real = module.simulate
    calls = []

    def second_fails(scenario, engine=None, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return real(scenario, engine, *args, **kwargs)

    monkeypatch.setattr(module, "simulate", second_fails)
    out = tmp_path / "cmp"
    assert run_app(app, ["compare", str(_scenario(tmp_path)), "--vary", "fabric.spines=1,2", "--out", str(out)]) == 1
    assert not out.exists()  # the first variant's folder was staged, not written into --out
    _no_staging_left(tmp_path)


def test_compare_ctrl_c_outside_the_event_loop_keeps_the_finished_variants(tmp_path, monkeypatch, capsys):
    module = sys.modules["aifabric.simulate"]
    real = module.simulate
    calls = []

    def second_interrupted(scenario, engine=None, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(scenario, engine, *args, **kwargs)

    monkeypatch.setattr(module, "simulate", second_interrupted)
    out = tmp_path / "cmp"
    args = ["compare", str(_scenario(tmp_path)), "--vary", "fabric.spines=1,2,4", "--out", str(out)]
    assert run_app(app, args) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "Traceback" not in err
    assert len(calls) == 2 and not (out / "compare.json").exists()
    first, second = sorted(p for p in out.iterdir())
    assert json.loads((first / "summary.json").read_text())["complete"] is True
    assert json.loads((second / "summary.json").read_text())["complete"] is False
    _no_staging_left(tmp_path)
    monkeypatch.setattr(module, "simulate", real)
    assert run_app(app, args) == 0  # the cut-off comparison's folder is aifabric's: written over
    assert json.loads((out / "compare.json").read_text())["variants"]


# ---------------------------------------------------------------- sweep and optimize

TINY = {
    "name": "tiny",
    "seed": 1,
    "cluster": {"gpu": "H100", "servers": 4, "gpus_per_server": 2, "nic_speed_gbps": 400},
    "fabric": {"topology": "rail-optimized", "servers_per_segment": 2, "spines": 1, "link_speed_gbps": 400},
    "workload": {
        "kind": "data-parallel",
        "model": {"kind": "feed-forward", "layer_widths": [256, 512, 256]},
        "global_batch_size": 64,
        "precision": "bf16",
    },
    "engine": "flow",
}


@pytest.fixture
def tiny(tmp_path):
    import yaml

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY), encoding="utf-8")
    return path


def test_sweep_refuses_a_folder_of_user_files(tiny, tmp_path, capsys):
    folder = _user_folder(tmp_path)
    before = _contents(folder)
    args = [
        "sweep",
        str(tiny),
        "--vary",
        "fabric.spines=1,2",
        "--backend",
        "local",
        "--workers",
        "1",
        "--no-reports",
        "--out",
        str(folder),
    ]
    assert run_app(app, args) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "notes.txt" in err and "--force" in err
    assert _contents(folder) == before
    assert run_app(app, [*args, "--force"]) == 0
    assert (folder / "notes.txt").read_text() == "my notes\n"
    assert json.loads((folder / "sweep.json").read_text())["complete"] is True


def test_sweep_ctrl_c_leaves_a_resumable_folder_saying_incomplete(tiny, tmp_path, monkeypatch, capsys):
    import aifabric.sweep.run as run

    def interrupted(backend, cases, out, payload, on_row):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "execute", interrupted)
    out = tmp_path / "sw"
    args = [
        "sweep",
        str(tiny),
        "--vary",
        "fabric.spines=1,2",
        "--backend",
        "local",
        "--workers",
        "1",
        "--no-reports",
        "--out",
        str(out),
    ]
    assert run_app(app, args) == 130
    err = capsys.readouterr().err
    assert "--resume" in err and "Traceback" not in err
    assert json.loads((out / "sweep.json").read_text())["complete"] is False


def test_optimize_is_staged_and_refuses_user_files(tiny, tmp_path, monkeypatch, capsys):
    folder = _user_folder(tmp_path)
    args = [
        "optimize",
        str(tiny),
        "--vary",
        "fabric.spines=1,2",
        "--objective",
        "cost",
        "--backend",
        "local",
        "--workers",
        "1",
        "--no-reports",
        "--trials",
        "2",
    ]
    assert run_app(app, [*args, "--out", str(folder)]) == 2
    assert "--force" in capsys.readouterr().err
    import aifabric.sweep.optimize as optimize

    def boom(*a, **k):
        raise RuntimeError("boom")

    real = optimize.search
    monkeypatch.setattr(optimize, "search", boom)
    out = tmp_path / "opt"
    assert run_app(app, [*args, "--out", str(out)]) == 1
    assert not out.exists()  # nothing half-written in --out
    _no_staging_left(tmp_path)
    monkeypatch.setattr(optimize, "search", real)
    assert run_app(app, [*args, "--out", str(out)]) == 0
    assert run_app(app, [*args, "--out", str(out)]) == 0  # its own earlier search: written over
    assert json.loads((out / "optimize.json").read_text())


# ---------------------------------------------------------------- train


def test_train_refuses_user_files_and_is_staged(tmp_path, capsys):
    pytest.importorskip("torch")
    folder = _user_folder(tmp_path)
    before = _contents(folder)
    args = ["train", "--model", "fnn", "--steps", "1"]
    assert run_app(app, [*args, "--out", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "--force" in err and _contents(folder) == before
    out = tmp_path / "t"
    assert run_app(app, [*args, "--out", str(out)]) == 0
    assert json.loads((out / "train.json").read_text())["complete"] is True
    assert run_app(app, [*args, "--out", str(out)]) == 0  # its own: written over
    assert run_app(app, [*args, "--out", ""]) == 2
    _no_staging_left(tmp_path)


# ---------------------------------------------------------------- odd places


@pytest.mark.parametrize(
    "args",
    [
        ["train", "--steps", "1", "--out", "{blocked}/run"],
        ["sweep", "{scenario}", "--vary", "fabric.spines=1,2", "--backend", "local", "--out", "{blocked}/run"],
        ["optimize", "{scenario}", "--vary", "fabric.spines=1,2", "--backend", "local", "--out", "{blocked}/run"],
        ["compare", "{scenario}", "--vary", "fabric.spines=1,2", "--out", "{blocked}/run"],
        ["replay", "{scenario}", "--scenario", "{scenario}", "--out", "{blocked}/run"],
        ["calibrate", "gemm", "--quick", "--out", "{blocked}/g.yaml"],
        ["fabric", "plan", "{scenario}", "--out", "{blocked}"],
    ],
)
def test_an_unwritable_or_odd_out_is_exit_2_naming_it(tmp_path, capsys, args):
    scenario = _scenario(tmp_path)
    blocked = tmp_path / "a-file"
    blocked.write_text("x")
    code = run_app(app, [a.format(scenario=scenario, blocked=blocked) for a in args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--out" in err and "internal error" not in err


# ---------------------------------------------------------------- fabric draw and polarization: one file each


@pytest.mark.parametrize(
    "args,name",
    [
        (["fabric", "draw", "{scenario}"], "topology.svg"),
        (["fabric", "polarization", "{scenario}", "--trials", "2"], "p.json"),
    ],
)
def test_a_single_file_of_the_user_is_not_written_over(tmp_path, monkeypatch, capsys, args, name):
    monkeypatch.chdir(tmp_path)
    scenario = _scenario(tmp_path)
    mine = tmp_path / name
    mine.write_text("<svg>my own drawing</svg>\n")
    argv = [a.format(scenario=scenario) for a in args] + ["--out", str(mine)]
    assert run_app(app, argv) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "--force" in err and mine.read_text() == "<svg>my own drawing</svg>\n"
    assert run_app(app, [*argv, "--force"]) == 0
    assert run_app(app, argv) == 0  # now its own: replaced
    if name.endswith(".svg"):
        import xml.dom.minidom

        xml.dom.minidom.parseString(mine.read_text())  # still a valid SVG document
    else:
        json.loads(mine.read_text())


def test_a_failed_run_without_out_leaves_no_empty_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(sys.modules["aifabric.simulate"], "simulate", boom)
    assert run_app(app, ["demo", "--scenario", "ch14"]) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ["train", "--steps", "1"],
        ["sweep", "{scenario}", "--vary", "fabric.spines=1,2", "--backend", "local"],
        ["optimize", "{scenario}", "--vary", "fabric.spines=1,2", "--backend", "local"],
        ["compare", "{scenario}", "--vary", "fabric.spines=1,2"],
        ["replay", "{scenario}", "--scenario", "{scenario}"],
        ["fabric", "plan", "{scenario}"],
        ["packet", "incast"],
        ["simulate", "{scenario}"],
    ],
)
def test_a_file_given_as_out_folder_is_exit_2_before_any_work(tmp_path, capsys, args):
    scenario = _scenario(tmp_path)
    a_file = tmp_path / "results.txt"
    a_file.write_text("mine")
    code = run_app(app, [a.format(scenario=scenario) for a in args] + ["--out", str(a_file)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--out" in err and "internal error" not in err and a_file.read_text() == "mine"
