"""The RDMA verbs objects a NIC keeps (Deep Learning for Network Engineers, Chapter 9): protection domains,
memory regions with L_Key/R_Key, queue pairs and their state machine, completion queues.

The book's four phases of an RDMA Write: (a) allocate a protection domain and register memory (every region
gets an L_Key; one registered with remote access also an R_Key), (b) create a queue pair bound to the same
PD and a completion queue, set its service type, query a P_Key and move it to INIT, (c) the connection
exchange (cm.py) moves it INIT -> RTR -> RTS (the book's "Ready to Send and Ready to Receive"; the standard
order is RTR first), (d) post the Write; the responder checks the P_Key, then the R_Key and the address
range, places the data, and the requester's completion queue gets a work completion.

Attributes each transition sets (IBTA Vol. 1 §10.3, `ibv_modify_qp`):

- RESET -> INIT: P_Key index (the port's P_Key table) and access flags; a datagram QP (UD) its Q_Key;
- INIT -> RTR: path MTU, destination QPN, expected receive PSN (connected QPs: RC, UC, RUD, ROD);
- RTR -> RTS: initial send PSN; reliable QPs (RC, RUD, ROD) also the ACK timeout and retry count;
- any state -> ERR (a fatal completion: outstanding work requests are flushed), any state -> RESET.

Service types: RC (Reliable Connection, the book's), UC (Unreliable Connection), UD (Unreliable Datagram),
and Ultra Ethernet's RUD (Reliable Unordered Delivery) and ROD (Reliable Ordered Delivery).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

from .headers import PSN_MODULUS, QPN_MAX

# ibv_access_flags; reading local memory needs no flag (the book's "Local Read" is always granted)
LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC = 0x1, 0x2, 0x4, 0x8
ACCESS_NAMES = {
    LOCAL_WRITE: "Local Write",
    REMOTE_WRITE: "Remote Write",
    REMOTE_READ: "Remote Read",
    REMOTE_ATOMIC: "Remote Atomic",
}
DEFAULT_PKEY = 0xFFFF  # the default partition, full member
PATH_MTUS = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}  # IBTA MTU enumeration
QP_TYPES = ("RC", "UC", "UD", "RUD", "ROD")
RELIABLE = ("RC", "RUD", "ROD")
CONNECTED = ("RC", "UC", "RUD", "ROD")
ACK_TIMEOUT_UNIT_S = 4.096e-6  # IBTA: Local ACK Timeout = 4.096 us x 2^timeout


class VerbsError(ValueError):
    """A verbs call the NIC refuses (an illegal state transition, a missing attribute, a bad key)."""


class QpState(enum.Enum):
    RESET = "RESET"
    INIT = "INIT"
    RTR = "RTR"
    RTS = "RTS"
    ERR = "ERR"


class WcStatus(enum.Enum):
    SUCCESS = "success"
    REM_ACCESS_ERR = "remote access error"  # NAK: R_Key invalid, access not granted, or out of the region
    RETRY_EXC_ERR = "transport retry counter exceeded"  # no ACK after retry_cnt retransmissions
    WR_FLUSH_ERR = "work request flushed"  # outstanding when the QP went to the error state


def access_names(flags: int) -> str:
    names = ["Local Read"] + [n for bit, n in ACCESS_NAMES.items() if flags & bit]
    return ", ".join(names)


def pkeys_match(a: int, b: int) -> bool:
    """IBTA §10.9.3: the low 15 bits must be equal, and at least one of the two must be a full member (bit 15)."""
    return (a & 0x7FFF) == (b & 0x7FFF) and bool((a | b) & 0x8000)


def ack_timeout_exponent(rto_s: float) -> int:
    """The 5-bit Local ACK Timeout whose 4.096 us x 2^t is the nearest at or above `rto_s` (1 ms -> 8)."""
    if rto_s <= 0:
        return 0
    return max(1, min(31, math.ceil(math.log2(rto_s / ACK_TIMEOUT_UNIT_S) - 1e-9)))


@dataclass
class MemoryRegion:
    """Registered memory: a virtually contiguous range, its access rights, its keys."""

    pd: ProtectionDomain
    addr: int
    length: int
    access: int
    lkey: int
    rkey: int | None  # only a region registered with remote access has one

    def covers(self, va: int, length: int) -> bool:
        return self.addr <= va and va + length <= self.addr + self.length


@dataclass
class WorkRequest:
    """A Work Request Entity on the send queue (the book's Figure 9-5 fields)."""

    wr_id: int
    length: int  # local buffer length = bytes written
    local_addr: int
    lkey: int
    remote_addr: int
    rkey: int
    opcode: str = "RDMA_WRITE"  # or "SEND" (the only operation a UD QP has)
    signaled: bool = True  # the Send Flag: report success through the CQ
    remote_qpn: int | None = None  # UD: the destination QP (an address handle's), per work request
    remote_qkey: int | None = None  # UD: the Q_Key the destination QP expects


@dataclass(frozen=True)
class WorkCompletion:
    wr_id: int
    status: WcStatus
    opcode: str
    byte_len: int
    qp_num: int
    t_s: float


@dataclass
class CompletionQueue:
    """Where the NIC tells the application that a work request finished, and how."""

    depth: int = 4096
    entries: list[WorkCompletion] = field(default_factory=list)
    overflowed: int = 0

    def push(self, wc: WorkCompletion) -> None:
        if len(self.entries) >= self.depth:
            self.overflowed += 1
            return
        self.entries.append(wc)

    def poll(self, n: int = 16) -> list[WorkCompletion]:
        out, self.entries = self.entries[:n], self.entries[n:]
        return out


# transitions: (from, to) -> (attributes required by type, attributes allowed by type)
_REQUIRED: dict[tuple[QpState, QpState], dict[str, tuple[str, ...]]] = {
    (QpState.RESET, QpState.INIT): {
        "RC": ("pkey_index", "access_flags"),
        "UC": ("pkey_index", "access_flags"),
        "UD": ("pkey_index", "qkey"),
        "RUD": ("pkey_index", "access_flags"),
        "ROD": ("pkey_index", "access_flags"),
    },
    (QpState.INIT, QpState.RTR): {t: ("path_mtu", "dest_qpn", "rq_psn") for t in CONNECTED} | {"UD": ()},
    (QpState.RTR, QpState.RTS): {t: ("sq_psn", "timeout", "retry_cnt") for t in RELIABLE}
    | {"UC": ("sq_psn",), "UD": ("sq_psn",)},
}
_ATTRS = ("pkey_index", "access_flags", "qkey", "path_mtu", "dest_qpn", "rq_psn", "sq_psn", "timeout", "retry_cnt")


class QueuePair:
    """A send queue and a receive queue, bound to a PD and to completion queues; its state machine."""

    def __init__(
        self,
        pd: ProtectionDomain,
        qpn: int,
        qp_type: str,
        send_cq: CompletionQueue,
        recv_cq: CompletionQueue | None = None,
        max_send_wr: int = 1024,
    ):
        if qp_type not in QP_TYPES:
            raise VerbsError(f"QP type must be one of {', '.join(QP_TYPES)}, got {qp_type!r}")
        if not 2 <= qpn <= QPN_MAX:  # QP0 and QP1 are the management QPs
            raise VerbsError(f"QPN {qpn:#x} does not fit the 24-bit BTH DestQP field (2..0xffffff)")
        self.pd, self.qpn, self.type = pd, qpn, qp_type
        self.send_cq, self.recv_cq = send_cq, recv_cq or send_cq
        self.max_send_wr = max_send_wr
        self.state = QpState.RESET
        self.pkey_index: int | None = None
        self.access_flags = 0
        self.qkey: int | None = None
        self.path_mtu: int | None = None
        self.dest_qpn: int | None = None
        self.rq_psn: int | None = None
        self.sq_psn: int | None = None
        self.timeout: int | None = None
        self.retry_cnt: int | None = None
        self.port_mtu = 4096  # a UD QP sends datagrams of at most the port's MTU (UD has no path MTU attribute)
        self.history: list[tuple[QpState, QpState, dict]] = []
        self.outstanding: dict[int, WorkRequest] = {}  # by wr_id, in posting order

    @property
    def pkey(self) -> int:
        if self.pkey_index is None:
            raise VerbsError(f"QP {self.qpn:#x} has no P_Key yet (state {self.state.value}): set one in RESET -> INIT")
        return self.pd.device.pkey_table[self.pkey_index]

    def modify(self, to: QpState, t_s: float = 0.0, **attrs) -> QueuePair:
        """ibv_modify_qp: move to `to`, setting the attributes that transition takes (`t_s`: when, for the
        completions of work requests flushed by a move to ERR)."""
        frm = self.state
        unknown = sorted(set(attrs) - set(_ATTRS))
        if unknown:
            raise VerbsError(f"unknown QP attribute(s): {', '.join(unknown)}")
        if to in (QpState.ERR, QpState.RESET):
            if attrs:
                raise VerbsError(f"{frm.value} -> {to.value} takes no attributes")
            self._enter(frm, to, {})
            if to is QpState.ERR:
                for wr in list(self.outstanding.values()):
                    self.complete(wr, WcStatus.WR_FLUSH_ERR, t_s)
            return self
        rules = _REQUIRED.get((frm, to))
        if rules is None:
            legal = [t.value for (f, t) in _REQUIRED if f is frm] + ["ERR", "RESET"]
            raise VerbsError(
                f"QP {self.qpn:#x}: illegal transition {frm.value} -> {to.value} (from {frm.value}: "
                f"{', '.join(legal)}); the order is RESET -> INIT -> RTR -> RTS"
            )
        need = rules[self.type]
        missing = [a for a in need if attrs.get(a) is None]
        if missing:
            raise VerbsError(f"QP {self.qpn:#x} ({self.type}): {frm.value} -> {to.value} needs {', '.join(missing)}")
        extra = sorted(set(attrs) - set(need))
        if extra:
            raise VerbsError(
                f"QP {self.qpn:#x} ({self.type}): {frm.value} -> {to.value} does not set {', '.join(extra)}"
            )
        self._check(attrs)
        for k, v in attrs.items():
            setattr(self, k, v)
        self._enter(frm, to, attrs)
        return self

    def _check(self, a: dict) -> None:
        dev = self.pd.device
        if "pkey_index" in a and not 0 <= a["pkey_index"] < len(dev.pkey_table):
            raise VerbsError(f"P_Key index {a['pkey_index']} is not in the port's table of {len(dev.pkey_table)}")
        if "path_mtu" in a and a["path_mtu"] not in PATH_MTUS:
            raise VerbsError(f"path MTU must be one of {', '.join(map(str, PATH_MTUS))}, got {a['path_mtu']}")
        if "dest_qpn" in a and not 0 <= a["dest_qpn"] <= QPN_MAX:
            raise VerbsError(f"destination QPN {a['dest_qpn']:#x} does not fit 24 bits")
        for k in ("rq_psn", "sq_psn"):
            if k in a and not 0 <= a[k] < PSN_MODULUS:
                raise VerbsError(f"{k} {a[k]:#x} does not fit 24 bits")
        if "timeout" in a and not 0 <= a["timeout"] <= 31:
            raise VerbsError("timeout is a 5-bit exponent (4.096 us x 2^t), 0..31")
        if "retry_cnt" in a and not 0 <= a["retry_cnt"] <= 7:
            raise VerbsError("retry count is 3 bits, 0..7")

    def _enter(self, frm: QpState, to: QpState, attrs: dict) -> None:
        self.state = to
        self.history.append((frm, to, dict(attrs)))

    # -- work requests ------------------------------------------------------------------------------------
    def post_send(self, wr: WorkRequest) -> None:
        if self.state is not QpState.RTS:
            raise VerbsError(f"QP {self.qpn:#x} is in {self.state.value}: post a send only in RTS")
        if len(self.outstanding) >= self.max_send_wr:
            raise VerbsError(f"QP {self.qpn:#x}: send queue full ({self.max_send_wr} work requests)")
        mr = self.pd.by_lkey.get(wr.lkey)
        if mr is None or not mr.covers(wr.local_addr, wr.length):
            raise VerbsError(f"L_Key {wr.lkey:#x} does not cover {wr.length} bytes at {wr.local_addr:#x}")
        if self.type == "UD":  # IBTA Vol. 1 Ch. 9: UD carries SENDs of one packet, each to the QP its WR names
            if wr.opcode != "SEND":
                raise VerbsError(
                    f"QP {self.qpn:#x} is UD: it sends SEND only, no {wr.opcode} (UD has no RDMA Write "
                    "or Read); use an RC or UC QP"
                )
            if wr.length > self.port_mtu:
                raise VerbsError(
                    f"QP {self.qpn:#x} is UD: a datagram carries at most the MTU ({self.port_mtu} B), "
                    f"not {wr.length:,} B; split the message or use an RC or UC QP"
                )
            if wr.remote_qpn is None:
                raise VerbsError(
                    f"QP {self.qpn:#x} is UD: each work request names its destination QP (address "
                    "handle, remote QPN, Q_Key)"
                )
        elif wr.opcode not in ("RDMA_WRITE", "SEND"):
            raise VerbsError(f"unknown opcode {wr.opcode!r} (RDMA_WRITE or SEND)")
        if wr.wr_id in self.outstanding:
            raise VerbsError(f"QP {self.qpn:#x}: work request {wr.wr_id} is already posted")
        self.outstanding[wr.wr_id] = wr

    def complete(self, wr: WorkRequest, status: WcStatus, t_s: float) -> WorkCompletion:
        """The NIC retires `wr`: a completion if it was signalled or failed (errors are always reported)."""
        self.outstanding.pop(wr.wr_id, None)
        wc = WorkCompletion(wr.wr_id, status, wr.opcode, wr.length if status is WcStatus.SUCCESS else 0, self.qpn, t_s)
        if wr.signaled or status is not WcStatus.SUCCESS:
            self.send_cq.push(wc)
        return wc

    def fail(self, wr: WorkRequest, status: WcStatus, t_s: float) -> None:
        """A fatal error on `wr`: its error completion, the QP to ERR, the others flushed."""
        self.complete(wr, status, t_s)
        self.modify(QpState.ERR, t_s)


class ProtectionDomain:
    """The book's tenant or VRF: memory regions and queue pairs that may be used together."""

    def __init__(self, device: Device, handle: int):
        self.device, self.handle = device, handle
        self.by_lkey: dict[int, MemoryRegion] = {}
        self.by_rkey: dict[int, MemoryRegion] = {}

    def reg_mr(self, addr: int, length: int, access: int) -> MemoryRegion:
        if length <= 0 or addr < 0:
            raise VerbsError(f"a memory region needs a positive length at a non-negative address ({length} at {addr})")
        if access & (REMOTE_WRITE | REMOTE_ATOMIC) and not access & LOCAL_WRITE:
            raise VerbsError("remote write or atomic access needs local write too (IBTA §10.6.3.1)")
        key = self.device.new_key()
        remote = bool(access & (REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC))
        mr = MemoryRegion(self, addr, length, access, key, key if remote else None)
        self.by_lkey[key] = mr
        if mr.rkey is not None:
            self.by_rkey[mr.rkey] = mr
        return mr

    def create_qp(
        self, qp_type: str, send_cq: CompletionQueue, qpn: int | None = None, recv_cq: CompletionQueue | None = None
    ) -> QueuePair:
        qp = QueuePair(self, self.device.new_qpn() if qpn is None else qpn, qp_type, send_cq, recv_cq)
        self.device.qps.append(qp)
        return qp

    def check_remote(self, rkey: int, va: int, length: int, need: int = REMOTE_WRITE) -> str | None:
        """The responder's R_Key check: None if the access is allowed, else why not."""
        mr = self.by_rkey.get(rkey)
        if mr is None:
            return f"R_Key {rkey:#x} is not a key of this protection domain"
        if not mr.access & need:
            return f"R_Key {rkey:#x}: the region does not grant {ACCESS_NAMES[need]}"
        if not mr.covers(va, length):
            return (
                f"R_Key {rkey:#x}: {length} bytes at {va:#x} fall outside the region "
                f"{mr.addr:#x}..{mr.addr + mr.length:#x}"
            )
        return None


class Device:
    """An RDMA NIC's verbs context: its port's P_Key table, its PDs, CQs and QPs, key and QPN allocation."""

    def __init__(self, name: str, guid: int, pkey_table: tuple[int, ...] = (DEFAULT_PKEY,), key_tag: int = 0):
        if not pkey_table:
            raise VerbsError("a port's P_Key table holds at least one P_Key")
        self.name, self.guid = name, guid
        self.pkey_table = list(pkey_table)
        self.pds: list[ProtectionDomain] = []
        self.qps: list[QueuePair] = []
        self._keys = 0
        self._key_tag = key_tag & 0xFF
        self._qpn = 0x100

    def alloc_pd(self) -> ProtectionDomain:
        pd = ProtectionDomain(self, len(self.pds) + 1)
        self.pds.append(pd)
        return pd

    def create_cq(self, depth: int = 4096) -> CompletionQueue:
        return CompletionQueue(depth)

    def new_key(self) -> int:
        """mlx5-style keys: the region's index in the upper 24 bits, a per-device tag in the low 8."""
        self._keys += 1
        return (self._keys << 8) | self._key_tag

    def new_qpn(self) -> int:
        self._qpn += 1
        return self._qpn

    def pkey_index(self, pkey: int) -> int:
        """`ibv_query_pkey` searched: the index of `pkey` in the port's table."""
        if pkey not in self.pkey_table:
            raise VerbsError(
                f"P_Key {pkey:#06x} is not in {self.name}'s P_Key table "
                f"({', '.join(f'{k:#06x}' for k in self.pkey_table)})"
            )
        return self.pkey_table.index(pkey)
