"""Issue 16, items 5 and 7: command-line values that ran out of memory, never finished, crashed (exit 1) or were
silently ignored are refused with exit 2, naming the option, before any work."""

from __future__ import annotations

import time

import pytest

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.compare import parse_vary
from aifabric.errors import InputError

REFUSED = [
    (["collective", "allreduce", "--ranks", "100000"], "--ranks"),  # MemoryError: 37 GiB
    (["collective", "alltoall", "--ranks", "100000"], "--ranks"),
    (["collective", "allreduce", "--elements", "9223372036854775808"], "--elements"),  # printed negative sends
    (["collective", "bench", "--nvlink-gBps", "1e-300"], "--nvlink-gBps"),
    (["collective", "bench", "--max-bytes", "1000000000000000"], "--max-bytes"),
    (["collective", "bench", "--cpu-vendor", "via"], "--cpu-vendor"),
    (["fabric", "rail-map", "--ports", "1000000000"], "--ports"),  # 7.8 GB, then a traceback
    (["packet", "incast", "--size-mb", "inf"], "--size-mb"),  # OverflowError
    (["packet", "incast", "--size-mb", "100000"], "--size-mb"),  # unbounded
    (["packet", "incast", "--flow", "1000"], "--flow"),  # exit 0, nothing traced
    (["pipeline", "--schedule", "1f1b", "--backward-steps", "100000000"], "--backward-steps"),  # past 60 s
    (["pipeline", "--schedule", "interleaved", "--chunks", "100000000"], "--chunks"),
    (
        ["pipeline", "--schedule", "interleaved", "--chunks", "16", "--stages", "64", "--micro-batches", "256"],
        "--micro-batches",
    ),
]


@pytest.mark.parametrize("args,flag", REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_refused_with_exit_2_naming_the_option(args, flag, capsys):
    t0 = time.perf_counter()
    code = run_app(app, args)
    err = capsys.readouterr().err
    assert code == 2, err[-400:]
    assert flag in err and "Traceback" not in err
    assert time.perf_counter() - t0 < 10


def test_vary_takes_a_yaml_list_and_refuses_empty_values():
    assert parse_vary("fabric.spines=[1, 2]") == (("fabric", "spines"), [1, 2])
    assert parse_vary("fabric.spines=1,2..3") == (("fabric", "spines"), [1, 2, 3])
    for bad in ("fabric.spines=1,,2", "fabric.spines=[1", "fabric.spines=1..100000000"):
        with pytest.raises(InputError) as exc:
            parse_vary(bad)
        assert exc.value.problems[0].path == "--vary"


def test_compare_with_a_broken_vary_value_exits_2(tmp_path, capsys):
    from aifabric.scenario import ch14_scenario_text

    path = tmp_path / "s.yaml"
    path.write_text(ch14_scenario_text())
    assert run_app(app, ["compare", str(path), "--vary", "fabric.spines=[1", "--out", str(tmp_path / "c")]) == 2
    assert "--vary" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize(
    "args,flag",
    [
        (["fabric", "plan", "{scenario}", "--out", "{blocked}/plan"], "--out"),
        (["fabric", "draw", "{scenario}", "--out", "{blocked}/t.svg"], "--out"),
        (["fabric", "polarization", "{scenario}", "--out", "{blocked}/p.json"], "--out"),
        (["packet", "incast", "--out", "{blocked}/run"], "--out"),
        (["packet", "incast", "--pcap", "{blocked}/x.pcap"], "--pcap"),
        (["simulate", "{scenario}", "--out", "{blocked}/run"], "--out"),
    ],
)
def test_an_unwritable_out_is_refused_before_the_run(tmp_path, capsys, args, flag):
    """A place that cannot be written (here: under a regular file) is exit 2 naming the option, not an OS error
    after the whole run (exit 1)."""
    from aifabric.scenario import ch14_scenario_text

    scenario = tmp_path / "s.yaml"
    scenario.write_text(ch14_scenario_text())
    blocked = tmp_path / "a-file"
    blocked.write_text("x")
    argv = [a.format(scenario=scenario, blocked=blocked) for a in args]
    assert run_app(app, argv) == 2
    err = capsys.readouterr().err
    assert flag in err and "internal error" not in err
