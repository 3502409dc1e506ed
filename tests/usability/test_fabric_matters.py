"""A scenario where the fabric decides the outcome, and `compare` that shows it (or says it cannot).

The embedded `fabric` scenario puts every gradient AllReduce across the spine tier: ECMP vs spraying and
the leaf oversubscription change the iteration time. On the default demo no byte reaches a spine, and
`compare --vary fabric.load_balancing=...` says so instead of printing +0.0 % without a word. compare.html
holds the metrics table, a chart per metric and a link to each run's report, in well under a megabyte.
"""

from __future__ import annotations

import json
import re

import pytest

from aifabric.compare import variants
from aifabric.scenario import EMBEDDED, embedded_scenario_text
from aifabric.simulate import simulate

from .conftest import cli


@pytest.fixture(scope="module")
def fabric_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("fabric") / "scenario.yaml"
    path.write_text(embedded_scenario_text("fabric"), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def lb_compare(fabric_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("cmp") / "out"
    code, text, err = cli("compare", fabric_file, "--vary", "fabric.load_balancing=ecmp,spray", "--out", out)
    assert code == 0, err
    return out, text


def test_the_fabric_scenario_is_embedded_and_in_the_readme():
    from pathlib import Path

    assert "fabric" in EMBEDDED
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert "aifabric demo --scenario fabric" in readme
    assert "--vary fabric.load_balancing=ecmp,spray" in readme


def test_spraying_beats_ecmp_on_the_fabric_scenario(lb_compare):
    out, text = lb_compare
    ecmp, spray = json.loads((out / "compare.json").read_text())["variants"]
    assert spray["iteration_time_s"] < 0.9 * ecmp["iteration_time_s"]  # the fabric decides: > 10 %
    assert spray["max_util_spine"] < ecmp["max_util_spine"]  # the same bytes, spread over every spine
    assert spray["network_bytes"] == ecmp["network_bytes"] and spray["compute_time_s"] == ecmp["compute_time_s"]
    row = next(line for line in text.splitlines() if "iteration_time_s" in line)
    assert re.search(r"\(-\d+\.\d%\)", row)
    assert "cannot change anything" not in text


def test_oversubscription_slows_the_fabric_scenario(fabric_file):
    runs = [simulate(v.scenario) for v in variants([fabric_file], "fabric.leaf_oversubscription=1,4")]
    assert [len(r.fabric.nodes_of_kind("spine")) for r in runs] == [8, 2]  # derived from the ratio
    assert runs[1].results.iteration_time_s > 1.2 * runs[0].results.iteration_time_s


def test_compare_html_has_the_table_the_charts_and_the_runs(lb_compare):
    out, _ = lb_compare
    page = (out / "compare.html").read_text()
    assert len(page.encode()) < 1_000_000  # was 4.8 MB (plotly.js inline) for one bar chart
    assert "<table class='m'>" in page and "iteration_time_s" in page and "(-" in page
    charts = re.findall(r"<div class='chart'><h3>([a-z_A-Z]+)</h3><svg", page)
    assert "iteration_time_s" in charts and "max_util_spine" in charts and len(charts) >= 4
    links = sorted(set(re.findall(r"href='([^']+/report\.html)'", page)))
    assert len(links) == 2 and all((out / link).is_file() for link in links)
    for link in links:
        assert (out / link).parent.joinpath("summary.json").is_file()


def test_compare_says_when_a_varied_field_cannot_change_anything(tmp_path):
    """The default demo: every transfer between servers stays on its rail switch."""
    demo = tmp_path / "demo.yaml"
    demo.write_text(embedded_scenario_text("demo"))
    code, text, err = cli(
        "compare", demo, "--vary", "fabric.load_balancing=ecmp,spray", "--engine", "analytic", "--out", tmp_path / "out"
    )
    assert code == 0, err
    flat = " ".join(text.split())
    assert "fabric.load_balancing acts on the spine tier" in flat and "cannot change anything" in flat
    notes = json.loads((tmp_path / "out" / "compare.json").read_text())["notes"]
    assert notes and "no traffic crossed" in notes[0]
    assert "cannot change anything" in (tmp_path / "out" / "compare.html").read_text()


def test_compare_prints_column_labels_whole(tmp_path, monkeypatch):
    """Two columns used to read `workload.parallelism.order=tp-c…` on an 80-column terminal: the columns are the
    values now, the field is said once above the table."""
    from rich.console import Console

    import aifabric.cli.compare_cmd as compare_cmd

    monkeypatch.setattr(compare_cmd, "console", Console(width=80))
    demo = tmp_path / "demo.yaml"
    demo.write_text(embedded_scenario_text("demo"))
    code, text, err = cli(
        "compare",
        demo,
        "--vary",
        "workload.parallelism.order=tp-cp-dp-pp,tp-cp-pp-dp",
        "--engine",
        "analytic",
        "--out",
        tmp_path / "out",
    )
    assert code == 0, err
    header = next(line for line in text.splitlines() if "metric" in line)
    assert "tp-cp-dp-pp" in header and "tp-cp-pp-dp" in header and "…" not in text
    assert "workload.parallelism.order" in text
