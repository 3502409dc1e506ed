from __future__ import annotations

from .._lazy import lazy_exports

ENGINES = ("flow", "analytic", "packet")

_EXPORTS = {
    "Interrupted": ".executor", "Timeline": ".executor", "run": ".executor",
    "TaskGraph": ".taskgraph",
    "lower": ".tasks",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ['ENGINES', 'Interrupted', 'TaskGraph', 'Timeline', 'lower', 'run']
