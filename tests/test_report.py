"""The run's output folder: report.html (checked in headless Chromium), trace.json, CSV tables, partial results."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from aifabric.report import build_summary
from aifabric.scenario import ch14_scenario, demo_scenario
from aifabric.simulate import simulate


def _sigint_at_its_default() -> None:
    """`preexec_fn` of a child a test interrupts: SIGINT at its default action, as a terminal starts a command,
    whatever the test runner inherited (a background job starts with SIGINT ignored, and Python then installs no
    handler: the Ctrl-C would do nothing)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    from aifabric.cli.run_cmds import write_report

    out = tmp_path_factory.mktemp("report")
    write_report(simulate(ch14_scenario()), out, "name: x\n")
    return out


@pytest.fixture(scope="module")
def llm_run_dir(tmp_path_factory) -> Path:
    """The embedded demo: LLM training in 3D parallelism (tensor, pipeline, data), folded NVLink collectives."""
    from aifabric.cli.run_cmds import write_report

    out = tmp_path_factory.mktemp("report-llm")
    write_report(simulate(demo_scenario()), out, "name: x\n")
    return out


def test_output_files(run_dir):
    for name in (
        "summary.json",
        "report.html",
        "trace.json",
        "links.csv",
        "collectives.csv",
        "ranks.csv",
        "flows.csv",
        "scenario.yaml",
    ):
        assert (run_dir / name).stat().st_size > 0, name
    assert not [p for p in run_dir.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_trace_is_chrome_trace_event_format(run_dir):
    trace = json.loads((run_dir / "trace.json").read_text())
    events = trace["traceEvents"]
    threads = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert len([t for t in threads if t[1] < 100_000]) == 8  # one track per rank
    spans = [e for e in events if e["ph"] == "X"]
    assert spans and all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)
    assert {e["cat"] for e in spans} == {"compute", "communication", "transfer"}
    counters = [e for e in events if e["ph"] == "C"]
    assert counters and all("Gb/s" in e["args"] for e in counters)
    nic_to_rail = [e["args"]["Gb/s"] for e in counters if "/nic" in e["name"] and "->rail" in e["name"]]
    # a NIC's link at the path's achievable rate: PCIe Gen5 x16 at 75 % (48 GB/s = 384 Gb/s) holds the 400G NIC
    assert max(nic_to_rail) == pytest.approx(384, rel=1e-6)


def test_csv_tables_agree_with_summary(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    with open(run_dir / "flows.csv") as fh:
        flows = list(csv.DictReader(fh))
    assert len(flows) == summary["flows"]["count"]
    assert sum(float(f["bytes"]) for f in flows) == pytest.approx(summary["flows"]["bytes"])
    with open(run_dir / "links.csv") as fh:
        assert len(list(csv.DictReader(fh))) == len(summary["links"])


def test_html_is_self_contained(run_dir):
    text = (run_dir / "report.html").read_text()
    assert "<script src=" not in text  # nothing fetched: plotly.js is inline
    assert text.count("Plotly.newPlot") >= 5
    assert "<h2>Scenario</h2>" in text


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.parametrize("which", ["run_dir", "llm_run_dir"])
def test_report_renders_in_headless_chromium(which, request, tmp_path):
    run_dir = request.getfixturevalue(which)
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install chromium (see .ci/run)")
        pytest.skip("chromium is not installed: report.html is not checked in a real browser (README: Tests)")
    proc = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            (run_dir / "report.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    dom = proc.stdout
    assert "<body" in dom, proc.stderr[-2000:]
    n_plots = int(dom.split('class="note">')[-1].split(" plots")[0])
    assert dom.count('class="main-svg"') >= n_plots  # every plot was drawn by plotly.js
    errors = dom.split('id="js-errors">')[1].split("</div>")[0]
    assert errors.strip() == "", errors
    if which == "llm_run_dir":  # the Gantt's legend names the bubble; the traffic matrix has its menu
        assert ">bubble<" in dom and "updatemenu" in dom


def test_interrupted_run_leaves_valid_partial_results():
    calls = {"n": 0}

    def progress(done, total):
        calls["n"] += 1
        if done >= 40:
            raise KeyboardInterrupt

    run = simulate(ch14_scenario(), progress=progress)
    assert run.results.complete is False
    summary = build_summary(run)
    assert summary["complete"] is False
    json.dumps(summary)  # serializable
    full = simulate(ch14_scenario()).results
    assert run.results.flow_count < full.flow_count


def test_ctrl_c_on_the_command_leaves_a_readable_folder(ch14_data, write_scenario, tmp_path):
    """A real SIGINT to `aifabric simulate`: exit 130, and every file written, summary.json saying complete=false."""
    import signal
    import sys
    import time

    ch14_data["cluster"].update(servers=64, gpus_per_server=8)
    ch14_data["fabric"].update(spines=8, switch_radix=128)
    ch14_data["workload"]["global_batch_size"] = 512 * 64
    path = write_scenario(ch14_data)
    out = tmp_path / "out"
    # on the reference loop: the compiled one finishes this run within a second of its first progress line
    # (its own SIGINT handling is tested in tests/test_fastloop.py)
    env = {**os.environ, "AIFABRIC_PURE_PYTHON": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "aifabric", "simulate", str(path), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=_sigint_at_its_default,
    )
    # wait until the event loop runs (the CLI says so on stderr), then interrupt it
    line = before = proc.stderr.readline()
    while line and "simulating" not in line:
        line = proc.stderr.readline()
        before += line
    assert "simulating" in line
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the simulation finished before the interrupt arrived")
    assert proc.returncode == 130, stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False
    assert (out / "report.html").exists() and (out / "trace.json").exists()
    assert "interrupted" in (stdout + stderr)
    # a large cluster's stages are announced with the time so far (the event loop has its bar)
    assert "lowering it to a task graph" in before and "writing the report" in stderr
