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
    return problems
