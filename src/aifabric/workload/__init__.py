from .data_parallel import build_data_parallel
from .ops import Collective, Compute, Op, Workload

__all__ = ["Collective", "Compute", "Op", "Workload", "build_data_parallel"]
