"""Physical and logical checks that need several fields at once, run after the schema accepts the types.

Each check returns problems naming the field to change; all of them are reported together.
"""

from __future__ import annotations

import weakref

from ..errors import InputError, Problem
from .checks_fabric import check_fabric
from .checks_workload import check_workload
from .schema import Scenario


def check_scenario(s: Scenario) -> list[Problem]:
    problems: list[Problem] = []
    problems += check_fabric(s)
    problems += check_workload(s)
    problems += check_calibration(s)
    return problems


# Scenarios that passed every check, by id (a Scenario is frozen: once checked, checked for good)
_CHECKED: weakref.WeakValueDictionary[int, Scenario] = weakref.WeakValueDictionary()


def checked(s: Scenario, source: str | None = None) -> Scenario:
    """`s` itself when every cross-field check passes, or InputError listing every problem. A Scenario built any
    way (parse_scenario, `Scenario.model_validate`, `model_copy`) goes through the same checks; each object is
    checked once (under a millisecond for the embedded scenarios and 16,384-GPU ones)."""
    if _CHECKED.get(id(s)) is s:
        return s
    problems = check_scenario(s)
    if problems:
        raise InputError(problems, source or f"<scenario {s.name}>")
    _CHECKED[id(s)] = s
    return s


def check_calibration(s: Scenario) -> list[Problem]:
    """A GEMM or attention table must read, and must have been measured on the cluster's GPU."""
    out: list[Problem] = []
    if s.calibration.gemm is not None:
        from ..kernels.calibration import load_gemm_table

        try:
            table = load_gemm_table(s.calibration.gemm)
        except InputError as exc:
            out += list(exc.problems)
        else:
            out += _measured_on("calibration.gemm", table.gpu, table.device, s.cluster.gpu)
    if s.calibration.attention is not None:
        from ..kernels.attention_calibration import load_attention_table

        try:
            _, on, device = load_attention_table(s.calibration.attention)
        except InputError as exc:
            out += list(exc.problems)
        else:
            out += _measured_on("calibration.attention", on, device, s.cluster.gpu)
    return out


def _measured_on(field: str, gpu: str, device: str, cluster_gpu: str) -> list[Problem]:
    if gpu == cluster_gpu:
        return []
    where = f"a {gpu}" if gpu else f"{device or 'a device'} (not a GPU of the catalog)"
    return [Problem(field, f"measured on {where}; the cluster's GPU is {cluster_gpu}")]
