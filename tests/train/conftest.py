from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """Run a plan once per session (processes are the slow part): (parallel run, single-process run)."""
    pytest.importorskip("torch")
    from aifabric.train.launcher import launch, single_process
    from aifabric.train.worker import TrainConfig

    cache: dict = {}

    def run(model: str, steps: int = 2, **plan):
        key = (model, steps, tuple(sorted(plan.items())))
        if key not in cache:
            base = tmp_path_factory.mktemp(f"{model}")
            cfg = TrainConfig(model=model, steps=steps, out=str(base / "par"), **plan)
            cache[key] = (launch(cfg, timeout_s=60), single_process(cfg, base / "ref"))
        return cache[key]

    return run
