from .data_parallel import build_data_parallel
from .llm import build_llm_training
from .memory import MemoryEstimate, memory_per_gpu
from .ops import Collective, Compute, Op, Recv, Send, Wait, Workload
from .plan import Plan
from .ranks import RankLayout
from .traffic import traffic_summary

__all__ = [
    "Collective", "Compute", "MemoryEstimate", "Op", "Plan", "RankLayout", "Recv", "Send", "Wait", "Workload",
    "build_data_parallel", "build_llm_training", "memory_per_gpu", "traffic_summary",
]
