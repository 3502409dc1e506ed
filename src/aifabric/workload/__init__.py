from __future__ import annotations

from .._lazy import lazy_exports

_EXPORTS = {
    "build_data_parallel": ".data_parallel",
    "build_llm_training": ".llm",
    "MemoryEstimate": ".memory", "memory_per_gpu": ".memory",
    "Collective": ".ops", "Compute": ".ops", "Op": ".ops", "Recv": ".ops", "Send": ".ops", "Wait": ".ops",
    "Workload": ".ops",
    "Plan": ".plan",
    "RankLayout": ".ranks",
    "traffic_summary": ".traffic",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["Collective", "Compute", "MemoryEstimate", "Op", "Plan", "RankLayout", "Recv", "Send", "Wait", "Workload",
           "build_data_parallel", "build_llm_training", "memory_per_gpu", "traffic_summary"]
