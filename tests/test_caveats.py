"""The caveats said beside a run's numbers (report/caveats.py) agree with what the validation suite stored, and
reach the terminal, summary.json and report.html of a run they apply to, and only such a run."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from aifabric.report import caveats as cv
from aifabric.report.html import build_html
from aifabric.report.summary import build_summary
from aifabric.report.terminal import print_summary
from aifabric.scenario import ch14_scenario
from aifabric.simulate import simulate

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "fidelity" / "results.json"
CASES = RESULTS.with_name("cases.yaml")


def _with(**workload):
    s = ch14_scenario()
    return s.model_copy(update={"workload": s.workload.model_copy(update=workload)})


def _fp8_case_ids(sources: tuple[str, ...]) -> set[str]:
    """The suite's cases run in FP8 from these sources, by their own (merged) settings in
    bench/fidelity/cases.yaml."""
    cases = yaml.safe_load(CASES.read_text())["cases"]
    return {c["id"] for c in cases if c.get("precision") == "fp8" and c["source"] in sources}


@pytest.mark.parametrize("figures", [cv.FP8_2025, cv.FP8_2024, cv.BLACKWELL], ids=["2025", "2024", "blackwell"])
def test_the_fp8_figures_are_the_suites_stored_results(figures):
    stored = json.loads(RESULTS.read_text())
    ids = _fp8_case_ids(figures.sources)
    assert ids <= set(stored), ids - set(stored)
    errors = [100 * (stored[k]["predicted"] / stored[k]["published"] - 1) for k in ids]
    assert len(errors) == figures.cases
    assert (round(min(errors), 1), round(max(errors), 1)) == figures.range_pct
    assert round(sum(abs(e) for e in errors) / len(errors), 1) == figures.mean_pct


def test_every_fp8_case_of_the_suite_is_in_one_era():
    cases = yaml.safe_load(CASES.read_text())["cases"]
    fp8 = {c["id"] for c in cases if c.get("precision") == "fp8"}
    eras = (cv.FP8_2025, cv.FP8_2024, cv.BLACKWELL, cv.MOE)
    assert fp8 == set().union(*(_fp8_case_ids(e.sources) for e in eras))
    assert sum(len(_fp8_case_ids(e.sources)) for e in eras) == len(fp8)  # no case in two
    assert all(len(_fp8_case_ids(e.sources)) == e.cases for e in eras[:3])  # the dense eras are all FP8


def test_the_moe_figures_are_the_suites_stored_results_and_every_moe_case_is_counted():
    stored = json.loads(RESULTS.read_text())
    cases = yaml.safe_load(CASES.read_text())["cases"]
    moe = {c["id"] for c in cases if c["source"] in cv.MOE.sources}
    assert moe <= set(stored), moe - set(stored)
    errors = [100 * (stored[k]["predicted"] / stored[k]["published"] - 1) for k in moe]
    assert len(errors) == cv.MOE.cases
    assert (round(min(errors), 1), round(max(errors), 1)) == cv.MOE.range_pct
    assert round(sum(abs(e) for e in errors) / len(errors), 1) == cv.MOE.mean_pct
    # every case of an MoE model in the suite is one of them
    from aifabric.models.zoo import MODELS

    assert moe == {c["id"] for c in cases if getattr(MODELS.get(c.get("model_name", "")), "moe", None)}


def test_an_moe_run_gets_the_moe_caveat_before_its_gpus():
    from aifabric.scenario.load import demo_scenario

    llm = demo_scenario()
    spec = llm.workload.model.model_copy(update={"name": "mixtral-8x7b"})
    moe = llm.model_copy(update={"workload": llm.workload.model_copy(update={"model": spec})})
    lines = cv.caveats(moe)
    assert lines[0].startswith("Mixture of experts:") and cv.MOE_CASE_IDS in lines[0]
    assert lines[1:] == cv.caveats(llm)  # and the dense line of its GPU, as for a dense model
    assert not any(line.startswith("Mixture") for line in cv.caveats(llm))
    overridden = moe.model_copy(update={"workload": moe.workload.model_copy(update={"compute_efficiency": 0.4})})
    assert cv.caveats(overridden) == []


def test_only_an_fp8_run_on_the_kernel_model_gets_the_fp8_caveat():
    assert cv.caveats(ch14_scenario()) == []
    assert cv.caveats(_with(precision="fp8", compute_efficiency=0.4)) == []  # an override says its own time
    [text] = cv.caveats(_with(precision="fp8"))
    assert "FP8" in text and "optimistic" in text and "docs/validation.md" in text


def test_a_16_bit_llm_run_on_hopper_gets_the_hopper_caveat_and_no_other_gpu_does():
    from aifabric.scenario.load import demo_scenario

    llm = demo_scenario()
    assert llm.workload.kind == "llm-training" and llm.cluster.gpu == "H100" and llm.workload.precision != "fp8"
    [text] = cv.caveats(llm)
    assert text.startswith("Hopper:") and cv.LONG_SEQUENCE_CASES in text and "optimistic" in text
    for gpu, expected in (("H200", 1), ("A100", 0), ("B200", 1), ("GB200", 1)):
        other = llm.model_copy(update={"cluster": llm.cluster.model_copy(update={"gpu": gpu})})
        assert len(cv.caveats(other)) == expected, gpu
        if gpu.endswith("B200"):  # Blackwell's own line, in 16-bit and FP8 alike, not H100's
            [text] = cv.caveats(other)
            assert text.startswith("Blackwell:") and cv.BLACKWELL_CASE_IDS in text and "derived" in text
            fp8 = other.model_copy(update={"workload": other.workload.model_copy(update={"precision": "fp8"})})
            assert cv.caveats(fp8) == [text]
    overridden = llm.model_copy(update={"workload": llm.workload.model_copy(update={"compute_efficiency": 0.4})})
    assert cv.caveats(overridden) == []
    fp8 = llm.model_copy(update={"workload": llm.workload.model_copy(update={"precision": "fp8"})})
    [text] = cv.caveats(fp8)
    assert text.startswith("FP8:")


@pytest.mark.parametrize("precision", ["fp8", "bf16"])
def test_the_caveat_reaches_terminal_summary_and_report(precision):
    run = simulate(_with(precision=precision))
    out = io.StringIO()
    print_summary(run, Console(file=out, width=200))
    summary = build_summary(run)
    page = build_html(run)
    expected = cv.caveats(run.scenario)
    assert summary["caveats"] == expected
    assert ("accuracy" in out.getvalue()) == bool(expected)
    assert ("optimistic" in page) == bool(expected)
    if precision == "fp8":
        assert expected and "lower bound" in out.getvalue()


@pytest.mark.parametrize(
    ("figures", "gpus"), [(cv.FSDP_A100, cv.A100_GPUS), (cv.FSDP_H100, cv.HOPPER_GPUS)], ids=["a100", "h100"]
)
def test_the_fsdp_figures_are_the_suites_stored_results(figures, gpus):
    stored = json.loads(RESULTS.read_text())
    cases = yaml.safe_load(CASES.read_text())["cases"]
    ids = {c["id"] for c in cases if c["source"] in figures.sources and c["gpu"] in gpus}
    assert ids <= set(stored), ids - set(stored)
    errors = [100 * (stored[k]["predicted"] / stored[k]["published"] - 1) for k in ids]
    assert len(errors) == figures.cases
    assert (round(min(errors), 1), round(max(errors), 1)) == figures.range_pct
    assert round(sum(abs(e) for e in errors) / len(errors), 1) == figures.mean_pct


def test_an_fsdp_run_on_a100_gets_the_fsdp_caveat_and_a_hopper_run_cites_the_16_bit_fsdp_runs():
    from aifabric.scenario.load import demo_scenario

    llm = demo_scenario()
    a100 = llm.model_copy(update={"cluster": llm.cluster.model_copy(update={"gpu": "A100"})})
    assert cv.caveats(a100) == []  # Megatron-style, ZeRO-0: the A100 cases' own ground
    for field, value in (("zero", 3), ("fsdp", True)):
        par = a100.workload.parallelism.model_copy(update={field: value})
        fsdp = a100.model_copy(update={"workload": a100.workload.model_copy(update={"parallelism": par})})
        [text] = cv.caveats(fsdp)
        assert text.startswith("FSDP on A100:") and cv.FSDP_A100_CASE_IDS in text and "from -8 to +13 %" in text
    [hopper] = cv.caveats(llm)
    assert cv.FSDP_H100_CASE_IDS in hopper and "21-44 % optimistic" in hopper


def test_a_range_that_crosses_zero_is_said_with_its_signs():
    assert cv._span(cv.SuiteFigures("x", (), 1, (-1.4, 15.9), 6.4)) == "from -1 to +16 %"
    assert cv._span(cv.SuiteFigures("x", (), 1, (6.4, 15.6), 9.6)) == "6-16 % optimistic"
