"""A rank that dies or hangs ends the run within a timeout, the message names the rank, and no process is
left behind."""

import os
import time

import pytest

pytest.importorskip("torch")

from aifabric.train.launcher import TrainFailure, launch
from aifabric.train.worker import TrainConfig


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie still answers kill(0); it must at least not be running
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split()[2] == "Z"


@pytest.mark.parametrize("kind", ["crash", "hang"])
def test_fault_names_the_rank_and_leaves_no_process(tmp_path, kind):
    cfg = TrainConfig(model="fnn", dp=2, steps=3, fault=f"{kind}:1:1", out=str(tmp_path))
    t0 = time.monotonic()
    with pytest.raises(TrainFailure) as exc:
        launch(cfg, timeout_s=3)
    assert exc.value.ranks == [1]
    msg = str(exc.value)
    if kind == "crash":
        assert msg.startswith("rank 1 exited with code 1") and "injected crash" in msg
    else:
        assert "rank 1 hung at step 1" in msg
    assert time.monotonic() - t0 < 60
    assert len(exc.value.pids) == 2 and all(_gone(p) for p in exc.value.pids)
