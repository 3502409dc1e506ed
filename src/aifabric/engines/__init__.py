from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

ENGINES = ("flow", "analytic", "packet", "hybrid")

if TYPE_CHECKING:  # what the lazy exports below are, for type checkers
    from .executor import Interrupted, Timeline, run
    from .taskgraph import TaskGraph
    from .tasks import lower

_EXPORTS = {
    "Interrupted": ".executor",
    "Timeline": ".executor",
    "run": ".executor",
    "TaskGraph": ".taskgraph",
    "lower": ".tasks",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["ENGINES", "Interrupted", "TaskGraph", "Timeline", "lower", "run"]
