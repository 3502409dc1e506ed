"""Physical and logical checks that need several fields at once, run after the schema accepts the types.

Each check returns problems naming the field to change; all of them are reported together.
"""

from __future__ import annotations

from ..errors import Problem
from .checks_fabric import check_fabric
from .checks_workload import check_workload
from .schema import Scenario


def check_scenario(s: Scenario) -> list[Problem]:
    problems: list[Problem] = []
    problems += check_fabric(s)
    problems += check_workload(s)
    problems += check_calibration(s)
    return problems


def check_calibration(s: Scenario) -> list[Problem]:
    """A GEMM table must read, and must have been measured on the cluster's GPU."""
    if s.calibration.gemm is None:
        return []
    from ..errors import InputError
    from ..kernels.calibration import load_gemm_table

    try:
        table = load_gemm_table(s.calibration.gemm)
    except InputError as exc:
        return list(exc.problems)
    if table.gpu != s.cluster.gpu:
        where = f"a {table.gpu}" if table.gpu else f"{table.device or 'a device'} (not a GPU of the catalog)"
        return [Problem("calibration.gemm", f"measured on {where}; the cluster's GPU is {s.cluster.gpu}")]
    return []
