"""Physical and logical checks that need several fields at once, run after the schema accepts the types.

Each check returns problems naming the field to change; all of them are reported together.
"""

from __future__ import annotations

from ..errors import Problem
from .schema import Scenario


def check_scenario(s: Scenario) -> list[Problem]:
    problems: list[Problem] = []
    problems += _check_fabric(s)
    problems += _check_workload(s)
    return problems


def _check_fabric(s: Scenario) -> list[Problem]:
    out: list[Problem] = []
    c, f = s.cluster, s.fabric
    if c.servers > 1 and c.gpus_per_server > 1 and f.spines == 0:
        out.append(Problem("fabric.spines", "must be >= 1: cross-rail traffic between servers needs a spine"))
    rail_ports = c.servers + f.spines * f.links_per_spine
    if rail_ports > f.switch_radix:
        out.append(
            Problem(
                "fabric.switch_radix",
                f"each rail switch needs {rail_ports} ports ({c.servers} servers + {f.spines} spines x "
                f"{f.links_per_spine} links) but has {f.switch_radix}",
            )
        )
    spine_ports = c.gpus_per_server * f.links_per_spine
    if f.spines and spine_ports > f.switch_radix:
        out.append(
            Problem(
                "fabric.switch_radix",
                f"each spine needs {spine_ports} ports ({c.gpus_per_server} rail switches x "
                f"{f.links_per_spine} links) but has {f.switch_radix}",
            )
        )
    return out


def _check_workload(s: Scenario) -> list[Problem]:
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
