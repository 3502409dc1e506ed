"""Issue 16, item 8: `replay` on corrupt traces exits 2 naming the line and the field (it crashed with KeyError,
TypeError, IndexError, UnicodeDecodeError, or replayed nonsense: negative bytes, NaN times, "no" taken as true,
an empty trace in 0 s, a collective one rank never joins)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.scenario import ch14_scenario_text

WORLD = 4


def _records() -> list[dict]:
    recs = []
    for r in range(WORLD):
        recs.append(
            {
                "kind": "meta",
                "rank": r,
                "world_size": WORLD,
                "layout": {"dp": WORLD, "tp": 1, "pp": 1},
                "config": {"model": "fnn"},
                "backend": "gloo",
            }
        )
        recs.append({"kind": "step", "rank": r, "step": 0, "start_s": 0.0, "end_s": 0.012, "loss": 1.0})
        recs.append(
            {
                "kind": "comm",
                "rank": r,
                "seq": 1,
                "op": "all-reduce",
                "group": list(range(WORLD)),
                "dtype": "float32",
                "elements": 1000,
                "bytes": 4000,
                "tag": "grad-bucket0",
                "step": 0,
                "start_s": 0.010,
                "end_s": 0.011,
                "async_op": False,
            }
        )
    return recs


def _comm(recs: list[dict], rank: int) -> dict:
    return next(x for x in recs if x["kind"] == "comm" and x["rank"] == rank)


def _set(key, value, rank=1):
    def change(recs):
        _comm(recs, rank)[key] = value
        return recs

    return change


def _drop(key, rank=1):
    def change(recs):
        del _comm(recs, rank)[key]
        return recs

    return change


CORRUPT = {
    "no seq": (_drop("seq"), "seq"),
    "no start_s": (_drop("start_s"), "start_s"),
    "empty group": (_set("group", []), "group"),
    "group of strings": (_set("group", ["a", "b"]), "group"),
    "negative bytes": (_set("bytes", -5), "bytes"),
    "async_op 'no'": (_set("async_op", "no"), "async_op"),
    "end before start": (_set("end_s", -1.0), "end_s"),
    "rank outside the world": (_set("group", [0, 1, 2, 9]), "outside the world"),
    "a rank never joins": (
        lambda recs: [x for x in recs if not (x["kind"] == "comm" and x["rank"] == 3)],
        "no match on rank 3",
    ),
    "elements differ": (_set("elements", 7), "elements"),
    "only meta records": (lambda recs: [x for x in recs if x["kind"] == "meta"], "nothing to replay"),
}


def _scenario(tmp_path: Path) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(ch14_scenario_text())
    return path


def _replay(tmp_path: Path, text: str | bytes, capsys) -> tuple[int, str]:
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(text if isinstance(text, bytes) else text.encode())
    code = run_app(app, ["replay", str(trace), "--scenario", str(_scenario(tmp_path)), "--out", str(tmp_path / "r")])
    return code, capsys.readouterr().err


def test_a_good_trace_replays(tmp_path, capsys):
    code, err = _replay(tmp_path, "\n".join(json.dumps(x) for x in _records()) + "\n", capsys)
    assert code == 0, err


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_trace_exits_2_naming_line_and_field(tmp_path, capsys, case):
    change, said = CORRUPT[case]
    code, err = _replay(tmp_path, "\n".join(json.dumps(x) for x in change(_records())) + "\n", capsys)
    assert code == 2, err
    assert said in err and "Traceback" not in err and "internal error" not in err
    assert "line" in err or case == "only meta records"
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "text,said",
    [
        (b'{"kind": "meta", "rank": 0, "world_size": 1}\n\xff\xfe\n', "UTF-8"),
        ('{"kind": "comm", "rank": 0, "seq": 1, "start_s": NaN}\n', "NaN"),
        ('{"kind": "step", "rank": 0, "step": 0, "start_s": 0, "end_s": Infinity}\n', "Infinity"),
        ("[1, 2]\n", "JSON object"),
    ],
)
def test_not_a_trace_exits_2(tmp_path, capsys, text, said):
    code, err = _replay(tmp_path, text, capsys)
    assert code == 2 and said in err and "Traceback" not in err


def test_problems_are_all_listed_with_their_lines(tmp_path, capsys):
    recs = _records()
    _comm(recs, 1)["bytes"] = -1
    _comm(recs, 2)["async_op"] = "yes"
    code, err = _replay(tmp_path, "\n".join(json.dumps(x) for x in recs) + "\n", capsys)
    assert code == 2 and "2 problems" in err and "line 6" in err and "line 9" in err
