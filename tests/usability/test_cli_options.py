"""Every option of every command either works or is refused with exit 2 and a message naming it.

The walk goes over the typer app itself (every registered command and group, every parameter of its
function), so a new command or option is checked as soon as it exists, and fails here until the table of
base arguments below knows it. For each option a value of the wrong type, one out of range (negative
counts, NaN rates, a folder where a file is written, a file where a folder is, a path that does not exist)
and an unknown word for options that take names; each must end with exit code 2, the option (or the bad
value) named on stderr, and no traceback. Flags are checked to be consumed: each parameter of a command is
read in its body (an option accepted and never read is ignored silently).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import typing
from pathlib import Path

import pytest

from .conftest import COMMANDS, cli


def _params(callback):
    """(name, python type, OptionInfo | ArgumentInfo) of a command function's parameters."""
    hints = typing.get_type_hints(callback)
    for name, p in inspect.signature(callback).parameters.items():
        yield name, hints.get(name), p.default


def _flag(info) -> str:
    decls = [d.split("/")[0] for d in info.param_decls if d.startswith("--")]
    return decls[0]


def _is_option(info) -> bool:
    return type(info).__name__ == "OptionInfo"


def _base(inputs) -> dict[tuple[str, ...], list[str]]:
    """Arguments with which each command runs: what a bad option is added to."""
    sc, tr, nccl = str(inputs["scenario"]), str(inputs["trace"]), str(inputs["nccl"])
    ops = (
        "allreduce",
        "reducescatter",
        "allgather",
        "broadcast",
        "reduce",
        "alltoall",
        "alltoallv",
        "sendrecv",
        "barrier",
    )
    base = {
        (): ["models"],
        ("demo",): ["demo"],
        ("validate",): ["validate", sc],
        ("simulate",): ["simulate", sc],
        ("compare",): ["compare", sc, sc],
        ("workload",): ["workload", sc],
        ("models",): ["models"],
        ("pipeline",): ["pipeline"],
        ("fabric", "plan"): ["fabric", "plan", sc],
        ("fabric", "polarization"): ["fabric", "polarization", sc],
        ("fabric", "draw"): ["fabric", "draw", sc],
        ("fabric", "rail-map"): ["fabric", "rail-map"],
        ("fabric", "config"): ["fabric", "config", sc],
        ("collective", "bench"): ["collective", "bench"],
        ("collective", "bootstrap"): ["collective", "bootstrap"],
        ("packet",): ["packet", "incast"],
        ("train",): ["train"],
        ("replay",): ["replay", tr, "--scenario", sc],
        ("learn",): ["learn", "neuron"],
        ("calibrate", "nccl-tests"): ["calibrate", "nccl-tests", nccl],
        ("calibrate", "gemm"): ["calibrate", "gemm"],
        ("calibrate", "attention"): ["calibrate", "attention"],
        ("sweep",): ["sweep", sc, "--vary", "cluster.nic_speed_gbps=200,400", "--backend", "local"],
        ("optimize",): ["optimize", sc, "--vary", "cluster.nic_speed_gbps=200,400", "--backend", "local"],
    }
    base.update({("collective", op): ["collective", op] for op in ops})
    return base


# commands whose options are also checked in another input form (the same flags, another positional form)
OTHER_FORMS = {
    ("packet",): lambda i: ["packet", str(i["scenario"])],
    ("fabric", "rail-map"): lambda i: ["fabric", "rail-map", str(i["scenario"])],
    ("compare",): lambda i: ["compare", str(i["scenario"]), "--vary", "cluster.nic_speed_gbps=200,400"],
}

# what a path option names: a folder written into, a file written, or an input read
PATH_KIND = {"--out": "dir", "--pcap": "file", "--scenario": "input", "--prices": "input", "--qos": "input"}
PATH_KIND_OF = {
    (("fabric", "draw"), "--out"): "file",
    (("fabric", "polarization"), "--out"): "file",
    (("calibrate", "nccl-tests"), "--out"): "file",
    (("calibrate", "gemm"), "--out"): "file",
    (("calibrate", "attention"), "--out"): "file",
    (("fabric", "config"), "--import"): "input",
}
# string options whose every value is valid (none yet): an unknown word must be refused everywhere else
FREE_TEXT: set[tuple[tuple[str, ...], str]] = set()


