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
    """A GEMM table must read, and must have been measured on the cluster's GPU."""
    if s.calibration.gemm is None:
        return []
    from ..kernels.calibration import load_gemm_table

    try:
        table = load_gemm_table(s.calibration.gemm)
    except InputError as exc:
        return list(exc.problems)
    if table.gpu != s.cluster.gpu:
        where = f"a {table.gpu}" if table.gpu else f"{table.device or 'a device'} (not a GPU of the catalog)"
        return [Problem("calibration.gemm", f"measured on {where}; the cluster's GPU is {s.cluster.gpu}")]
    return []
