"""What unreliability costs a training job: failures per component, the job's mean time between failures,
the checkpoint interval that loses least (Young 1974, Daly 2006) and the fraction of the run lost.

Failure rates default to the only published breakdown at today's scale: Llama 3 405B's 54-day pre-training
snapshot on 16,384 H100 (Llama Team, Dubey et al. 2024, "The Llama 3 Herd of Models", Table 5): 466 job
interruptions, 47 planned, 419 unexpected, by root cause. Each cause is charged to the component it names,
per component-hour of that cluster (1,296 hours; 16,384 GPUs, 2,048 servers of 8, one 400 Gb/s NIC per GPU):

| component | Table 5 causes | interruptions | per component-hour |
|---|---|---|---|
| GPU | faulty GPU 148, HBM3 72, SRAM 19, system processor 17, silent data corruption 6, thermal interface + sensor 6 | 268 | 268 / (16,384 x 1,296) |
| server (host) | host maintenance 32, SSD 3, power supply 3, chassis 2, IO expansion board 2, CPU 2, system memory 2 | 46 | 46 / (2,048 x 1,296) |
| NIC | NIC 7 | 7 | 7 / (16,384 x 1,296) |
| network cable (switch + cable) | network switch/cable 35 | 35 | 35 / (35,109 x 1,296) |
| software, per GPU | software bug 54, dependency 2, NCCL watchdog timeouts 7 | 63 | 63 / (16,384 x 1,296) |

The network's count is an assumption from the paper's description of the fabric (three layers, 1:7
oversubscription at the aggregation layer): per GPU one NIC-leaf cable, one leaf-spine cable and 1/7 of a
spine-aggregation one, 2 1/7 x 16,384 = 35,109 cables; a switch's failures are spread over its cables. Every
rate is overridable in the scenario's `reliability:` section.

The job (every rank needed, as synchronous training is): failures arrive at the sum of its components'
rates, M = 1 / sum(rate x count) hours apart. A checkpoint of C bytes (weights and optimizer: 14 bytes per
parameter with mixed-precision Adam, the ZeRO paper's 16 less the 16-bit gradient) takes delta = C / write
bandwidth; checkpoints every tau of work. Per unit of wall time the job loses delta / (tau + delta) to
checkpointing and, per failure, half a period of work ((tau + delta) / 2) and the restart R:

    lost(tau) = delta / (tau + delta) + ((tau + delta) / 2 + R) / M

minimized at tau + delta = sqrt(2 delta M) (Young's interval, sqrt(2 delta M), counts from one checkpoint's
start to the next); Daly's higher-order estimate, sqrt(2 delta M) (1 + sqrt(delta / 2M) / 3 + delta / 18M) -
delta for delta < 2M, is reported beside it. The default write bandwidth is Llama 3's storage, "a sustainable
throughput of 2 TB/s" (Dubey et al. 2024, Section 3.3.1), for its 16,384 GPUs, scaled to the job's GPUs. The
restart time has no published figure: 10 minutes by default, set yours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from .fabric.graph import NIC, SWITCH_KINDS, TIER_HOST, TIER_SPINE, TIER_SUPERSPINE, Fabric

LLAMA3_HOURS = 54 * 24
LLAMA3_GPUS = 16_384
LLAMA3_SERVERS = LLAMA3_GPUS // 8
LLAMA3_CABLES = LLAMA3_GPUS * (2 + 1 / 7)
SOURCE = "Llama Team (Dubey et al.) 2024, The Llama 3 Herd of Models, Table 5 (54 days, 16,384 H100)"
DEFAULT_RATES_PER_HOUR = {  # failures per component-hour
    "gpu": 268 / (LLAMA3_GPUS * LLAMA3_HOURS),
    "server": 46 / (LLAMA3_SERVERS * LLAMA3_HOURS),
    "nic": 7 / (LLAMA3_GPUS * LLAMA3_HOURS),
    "network_cable": 35 / (LLAMA3_CABLES * LLAMA3_HOURS),
    "software_per_gpu": 63 / (LLAMA3_GPUS * LLAMA3_HOURS),
}
CHECKPOINT_BYTES_PER_PARAM = 14.0  # bf16 weights 2 + fp32 master 4 + Adam moments 8
LLAMA3_STORAGE_BYTES_PER_S = 2e12  # "a sustainable throughput of 2 TB/s"
DEFAULT_RESTART_S = 600.0


@dataclass(frozen=True)
class Component:
    kind: str
    count: int
    rate_per_hour: float  # failures per component-hour

    @property
    def failures_per_day(self) -> float:
        return self.count * self.rate_per_hour * 24


@dataclass(frozen=True)
class Reliability:
    components: list[Component]
    checkpoint_bytes: float
    write_bytes_per_s: float
    restart_s: float
    interval_s: float  # work between checkpoints, as run (the scenario's, or the best)
    interval_given: bool = False
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def failures_per_hour(self) -> float:
        return sum(c.count * c.rate_per_hour for c in self.components)

    @property
    def mtbf_s(self) -> float:
        rate = self.failures_per_hour
        return 3600.0 / rate if rate > 0 else math.inf

    @property
    def checkpoint_s(self) -> float:
        return self.checkpoint_bytes / self.write_bytes_per_s if self.write_bytes_per_s > 0 else 0.0

    @property
    def young_interval_s(self) -> float:
        """Young: sqrt(2 delta M), from one checkpoint's start to the next."""
        return math.sqrt(2 * self.checkpoint_s * self.mtbf_s)

    @property
    def best_interval_s(self) -> float:
        """The work between checkpoints that minimizes `lost`: sqrt(2 delta M) - delta (at least delta)."""
        return max(self.young_interval_s - self.checkpoint_s, self.checkpoint_s)

    @property
    def daly_interval_s(self) -> float:
        d, m = self.checkpoint_s, self.mtbf_s
        if not math.isfinite(m):
            return math.inf
        if d >= 2 * m:
            return m
        return math.sqrt(2 * d * m) * (1 + math.sqrt(d / (2 * m)) / 3 + d / (18 * m)) - d

    def lost(self, interval_s: float | None = None) -> dict[str, float]:
        """Fractions of wall time lost: to writing checkpoints, to redoing work after a failure, to restarting."""
        tau = self.interval_s if interval_s is None else interval_s
        d, m = self.checkpoint_s, self.mtbf_s
        period = tau + d
        checkpointing = d / period if period > 0 else 0.0
        rework = (period / 2) / m if math.isfinite(m) else 0.0
        restart = self.restart_s / m if math.isfinite(m) else 0.0
        return {
            "checkpointing": checkpointing,
            "rework": rework,
            "restart": restart,
            "total": min(1.0, checkpointing + rework + restart),
        }

    def to_dict(self) -> dict:
        lost = self.lost()
        return {
            "components": [
                {
                    "kind": c.kind,
                    "count": c.count,
                    "failures_per_hour_each": c.rate_per_hour,
                    "failures_per_day": c.failures_per_day,
                }
                for c in self.components
            ],
            "failures_per_day": self.failures_per_hour * 24,
            "mtbf_s": self.mtbf_s,
            "checkpoint_bytes": self.checkpoint_bytes,
            "checkpoint_write_bytes_per_s": self.write_bytes_per_s,
            "checkpoint_s": self.checkpoint_s,
            "restart_s": self.restart_s,
            "checkpoint_interval_s": self.interval_s,
            "checkpoint_interval_given": self.interval_given,
            "young_interval_s": self.young_interval_s,
            "daly_interval_s": self.daly_interval_s,
            "lost_fraction": lost,
            "effective_training_fraction": 1.0 - lost["total"],
            "sources": self.sources,
        }


