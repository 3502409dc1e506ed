"""The report's fast paths write what the reference paths write, byte for byte (issue 13: writing the report of
3.5 million tasks).

- trace.json's rank segments: the compiled writer (report/_fast.py) against the f-string per line, on small runs
  with the compiled writer forced, and its number formatting against Python's repr on random values.
- A whole report folder written with AIFABRIC_PURE_PYTHON=1 and with every fast path forced: the same files.
- analysis.Flows.dims and bytes_by_dimension against their first definitions."""

from __future__ import annotations

import numpy as np
import pytest
from test_report_scale import PP, _no_pipeline

from aifabric.analysis import Flows, bytes_by_dimension
from aifabric.report import _fast
from aifabric.report import trace as trace_mod
from aifabric.report.write import write_report
from aifabric.scenario import embedded_scenario
from aifabric.scenario.load import parse_scenario
from aifabric.simulate import simulate

needs_numba = pytest.mark.skipif(not _fast.AVAILABLE, reason="numba is not installed")


@pytest.fixture(scope="module", params=["pp", "nopp", "ch14"])
def run(request):
    if request.param == "pp":
        return simulate(parse_scenario(PP))
    if request.param == "nopp":
        return simulate(parse_scenario(_no_pipeline()))
    return simulate(embedded_scenario("ch14"))


def _pure(monkeypatch) -> None:
    monkeypatch.setenv("AIFABRIC_PURE_PYTHON", "1")


def _compiled(monkeypatch) -> None:
    monkeypatch.delenv("AIFABRIC_PURE_PYTHON", raising=False)
    monkeypatch.setattr(_fast, "MIN_ROWS", 0)


@needs_numba
def test_segment_lines_compiled_equal_python(run, monkeypatch):
    _compiled(monkeypatch)
    fast = trace_mod._segment_lines(run, other_fast := {})
    assert isinstance(fast, trace_mod.Block) and fast.n > 0
    _pure(monkeypatch)
    ref = trace_mod._segment_lines(run, other_ref := {})
    assert isinstance(ref, list)
    assert fast.text == ",\n".join(ref)
    assert other_fast == other_ref


@needs_numba
def test_report_folder_same_with_and_without_fast_paths(run, monkeypatch, tmp_path):
    _pure(monkeypatch)
    ref = write_report(run, tmp_path / "ref")
    _compiled(monkeypatch)
    fast = write_report(run, tmp_path / "fast")
    names = sorted(p.name for p in ref.iterdir())
    assert names == sorted(p.name for p in fast.iterdir())
    for name in names:
        if name.endswith(".parquet"):
            continue  # written by pyarrow from the same columns as the CSV tables
        assert (ref / name).read_bytes() == (fast / name).read_bytes(), name


@needs_numba
def test_thousandths_written_as_python_repr():
    rng = np.random.default_rng(7)
    scale = 10.0 ** rng.integers(-3, 12, 20_000)
    v = np.round(rng.random(20_000) * scale * rng.choice([-1, 1], 20_000), 3)
    v = v[~((v == 0) & np.signbit(v))]  # -0.0: refused (the Python writer takes those runs)
    v = np.concatenate((v, [0.0, 0.001, 0.01, 0.1, 1.0, 10.0, 123.456, 999999999999.999, 5e-3, 0.5, 1e11]))
    k = _fast.exact_thousandths(v)
    assert k is not None
    n = len(v)
    enc = trace_mod._enc
    text = _fast.segment_text(["x"] * n, np.zeros(n, dtype=np.int64), ['"c"'], np.arange(n), np.arange(n), k, k, enc)
    ref = ",\n".join(
        f'{{"ph":"X","name":"x","cat":"c","pid":{i},"tid":{i},"ts":{a},"dur":{a}}}' for i, a in enumerate(v.tolist())
    )
    assert text == ref


@needs_numba
@pytest.mark.parametrize(
    "names",
    [
        ["fwd", "b\\u0000c", "é→😀", "", 'q"\\', "\\\\u0000", "tab\t", "fwd"],
        ["with\x00nul", "b", "b", "\x00"],  # a name holding a NUL: encoded one distinct name at a time
        ["one"],
    ],
)
def test_segment_names_encoded_as_json_does(names):
    n = len(names)
    kinds = np.arange(n) % 4
    cats = [trace_mod._enc(c) for c in ("compute", "communication", "idle", "bubble")]
    t = np.arange(n) * 1000 + 1500
    text = _fast.segment_text(names, kinds, cats, np.arange(n), np.arange(n) + 7, t, t, trace_mod._enc)
    ref = trace_mod._segment_lines_python(
        names, kinds.tolist(), cats, list(range(n)), list(range(7, n + 7)), t / 1000, t / 1000
    )
    assert text == ",\n".join(ref)


def test_values_not_in_thousandths_are_refused():
    assert _fast.exact_thousandths(np.array([1.0, 2.0005])) is None
    assert _fast.exact_thousandths(np.array([1.0, np.inf])) is None
    assert _fast.exact_thousandths(np.array([-0.0])) is None
    assert _fast.exact_thousandths(np.array([1e15])) is None
    assert _fast.exact_thousandths(np.array([0.001, 0.0, 12.5])).tolist() == [1, 0, 12500]


def test_factorize_keeps_first_appearance_order():
    codes, uniques = _fast.factorize(["b", "a", "b", "c", "a"])
    assert uniques == ["b", "a", "c"] and codes.tolist() == [0, 1, 0, 2, 1]
    codes, uniques = _fast.factorize([])
    assert uniques == [] and codes.tolist() == []


