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

Checks, in the scenario's one style (scenario/): each field's own check is declared on it (`Annotated` pydantic
validators) and pydantic runs them all, its errors becoming `field.path: reason` problems as a scenario's do
(scenario/load.py `problems_from_validation`); the rule across fields (the threshold order) is a function returning
problems, as scenario/checks_qos.py's are. The dataclasses are plain when built (a configuration is often made in
steps with `dataclasses.replace`); `validate`, which `Network` runs, checks the whole and raises one `InputError`
listing every problem.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from typing import Annotated, Any

from pydantic import AfterValidator, TypeAdapter, ValidationError

from ..errors import InputError, Problem
from .headers import PFC_MAX_QUANTA

LB_MODES = ("ecmp", "flowlet", "spray", "adaptive")
TRANSPORTS = ("rc", "uc", "ud", "uet")  # RoCEv2 RC, UC, UD (IBTA Vol. 1 Ch. 9); Ultra Ethernet
LOSSLESS_PRIORITY = 3
CNP_PRIORITY = 7
N_QUEUES = 8
WRED_WEIGHT_MAX = 15  # NX-OS `random-detect ... weight 0-15`


def _rule(ok: Callable[[Any], bool], message: str) -> AfterValidator:
    """A field's check, as pydantic runs it in `validate`: `message` ({v}: the value) when `ok(value)` is false."""

    def check(v: Any) -> Any:
        if not ok(v):
            raise ValueError(message.format(v=v))
        return v

    return AfterValidator(check)


def _range(lo: int, hi: int, what: str = "must be", note: str = "") -> AfterValidator:
    return _rule(lambda v: lo <= v <= hi, f"{what} {lo}..{hi}{note} (got {{v}})")


def _one_of(names: tuple[str, ...]) -> AfterValidator:
    return _rule(lambda v: v in names, f"must be one of {', '.join(names)} (got {{v!r}})")


# the checks of `validate`, on the fields they concern (pydantic metadata; the dataclasses stay plain at run time)
Queue = Annotated[int, _rule(lambda q: 0 <= q < N_QUEUES, "queue {v} is not 0..7")]
Positive = Annotated[float, _rule(lambda v: v > 0, "must be positive (got {v})")]


@dataclass(frozen=True)
class SwitchConfig:
    forwarding_latency_s: float | None = None  # None: the fabric's switch_latency_s
    buffer_bytes: int = 64 * 1024 * 1024
    queue_limit_bytes: int = 8 * 1024 * 1024  # lossy queues drop above this
    # lossy queues also drop above alpha x the free shared buffer
    dynamic_threshold_alpha: Annotated[
        float | None, _rule(lambda a: a is None or 0 < a <= 64, "must be in (0, 64] (got {v})")
    ] = None
    strict_priority_queues: tuple[Queue, ...] = (CNP_PRIORITY,)
    bandwidth_remaining_percent: Annotated[  # by queue
        tuple[int, ...],
        _rule(lambda v: len(v) == N_QUEUES and sum(v) <= 100, "8 percentages summing to at most 100 (got {v})"),
    ] = (50, 0, 0, 50, 0, 0, 0, 0)
    dscp_to_queue: tuple[tuple[int, Queue], ...] = ((24, 3), (48, 7))  # DSCP -> QoS group = queue; others -> default
    default_queue: Queue = 0  # `class class-default` -> `set qos-group 0`
    ecn_enabled: bool = True  # WRED on the ecn_queues (False: no WRED at all)
    wred_ecn: bool = True  # WRED marks ECN 11 (`ecn`); False: WRED drops instead
    ecn_queues: tuple[Queue, ...] = (LOSSLESS_PRIORITY,)
    wred_min_bytes: int = 150_000
    wred_max_bytes: int = 3_000_000
    wred_pmax: Annotated[float, _rule(lambda p: 0 <= p <= 1, "must be a probability in [0, 1] (got {v})")] = 0.07
    # WRED's exponential weight n (`random-detect ... weight n`): the depth WRED compares with its thresholds is
    # avg <- (1 - 2^-n) avg + 2^-n q at each arrival; 0 = the instantaneous depth q (the book's)
    wred_weight: Annotated[int, _range(0, WRED_WEIGHT_MAX)] = 0
    # queues whose WRED differs from the above: (queue, min bytes, max bytes, pmax, drop threshold bytes | None)
    wred_per_queue: tuple[tuple[int, int, int, float, int | None], ...] = ()
    drop_threshold_bytes: int | None = None  # egress drop on the ECN queues; None: PFC keeps them lossless
    pfc_enabled: bool = True
    pfc_priorities: tuple[Queue, ...] = (LOSSLESS_PRIORITY,)
    pfc_xon_bytes: int = 100_000
    pfc_xoff_bytes: int = 3_200_000
    pfc_headroom_bytes: int | None = None  # None: 2 x (cable + forwarding latency) x rate + 3 frames
    # priorities whose PFC thresholds differ from the above: (priority, xON bytes, xOFF bytes, headroom bytes | None)
    pfc_per_priority: tuple[tuple[int, int, int, int | None], ...] = ()
    pfc_quanta: Annotated[int, _range(0, PFC_MAX_QUANTA, note=" (0xFFFF)")] = PFC_MAX_QUANTA
    pfc_watchdog_s: float | None = 0.1