def component_counts(fabric: Fabric) -> dict[str, int]:
    """GPUs, servers, backend NICs and network cables (switch-facing, each direction counted once)."""
    gpus = fabric.world_size
    network = sum(1 for link in fabric.links if link.tier in (TIER_HOST, TIER_SPINE, TIER_SUPERSPINE))
    return {
        "gpu": gpus,
        "server": math.ceil(gpus / fabric.gpus_per_server),
        "nic": len(fabric.nodes_of_kind(NIC)),
        "network_cable": network // 2,
        "software_per_gpu": gpus,
        "switches": sum(1 for n in fabric.nodes.values() if n.kind in SWITCH_KINDS),
    }


def reliability(fabric: Fabric, params: float, spec=None) -> Reliability:
    """The job's reliability on `fabric` for a model of `params` parameters; `spec`: the scenario's
    `reliability:` section (scenario/reliability_spec.py), None for every default."""
    counts = component_counts(fabric)
    rates = dict(DEFAULT_RATES_PER_HOUR)
    sources = {k: SOURCE for k in rates}
    overrides = dict(getattr(spec, "failures_per_hour", None) or {})
    for k, v in overrides.items():
        rates[k] = v
        sources[k] = "scenario"
    components = [Component(k, counts[k], rates[k]) for k in DEFAULT_RATES_PER_HOUR]
    per_param = getattr(spec, "checkpoint_bytes_per_param", None) or CHECKPOINT_BYTES_PER_PARAM
    write_gbps = getattr(spec, "checkpoint_write_gBps", None)
    if write_gbps:
        write = write_gbps * 1e9
        sources["checkpoint_write"] = "scenario"
    else:
        write = LLAMA3_STORAGE_BYTES_PER_S * counts["gpu"] / LLAMA3_GPUS
        sources["checkpoint_write"] = (
            "Llama 3's storage, 'a sustainable throughput of 2 TB/s' (Dubey et al. 2024, "
            "Section 3.3.1), per GPU of its 16,384, times this job's GPUs"
        )
    restart = getattr(spec, "restart_s", None)
    sources["restart"] = "scenario" if restart is not None else "assumption (no published figure): 10 minutes"
    r = Reliability(
        components, params * per_param, write, DEFAULT_RESTART_S if restart is None else restart, 0.0, sources=sources
    )
    given = getattr(spec, "checkpoint_interval_s", None)
    return replace(r, interval_s=given if given is not None else r.best_interval_s, interval_given=given is not None)