# --- analysis: dims and bytes per dimension -------------------------------------------------------------


def _dims_reference(f: Flows) -> list[str]:
    return sorted(set(np.unique(f.dim).tolist()) | set(np.unique(f.folded_dim).tolist()))


def _bytes_by_dimension_reference(f: Flows) -> dict[str, dict[str, float]]:
    out = {}
    for d in _dims_reference(f):
        m = f.dim == d
        out[d] = {
            "scale_up_bytes": float(f.size_bytes[m & f.scale_up].sum() + f.folded_bytes[f.folded_dim == d].sum()),
            "scale_out_bytes": float(f.size_bytes[m & ~f.scale_up].sum()),
        }
    return out


def _random_flows(seed: int, n: int, n_folded: int) -> Flows:
    rng = np.random.default_rng(seed)
    dims = np.array(["dp", "tp", "pp", "ep", "cp", "zero", "other"], dtype=object)
    return Flows(
        task=np.arange(n),
        src=rng.integers(0, 64, n),
        dst=rng.integers(0, 64, n),
        size_bytes=rng.random(n) * 1e8,
        start_s=rng.random(n),
        end_s=rng.random(n) + 1,
        scale_up=rng.random(n) < 0.4,
        dim=dims[rng.integers(0, rng.integers(1, 8), n)],
        folded_src=rng.integers(0, 64, n_folded),
        folded_dst=rng.integers(0, 64, n_folded),
        folded_bytes=rng.random(n_folded) * 1e7,
        folded_dim=dims[rng.integers(0, 7, n_folded)],
    )


@pytest.mark.parametrize("seed,n,n_folded", [(1, 0, 0), (2, 5, 0), (3, 0, 4), (4, 10_000, 50), (5, 100_000, 0)])
def test_dims_and_bytes_by_dimension_as_defined(seed, n, n_folded):
    f = _random_flows(seed, n, n_folded)
    assert f.dims == _dims_reference(f)
    assert bytes_by_dimension(f) == _bytes_by_dimension_reference(f)


def test_bytes_by_dimension_of_runs(run):
    assert run.flows.dims == _dims_reference(run.flows)
    assert bytes_by_dimension(run.flows) == _bytes_by_dimension_reference(run.flows)


# --- summary.json's indented JSON ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        {},
        [],
        {"a": [], "b": {}, "c": [[]], "d": [{}]},
        [1, 2.5, "x", None, True, False, -0.0, 1e300, 5e-324],
        {"a": {"b": [1, {"c": [], "d": {"e": 1.0}}], "f": 'é\n"→', "g": (1, [2, (3,)])}},
        {"ranks": [{"rank": k, "idle_s": k / 7, "name": f"r{k}"} for k in range(50)]},
        {1: 2, "a": {2.5: "x", None: 1}},  # keys json converts: left to json.dumps
        "text",
        3,
        None,
    ],
)
def test_dumps_indented_is_json_dumps(data):
    import json

    from aifabric.report.files import dumps_indented

    assert dumps_indented(data) == json.dumps(data, indent=2, sort_keys=False, allow_nan=False)


def test_dumps_indented_refuses_what_json_refuses():
    from aifabric.report.files import dumps_indented

    for bad in (float("nan"), {"a": [float("inf")]}, {"a": {"b": -float("inf")}}):
        with pytest.raises(ValueError):
            dumps_indented(bad)
    with pytest.raises(TypeError):
        dumps_indented({"a": [np.int64(1)]})


def test_summary_json_as_json_dumps_writes_it(run, tmp_path):
    import json

    from aifabric.report.files import write_json
    from aifabric.report.summary import build_summary

    summary = build_summary(run)
    text = write_json(tmp_path / "summary.json", summary).read_text()
    assert text == json.dumps(summary, indent=2, sort_keys=False, allow_nan=False) + "\n"


# --- CSV tables --------------------------------------------------------------------------------------------


def _csv_module(columns) -> str:
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerows(zip(*columns))
    return buf.getvalue()


@needs_numba
def test_csv_rows_compiled_as_the_csv_module_writes_them():
    from aifabric.report.tables import _QUOTED

    rng = np.random.default_rng(3)
    n = 2000
    columns = [
        list(range(n)),
        [f"it0/fwd é→{i}" for i in range(n)],
        (rng.random(n) * 10.0 ** rng.integers(-8, 20, n)).tolist(),  # repr, in both notations
        (rng.integers(-(10**12), 10**12, n) * 1.0).tolist(),  # integral floats: the integer and ".0"
        [""] * n,
        (-rng.integers(0, 2**62, n)).tolist(),
        np.where(rng.random(n) < 0.5, "nvlink", "scale-out").tolist(),
    ]
    assert _fast.csv_rows(columns, _QUOTED).tobytes().decode() == _csv_module(columns)
    for special in ([1e16, 1e15, -0.0, 0.0, 5e-324], [2**70, 1, -(2**70), 0, 5]):
        cols = [special, list(range(len(special)))]
        assert _fast.csv_rows(cols, _QUOTED).tobytes().decode() == _csv_module(cols)


@pytest.mark.parametrize(
    "column",
    [["a,b", "c"], ['say "x"', "c"], ["line\nbreak", "c"], [True, False], [1, 2.0], ["nul\x00", "c"], [None, 1]],
)
def test_csv_rows_leave_quoting_and_odd_types_to_the_csv_module(column):
    from aifabric.report.tables import _QUOTED

    assert _fast.csv_rows([column, [1, 2]], _QUOTED) is None
