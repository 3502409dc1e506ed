from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from aifabric.scenario import ch14_scenario_text


@pytest.fixture
def ch14_data() -> dict:
    """The embedded demo scenario as a plain mapping, to mutate in tests."""
    return yaml.safe_load(ch14_scenario_text())


@pytest.fixture
def write_scenario(tmp_path: Path):
    def _write(data, name: str = "scenario.yaml") -> Path:
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
        return path

    return _write