@dataclass(frozen=True)
class DcqcnConfig:
    enabled: bool = True
    # ns-3 EwmaGain; the paper's 1/256 makes alpha stay near 1 for milliseconds
    g: Annotated[float, _rule(lambda g: 0 < g <= 1, "must be in (0, 1] (got {v})")] = 1 / 16
    clamp_target_rate: bool = False  # ns-3 ClampTargetRate; the paper's algorithm is True
    alpha_init: float = 1.0
    alpha_update_interval_s: Positive = 55e-6
    rate_decrease_interval_s: float = 4e-6
    rate_increase_timer_s: Positive = 55e-6
    byte_counter_bytes: int = 10 * 1024 * 1024
    fast_recovery_steps: int = 5
    r_ai_gbps: float = 0.005
    r_hai_gbps: float = 0.05
    min_rate_gbps: float = 0.1
    cnp_interval_s: Positive = 50e-6  # notification point: at most one CNP per QP per interval


@dataclass(frozen=True)
class NicConfig:
    mtu_bytes: Annotated[int, _range(256, 9000, note=" (RoCE: 256, 512, 1024, 2048 or 4096)")] = 4096
    write_only: bool = False  # every packet RDMA Write Only with its own RETH (seeds Figure 12-7)
    # rc: RoCEv2 RC, go-back-N, in order; uc: Unreliable Connection (no ACK, no retransmission: a lost packet loses
    # its message; complete at the sender once sent); ud: Unreliable Datagram (SEND of at most the path MTU, no
    # RDMA Write); uet: spraying, out of order tolerated
    transport: Annotated[str, _one_of(TRANSPORTS)] = "rc"
    ack_every_packets: Annotated[int, _rule(lambda n: n >= 1, "must be at least 1 (got {v})")] = 8
    rto_s: float = 1e-3
    data_dscp: int = 24
    cnp_dscp: int = 48
    pkey: Annotated[
        int,
        _rule(
            lambda k: 0 < k <= 0xFFFF and k & 0x7FFF,
            "must be a 16-bit P_Key with a non-zero partition number (got {v:#x})",
        ),
    ] = 0xFFFF  # the partition of every QP (default partition, full member; the book's example 0x8012)
    # timeouts in a row before the QP goes to ERR (3 bits; 7 is the usual setting)
    retry_cnt: Annotated[int, _range(0, 7, "is 3 bits:")] = 7
    cm_setup: bool = False  # REQ -> REP -> RTU on the wire before a QP's first Write (False: set up before the run)
    # host CM software per message sent (not in the book; rdma_cm is tens of us)
    cm_processing_s: Annotated[float, _rule(lambda v: v >= 0, "must be >= 0 (got {v})")] = 10e-6
    # CM retries (IBTA Vol. 1 Ch. 12): a REQ (or REP) unanswered for 4.096 us x 2^cm_response_timeout is sent again,
    # up to max_cm_retries times; then the connection fails. rdma_cm's defaults: 20 (4.29 s) and 15 (Linux
    # drivers/infiniband/core/cma.c, CMA_CM_RESPONSE_TIMEOUT and CMA_MAX_CM_RETRIES)
    cm_response_timeout: Annotated[int, _range(0, 31, "is a 5-bit exponent (4.096 us x 2^t):")] = 20
    max_cm_retries: Annotated[int, _range(0, 15, "is 4 bits in the REQ:")] = 15


@dataclass(frozen=True)
class LbConfig:
    mode: Annotated[str, _one_of(LB_MODES)] = "ecmp"
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
    # packets and PFC frames kept for the pcap; past it `Network.capture_missed` counts
    trace_max_packets: Annotated[int, _rule(lambda n: n >= 0, "must be >= 0 (got {v})")] = 2000
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

    def pfc_of(self, prio: int) -> tuple[int, int, int | None]:
        """(xON, xOFF, headroom | None) of PFC priority `prio`: its own (`pfc_per_priority`) or the switch's."""
        s = self.switch
        for pp, xon, xoff, head in s.pfc_per_priority:
            if pp == prio:
                return xon, xoff, head
        return s.pfc_xon_bytes, s.pfc_xoff_bytes, s.pfc_headroom_bytes

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


def threshold_order_problems(s: SwitchConfig) -> list[Problem]:
    """The threshold rule on every queue that is both lossless (PFC) and WRED-managed (ECN), with its own WRED
    thresholds (`wred_per_queue`) or the switch's."""
    if not (s.ecn_enabled and s.pfc_enabled):
        return []
    out = []
    own = {q for q, *_ in s.wred_per_queue}
    own_pfc = {q: (xon, xoff) for q, xon, xoff, _ in s.pfc_per_priority}
    lossless_wred = [q for q in s.ecn_queues if q in s.pfc_priorities]
    if any(q not in own and q not in own_pfc for q in lossless_wred) or not lossless_wred and not own:
        out += threshold_problems(s.pfc_xon_bytes, s.wred_min_bytes, s.wred_max_bytes, s.pfc_xoff_bytes)
    for q, lo, hi, _, _ in s.wred_per_queue:
        if q in lossless_wred:
            xon, xoff = own_pfc.get(q, (s.pfc_xon_bytes, s.pfc_xoff_bytes))
            out += threshold_problems(xon, lo, hi, xoff, f"switch.wred_per_queue[{q}]")
    for q, (xon, xoff) in own_pfc.items():
        if q in lossless_wred and q not in own:
            out += threshold_problems(xon, s.wred_min_bytes, s.wred_max_bytes, xoff, f"switch.pfc_per_priority[{q}]")
    return out


@cache
def _schema() -> TypeAdapter[PacketConfig]:
    return TypeAdapter(PacketConfig)


def validate(cfg: PacketConfig) -> PacketConfig:
    """`cfg` itself when every check passes, else `InputError` listing every problem by field path: the fields'
    own checks (declared on them, run by pydantic as the scenario's are) and the threshold rule across fields."""
    problems = threshold_order_problems(cfg.switch)
    try:
        _schema().validate_python(asdict(cfg))
    except ValidationError as exc:
        from ..scenario.load import problems_from_validation

        problems = problems_from_validation(exc) + problems
    if problems:
        raise InputError(problems)
    return cfg
