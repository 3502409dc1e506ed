"""`aifabric pipeline` and `aifabric workload` on the command line."""

import re

from aifabric.cli import run_app
from aifabric.cli.app import app


def run(args, capsys):
    code = run_app(app, args)
    out = capsys.readouterr()
    return code, out.out + out.err


def utilizations(text):
    return [int(x) for x in re.findall(r"│\s+(\d+)% │", text)]


def test_pipeline_book_example(capsys):
    code, text = run(["pipeline", "--stages", "4", "--micro-batches", "4", "--schedule", "book"], capsys)
    assert code == 0
    assert utilizations(text) == [25, 50, 75, 100, 75, 75, 100, 75, 50, 25]
    assert "overall utilization 65.0%" in text
    assert "1a, 0b, 1b" in text  # the idle GPUs of step 1, named as in the book
    # t2: "y2 0a→1a (NVLink); 1a out(y1)→0b (RoCEv2)"; t4: 1b computes E1 and propagates it to 0b
    assert "y2 0a→1a NVLink; y1 1a→0b RDMA" in text
    assert "E1 1b→0b" in text


def test_pipeline_blog_example(capsys):
    code, text = run(["pipeline", "--schedule", "blog"], capsys)
    assert code == 0
    assert utilizations(text) == [25, 50, 75, 100, 75, 50, 75, 100, 75, 50, 25]


def test_pipeline_1f1b_prints_the_textbook_bubble(capsys):
    code, text = run(["pipeline", "-p", "4", "-m", "8", "-s", "1f1b"], capsys)
    assert code == 0
    assert "bubble (idle share) 27.3%" in text and "(p−1)/(v·m+p−1) = 27.3%" in text


def test_pipeline_bad_input_exits_2(capsys):
    code, text = run(["pipeline", "-s", "interleaved", "-p", "4", "-m", "6"], capsys)
    assert code == 2 and "--micro-batches" in text
    code, text = run(["pipeline", "--stages", "0"], capsys)
    assert code == 2 and "--stages" in text


def test_workload_command_on_the_demo(capsys, ch14_data, write_scenario):
    code, text = run(["workload", str(write_scenario(ch14_data))], capsys)
    assert code == 0
    assert "data parallel" in text and "scale-out" in text


def test_models_command_lists_the_zoo_and_figure_13_3(capsys):
    code, text = run(["models"], capsys)
    assert code == 0
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") > 5}
    # network.md 6.2 / Figure 13-3: 405B needs 11 GPUs at 80 GB (the book's "10" is 800 GB < 810 GB)
    assert rows["llama3-405b"].rstrip(" │").endswith("11")
    assert rows["llama3-8b"].rstrip(" │").endswith("1")
    assert "101,632" in rows["mnist-784-128-10"]
    # the sliding window: every block of Mistral 7B, every other block of gpt-oss
    window = {name: [c.strip() for c in line.split("│")][8] for name, line in rows.items()}
    assert (window["mistral-7b"], window["gpt-oss-120b"], window["llama3-8b"]) == ("4,096", "128/2", "")
    code, text = run(["models", "--gpu-memory-gb", "0"], capsys)
    assert code == 2
