from .executor import Interrupted, Timeline, run
from .tasks import TaskGraph, lower

ENGINES = ("flow", "analytic")

__all__ = ["ENGINES", "Interrupted", "TaskGraph", "Timeline", "lower", "run"]
