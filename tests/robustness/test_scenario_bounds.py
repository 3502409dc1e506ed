"""Issue 16, items 4 and 6: values `validate` accepted and `simulate` then hung or crashed on.

Each is refused by the schema itself (so Python users get the same error as the CLI), naming the field."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from pydantic import ValidationError

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.errors import InputError
from aifabric.scenario import ch14_scenario_text
from aifabric.scenario.load import parse_scenario
from aifabric.scenario.schema import Scenario

BASE = yaml.safe_load(ch14_scenario_text())


def _with(path: str, value):
    data = copy.deepcopy(BASE)
    *head, last = path.split(".")
    node = data
    for key in head:
        node = node.setdefault(key, {})
    node[last] = value
    return data


CASES = {
    "infinite latency": ("fabric.link_latency_ns", float("inf"), "finite"),
    "1e999 as a string": ("fabric.link_latency_ns", "1e999", "finite"),
    "NaN speed": ("cluster.nic_speed_gbps", float("nan"), "finite"),
    "denormal efficiency": ("workload.compute_efficiency", 5e-324, ">="),
    "denormal oversubscription": ("fabric.leaf_oversubscription", 1e-320, ">="),
    "denormal latency": ("cluster.nvlink_latency_ns", 5e-324, "magnitude"),
    "huge batch": ("workload.global_batch_size", 2**31, "<="),
    "2^31 spines": ("fabric.spines", 2**31 - 1, "<="),
    "2^63 layer width": ("workload.model.layer_widths", [2**63, 8], "<="),
    "servers: true": ("cluster.servers", True, "not true"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_by_the_schema_naming_the_field(case):
    path, value, said = CASES[case]
    data = _with(path, value)
    with pytest.raises(InputError) as exc:
        parse_scenario(data)
    assert [p.path for p in exc.value.problems] == [path], str(exc.value)
    assert said in str(exc.value)
    with pytest.raises(ValidationError):  # the Python API: the same bound
        Scenario.model_validate(data)


def test_fp8_on_a_gpu_without_it_is_refused_for_data_parallel_too():
    data = _with("cluster.gpu", "A100")
    data["workload"]["precision"] = "fp8"
    with pytest.raises(InputError) as exc:
        parse_scenario(data)
    assert [p.path for p in exc.value.problems] == ["workload.precision"]


def test_too_many_micro_batches_are_refused():
    data = yaml.safe_load(ch14_scenario_text())
    data["workload"] = {
        "kind": "llm-training",
        "model": "gpt3-125m",
        "global_batch_size": 1 << 20,
        "parallelism": {"tp": 1, "pp": 2, "micro_batch_size": 1},
        "seq_len": 128,
    }
    with pytest.raises(InputError) as exc:
        parse_scenario(data)
    assert any(p.path == "workload.global_batch_size" and "micro-batches" in p.message for p in exc.value.problems)


def test_a_name_with_markup_is_printed_as_it_is(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_with("name", "[/] [bold red]x")))
    assert run_app(app, ["simulate", str(path), "--out", str(tmp_path / "run")]) == 0
    assert "[/] [bold red]x" in capsys.readouterr().out
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["scenario"]["name"] == "[/] [bold red]x"


def test_ordinary_values_still_pass():
    s = parse_scenario(_with("fabric.link_latency_ns", 0))
    assert s.fabric.link_latency_ns == 0
    s = parse_scenario(_with("workload.compute_efficiency", 0.5))
    assert s.workload.compute_efficiency == 0.5


def test_a_cable_from_a_switch_to_itself_is_refused():
    data = copy.deepcopy(BASE)
    data["fabric"] = {
        "topology": "custom",
        "custom": {
            "switches": [{"id": "leaf1"}],
            "links": [{"a": "s0/nic0", "b": "leaf1"}, {"a": "leaf1", "b": "leaf1"}],
        },
    }
    with pytest.raises(InputError) as exc:
        parse_scenario(data)
    assert any(p.path == "fabric.custom.links[1]" and "itself" in p.message for p in exc.value.problems), str(exc.value)


@pytest.mark.parametrize(
    "args", [["fabric", "plan"], ["fabric", "polarization", "--trials", "2"], ["fabric", "rail-map"]]
)
def test_a_name_with_markup_in_the_fabric_commands(tmp_path, capsys, args):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_with("name", "[/] [bold red]x")))
    assert run_app(app, [*args[:2], str(path), *args[2:]]) == 0
    assert "[/] [bold red]x" in capsys.readouterr().out


@pytest.mark.parametrize("value", [0, -1, 2**20, float("inf"), float("nan"), True, "128x"])
def test_a_custom_models_head_width_out_of_bounds_exits_2_naming_it(tmp_path, value, capsys):
    """`workload.model.kv_channels` (each attention head's width): a positive whole number up to 65,536."""
    data = copy.deepcopy(BASE)
    data["workload"] = {
        "kind": "llm-training",
        "model": {"kind": "transformer", "layers": 2, "hidden": 256, "heads": 4, "vocab": 1000, "kv_channels": value},
        "global_batch_size": 8,
        "seq_len": 128,
    }
    with pytest.raises(InputError) as exc:
        parse_scenario(data)
    assert [p.path for p in exc.value.problems] == ["workload.model.kv_channels"], str(exc.value)
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(data))  # JSON is YAML; inf and nan as the words YAML reads as floats
    path.write_text(path.read_text().replace("Infinity", ".inf").replace("NaN", ".nan"))
    assert run_app(app, ["validate", str(path)]) == 2
    said = capsys.readouterr()
    assert "workload.model.kv_channels" in said.out + said.err


def test_a_custom_models_head_width_in_bounds_passes():
    data = copy.deepcopy(BASE)
    data["workload"] = {
        "kind": "llm-training",
        "model": {"kind": "transformer", "layers": 2, "hidden": 256, "heads": 4, "vocab": 1000, "kv_channels": 128},
        "global_batch_size": 8,
        "seq_len": 128,
    }
    parse_scenario(data)
