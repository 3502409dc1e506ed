"""Checks of the workload section against the cluster (GPU counts, batch, memory)."""

from __future__ import annotations

from ..errors import Problem
from .schema import Scenario


def check_workload(s: Scenario) -> list[Problem]:
    out: list[Problem] = []
    w, gpus = s.workload, s.cluster.total_gpus
    dp = w.data_parallel if w.data_parallel is not None else gpus
    if w.data_parallel is not None and w.data_parallel != gpus:
        out.append(
            Problem(
                "workload.data_parallel",
                f"must equal the cluster's GPU count {gpus} "
                f"({s.cluster.servers} servers x {s.cluster.gpus_per_server} GPUs) for pure data parallelism",
            )
        )
    if w.global_batch_size % dp:
        out.append(
            Problem(
                "workload.global_batch_size",
                f"must be divisible by the {dp} data-parallel ranks (got {w.global_batch_size})",
            )
        )
    return out
