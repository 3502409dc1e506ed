"""`aifabric train` writes the trace and a report; `aifabric replay` runs the trace on a fabric."""

import json

import pytest

torch = pytest.importorskip("torch")

from aifabric.cli import run_app
from aifabric.cli.app import app


@pytest.fixture(scope="module")
def train_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli-train")
    code = run_app(
        app, ["train", "--model", "fnn", "--dp", "2", "--tp", "2", "--pp", "2", "--steps", "2", "--out", str(out)]
    )
    assert code == 0
    return out


def test_train_writes_trace_report_and_the_single_process_weights(train_dir, trained):
    summary = json.loads((train_dir / "train.json").read_text())
    assert summary["world_size"] == 8 and summary["plan"] == {
        "dp": 2,
        "tp": 2,
        "pp": 2,
        "schedule": "1f1b",
        "micro_batches": 2,
        "global_batch": 32,
    }
    assert {row["op"] for row in summary["communication"]} == {"broadcast", "all-gather", "all-reduce", "send", "recv"}
    assert (train_dir / "trace.jsonl").exists()
    assert not list(train_dir.glob("*-rank*"))  # per-rank files merged and cleaned up
    page = (train_dir / "report.html").read_text()
    assert "Communication per rank" in page and "Loss and step time" in page
    assert all(f'"rank {r}"' in page for r in range(8))  # every rank has a row in the timeline
    assert "pipeline send" in page and "tensor-parallel" in page and "gradient buckets" in page
    _, ref = trained("fnn", dp=2, tp=2, pp=2, schedule="1f1b")
    from aifabric.train.summary import assemble_weights

    want = assemble_weights(ref.out_dir, ref)
    got = torch.load(train_dir / "weights.pt")
    assert all(torch.allclose(got[k], want[k], atol=1e-5, rtol=0) for k in want)
    assert summary["losses"] == pytest.approx(ref.losses, abs=1e-5)


def test_replay_on_the_demo_fabric(train_dir, ch14_data, write_scenario, tmp_path, capsys):
    scen = write_scenario(ch14_data)
    out = tmp_path / "replay"
    assert (
        run_app(
            app,
            ["replay", str(train_dir / "trace.jsonl"), "--scenario", str(scen), "--out", str(out), "--compute", "zero"],
        )
        == 0
    )
    s = json.loads((out / "summary.json").read_text())
    assert s["world_size"] == 8 and s["complete"]
    # the data-parallel gradient AllReduces of the trace are in the simulated run, bytes unchanged
    buckets = [c for c in s["collectives"] if c["label"].startswith("grad-bucket")]
    assert len(buckets) == 2 * 4 and {c["bytes_per_rank"] for c in buckets} == {
        (64 * 128 + 128) // 2 * 4,
        (128 * 10 + 10) // 2 * 4 + 0,
    }
    capsys.readouterr()


def test_replay_refuses_a_trace_larger_than_the_cluster(train_dir, ch14_data, write_scenario, capsys):
    ch14_data["cluster"]["servers"] = 1
    code = run_app(app, ["replay", str(train_dir), "--scenario", str(write_scenario(ch14_data))])
    assert code == 2 and "cluster" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--tp", "3"], "--tp"),
        (["--pp", "3"], "--pp"),
        (["--model", "resnet"], "--model"),
        (["--dp", "3"], "--batch-size"),
    ],
)
def test_bad_plans_exit_2_naming_the_flag(args, flag, capsys, tmp_path):
    code = run_app(app, ["train", "--out", str(tmp_path), *args])
    assert code == 2 and flag in capsys.readouterr().err
