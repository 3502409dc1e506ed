"""The scenario: model + parallelism plan + GPU cluster + backend fabric + engine, as validated data.

Field names carry their units (`_gbps` = Gb/s, `_gBps` = GB/s, `_ns` = nanoseconds). Every model
forbids unknown fields, so a typo is an error, not a silently ignored setting.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from pydantic import Field

from .base import Strict
from .calibration_spec import CalibrationSpec, TierCalibration
from .costs_spec import CostsSpec
from .fabric_spec import ClusterSpec, FabricSpec
from .faults_spec import FaultSpec
from .reliability_spec import ReliabilitySpec
from .workload_spec import FeedForwardSpec, WorkloadSpec

SCHEMA_VERSION = 1


class LoweringOptions(TypedDict):
    """`engines.lower`'s keyword arguments that a scenario's `fidelity` decides."""

    fold_scale_up: bool
    merge_ring_steps: bool


class FidelitySpec(Strict):
    """How much of the run is simulated flow by flow (docs/validation.md, "Fidelity")."""

    scale_up_collectives: Literal["analytic", "flows"] | None = Field(
        None,
        description="collectives inside one server's NVLink domain: analytic = timed once on their own "
        "and folded into their GPUs' time (engines/fold.py); flows = every transfer simulated. "
        "Default: analytic for llm-training, flows for data-parallel",
    )
    ring_steps: Literal["merged", "each"] | None = Field(
        None,
        description="ring collectives between servers: merged = one transfer per ring edge for the "
        "whole collective; each = one transfer per step. Default: merged for llm-training, each for data-parallel",
    )


class Scenario(Strict):
    schema_version: int = Field(SCHEMA_VERSION, ge=1, le=SCHEMA_VERSION)
    name: str = "scenario"
    seed: int = Field(0, ge=0, description="seed of every random choice (QP numbers, ...)")
    cluster: ClusterSpec
    fabric: FabricSpec = FabricSpec()
    workload: WorkloadSpec
    engine: Literal["flow", "analytic", "packet", "hybrid"] = "flow"
    fidelity: FidelitySpec = FidelitySpec()
    iteration: Literal["steady", "first"] = Field(
        "steady",
        description="which training iteration is simulated: steady = any after the first (the job's RDMA "
        "connections are up); first = the job's first, each connection NCCL opens set up (queue pairs created, "
        "INIT -> RTR -> RTS, CM REQ -> REP -> RTU) before the collective or send that first uses it "
        "(engines/setup_tasks.py)",
    )
    calibration: CalibrationSpec = Field(
        CalibrationSpec(),
        description="the user's own measurements in place of the catalog's: a GEMM table "
        "(`aifabric calibrate gemm`), achievable NVLink and network rates and latencies (`aifabric calibrate "
        "nccl-tests`); or the name of a file holding this block",
    )
    costs: CostsSpec = Field(
        CostsSpec(),
        description="what the cluster costs to buy and to run: price per kWh, PUE, the training run's "
        "length, your prices and power figures over the documented defaults (aifabric.costs)",
    )
    faults: list[FaultSpec] = Field(
        default_factory=list,
        max_length=10_000,
        description="links, switches, NICs down or degraded, slow GPUs, during the iteration (aifabric.faults)",
    )
    reliability: ReliabilitySpec = Field(
        ReliabilitySpec(),
        description="failure rates by component, checkpoint size, bandwidth and interval, restart "
        "time: what failures cost the training run (aifabric.reliability)",
    )

    def applicable_dump(self) -> dict:
        """The scenario as JSON data with every default that applies to it filled in, and what does not apply
        left out (a zoo model's architecture fields, MoE fields of a dense model, the super-spine tier of a
        two-tier fabric, unset optional fields): what the report shows. Re-runnable as it is."""
        return _applicable(self)

    def lowering_options(self) -> LoweringOptions:
        """`engines.lower` keyword arguments from `fidelity` and the workload kind's defaults."""
        llm = self.workload.kind == "llm-training"
        up = self.fidelity.scale_up_collectives or ("analytic" if llm else "flows")
        ring = self.fidelity.ring_steps or ("merged" if llm else "each")
        return {"fold_scale_up": up == "analytic", "merge_ring_steps": ring == "merged"}


_TRANSFORMER_FIELDS = (
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "kv_channels",
    "ffn_hidden",
    "vocab",
    "gated_mlp",
    "bias",
    "experts",
    "top_k",
    "expert_ffn_hidden",
    "shared_experts",
)
_MOE_FIELDS = ("top_k", "expert_ffn_hidden", "shared_experts")
_SUPERSPINE_FIELDS = (
    "pods",
    "superspines",
    "superspine_planes",
    "superspine_link_speed_gbps",
    "links_per_superspine",
    "superspine_radix",
    "spine_oversubscription",
)
_SPINE_FIELDS = (
    "spines",
    "link_speed_gbps",
    "links_per_spine",
    "spine_radix",
    "spine_cabling",
    "spines_per_leaf",
    "leaf_oversubscription",
    "load_balancing",
    "flowlet_gap_us",
    "ecmp_hash_seed",
    "per_switch_hash_seed",
    "ecmp_hash_fields",
)


def _drop_none(d: dict) -> dict:
    return {k: (_drop_none(v) if isinstance(v, dict) else v) for k, v in d.items() if v is not None}


def _applicable(s: Scenario) -> dict:
    data = s.model_dump(mode="json")
    w, m, f = data["workload"], data["workload"]["model"], data["fabric"]
    if s.workload.model.name is not None:  # a zoo model: its architecture is the zoo's
        w["model"] = {"name": s.workload.model.name}
    elif s.workload.model.kind == "feed-forward":
        w["model"] = {k: m[k] for k in ("kind", "layer_widths", "bias")}
    else:
        drop = ("layer_widths",) + (_MOE_FIELDS if s.workload.model.experts is None else ())
        w["model"] = {k: v for k, v in m.items() if k not in drop}
    if s.workload.kind == "llm-training":
        w.pop("data_parallel", None)
    else:
        for k in ("parallelism", "seq_len", "attention", "memory_check"):
            w.pop(k, None)
    if s.fabric.topology != "multi-pod":
        for k in _SUPERSPINE_FIELDS:
            f.pop(k, None)
    if s.fabric.topology in ("single-switch", "rail-only"):
        for k in _SPINE_FIELDS:
            f.pop(k, None)
    if s.fabric.spine_cabling != "partial-mesh":
        f.pop("spines_per_leaf", None)
    if s.fabric.load_balancing != "flowlet":
        f.pop("flowlet_gap_us", None)
    if s.engine not in ("packet", "hybrid") and "qos" not in s.fabric.model_fields_set:
        f.pop("qos", None)  # the switch profile is the packet engine's (and `aifabric fabric config`'s)
    costs = data["costs"]
    for k in ("prices", "power"):  # the tables the scenario changes (the defaults are costs/*.py's)
        given = getattr(s.costs, k).model_fields_set
        costs[k] = {name: v for name, v in costs[k].items() if name in given}
        if not costs[k]:
            costs.pop(k)
    return _drop_none(data)


__all__ = [
    "SCHEMA_VERSION",
    "CalibrationSpec",
    "ClusterSpec",
    "CostsSpec",
    "FabricSpec",
    "FeedForwardSpec",
    "FidelitySpec",
    "Scenario",
    "TierCalibration",
    "WorkloadSpec",
]