def _bad_values(path: tuple[str, ...], flag: str, kind, inputs) -> list[str]:
    elem = typing.get_args(kind)[0] if typing.get_origin(kind) is list else kind
    if elem is bool:
        return []
    if elem is int:
        return ["x", "-1"]
    if elem is float:
        return ["x", "-1", "nan"]
    if elem is Path or (elem is str and flag == "--scenario" and path == ("collective", "bench")):
        what = PATH_KIND_OF.get((path, flag)) or PATH_KIND.get(flag)
        assert what, f"{' '.join(path)} {flag}: say in PATH_KIND what this path option names"
        return [str(inputs[{"dir": "file", "file": "dir", "input": "missing"}[what]])]
    if elem is str:
        return [] if (path, flag) in FREE_TEXT else ["no-such-choice"]
    raise AssertionError(f"{' '.join(path)} {flag}: no bad values for type {kind}")


def _cases(inputs):
    base = _base(inputs)
    missing = set(COMMANDS) - set(base)
    assert not missing, f"commands without base arguments in this test: {sorted(missing)}"
    for path, callback in COMMANDS.items():
        forms = [base[path]] + ([OTHER_FORMS[path](inputs)] if path in OTHER_FORMS else [])
        for _name, kind, info in _params(callback):
            if not _is_option(info):
                continue
            flag = _flag(info)
            for value in _bad_values(path, flag, kind, inputs):
                for form in forms:
                    args = [flag, value, *form] if path == () else [*form, flag, value]
                    yield path, flag, value, args


def test_every_command_is_walked():
    names = {" ".join(p) for p in COMMANDS}
    assert {
        "demo",
        "simulate",
        "compare",
        "packet",
        "replay",
        "fabric rail-map",
        "collective bench",
        "calibrate gemm",
        "calibrate attention",
    } <= names and len(names) > 25


def test_every_bad_option_value_is_refused_with_exit_2(inputs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing a command might write lands in the repository
    failures = []
    n = 0
    for _path, flag, value, args in _cases(inputs):
        n += 1
        code, out, err = cli(*args)
        named = flag in err or value in err or flag.lstrip("-") in err
        if code != 2 or not named or "Traceback" in err + out:
            failures.append(f"aifabric {' '.join(args)} -> exit {code}: {(err or out).strip()[-300:]!r}")
    assert n > 150
    assert not failures, "\n".join(failures)


def test_every_argument_that_names_a_file_is_checked(inputs):
    """Positional files that do not exist: exit 2 naming the path."""
    missing = str(inputs["missing"])
    cases = [
        ["validate", missing],
        ["simulate", missing],
        ["workload", missing],
        ["compare", missing, missing],
        ["fabric", "plan", missing],
        ["fabric", "draw", missing],
        ["fabric", "polarization", missing],
        ["fabric", "rail-map", missing],
        ["packet", missing],
        ["replay", missing, "--scenario", str(inputs["scenario"])],
        ["calibrate", "nccl-tests", missing],
        ["sweep", missing, "--vary", "fabric.spines=1,2"],
        ["optimize", missing, "--vary", "fabric.spines=1,2"],
    ]
    for args in cases:
        code, out, err = cli(*args)
        assert code == 2 and missing in err and "Traceback" not in err, (args, code, err)


def _reads(callback, name: str) -> bool:
    tree = ast.parse(textwrap.dedent(inspect.getsource(callback)))
    fn = tree.body[0]
    return any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        for stmt in fn.body
        for n in ast.walk(stmt)
    )


# read elsewhere than in the command's body
READ_ELSEWHERE = {((), "debug"): "cli.errors.run_app reads --debug before parsing (tracebacks of internal errors)"}


def test_every_option_is_read_by_its_command():
    """A parameter its command never reads is an option accepted and silently ignored (an option with a
    callback is read by the callback)."""
    unread = [
        f"{' '.join(path) or '(root)'} {_flag(info) if _is_option(info) else name}"
        for path, callback in COMMANDS.items()
        for name, _, info in _params(callback)
        if not _reads(callback, name) and getattr(info, "callback", None) is None and (path, name) not in READ_ELSEWHERE
    ]
    assert not unread, unread


@pytest.mark.parametrize(
    "args",
    [
        ["fabric", "rail-map", "--ports", "48", "--hosts", "4", "--rails", "8"],
        ["collective", "allreduce", "--ranks", "4", "--elements", "16", "--explain"],
        ["collective", "broadcast", "--ranks", "4", "--gpus-per-server", "2", "--root", "3"],
        ["collective", "bootstrap", "--nnodes", "1", "--nproc-per-node", "2"],
        ["pipeline", "--stages", "4", "--micro-batches", "4", "--schedule", "1f1b"],
    ],
)
def test_good_values_still_work(args):
    code, out, err = cli(*args)
    assert code == 0, err


def test_a_root_it_does_not_have_is_refused_for_an_operation_without_one():
    code, _, err = cli("collective", "allreduce", "--root", "2")
    assert code == 2 and "--root" in err
