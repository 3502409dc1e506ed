"""`aifabric validate`: exit 0 on a good scenario; exit 2 with every problem named by field path, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from aifabric.cli import run_app
from aifabric.cli.app import app


def validate(path, capsys):
    code = run_app(app, ["validate", str(path)])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_valid_scenario_exits_0(ch14_data, write_scenario, capsys):
    code, text = validate(write_scenario(ch14_data), capsys)
    assert code == 0, text
    assert "ok" in text and "8 GPUs" in text


def test_missing_file(tmp_path, capsys):
    code, text = validate(tmp_path / "nope.yaml", capsys)
    assert code == 2
    assert "no such file" in text


def test_directory_instead_of_file(tmp_path, capsys):
    code, text = validate(tmp_path, capsys)
    assert code == 2
    assert "is a directory" in text


def test_bad_yaml_names_line(write_scenario, capsys):
    code, text = validate(write_scenario("cluster:\n  servers: [1, 2\n"), capsys)
    assert code == 2
    assert "not valid YAML" in text and "line" in text


@pytest.mark.parametrize("content", ["", "- just\n- a list\n", "42\n"])
def test_not_a_mapping(write_scenario, capsys, content):
    code, text = validate(write_scenario(content), capsys)
    assert code == 2
    assert "must be a YAML mapping" in text


def test_unknown_field_suggests_the_right_one(ch14_data, write_scenario, capsys):
    ch14_data["cluster"]["gpus_per_srever"] = 4
    code, text = validate(write_scenario(ch14_data), capsys)
    assert code == 2
    assert "cluster.gpus_per_srever: unknown field; did you mean 'gpus_per_server'?" in text


def test_wrong_type(ch14_data, write_scenario, capsys):
    ch14_data["cluster"]["servers"] = "two"
    code, text = validate(write_scenario(ch14_data), capsys)
    assert code == 2
    assert "cluster.servers: must be an integer (got 'two')" in text


def test_out_of_range(ch14_data, write_scenario, capsys):
    ch14_data["cluster"]["gpus_per_server"] = 0
    code, text = validate(write_scenario(ch14_data), capsys)
    assert code == 2
    assert "cluster.gpus_per_server: must be >= 1 (got 0)" in text


def test_list_item_path(ch14_data, write_scenario, capsys):
    ch14_data["workload"]["model"]["layer_widths"] = [4096, "wide", 10]
    code, text = validate(write_scenario(ch14_data), capsys)
    assert code == 2
    assert "workload.model.layer_widths[1]: must be an integer" in text


def test_missing_required_field(ch14_data, write_scenario, capsys):
    del ch14_data["cluster"]["servers"]
    code, text = validate(write_scenario(ch14_data), capsys)
    assert code == 2
    assert "cluster.servers: required field is missing" in text


def test_unknown_gpu_lists_the_catalog(ch14_data, write_scenario, capsys):
    ch14_data["cluster"]["gpu"] = "Z9000"
    code, text = validate(write_scenario(ch14_data), capsys)
    assert code == 2
    assert "cluster.gpu: unknown GPU 'Z9000'; known: A100, A100-40GB, A100-PCIE, H100, H100-PCIE, H200" in text


def test_bad_choice(ch14_data, write_scenario, capsys):
    ch14_data["engine"] = "quantum"
    code, text = validate(write_scenario(ch14_data), capsys)
    assert code == 2
    assert "engine: must be one of" in text and "'quantum'" in text


def test_gpu_count_that_does_not_match(ch14_data, write_scenario, capsys):
    ch14_data["workload"]["data_parallel"] = 6  # the cluster has 2 x 4 = 8 GPUs
    code, text = validate(write_scenario(ch14_data), capsys)
    assert code == 2
    assert "workload.data_parallel: must equal the cluster's GPU count 8" in text


def test_batch_not_divisible(ch14_data, write_scenario, capsys):
    ch14_data["workload"]["global_batch_size"] = 1001
    code, text = validate(write_scenario(ch14_data), capsys)
    assert code == 2
    assert "workload.global_batch_size: must be divisible by the 8 data-parallel ranks" in text


def test_ports_beyond_radix(ch14_data, write_scenario, capsys):
    ch14_data["cluster"]["servers"] = 70
    ch14_data["workload"]["global_batch_size"] = 280 * 64
    code, text = validate(write_scenario(ch14_data), capsys)
    assert code == 2
    assert "fabric.switch_radix:" in text and "needs 72 ports" in text


def test_every_problem_is_listed(ch14_data, write_scenario, capsys):
    ch14_data["cluster"]["gpus_per_server"] = 0
    ch14_data["cluster"]["servers"] = -3
    ch14_data["fabric"]["spines"] = "many"
    ch14_data["workload"]["compute_efficiency"] = 1.5
    code, text = validate(write_scenario(ch14_data), capsys)
    assert code == 2
    assert "4 problems" in text
    for path in ("cluster.gpus_per_server", "cluster.servers", "fabric.spines", "workload.compute_efficiency"):
        assert f"{path}:" in text
    assert "Traceback" not in text


def test_real_command_exit_code_and_no_traceback(ch14_data, write_scenario):
    ch14_data["cluster"]["gpus_per_server"] = 0
    path = write_scenario(ch14_data)
    proc = subprocess.run([sys.executable, "-m", "aifabric", "validate", str(path)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "cluster.gpus_per_server: must be >= 1" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_unknown_flag_is_bad_input(capsys):
    assert run_app(app, ["demo", "--no-such-flag"]) == 2
