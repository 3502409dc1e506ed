"""What a new user meets from the README: its commands do what it says, and say it in the user's words.

- the test command prints its result line (`N passed`);
- the demo prints MFU and HFU on the terminal, as the README says;
- the command table's `fabric rail-map FILE` works;
- the README says how to get PyTorch's CPU build on a stock machine and what happens without Chromium;
- help texts, docs and the schema cite the book by title and chapter, not the project's internal names for
  its sources ("the seeds", "errata #22");
- `aifabric --version` and `--help` import none of the heavy libraries (the command line imports lazily).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import COMMANDS_HELP, cli

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_test_command_prints_its_result_line():
    """`python -m pytest -q` (the README's command) on top of the project's pytest options prints `N passed`:
    an `-q` in addopts made it -qq, which ends at [100%] with no result line."""
    assert "python -m pytest -q" in README
    node = "tests/usability/test_cli_options.py::test_every_command_is_walked"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", node],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^1 passed in ", proc.stdout, re.MULTILINE), proc.stdout


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("demo") / "run"
    code, text, err = cli("demo", "--out", out)
    assert code == 0, err
    return out, text


def test_the_demo_prints_mfu_and_hfu(demo):
    out, text = demo
    row = next(line for line in text.splitlines() if "throughput" in line)
    summary = json.loads((out / "summary.json").read_text())
    assert f"MFU {100 * summary['mfu']:.1f}%" in row and f"HFU {100 * summary['hfu']:.1f}%" in row


def test_idle_time_says_mean_and_max_as_summary_json_does(demo):
    """The terminal's idle figure was a mean, summary.json's idle_time_s the maximum, neither said so."""
    out, text = demo
    summary = json.loads((out / "summary.json").read_text())
    ranks = summary["ranks"]
    assert summary["idle_time_s"] == pytest.approx(max(r["idle_s"] for r in ranks))
    assert summary["idle_time_mean_s"] == pytest.approx(sum(r["idle_s"] for r in ranks) / len(ranks))
    row = next(line for line in text.splitlines() if "GPU idle" in line)
    assert "mean" in row and "max" in row and "idle_time_s" in row


def test_the_report_shows_no_default_that_does_not_apply(demo):
    """A zoo model's dump held the custom-model defaults (bias: true, gated_mlp: false, top_k: 2)."""
    out, _ = demo
    scenario = json.loads((out / "summary.json").read_text())["scenario"]
    assert scenario["workload"]["model"] == {"name": "gpt3-13b"}
    assert "superspines" not in scenario["fabric"] and "custom" not in scenario["fabric"]
    html = (out / "report.html").read_text()
    dump = html[html.index("<h2>Scenario</h2>") :]
    assert "gated_mlp" not in dump and "top_k" not in dump and "name: gpt3-13b" in dump


def test_a_zoo_model_with_architecture_fields_is_refused(inputs, tmp_path):
    """The fields were ignored for a zoo model: now they are refused, naming them."""
    path = tmp_path / "s.yaml"
    path.write_text(
        inputs["scenario"]
        .read_text()
        .replace("  kind: data-parallel\n", "")
        .replace(  # one kind
            "model:\n    kind: feed-forward\n    layer_widths:\n    - 256\n    - 512\n    - 256",
            "model: {name: llama3-8b, gated_mlp: false}\n  kind: llm-training\n  parallelism: {tp: 2}",
        )
    )
    code, _, err = cli("validate", path)
    assert code == 2 and "gated_mlp" in err and "llama3-8b" in err


def test_rail_map_takes_the_file_the_command_table_shows(inputs):
    assert "rail-map [FILE]" in README
    code, text, err = cli("fabric", "rail-map", inputs["scenario"])
    assert code == 0, err
    assert "2 hosts x 1 rails (tiny" in text and "Rail-1" in text  # a rail switch of the file's, by its name
    code, text, _ = cli("fabric", "rail-map", inputs["scenario"], "--ports", "48")
    assert code == 0 and text.startswith("48-port")


def test_the_readme_says_how_to_get_the_cpu_build_and_what_chromium_is_for():
    assert "--index-url https://download.pytorch.org/whl/cpu" in README
    assert "Chromium" in README and "skipped" in README
    report_test = (ROOT / "tests" / "test_report.py").read_text()
    assert 'pytest.skip("chromium is not installed' in report_test  # the reason -rs prints


# what the project's internal names for its sources look like in a sentence
INTERNAL = re.compile(
    r"\bthe seeds\b|\bseeds'|\bseeds (?:Ch|Fig|§|Blog|Example)|\bSeeds:|errata|skeleton", re.IGNORECASE
)
NOT_EDITED_HERE: set[str] = set()


def test_help_texts_and_docs_cite_the_book_not_internal_names():
    texts = {"README.md": README}
    for doc in sorted((ROOT / "docs").glob("*.md")):
        if doc.name not in NOT_EDITED_HERE:
            texts[f"docs/{doc.name}"] = doc.read_text(encoding="utf-8")
    for yaml_file in sorted((ROOT / "src" / "aifabric" / "scenarios").glob("*.yaml")):
        texts[yaml_file.name] = yaml_file.read_text(encoding="utf-8")
    from aifabric.scenario.schema import Scenario

    texts["scenario schema"] = json.dumps(Scenario.model_json_schema())
    for args in COMMANDS_HELP:
        code, text, err = cli(*args, "--help")
        assert code == 0, (args, err)
        texts[" ".join(args) + " --help"] = text
    found = {where: sorted(set(m.group(0) for m in INTERNAL.finditer(text))) for where, text in texts.items()}
    assert not {k: v for k, v in found.items() if v}
    assert "Deep Learning for Network Engineers" in README


HEAVY = ("numpy", "scipy", "pydantic", "plotly", "scapy", "yaml", "torch")


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["demo", "--help"]])
def test_version_and_help_import_no_heavy_library(args):
    """`aifabric --version` took 2.2 s importing every command's libraries; the commands import them lazily.
    (Typer itself imports pydantic to convert a command's parameters: not counted for a command's help.)"""
    heavy = HEAVY if len(args) == 1 else tuple(m for m in HEAVY if m != "pydantic")
    code = (
        "import sys\nfrom aifabric.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY', sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in proc.stdout, proc.stdout[-400:] + proc.stderr
