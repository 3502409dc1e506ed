"""Issue 16, items 3 and 6: small files that took the machine down, and what YAML accepted silently.

Each is refused with exit 2, quickly, in a short message that says what was refused (and where)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.errors import InputError
from aifabric.scenario.load import parse_scenario, read_yaml

VALID_HEAD = (
    "cluster: {servers: 1, gpus_per_server: 8}\nworkload: {model: {layer_widths: [2, 2]}, global_batch_size: 8}\n"
)


def _bomb(levels: int) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + f"\ncluster: *a{levels - 1}\n"


HOSTILE = {
    "alias-bomb": (_bomb(10), "aliases followed"),
    "self-alias": ("cluster: &c {servers: 1, gpus_per_server: 8, x: *c}\n", "contains it"),
    "deep-flow": ("name: " + "[" * 1000 + "]" * 1000 + "\n", "nested deeper"),
    "deep-block": ("".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "x: 1\n", "nested deeper"),
    "huge-int": ("seed: " + "9" * 4301 + "\n", "digits"),
    "many-keys": (VALID_HEAD + "".join(f"k{i}: 1\n" for i in range(100_000)), "keys"),
    "duplicate-key": (VALID_HEAD + "fabric: {spines: 1}\nfabric: {spines: 2}\n", "'fabric' given twice"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_yaml_is_refused_quickly_and_briefly(tmp_path, capsys, name):
    text, said = HOSTILE[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    t0 = time.perf_counter()
    code = run_app(app, ["validate", str(path)])
    elapsed = time.perf_counter() - t0
    err = capsys.readouterr().err
    assert code == 2, err[-500:]
    assert said in err and "Traceback" not in err
    assert len(err) < 600
    assert elapsed < 5  # under a second on an idle machine; the CI runner is shared


def test_dev_zero_is_refused(capsys):
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    assert run_app(app, ["validate", "/dev/zero"]) == 2
    assert "refused" in capsys.readouterr().err
    assert run_app(app, ["fabric", "plan", "/dev/zero"]) == 2


def test_a_big_bad_value_is_quoted_short():
    text = VALID_HEAD.replace("servers: 1", "servers: [" + ", ".join(["x"] * 20_000) + "]")
    with pytest.raises(InputError) as exc:
        parse_scenario(read_yaml(text, "<text>"))
    message = str(exc.value)
    assert "cluster.servers" in message and len(message) < 400


def test_limits_leave_ordinary_files_alone():
    data = parse_scenario(read_yaml(VALID_HEAD + "name: &n x\nfabric: {spines: 1, link_speed_gbps: 400}\n", "<t>"))
    assert data.fabric.spines == 1 and data.name == "x"
