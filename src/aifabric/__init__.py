"""aifabric: what distributed deep-learning training does to an AI data-center network,
and what the network does to training.

The library's public API (docs/api.md); each name is imported on first use, so `import aifabric` and
`aifabric --version` stay fast:

    load_scenario(path | YAML text | mapping | Scenario) -> Scenario   every check, InputError lists every problem
    simulate(scenario, engine=None) -> Run                              checks what it is given, then runs it
    write_report(run, out_dir) -> Path                                  the run's folder (summary.json last)
    build_fabric(scenario) -> (Fabric, Router);  make_plan(fabric) -> Plan   the fabric and its plan
    build_workload(scenario) -> Workload;  traffic_summary(workload, gpus_per_server)   the workload
"""

import sys
import types
from typing import TYPE_CHECKING

from ._lazy import lazy_exports

__version__ = "0.1.0"

if TYPE_CHECKING:  # what the lazy exports below are, for type checkers
    from .errors import InputError, Problem
    from .fabric.plan import make_plan
    from .report.write import write_report
    from .scenario.load import EMBEDDED, embedded_scenario, load_scenario
    from .scenario.schema import Scenario
    from .simulate import Run, build_fabric, build_workload, simulate
    from .workload.traffic import traffic_summary

_EXPORTS = {
    "InputError": ".errors",
    "Problem": ".errors",
    "Scenario": ".scenario.schema",
    "EMBEDDED": ".scenario.load",
    "embedded_scenario": ".scenario.load",
    "load_scenario": ".scenario.load",
    "Run": ".simulate",
    "build_fabric": ".simulate",
    "build_workload": ".simulate",
    "simulate": ".simulate",
    "write_report": ".report.write",
    "make_plan": ".fabric.plan",
    "traffic_summary": ".workload.traffic",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [
    "EMBEDDED",
    "InputError",
    "Problem",
    "Run",
    "Scenario",
    "build_fabric",
    "build_workload",
    "embedded_scenario",
    "load_scenario",
    "make_plan",
    "simulate",
    "traffic_summary",
    "write_report",
]


class _Package(types.ModuleType):
    """`aifabric.simulate` is the function, as if `__init__` said `from .simulate import simulate`: importing the
    submodule `aifabric.simulate` (which the import system records on the package) does not replace it."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "simulate" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
