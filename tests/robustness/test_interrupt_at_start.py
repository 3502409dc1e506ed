"""Issue 16, item 2: a Ctrl-C while the command starts (importing its modules) is exit 130 with a word, not a
Python traceback."""

from __future__ import annotations

import sys
import types

import pytest

import aifabric.cli


class _Interrupted(types.ModuleType):
    def __getattr__(self, name):
        raise KeyboardInterrupt


def test_ctrl_c_during_start_up(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "aifabric.cli.app", _Interrupted("aifabric.cli.app"))
    with pytest.raises(SystemExit) as exc:
        aifabric.cli.main(["simulate", "x.yaml"])  # what `aifabric simulate` runs first: the command tree's import
    assert exc.value.code == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "Traceback" not in err


def test_the_command_tree_is_still_exported():
    from aifabric.cli import app, run_app

    assert run_app(app, ["--version"]) == 0
