"""The validation suite's cases (bench/fidelity/cases.yaml): complete, quoted as published, runnable.

The suite itself (python bench/fidelity.py) runs minutes and reports errors; it is not a test with a
tolerance: its figures are in docs/validation.md. These tests keep its inputs honest.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from aifabric.scenario import parse_scenario

BENCH = Path(__file__).resolve().parents[1] / "bench" / "fidelity.py"
METRICS = {"iteration_time_s", "tflops_per_gpu", "tokens_per_s_per_gpu", "layer_ms", "busbw_gBps"}


@pytest.fixture(scope="module")
def fidelity():
    spec = importlib.util.spec_from_file_location("fidelity", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fidelity"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def cases(fidelity):
    return fidelity.load_cases()


def test_every_case_names_its_source_and_quotes_its_figure(cases):
    sources, items = cases
    ids = [c["id"] for c in items]
    assert len(ids) == len(set(ids))
    for c in items:
        assert c["source"] in sources, c["id"]
        assert c["metric"] in METRICS, c["id"]
        assert c["published"] > 0 and c["where"], c["id"]
        # the figure appears in the quoted text as the source prints it
        assert f"{c['published']:g}" in c["quote"].replace(",", ""), c["id"]
    assert len({c["source"] for c in items if c.get("runnable", True)}) >= 4
    assert sum(1 for c in items if c.get("runnable", True)) >= 12


def test_every_runnable_training_case_is_a_valid_scenario(cases, fidelity):
    """Each case's model, GPUs, network and plan make a scenario the tool accepts (layers divide the
    stages, batch divides the replicas, the fabric's ports suffice)."""
    _, items = cases
    for c in items:
        if c.get("runnable", True) and c["metric"] in (*fidelity.TRAINING_METRICS, "layer_ms"):
            s = parse_scenario(fidelity.scenario_of(c))
            assert s.cluster.total_gpus == fidelity.gpus_of(c), c["id"]


def test_the_throughput_formula_is_narayanan_eq3(fidelity):
    """Eq. (3) with Table 1's 1T row and the published 163 TFLOP/s on 3,072 GPUs gives an iteration of about
    102.6 s (the formula counts the recomputation's forward)."""
    case = {"global_batch_size": 3072, "seq_len": 2048, "layers": 128, "hidden": 25600, "vocab": 51200}
    flops = fidelity.narayanan_eq3_flops(case)
    assert flops / (163e12 * 3072) == pytest.approx(102.6, rel=0.01)


def test_nemo_flops_reproduce_each_nemo_rows_tflops_from_its_tokens_per_second(cases, fidelity):
    """NeMo's performance tables print both tokens/s per GPU and model TFLOP/s per GPU: the formula the cases
    count with (`nemo_flops`, from the rows' own model shapes: GPT-3 and Llama) turns the first into the second
    within the table's rounding, so predicted and published TFLOP/s are counted alike. The pre-training table's
    columns: model, GPUs, GBS, MBS, sequence length, ...; the long-input one's: sequence length (K), GPUs, GBS, ...;
    both print tokens/s per GPU in the tenth column, both figures rounded to integers (the tolerance: half a unit
    of each)."""
    _, items = cases
    rows = [c for c in items if c["source"] in ("nemo2024", "nemo2024cp")]
    assert len(rows) >= 18
    for c in rows:
        cells = [x.strip() for x in c["quote"].split("|")[1:-1]]
        gpus, tokens_per_gpu_s = int(cells[1]), float(cells[9])
        seq = int(cells[0]) * 1024 if c["source"] == "nemo2024cp" else int(cells[4])
        assert gpus == fidelity.gpus_of(c), c["id"]
        assert int(cells[2]) == c["global_batch_size"] and seq == c["seq_len"], c["id"]
        per_token = fidelity.nemo_flops(c) / (c["global_batch_size"] * c["seq_len"])
        rounding = 0.5 / tokens_per_gpu_s + 0.5 / c["published"]
        assert per_token * tokens_per_gpu_s / 1e12 == pytest.approx(c["published"], rel=rounding), c["id"]


