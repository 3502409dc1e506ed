"""Every knob of the packet engine, with its default and where the default comes from.

Book values (seeds Ch. 11, Examples 11-1..11-7): DSCP 24 -> queue 3 (RoCEv2, lossless, PFC CoS 3,
`bandwidth remaining percent 50`, WRED 150 KB / 3000 KB / drop-probability 7 %, weight 0 = instantaneous
depth, ecn); DSCP 48 -> queue 7 strict priority (CNPs); anything else -> queue 0.

Not in the book (spec §11.1), chosen here and documented in docs/packet.md:
- PFC xON 100 KB and xOFF 3200 KB per ingress port and priority, so that xON < WRED min < WRED max < xOFF
  (the book's rule of thumb, checked by `validate`); headroom = 2 x (cable + forwarding latency) x rate + 3 MTU frames
  unless given; pause quanta 0xFFFF, refreshed every half pause while above xON; watchdog 100 ms
  (Cisco NX-OS default `priority-flow-control watch-dog-interval`).
- Shared buffer 64 MB per switch; a lossy queue drops above `queue_limit_bytes` (and, with a dynamic threshold,
  above alpha x the shared buffer still free, Choudhury and Hahne's rule) or when the shared
  buffer is full; a lossless queue never drops at egress unless `drop_threshold_bytes` is set; its
  ingress accounting drops only when a priority group overruns xOFF + headroom (a misconfiguration).
- DCQCN: the algorithm of Zhu et al. 2015 with ns-3 `RdmaHw` defaults (spec §11.2): g = 1/16 (EwmaGain;
  the paper's 1/256 is one field away), no target clamping (ClampTargetRate false), alpha update 55 us,
  rate decrease interval 4 us, fast recovery F = 5, R_AI 5 Mb/s, R_HAI 50 Mb/s, minimum rate 100 Mb/s;
  the paper's rate-increase timer 55 us and byte counter 10 MB; CNP interval 50 us (paper and ns-3).
- Transport: RoCE MTU 4096 B, an ACK every 8 packets (and on the last), RTO 1 ms (go-back-N), retry count 7,
  P_Key 0xFFFF; connection setup on the wire (CM REQ/REP/RTU) off unless asked for, 10 us of CM software per
  message when on.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import InputError, Problem
from .headers import PFC_MAX_QUANTA

LB_MODES = ("ecmp", "flowlet", "spray", "adaptive")
TRANSPORTS = ("rc", "uc", "ud", "uet")  # RoCEv2 RC, UC, UD (IBTA Vol. 1 Ch. 9); Ultra Ethernet
LOSSLESS_PRIORITY = 3
CNP_PRIORITY = 7
N_QUEUES = 8
WRED_WEIGHT_MAX = 15  # NX-OS `random-detect ... weight 0-15`


@dataclass(frozen=True)
class SwitchConfig:
    forwarding_latency_s: float | None = None  # None: the fabric's switch_latency_s
    buffer_bytes: int = 64 * 1024 * 1024
    queue_limit_bytes: int = 8 * 1024 * 1024  # lossy queues drop above this
    dynamic_threshold_alpha: float | None = None  # lossy queues also drop above alpha x the free shared buffer
    strict_priority_queues: tuple[int, ...] = (CNP_PRIORITY,)
    bandwidth_remaining_percent: tuple[int, ...] = (50, 0, 0, 50, 0, 0, 0, 0)  # by queue
    dscp_to_queue: tuple[tuple[int, int], ...] = ((24, 3), (48, 7))  # DSCP -> QoS group = queue; others -> default
    default_queue: int = 0  # `class class-default` -> `set qos-group 0`
    ecn_enabled: bool = True  # WRED on the ecn_queues (False: no WRED at all)
    wred_ecn: bool = True  # WRED marks ECN 11 (`ecn`); False: WRED drops instead
    ecn_queues: tuple[int, ...] = (LOSSLESS_PRIORITY,)
    wred_min_bytes: int = 150_000
    wred_max_bytes: int = 3_000_000
    wred_pmax: float = 0.07
    # WRED's exponential weight n (`random-detect ... weight n`): the depth WRED compares with its thresholds is
    # avg <- (1 - 2^-n) avg + 2^-n q at each arrival; 0 = the instantaneous depth q (the book's)
    wred_weight: int = 0
    # queues whose WRED differs from the above: (queue, min bytes, max bytes, pmax, drop threshold bytes | None)
    wred_per_queue: tuple[tuple[int, int, int, float, int | None], ...] = ()
    drop_threshold_bytes: int | None = None  # egress drop on the ECN queues; None: PFC keeps them lossless
    pfc_enabled: bool = True
    pfc_priorities: tuple[int, ...] = (LOSSLESS_PRIORITY,)
    pfc_xon_bytes: int = 100_000
    pfc_xoff_bytes: int = 3_200_000
    pfc_headroom_bytes: int | None = None  # None: 2 x (cable + forwarding latency) x rate + 3 frames
    pfc_quanta: int = PFC_MAX_QUANTA
    pfc_watchdog_s: float | None = 0.1


@dataclass(frozen=True)
class DcqcnConfig:
    enabled: bool = True
    g: float = 1 / 16  # ns-3 EwmaGain; the paper's 1/256 makes alpha stay near 1 for milliseconds
    clamp_target_rate: bool = False  # ns-3 ClampTargetRate; the paper's algorithm is True
    alpha_init: float = 1.0
    alpha_update_interval_s: float = 55e-6
    rate_decrease_interval_s: float = 4e-6
    rate_increase_timer_s: float = 55e-6
    byte_counter_bytes: int = 10 * 1024 * 1024
    fast_recovery_steps: int = 5
    r_ai_gbps: float = 0.005
    r_hai_gbps: float = 0.05
    min_rate_gbps: float = 0.1
    cnp_interval_s: float = 50e-6  # notification point: at most one CNP per QP per interval


@dataclass(frozen=True)
class NicConfig:
    mtu_bytes: int = 4096
    write_only: bool = False  # every packet RDMA Write Only with its own RETH (seeds Figure 12-7)
    # rc: RoCEv2 RC, go-back-N, in order; uc: Unreliable Connection (no ACK, no retransmission: a lost packet loses
    # its message; complete at the sender once sent); ud: Unreliable Datagram (SEND of at most the path MTU, no
    # RDMA Write); uet: spraying, out of order tolerated
    transport: str = "rc"
    ack_every_packets: int = 8
    rto_s: float = 1e-3
    data_dscp: int = 24
    cnp_dscp: int = 48
    pkey: int = 0xFFFF  # the partition of every QP (default partition, full member; the book's example 0x8012)
    retry_cnt: int = 7  # timeouts in a row before the QP goes to ERR (3 bits; 7 is the usual setting)
    cm_setup: bool = False  # REQ -> REP -> RTU on the wire before a QP's first Write (False: set up before the run)
    cm_processing_s: float = 10e-6  # host CM software per message sent (not in the book; rdma_cm is tens of us)
    # CM retries (IBTA Vol. 1 Ch. 12): a REQ (or REP) unanswered for 4.096 us x 2^cm_response_timeout is sent again,
    # up to max_cm_retries times; then the connection fails. rdma_cm's defaults: 20 (4.29 s) and 15 (Linux
    # drivers/infiniband/core/cma.c, CMA_CM_RESPONSE_TIMEOUT and CMA_MAX_CM_RETRIES)
    cm_response_timeout: int = 20
    max_cm_retries: int = 15


@dataclass(frozen=True)
class LbConfig:
    mode: str = "ecmp"
    flowlet_gap_s: float = 20e-6
    dre_tau_s: float = 20e-6  # time constant of the port-load estimator (flowlet, adaptive)


@dataclass(frozen=True)
class PacketConfig:
    switch: SwitchConfig = field(default_factory=SwitchConfig)
    nic: NicConfig = field(default_factory=NicConfig)
    dcqcn: DcqcnConfig = field(default_factory=DcqcnConfig)
    lb: LbConfig = field(default_factory=LbConfig)
    seed: int = 0
    depth_sample_s: float = 1e-6  # queue-depth time series: at most one sample per queue per interval
    nvlink_chunk_bytes: int = 65536  # scale-up transfers move in chunks of this size
    explain: bool = False
    trace_flows: tuple[int, ...] = ()  # flows whose packets are kept for the pcap
    trace_by: str = "flow"  # what trace_flows numbers: "flow" every transfer, "rdma" the RDMA transfers (QPs) alone
    trace_pfc: bool = False  # keep PFC frames for the pcap
    trace_max_packets: int = 2000  # packets and PFC frames kept for the pcap; past it `Network.capture_missed` counts
    trace_all: bool = False  # every RDMA transfer's packets kept (`simulate --pcap`), up to trace_max_packets
    until_s: float | None = None

    def with_(self, **kw) -> PacketConfig:
        return replace(self, **kw)

    def wred_of(self, q: int) -> tuple[int, int, float, int | None]:
        """(WRED min, max, pmax, drop threshold) of queue q."""
        s = self.switch
        for qq, lo, hi, pmax, drop in s.wred_per_queue:
            if qq == q:
                return lo, hi, pmax, drop
        return s.wred_min_bytes, s.wred_max_bytes, s.wred_pmax, s.drop_threshold_bytes

    def queue_of(self, dscp: int) -> int:
        """The egress queue (QoS group) of a DSCP value, as the switches classify it."""
        return dict(self.switch.dscp_to_queue).get(dscp, self.switch.default_queue)


def threshold_problems(xon: int, wred_min: int, wred_max: int, xoff: int, path: str = "switch") -> list[Problem]:
    """The book's rule of thumb (seeds Ch. 11, DCQCN): xON < WRED min < WRED max < xOFF."""
    names = (
        ("pfc_xon_bytes", xon),
        ("wred_min_bytes", wred_min),
        ("wred_max_bytes", wred_max),
        ("pfc_xoff_bytes", xoff),
    )
    out = []
    for (a, va), (b, vb) in zip(names, names[1:]):
        if not va < vb:
            out.append(
                Problem(
                    f"{path}.{b}",
                    f"must be greater than {a} ({vb} <= {va}): the rule is "
                    "xON < WRED min < WRED max < xOFF, so ECN acts before PFC",
                )
            )
    return out


