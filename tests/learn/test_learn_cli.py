"""`aifabric learn TOPIC [--explain] [--values ...]`: every topic prints the book's numbers, the corrected ones
with what the book printed, the user's own values when given, and refuses bad input with exit 2."""

import contextlib
import importlib.util
import io

import pytest

pytest.importorskip("torch")

from aifabric.cli import run_app
from aifabric.cli.app import app


@pytest.fixture(autouse=True, scope="module")
def _restore_threads():
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)  # `learn` sets one thread for its toy tensors


def cli(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_app(app, [str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


SHOWS = {
    "neuron": ["4.80", "0.992", "0.622", "96 bits", "112 bits", "the book prints the first sum as 4.84"],
    "backprop": [
        "0.245",
        "0.280",
        "0.840",
        "2.100",
        "0.042",
        "0.105",
        "0.058",
        "0.295",
        "η = 0.012",
        "Iteration 2: update",
        "AllReduce (sum)",
    ],
    "softmax": [
        "24.813",
        "0.244",
        "0.181",
        "1.709",
        "-0.819",
        "the book prints -log(0.181) = 0.734",
        "101,632",
        "406,528",
    ],
    "conv": [
        "(6 - 3) / 1 + 1 = 4",
        "vertical 99, horizontal 0",
        "94 × 94 × 8",
        "47 × 47 × 8",
        "45 × 45 × 16",
        "22 × 22 × 16",
        "7,744",
        "27,648: 72 %",
        "316.6 GiB",
    ],
    "rnn": [
        "[1, 0, 0, 0]",
        "[0, 0, 1, 0]",
        "a→l, l→l, l→e, e→y",
        "σ(z) = 0.0067",
        "the book prints 0.0998",
        "σ(z) = 0.0009",
    ],
    "lstm": ["standard cell vs torch.nn.LSTMCell", "ReLU", "the forget gate"],
    "transformer": [
        "2 3 4 5 6 7 8 9 10 5 2 11",
        "[1.743, 2.000] ≈ [1.7, 2.0]",
        "0.00655 ≈ 0.007",
        "mean -0.0067, std 1.0032",
        '"the"',
        "614,400,000",
        "604.0 million",
    ],
    "power": ["17.5 MW", "1,440 hours", "25,200 MWh", "$2,520,000 ($2.52 M)"],
}


@pytest.mark.parametrize("topic", list(SHOWS))
def test_each_topic_prints_the_books_numbers(topic):
    code, out, err = cli("learn", topic)
    assert code == 0, err
    missing = [s for s in SHOWS[topic] if s not in out]
    assert not missing, out
    assert "inputs (the book's)" in out


def test_every_topic_is_tested():
    from aifabric.learn.names import TOPICS

    assert set(SHOWS) == set(TOPICS)


def test_explain_says_how_and_lists_the_values():
    code, out, _ = cli("learn", "softmax", "--explain")
    assert code == 0
    assert "p_i = e^z_i / Σ_j e^z_j" in out and "change with --values NAME=VALUE" in out
    assert "logits" in out and "the 10 output neurons" in out


def test_your_own_values():
    code, out, _ = cli("learn", "power", "--values", "gpus=1000 days=30", "--values", "pue=1.5")
    assert code == 0
    assert "350,000 W" in out and "yours: days, gpus, pue changed" in out and "with the facility" in out
    code, out, _ = cli("learn", "softmax", "--values", "logits=0,0,10", "--values", "label=2")
    assert code == 0 and "neuron 3 (digit 2)" in out and "0.734" not in out  # no book note for your numbers


def test_no_topic_lists_them():
    code, out, _ = cli("learn")
    assert code == 0 and all(t in out for t in SHOWS) and "Chapter 7" in out


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["learn", "nothing"], "TOPIC"),
        (["learn", "neuron", "--values", "x9=1"], "--values"),
        (["learn", "neuron", "--values", "x1=abc"], "--values"),
        (["learn", "neuron", "--values", "x1=nan"], "--values"),
        (["learn", "power", "--values", "gpus=-3"], "--values"),
        (["learn", "backprop", "--values", "x=1,2"], "--values"),
        (["learn", "softmax", "--values", "label=12"], "--values"),
        (["learn", "conv", "--values", "kernel=9"], "--values"),
        (["learn", "--values", "x=1"], "--values"),
    ],
)
def test_bad_input_exits_2_naming_what(args, named):
    code, out, err = cli(*args)
    assert code == 2 and named in err and "Traceback" not in err + out, err


def test_without_pytorch_it_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    code, _, err = cli("learn", "neuron")
    assert code == 2 and "pip install torch" in err and "learn" in err
    code, out, _ = cli("learn", "power")  # the energy arithmetic needs no tensors
    assert code == 0 and "17.5 MW" in out


def test_the_docs_show_each_topic_with_its_command_and_output():
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "learn.md").read_text(encoding="utf-8")
    for topic, shows in SHOWS.items():
        assert f"## `{topic}`" in doc and f"aifabric learn {topic}\n" in doc, topic
        assert all(s in doc for s in shows), topic
