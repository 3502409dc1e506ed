"""The public Python API (docs/api.md): its examples run as written, and the Python path checks what the CLI
checks (issue 14: a global batch of 1,001 on 8 ranks, 70 servers on 64-port switches were simulated from Python
without complaint)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import aifabric
from aifabric.errors import InputError
from aifabric.scenario import ch14_scenario
from aifabric.scenario.schema import Scenario

API_MD = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def _examples() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", API_MD.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_docs_api_examples_run_in_order(tmp_path, monkeypatch):
    """Each ```python block of docs/api.md, in order, in one namespace, in an empty folder (a failing assert
    or a changed name fails here)."""
    blocks = _examples()
    assert len(blocks) >= 6
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "docs_api"}
    for i, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"docs/api.md python block {i}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"docs/api.md python block {i} failed: {type(exc).__name__}: {exc}\n{block}") from exc


def test_docs_api_names_every_public_name():
    text = API_MD.read_text(encoding="utf-8")
    missing = [name for name in aifabric.__all__ if f"`{name}" not in text]
    assert not missing, missing


def _ch14(**changes) -> dict:
    data = ch14_scenario().model_dump()
    for path, value in changes.items():
        section, field = path.split("__")
        data[section][field] = value
    return data


def _problems(call) -> list[tuple[str, str]]:
    with pytest.raises(InputError) as info:
        call()
    return [(p.path, p.message) for p in info.value.problems]


def test_simulate_refuses_a_batch_the_ranks_cannot_share():
    s = Scenario.model_validate(_ch14(workload__global_batch_size=1001))  # the schema alone accepts it
    (problem,) = _problems(lambda: aifabric.simulate(s))
    assert problem[0] == "workload.global_batch_size" and "8 data-parallel ranks" in problem[1]
    assert _problems(lambda: aifabric.simulate(s, engine="packet")) == [problem]  # every engine, one path
    assert _problems(lambda: aifabric.build_workload(s)) == [problem]


def test_simulate_refuses_more_servers_than_switch_ports():
    s = Scenario.model_validate(_ch14(cluster__servers=70, workload__global_batch_size=70 * 4 * 8))
    (problem,) = _problems(lambda: aifabric.simulate(s))
    assert problem[0] == "fabric.switch_radix" and "72 ports" in problem[1] and "has 64" in problem[1]
    assert _problems(lambda: aifabric.build_fabric(s)) == [problem]


def test_load_scenario_lists_every_problem_from_each_kind_of_input(tmp_path):
    data = _ch14(cluster__servers=70, workload__global_batch_size=1001)
    import yaml

    text = yaml.safe_dump(data)
    (tmp_path / "s.yaml").write_text(text)
    expected = ["fabric.switch_radix", "workload.global_batch_size"]
    for given in (data, text, tmp_path / "s.yaml", str(tmp_path / "s.yaml"), Scenario.model_validate(data)):
        assert [p for p, _ in _problems(lambda given=given: aifabric.load_scenario(given))] == expected, type(given)


def test_load_scenario_refuses_what_is_not_a_scenario():
    assert _problems(lambda: aifabric.load_scenario(42))[0][1].startswith("a scenario is a file's path")
    assert "no such file" in _problems(lambda: aifabric.load_scenario("no-such-file.yaml"))[0][1]


def test_simulate_names_an_unknown_engine():
    assert _problems(lambda: aifabric.simulate(ch14_scenario(), engine="fluid")) == [
        ("engine", "must be one of flow, analytic, packet, hybrid (got 'fluid')")
    ]


def test_a_scenario_is_checked_once(monkeypatch):
    import aifabric.scenario.checks as checks

    s = Scenario.model_validate(_ch14())
    calls = []
    real = checks.check_scenario
    monkeypatch.setattr(checks, "check_scenario", lambda s: calls.append(s) or real(s))
    assert aifabric.load_scenario(s) is s and aifabric.load_scenario(s) is s
    assert calls == [s]


def test_simulate_is_the_function_whatever_was_imported_first():
    code = (
        "import aifabric.simulate, aifabric.scenario.load; import aifabric, sys; "
        "assert callable(aifabric.simulate) and aifabric.simulate.__name__ == 'simulate', aifabric.simulate; "
        "from aifabric.simulate import Run; assert aifabric.Run is Run; "
        "print(sorted(m for m in ('numpy', 'pydantic') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_import_aifabric_imports_nothing_heavy():
    code = "import aifabric, sys; print(sorted(m for m in ('numpy', 'pydantic', 'scipy', 'yaml') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", (done.stdout, done.stderr)
