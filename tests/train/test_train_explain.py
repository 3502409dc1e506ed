"""`aifabric train --explain-step`: one step on one rank in the book's vocabulary (the forward values, the
gradients, the collectives that carry them, the averaging of Chapter 2, the update), consistent with the trace
and with the update rule; and the book's variants' flags refused with exit 2 where they do not apply."""

import json

import pytest

torch = pytest.importorskip("torch")

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.train.tracer import read_trace


@pytest.fixture(scope="module")
def explained(tmp_path_factory):
    runs = {}

    def run(*args):
        if args not in runs:
            out = tmp_path_factory.mktemp("explain")
            import contextlib
            import io

            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                code = run_app(app, ["train", "--steps", "2", "--explain-step", "--out", str(out), *args])
            assert code == 0
            runs[args] = (out, json.loads((out / "explain.json").read_text()), buf.getvalue())
        return runs[args]

    return run


def test_data_parallel_step_shows_the_averaging_and_the_allreduce(explained):
    out, rec, text = explained("--model", "fnn", "--dp", "2")
    assert "step 0 on rank 0" in text and "the averaging of Chapter 2" in text and "Chapter 14" in text
    assert "averaged ∇ (÷ dp)" in text and "w ← w - η·∇w" in text
    assert [layer["out_shape"] for layer in rec["layers"]] == [[16, 128], [16, 10]]
    assert rec["loss"]["kind"] == "cross-entropy" and 0 < rec["loss"]["p_label"] < 1
    for name, g in rec["gradients"].items():  # w_new = w_old - η·(averaged gradient)
        assert g["after"] == pytest.approx(g["before"] - rec["lr"] * g["averaged"], abs=1e-6), name
        assert g["local"] != pytest.approx(g["averaged"]), "the other replica's gradient enters the average"
    trace = read_trace(out / "trace.jsonl")
    step0 = [(e["op"], e["tag"], e["bytes"]) for e in trace.comms[0] if e["step"] == 0]
    assert [(e["op"], e["tag"], e["bytes"]) for e in rec["communication"]] == step0
    assert {e["tag"] for e in rec["communication"]} == {"init/broadcast", "grad-bucket0"}
    assert rec["buckets"] == [["1.bias", "1.weight", "0.bias", "0.weight"]]


def test_the_books_tensor_parallel_step_on_the_second_rank(explained):
    out, rec, text = explained("--model", "fnn", "--tp", "2", "--tp-style", "book", "--explain-rank", "1")
    assert rec["rank"] == 1 and rec["coords"]["tp"] == 1
    assert "tensor-parallel rank 2 of 2 (the book's style)" in text
    assert "AllReduce of the weight gradients across the tensor-parallel GPUs (the book's" in text
    assert "AllGather of the partial output vectors" in text
    assert '"local ∇" here is already the whole layer\'s' in text  # the weight-gradient AllReduce ran in backward
    assert [e["op"] for e in rec["communication"]] == ["all-gather", "all-gather", "all-reduce", "all-reduce"]
    assert all(g["averaged"] is None for g in rec["gradients"].values())  # no data parallelism: no averaging


def test_a_pipeline_stage_without_the_loss_says_where_the_error_comes_from(explained):
    _, rec, text = explained("--model", "fnn", "--layers", "4,3,2,1", "--pp", "3", "--batch-size", "24")
    assert rec["loss"] is None and "receives the error from the next one" in text
    assert [e["tag"] for e in rec["communication"]] == ["pp/act"] * 3 + ["pp/grad"] * 3
    assert rec["layers"][0]["name"] == "weights 3 × 4"  # the blog post's 3 x 4 matrix on GPU 1


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--model", "fnn", "--cell", "book"], "--cell"),
        (["--model", "cnn", "--tp", "2", "--tp-style", "book"], "--tp-style"),
        (["--model", "gpt", "--layers", "4,3"], "--layers"),
        (["--model", "lstm", "--layers", "3,2"], "--layers"),
        (["--model", "fnn", "--layers", "4,0,1"], "--layers"),
        (["--model", "fnn", "--layers", "4,3,2,1", "--tp", "2"], "--tp"),
        (["--model", "gpt", "--tp", "2", "--pp", "4", "--tp-style", "book"], "--pp"),
        (["--model", "fnn", "--dp", "2", "--explain-step", "--explain-rank", "2"], "--explain-rank"),
        (["--model", "fnn", "--explain-step", "--no-trace"], "--explain-step"),
    ],
)
def test_variant_flags_that_do_not_apply_exit_2(args, flag, capsys, tmp_path):
    code = run_app(app, ["train", "--out", str(tmp_path), *args])
    assert code == 2 and flag in capsys.readouterr().err