def test_megatron_bridge_flops_count_the_causal_half_and_reproduce_each_rows_tflops(cases, fidelity):
    """Megatron Bridge's table (NeMo 25.11) prints tokens/s and model TFLOP/s per GPU too, in its 14th and 15th
    columns, with GBS in the 4th and the sequence length in the 6th: its count is NeMo's with the attention
    term halved (the causal triangle, 6 s / h for 12 s / h), and NeMo's full-square count misses every row by
    more than the rounding."""
    _, items = cases
    rows = [c for c in items if c["source"] in ("bridge2025", "bridge2025b200")]
    assert len(rows) >= 5
    for c in rows:
        # a cell may add the MXFP8 run's figure in parentheses: "30624 (29521)"; the cases take the first (FP8-CS)
        cells = [x.strip().split(" (")[0] for x in c["quote"].split("|")[1:-1]]
        gpus, tokens_per_gpu_s = int(cells[1]), float(cells[13])
        assert gpus == fidelity.gpus_of(c) and int(cells[14]) == c["published"], c["id"]
        assert cells[2] == "FP8-CS" and int(cells[4]) == c["micro_batch_size"], c["id"]
        assert int(cells[3]) == c["global_batch_size"] and int(cells[5]) == c["seq_len"], c["id"]
        assert int(cells[7]) == c["tp"] and int(cells[8]) == c["pp"] and int(cells[9]) == c["cp"], c["id"]
        assert c["flops"] == "nemo-causal"
        tokens = c["global_batch_size"] * c["seq_len"]
        rounding = 0.5 / tokens_per_gpu_s + 0.5 / c["published"]
        causal = fidelity.FLOPS["nemo-causal"](c) / tokens * tokens_per_gpu_s / 1e12
        full = fidelity.nemo_flops(c) / tokens * tokens_per_gpu_s / 1e12
        assert causal == pytest.approx(c["published"], rel=rounding), c["id"]
        assert abs(full / c["published"] - 1) > 0.02, c["id"]


def test_llm_foundry_rows_are_read_as_printed_and_the_built_mpt_has_their_parameter_count(cases, fidelity):
    """LLM Foundry's MPT table: the plan (micro-batch, gradient accumulation, global batch, GPUs, activation
    checkpointing) and the figure are the quote's own cells, the tokens/s per GPU is its tokens/s over the GPUs,
    and the model the tool builds from the yaml's d_model, n_heads, n_layers (biases, learned positions, tied
    output layer) has the row's NumParams to the parameter: the architecture is read, not guessed."""
    _, items = cases
    rows = [c for c in items if c["source"] == "foundry2023"]
    assert len(rows) >= 12
    for c in rows:
        cells = [x.strip() for x in c["quote"].split("|")[1:-1]]
        seq, gpus, gpu = int(cells[1]), int(cells[2]), cells[3]
        mbs, accum, gbs = int(cells[7]), int(cells[8]), int(cells[9])
        tokens_s, tokens_s_gpu, params = int(cells[11]), int(cells[12]), int(cells[19])
        assert (seq, gpus) == (c["seq_len"], fidelity.gpus_of(c)), c["id"]
        assert gpu == {"A100": "a100_80gb", "H100": "h100_80gb"}[c["gpu"]], c["id"]
        assert (mbs, gbs) == (c["micro_batch_size"], c["global_batch_size"]) and mbs * accum * gpus == gbs, c["id"]
        assert (cells[17] == "True") == (c.get("recompute") == "full"), c["id"]
        # Composer's PURE: bf16 throughout, gradients reduced in bf16; DEFAULT: the tool's FSDP (fp32 reductions)
        assert (cells[15] == "PURE") == (c.get("grad_reduce_precision") == "bf16"), c["id"]
        assert tokens_s_gpu == c["published"] and abs(tokens_s / gpus - tokens_s_gpu) <= 1, c["id"]
        assert fidelity.model_of(c).params == params, c["id"]


def test_palm_flops_count_llama3_405bs_matmuls_and_full_attention(cases, fidelity):
    """PaLM's 6N + 12 L H Q T per token, N from Llama 3 405B's published shapes (hidden 16,384, 8 KV heads of
    128, FFN 53,248 SwiGLU, 126 blocks, vocabulary 128,256, RMSNorm weights), not from the tool's model."""
    _, items = cases
    l2 = next(c for c in items if c["id"] == "L2")
    h, kv, ffn, layers, vocab = 16384, 8 * 128, 53248, 126, 128256
    block = 2 * h * h + 2 * h * kv + 3 * h * ffn + 2 * h
    n = layers * block + h + h * vocab  # blocks, the final norm, the output layer (the input embedding: no FLOPs)
    tokens, seq = 2048 * 8192, 8192
    assert fidelity.palm_flops(l2) == pytest.approx(tokens * (6 * n + 12 * layers * h * seq), rel=1e-6)


