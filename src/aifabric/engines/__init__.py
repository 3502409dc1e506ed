from .executor import Interrupted, Timeline, run
from .taskgraph import TaskGraph
from .tasks import lower

ENGINES = ("flow", "analytic", "packet")  # packet: engines/packet.py (aifabric.packet)

__all__ = ["ENGINES", "Interrupted", "TaskGraph", "Timeline", "lower", "run"]
