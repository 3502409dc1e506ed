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


@pytest.fixture
def packet_interrupted_at_once(monkeypatch):
    """The packet engine's run stopped by a Ctrl-C before any task ran: engines.packet.run_packet raises Interrupted
    with the empty timeline it would leave."""
    import numpy as np

    import aifabric.engines.packet as packet
    from aifabric.engines.executor import Interrupted, Timeline
    from aifabric.engines.linkload import LinkLoad

    def interrupted(graph, fabric, *args, **kwargs):
        n, links = len(graph), len(fabric.links)
        raise Interrupted(
            Timeline(np.full(n, np.nan), np.full(n, np.nan), np.zeros(links), np.zeros(links), 0.0, 0, LinkLoad())
        )

    monkeypatch.setattr(packet, "run_packet", interrupted)