def test_a_swept_case_runs_every_virtual_stage_count_and_reports_a_range(cases, fidelity):
    """Llama 3's virtual stages are not published: each count the plan allows is a valid scenario (the end
    stages one block fewer), and the case says whether the published figure lies within the predictions."""
    _, items = cases
    swept = [c for c in items if "sweep_chunks" in c]
    assert {c["id"] for c in swept} == {"L1", "L2", "L3"}
    for c in swept:
        for v in c["sweep_chunks"]:
            s = parse_scenario(fidelity.scenario_of({**c, "chunks": v}))
            counts = s.workload.parallelism.layers_per_stage
            assert len(counts) == 16 * v and sum(counts) == 126, (c["id"], v)
            assert counts[0] == counts[-1] == 8 // v - 1 and set(counts[1:-1]) == {8 // v}
            assert s.cluster.total_gpus == fidelity.gpus_of(c)
    assert fidelity.sweep_error(400, {1: 300.0, 2: 380.0, 4: 420.0}) == 0.0
    assert fidelity.sweep_error(400, {1: 300.0, 2: 360.0}) == pytest.approx(360 / 400 - 1)
    assert fidelity.sweep_error(250, {1: 300.0, 2: 360.0}) == pytest.approx(300 / 250 - 1)


def test_small_cases_run_through_the_simulator(cases, fidelity):
    _, items = cases
    by_id = {c["id"]: c for c in items}
    t = fidelity.predict(by_id["K1"])  # 22B on one DGX A100: a whole iteration
    assert 0.1 < t < 10
    fwd = fidelity.predict(by_id["KL1"])  # one layer's forward, ms
    bwd = fidelity.predict(by_id["KL2"])
    assert 0 < fwd < bwd < 3 * fwd  # backward: two GEMMs per forward one, plus the attention's
    busbw = fidelity.predict(by_id["C4"])  # two DGX A100 over 8 x HDR: at most 8 NICs' payload rate
    assert 0 < busbw <= 8 * 25 * 0.9937


def test_stored_results_survive_a_partial_rerun(cases, fidelity, tmp_path, monkeypatch):
    # `--write-docs` stores each prediction; a later run of some cases replaces only theirs, and a stored result
    # whose published figure no longer matches the case is dropped (the case changed)
    monkeypatch.setattr(fidelity, "RESULTS", tmp_path / "results.json")
    _, items = cases
    a, b = items[0], items[1]
    fidelity.store([fidelity.Outcome(a, a["published"] * 1.1, 0.1, 1.0), fidelity.Outcome(b, b["published"], 0.0, 2.0)])
    stored = fidelity.store([fidelity.Outcome(a, a["published"] * 0.9, -0.1, 1.0)])
    assert stored[a["id"]]["predicted"] == pytest.approx(a["published"] * 0.9)
    assert fidelity.stored_outcome(b, stored).error == pytest.approx(0.0)
    assert fidelity.stored_outcome(a, stored).error == pytest.approx(-0.1)
    assert fidelity.stored_outcome({**a, "published": a["published"] * 2}, stored) is None


def test_the_aggregates_are_every_training_case_and_the_dense_models_ones(fidelity):
    """The summary's last two rows: every training case, and all but the mixture-of-experts models' (whose gap, the
    host's cost per micro-batch, docs/validation.md keeps apart); collectives in neither."""
    cases = [
        {"id": "a", "source": "s", "metric": "iteration_time_s", "model_name": "llama3-8b"},
        {"id": "b", "source": "s", "metric": "tokens_per_s_per_gpu", "model_name": "qwen3-30b-a3b"},
        {"id": "c", "source": "t", "metric": "tflops_per_gpu", "hidden": 1024},
        {"id": "d", "source": "nccl", "metric": "busbw_gBps"},
    ]
    errors = [0.1, -1.0, 0.3, 0.5]
    outcomes = [fidelity.Outcome(c, 1.0, e, 0.0) for c, e in zip(cases, errors, strict=True)]
    rows = {k: (n, mean, worst) for k, n, mean, worst in fidelity.summary_rows(outcomes)}
    assert rows[fidelity.ALL_TRAINING] == (3, pytest.approx(1.4 / 3), 1.0)
    assert rows[fidelity.DENSE_TRAINING] == (2, pytest.approx(0.2), 0.3)
    assert rows["collectives (nccl-tests)"] == (1, 0.5, 0.5)
    assert list(rows)[-2:] == [fidelity.DENSE_TRAINING, fidelity.ALL_TRAINING]
