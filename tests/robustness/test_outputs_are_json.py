"""Issue 16, item 5: what aifabric writes as JSON is JSON (Python's json module writes NaN and Infinity,
which no JSON reader takes)."""

from __future__ import annotations

import json

from aifabric.report.files import write_json


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_are_written_as_null(tmp_path):
    path = write_json(
        tmp_path / "s.json", {"t": float("inf"), "xs": [1.0, float("nan")], "n": {"m": -float("inf")}, "ok": 2.5}
    )
    assert _strict(path.read_text()) == {"t": None, "xs": [1.0, None], "n": {"m": None}, "ok": 2.5}
