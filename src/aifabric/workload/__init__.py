from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # what the lazy exports below are, for type checkers
    from .data_parallel import build_data_parallel
    from .llm import build_llm_training
    from .memory import MemoryEstimate, memory_per_gpu
    from .ops import Collective, Compute, Op, Recv, Send, Wait, Workload
    from .plan import Plan
    from .ranks import RankLayout
    from .traffic import traffic_summary

_EXPORTS = {
    "build_data_parallel": ".data_parallel",
    "build_llm_training": ".llm",
    "MemoryEstimate": ".memory",
    "memory_per_gpu": ".memory",
    "Collective": ".ops",
    "Compute": ".ops",
    "Op": ".ops",
    "Recv": ".ops",
    "Send": ".ops",
    "Wait": ".ops",
    "Workload": ".ops",
    "Plan": ".plan",
    "RankLayout": ".ranks",
    "traffic_summary": ".traffic",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [
    "Collective",
    "Compute",
    "MemoryEstimate",
    "Op",
    "Plan",
    "RankLayout",
    "Recv",
    "Send",
    "Wait",
    "Workload",
    "build_data_parallel",
    "build_llm_training",
    "memory_per_gpu",
    "traffic_summary",
]
