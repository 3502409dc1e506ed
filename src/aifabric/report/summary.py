"""summary.json: the machine-readable result of a run. Schema documented in docs/summary-schema.md."""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..analysis import bytes_by_dimension
from ..simulate import Run
from ..units import bytes_per_s_to_gbps
from .caveats import caveats
from .tables import flow_rows

SUMMARY_SCHEMA_VERSION = 2  # 2: algbw_gBps, busbw_gBps (were _GBps), packet_windows


def _gB(x: float) -> float:
    return x / 1e9


def build_summary(run: Run) -> dict[str, Any]:
    r = run.results
    s = run.scenario
    rt = run.rank_timeline
    n_ranks = len(r.rank_compute_s)
    idle, bubble = rt.idle_s[:n_ranks], rt.bubble_s[:n_ranks]
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "aifabric_version": __version__,
        "complete": r.complete,
        "scenario": s.applicable_dump(),
        "engine": r.engine,
        "world_size": run.fabric.world_size,
        "workload": {
            "description": run.workload.description,
            "params": run.workload.params,
            "flops_per_iteration": run.workload.flops_per_iteration,
        },
        "iterations": r.iterations,
        "iteration_time_s": r.iteration_time_s,
        "compute_time_s": r.compute_time_s,
        "communication_time_s": r.communication_time_s,
        "exposed_communication_s": r.exposed_communication_s,
        "idle_time_s": float(idle.max(initial=0.0)),
        "idle_time_mean_s": float(idle.mean()) if n_ranks else 0.0,
        "bubble_time_s": float(bubble.max(initial=0.0)),
        "bubble_time_mean_s": float(bubble.mean()) if n_ranks else 0.0,
        "pipeline_bubble_fraction": (
            float(bubble.mean()) / r.iteration_time_s if n_ranks and r.iteration_time_s > 0 else 0.0
        ),
        "ranks": [
            {"rank": k, "compute_s": c, "communication_s": m, "exposed_communication_s": e, "idle_s": i, "bubble_s": b}
            for k, (c, m, e, i, b) in enumerate(
                zip(
                    r.rank_compute_s.tolist(),
                    r.rank_comm_s.tolist(),
                    r.rank_exposed_s.tolist(),
                    idle.tolist(),
                    bubble.tolist(),
                )
            )
        ],
        "collectives": [
            {
                "key": c.key,
                "op": c.op,
                "label": c.label,
                "group_size": c.group_size,
                "bytes_per_rank": c.size_bytes,
                "algorithm": c.algorithm,
                "steps": c.steps,
                "count": c.count,
                "transfers": c.transfers,
                "start_s": c.start_s,
                "time_s": c.time_s,
                "algbw_gBps": _gB(c.algbw_bytes_per_s),
                "busbw_gBps": _gB(c.busbw_bytes_per_s),
            }
            for c in r.collectives
        ],
        "links": [
            {
                "id": link.id,
                "src": link.src,
                "dst": link.dst,
                "tier": link.tier,
                "capacity_gbps": bytes_per_s_to_gbps(link.capacity_bytes_per_s),
                "bytes": link.bytes,
                "utilization": link.utilization,
                "peak_gbps": bytes_per_s_to_gbps(link.peak_bytes_per_s),
            }
            for link in r.links
        ],
        "flows": {
            "count": r.flow_count,
            "bytes": r.flow_bytes,
            "scale_up_bytes": r.scale_up_bytes,
            "scale_out_bytes": r.scale_out_bytes,
            "by_dimension": bytes_by_dimension(run.flows),
            "table_rows": len(flow_rows(run)),
        },
        # where the validation suite found the tool off for runs like this one (report/caveats.py)
        "caveats": caveats(run.scenario),
        "mfu": r.mfu,
        "hfu": r.hfu,
        "model_tflops_per_gpu": r.model_flops_per_gpu_s / 1e12,
        "hardware_tflops_per_gpu": r.hardware_flops_per_gpu_s / 1e12,
        "compute_by_kind_s": dict(r.compute_by_kind_s),
        # once per job, before its first collective: the RDMA connections (QPs, CM REQ/REP/RTU) NCCL opens; not in
        # iteration_time_s (packet/job_connections.py)
        "connection_setup": run.connection_setup,
        # power and cost: the cluster's bill (power, capital), per iteration and per training run (aifabric.costs)
        "costs": run.costs,
        # what failures cost the training run: by component, MTBF, checkpoint interval, lost fraction
        # (aifabric.reliability)
        "reliability": run.reliability,
        # the scenario's faults: what broke, the iteration against the fault-free one (aifabric.faults); null
        # without faults
        "faults": run.faults,
        # the packet engine's fabric statistics (queues, ECN, CNPs, DCQCN, PFC, drops, FCTs); null otherwise
        "packet": run.packet_stats.to_dict(series=False) if run.packet_stats is not None else None,
        # the hybrid engine's packet windows (engines/hybrid.py): each span, what ran packet by packet and what
        # the fabric did there; null on the other engines
        "packet_windows": [w.to_dict() for w in run.packet_windows] if run.packet_windows is not None else None,
        # the flow engine's flowlet switching (engines/flowlet.py): its gap, connections, flowlets, path changes;
        # null without it
        "flowlets": dict(run.timeline.flowlets) if run.timeline.flowlets is not None else None,
    }
