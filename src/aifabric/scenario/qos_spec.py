"""`fabric.qos`: the switch QoS profile a network engineer deploys, as scenario data.

Deep Learning for Network Engineers, Chapter 11 (Figure 11-8, Examples 11-1..11-7), is the default:

- classification: DSCP 24 (RoCEv2) -> QoS group 3, DSCP 48 (CNP) -> QoS group 7, anything else -> group 0;
  QoS group n is egress queue n (fixed on NX-OS, "does not require configuration");
- scheduling: queue 7 strict priority (`priority level 1`), queue 3 `bandwidth remaining percent 50`;
- WRED on queue 3: minimum 150 KB, maximum 3,000 KB, drop-probability 7 %, weight 0 (instantaneous depth), ecn;
- network-qos: MTU 9216, `pause pfc-cos 3`; PFC watchdog on.

Not in the book, documented defaults of the packet engine (docs/packet.md): PFC xON 100 KB and xOFF 3,200 KB
(so that xON < WRED min < WRED max < xOFF; a lossless priority may have its own in `pfc.per_priority`), headroom from cable latency x speed, a 64 MB shared buffer, the DCQCN
parameters of ns-3's RdmaHw, RoCE path MTU 4096.

KB here is 1,000 bytes (the packet engine counts bytes; NX-OS `kbytes`); buffers are in MiB (2^20 bytes). The cross-field rules (threshold order,
headroom against the cables, MTU against the RoCE path MTU) are in checks_qos.py.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from .base import Strict

QUEUES = 8
DLB_MAC = "00:CC:CC:CC:CC:CC"  # Cisco's default DLB MAC (Chapter 12)


class TrafficClass(Strict):
    """One `class-map type qos match-any NAME` + `set qos-group N` (Examples 11-1, 11-2)."""

    name: str = Field(
        ...,
        min_length=1,
        max_length=40,
        pattern=r"^[A-Za-z][A-Za-z0-9_.-]*$",
        description="class-map name, e.g. ROCEv2, CNP",
    )
    dscp: list[int] = Field(..., min_length=1, max_length=64, description="DSCP values it matches (0..63)")
    qos_group: int = Field(..., ge=0, le=QUEUES - 1, description="internal QoS group = egress queue (0..7)")

    @field_validator("dscp")
    @classmethod
    def _dscp_range(cls, v: list[int]) -> list[int]:
        bad = [x for x in v if not 0 <= x <= 63]
        if bad:
            raise ValueError(f"DSCP is 6 bits: 0..63 (got {', '.join(map(str, bad))})")
        return v


class WredQueueSpec(Strict):
    """One queue's own WRED thresholds (its `random-detect` line), over the `wred` block's."""

    min_kb: float = Field(..., gt=0, le=1_000_000, description="WRED minimum threshold, KB")
    max_kb: float = Field(..., gt=0, le=1_000_000, description="WRED maximum threshold, KB")
    drop_probability_percent: float | None = Field(None, ge=0, le=100, description="default: the wred block's")
    drop_threshold_kb: float | None = Field(None, gt=0, le=1_000_000, description="default: none")


class WredSpec(Strict):
    """`random-detect minimum-threshold .. maximum-threshold .. drop-probability .. weight .. ecn` (Example 11-3)."""

    queues: list[int] = Field([3], max_length=QUEUES, description="queues with WRED (the book: queue 3)")
    min_kb: float = Field(150, gt=0, le=1_000_000, description="WRED minimum threshold, KB")
    max_kb: float = Field(3000, gt=0, le=1_000_000, description="WRED maximum threshold, KB")
    drop_probability_percent: float = Field(7, ge=0, le=100, description="marking probability at the maximum, %")
    weight: int = Field(
        0,
        ge=0,
        le=15,
        description="exponential weight n of the average queue depth WRED compares "
        "with its thresholds: avg <- (1 - 2^-n) avg + 2^-n depth at each "
        "arrival; 0 = instantaneous depth (the book's)",
    )
    ecn: bool = Field(True, description="mark ECN 11 instead of dropping (without it WRED drops)")
    drop_threshold_kb: float | None = Field(
        None, gt=0, le=1_000_000, description="drop above this depth even when marking (default: none)"
    )
    per_queue: dict[int, WredQueueSpec] = Field({}, description="queues of `queues` with thresholds of their own")

    @field_validator("per_queue")
    @classmethod
    def _per_queue_keys(cls, v: dict[int, WredQueueSpec]) -> dict[int, WredQueueSpec]:
        bad = [q for q in v if not 0 <= q < QUEUES]
        if bad:
            raise ValueError(f"queues are 0..7 (got {', '.join(map(str, bad))})")
        return v

    def of(self, q: int) -> tuple[float, float, float, float | None]:
        """(min KB, max KB, drop probability %, drop threshold KB) of queue q."""
        o = self.per_queue.get(q)
        if o is None:
            return self.min_kb, self.max_kb, self.drop_probability_percent, self.drop_threshold_kb
        p = self.drop_probability_percent if o.drop_probability_percent is None else o.drop_probability_percent
        return o.min_kb, o.max_kb, p, o.drop_threshold_kb


class PfcPrioritySpec(Strict):
    """One lossless priority's own thresholds (its network-qos class's `pause ... pause-threshold ...` line), over
    the `pfc` block's."""

    xon_kb: float = Field(..., gt=0, le=1_000_000, description="resume below this ingress level, KB")
    xoff_kb: float = Field(..., gt=0, le=1_000_000, description="pause above this ingress level, KB")
    headroom_kb: float | None = Field(
        None, gt=0, le=1_000_000, description="buffer above xOFF for what is in flight (default: the pfc block's)"
    )