def validate(cfg: PacketConfig) -> PacketConfig:
    p: list[Problem] = []
    s, d, n = cfg.switch, cfg.dcqcn, cfg.nic
    if s.ecn_enabled and s.pfc_enabled:  # on every queue that is both lossless and WRED-managed
        own = {q for q, *_ in s.wred_per_queue}
        lossless_wred = [q for q in s.ecn_queues if q in s.pfc_priorities]
        if any(q not in own for q in lossless_wred) or not lossless_wred and not own:
            p += threshold_problems(s.pfc_xon_bytes, s.wred_min_bytes, s.wred_max_bytes, s.pfc_xoff_bytes)
        for q, lo, hi, _, _ in s.wred_per_queue:
            if q in lossless_wred:
                p += threshold_problems(s.pfc_xon_bytes, lo, hi, s.pfc_xoff_bytes, f"switch.wred_per_queue[{q}]")
    if s.dynamic_threshold_alpha is not None and not 0 < s.dynamic_threshold_alpha <= 64:
        p.append(Problem("switch.dynamic_threshold_alpha", "must be in (0, 64]"))
    if not 0 <= s.wred_weight <= WRED_WEIGHT_MAX:
        p.append(Problem("switch.wred_weight", f"must be 0..{WRED_WEIGHT_MAX} (got {s.wred_weight})"))
    if not 0 <= s.wred_pmax <= 1:
        p.append(Problem("switch.wred_pmax", "must be a probability in [0, 1]"))
    if not 0 <= s.pfc_quanta <= PFC_MAX_QUANTA:
        p.append(Problem("switch.pfc_quanta", "must be 0..65535 (0xFFFF)"))
    if len(s.bandwidth_remaining_percent) != N_QUEUES or sum(s.bandwidth_remaining_percent) > 100:
        p.append(Problem("switch.bandwidth_remaining_percent", "8 percentages summing to at most 100"))
    for q in (
        *s.strict_priority_queues,
        *s.ecn_queues,
        *s.pfc_priorities,
        *(v for _, v in s.dscp_to_queue),
        s.default_queue,
    ):
        if not 0 <= q < N_QUEUES:
            p.append(Problem("switch", f"queue {q} is not 0..7"))
    if not 0 < d.g <= 1:
        p.append(Problem("dcqcn.g", "must be in (0, 1]"))
    for name in ("alpha_update_interval_s", "rate_increase_timer_s", "cnp_interval_s"):
        if getattr(d, name) <= 0:
            p.append(Problem(f"dcqcn.{name}", "must be positive"))
    if not 256 <= n.mtu_bytes <= 9000:
        p.append(Problem("nic.mtu_bytes", "must be 256..9000 (RoCE: 256, 512, 1024, 2048 or 4096)"))
    if n.transport not in TRANSPORTS:
        p.append(Problem("nic.transport", f"must be one of {', '.join(TRANSPORTS)}"))
    if n.ack_every_packets < 1:
        p.append(Problem("nic.ack_every_packets", "must be at least 1"))
    if not 0 < n.pkey <= 0xFFFF or not n.pkey & 0x7FFF:
        p.append(Problem("nic.pkey", f"must be a 16-bit P_Key with a non-zero partition number (got {n.pkey:#x})"))
    if not 0 <= n.retry_cnt <= 7:
        p.append(Problem("nic.retry_cnt", "is 3 bits: 0..7"))
    if n.cm_processing_s < 0:
        p.append(Problem("nic.cm_processing_s", "must be >= 0"))
    if not 0 <= n.cm_response_timeout <= 31:
        p.append(Problem("nic.cm_response_timeout", "is a 5-bit exponent (4.096 us x 2^t): 0..31"))
    if not 0 <= n.max_cm_retries <= 15:
        p.append(Problem("nic.max_cm_retries", "is 4 bits in the REQ: 0..15"))
    if cfg.trace_max_packets < 0:
        p.append(Problem("trace_max_packets", f"must be >= 0 (got {cfg.trace_max_packets})"))
    if cfg.lb.mode not in LB_MODES:
        p.append(Problem("lb.mode", f"must be one of {', '.join(LB_MODES)}"))
    if p:
        raise InputError(p)
    return cfg
