from .executor import Interrupted, Timeline, run
from .taskgraph import TaskGraph
from .tasks import lower

ENGINES = ("flow", "analytic")

__all__ = ["ENGINES", "Interrupted", "TaskGraph", "Timeline", "lower", "run"]