class PfcSpec(Strict):
    """`pause pfc-cos N` (Example 11-4), thresholds per ingress port and priority, the watchdog (Example 11-5)."""

    enabled: bool = True
    priorities: list[int] = Field([3], max_length=QUEUES, description="lossless CoS values (the book: 3)")
    xon_kb: float = Field(100, gt=0, le=1_000_000, description="resume below this ingress level, KB")
    xoff_kb: float = Field(3200, gt=0, le=1_000_000, description="pause above this ingress level, KB")
    headroom_kb: float | None = Field(
        None,
        gt=0,
        le=1_000_000,
        description="buffer above xOFF for what is in flight "
        "(default: 2 x (cable + switch latency) x speed + 3 frames)",
    )
    quanta: int = Field(0xFFFF, ge=1, le=0xFFFF, description="pause time in quanta of 512 bit times")
    watchdog_ms: float | None = Field(100, gt=0, le=100_000, description="PFC watchdog interval, ms (null: off)")
    per_priority: dict[int, PfcPrioritySpec] = Field(
        {}, description="priorities of `priorities` with thresholds of their own (e.g. {5: {xon_kb: 50, xoff_kb: 800}})"
    )

    @field_validator("per_priority")
    @classmethod
    def _per_priority_keys(cls, v: dict[int, PfcPrioritySpec]) -> dict[int, PfcPrioritySpec]:
        bad = [q for q in v if not 0 <= q < QUEUES]
        if bad:
            raise ValueError(f"priorities are 0..7 (got {', '.join(map(str, bad))})")
        return v

    def of(self, prio: int) -> tuple[float, float, float | None]:
        """(xON KB, xOFF KB, headroom KB | None) of a priority: its own or the block's."""
        o = self.per_priority.get(prio)
        if o is None:
            return self.xon_kb, self.xoff_kb, self.headroom_kb
        return o.xon_kb, o.xoff_kb, self.headroom_kb if o.headroom_kb is None else o.headroom_kb


class BufferSpec(Strict):
    shared_mib: float = Field(64, gt=0, le=1_000_000, description="shared packet buffer per switch, MiB")
    lossy_queue_limit_mib: float = Field(8, gt=0, le=1_000_000, description="a lossy queue drops above this, MiB")
    dynamic_threshold_alpha: float | None = Field(
        None,
        gt=0,
        le=64,
        description="lossy queues also drop above alpha x the free shared buffer (dynamic "
        "threshold; default: off, the static limit alone)",
    )


class DcqcnSpec(Strict):
    """DCQCN (Zhu et al. 2015): the NIC's reaction point and notification point; defaults of ns-3's RdmaHw."""

    g: float = Field(1 / 16, gt=0, le=1, description="alpha gain")
    alpha_update_interval_us: float = Field(55, gt=0, le=1e6)
    rate_decrease_interval_us: float = Field(4, gt=0, le=1e6)
    rate_increase_timer_us: float = Field(55, gt=0, le=1e6)
    byte_counter_mib: float = Field(10, gt=0, le=1e6, description="rate-increase byte counter, MiB")
    fast_recovery_steps: int = Field(5, ge=1, le=100)
    r_ai_mbps: float = Field(5, gt=0, le=1e6, description="additive increase, Mb/s")
    r_hai_mbps: float = Field(50, gt=0, le=1e6, description="hyper increase, Mb/s")
    min_rate_mbps: float = Field(100, gt=0, le=1e6, description="rate floor, Mb/s")
    clamp_target_rate: bool = False
    cnp_interval_us: float = Field(50, gt=0, le=1e6, description="notification point: one CNP per QP per interval")


class DlbSpec(Strict):
    """Dynamic Load Balancing (Deep Learning for Network Engineers, Chapter 12, Example 12-1: Cisco Nexus 9000
    `hardware profile dlb`): the switches choose among the equal-cost uplinks by their load, per flowlet or per
    packet, over the ECMP groups the routing gives them. Off: the ECMP hash alone (or `fabric.load_balancing`)."""

    mode: Literal["off", "flowlet", "per-packet"] = Field(
        "off",
        description="flowlet: the least-loaded uplink at each new flowlet (an idle gap longer than "
        "flowlet_aging_us); per-packet: the least-loaded uplink for every packet",
    )
    flowlet_aging_us: float | None = Field(
        None,
        gt=0,
        le=1_000_000,
        description="mode flowlet: the idle gap that "
        "ends a flowlet, µs (NX-OS `flowlet-aging`; default fabric.flowlet_gap_us); "
        "the packet engine's: the flow engine has no gaps and spreads every "
        "transfer over the equal-cost paths, the flowlets' long-run share",
    )
    mac_address: str = Field(
        DLB_MAC,
        pattern=r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$",
        description="the DLB virtual next-hop MAC, the same on every switch (Cisco's default 00:CC:CC:CC:CC:CC)",
    )

    @field_validator("mac_address")
    @classmethod
    def _unicast(cls, v: str) -> str:
        if int(v[:2], 16) & 1:
            raise ValueError(f"{v} is a multicast MAC (the first octet's low bit is set): a next hop is unicast")
        return v.upper()


class QosSpec(Strict):
    """The switch (and NIC) QoS profile: classification, scheduling, WRED/ECN, PFC, buffers, MTU, DCQCN."""

    classes: list[TrafficClass] = Field(
        [TrafficClass(name="ROCEv2", dscp=[24], qos_group=3), TrafficClass(name="CNP", dscp=[48], qos_group=7)],
        max_length=QUEUES,
        description="DSCP -> QoS group (anything else: default_qos_group)",
    )
    default_qos_group: int = Field(0, ge=0, le=QUEUES - 1)
    strict_priority_queues: list[int] = Field([7], max_length=QUEUES, description="`priority level 1` queues")
    bandwidth_remaining_percent: dict[int, int] = Field(
        {0: 50, 3: 50}, description="queue -> `bandwidth remaining percent` (others 0)"
    )
    wred: WredSpec = WredSpec()
    pfc: PfcSpec = PfcSpec()
    buffer: BufferSpec = BufferSpec()
    mtu_bytes: int = Field(9216, ge=1500, le=9216, description="switch MTU (network-qos `mtu`)")
    roce_mtu_bytes: Literal[256, 512, 1024, 2048, 4096] = Field(4096, description="RoCE path MTU of the NICs")
    data_dscp: int = Field(24, ge=0, le=63, description="DSCP the NICs put on RoCEv2 data")
    cnp_dscp: int = Field(48, ge=0, le=63, description="DSCP the NICs put on CNPs")
    ack_every_packets: int = Field(8, ge=1, le=1024, description="the responder ACKs every N packets")
    congestion_control: Literal["dcqcn", "none"] = "dcqcn"
    dcqcn: DcqcnSpec = DcqcnSpec()
    dlb: DlbSpec = Field(DlbSpec(), description="Dynamic Load Balancing on the uplinks: off, flowlet or per-packet")

    @field_validator("strict_priority_queues")
    @classmethod
    def _queues(cls, v: list[int]) -> list[int]:
        bad = [q for q in v if not 0 <= q < QUEUES]
        if bad:
            raise ValueError(f"queues are 0..7 (got {', '.join(map(str, bad))})")
        return v

    @field_validator("bandwidth_remaining_percent")
    @classmethod
    def _shares(cls, v: dict[int, int]) -> dict[int, int]:
        bad = [q for q in v if not 0 <= q < QUEUES]
        if bad:
            raise ValueError(f"queues are 0..7 (got {', '.join(map(str, bad))})")
        if any(not 0 <= p <= 100 for p in v.values()):
            raise ValueError("each share is 0..100 %")
        if sum(v.values()) > 100:
            raise ValueError(f"shares add up to {sum(v.values())} %, more than 100")
        return v

    @field_validator("classes")
    @classmethod
    def _distinct_dscp(cls, v: list[TrafficClass]) -> list[TrafficClass]:
        seen: dict[int, str] = {}
        for c in v:
            for d in c.dscp:
                if d in seen:
                    raise ValueError(f"DSCP {d} is matched by two classes ({seen[d]} and {c.name})")
                seen[d] = c.name
        return v

    def dscp_to_queue(self) -> dict[int, int]:
        return {d: c.qos_group for c in self.classes for d in c.dscp}

    def queue_of(self, dscp: int) -> int:
        return self.dscp_to_queue().get(dscp, self.default_qos_group)
