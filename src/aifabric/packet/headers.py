"""What the wire carries: RoCEv2 opcodes, header sizes, RDMA Write segmentation, PFC quanta arithmetic.

Values from IBTA Vol. 1 / RoCEv2 Annex A17 (spec network.md §2.10) and IEEE 802.1Qbb (§4.6):

- RC opcodes RDMA_WRITE_FIRST 0x06, MIDDLE 0x07, LAST 0x08, ONLY 0x0A, ACKNOWLEDGE 0x11, CNP 0x81.
- RETH (16 B: VA, R_Key, DMA length) is on WRITE_FIRST and WRITE_ONLY only; in "write-only" mode
  (seeds Figure 12-7, ConnectX-5+) every packet is an independent WRITE_ONLY with its own RETH.
- A PFC frame: Ethertype 0x8808, opcode 0x0101, class-enable vector bit i = priority i,
  pause time in quanta of 512 bit times: pause_s = quanta * 512 / (8 * link_bytes_per_s).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..units import BITS_PER_BYTE

ROCEV2_UDP_DPORT = 4791
UET_UDP_DPORT = 4793  # UEC 1.0 (spec §8.5, [EXTERNAL])

OP_WRITE_FIRST, OP_WRITE_MIDDLE, OP_WRITE_LAST, OP_WRITE_ONLY = 0x06, 0x07, 0x08, 0x0A
# IBTA Vol. 1 Table 38: the opcode's top 3 bits name the transport (000 RC, 001 UC, 011 UD), the low 5 the operation
OP_UC_WRITE_FIRST, OP_UC_WRITE_MIDDLE, OP_UC_WRITE_LAST, OP_UC_WRITE_ONLY = 0x26, 0x27, 0x28, 0x2A
OP_UD_SEND_ONLY = 0x64
UC_OPCODE = {
    OP_WRITE_FIRST: OP_UC_WRITE_FIRST,
    OP_WRITE_MIDDLE: OP_UC_WRITE_MIDDLE,
    OP_WRITE_LAST: OP_UC_WRITE_LAST,
    OP_WRITE_ONLY: OP_UC_WRITE_ONLY,
}
OP_ACK = 0x11
OP_CNP = 0x81
OPCODE_NAMES = {
    OP_WRITE_FIRST: "RDMA_WRITE_FIRST",
    OP_WRITE_MIDDLE: "RDMA_WRITE_MIDDLE",
    OP_WRITE_LAST: "RDMA_WRITE_LAST",
    OP_WRITE_ONLY: "RDMA_WRITE_ONLY",
    OP_ACK: "ACKNOWLEDGE",
    OP_CNP: "CNP",
    OP_UC_WRITE_FIRST: "UC RDMA_WRITE_FIRST",
    OP_UC_WRITE_MIDDLE: "UC RDMA_WRITE_MIDDLE",
    OP_UC_WRITE_LAST: "UC RDMA_WRITE_LAST",
    OP_UC_WRITE_ONLY: "UC RDMA_WRITE_ONLY",
    OP_UD_SEND_ONLY: "UD SEND_ONLY",
}

# header bytes on the wire (no preamble / inter-frame gap)
ETH_BYTES, IPV4_BYTES, UDP_BYTES, BTH_BYTES, RETH_BYTES, AETH_BYTES = 14, 20, 8, 12, 16, 4
DETH_BYTES = 8  # Datagram Extended Transport Header (UD): Q_Key, source QP
ICRC_BYTES, FCS_BYTES = 4, 4
ROCE_HEADER_BYTES = ETH_BYTES + IPV4_BYTES + UDP_BYTES + BTH_BYTES + ICRC_BYTES + FCS_BYTES  # 62
ACK_BYTES = ROCE_HEADER_BYTES + AETH_BYTES  # 66
CNP_BYTES = ROCE_HEADER_BYTES + 16  # 16 reserved bytes after the BTH: 78
PFC_FRAME_BYTES = 64  # minimum Ethernet frame

# DSCP and ECN (seeds Ch. 11, §4.1)
DSCP_ROCE, DSCP_CNP = 24, 48
ECN_NOT_ECT, ECN_ECT1, ECN_ECT0, ECN_CE = 0b00, 0b01, 0b10, 0b11

PSN_MODULUS = 1 << 24
QPN_MAX = 0xFFFFFF
PFC_QUANTUM_BITS = 512
PFC_MAX_QUANTA = 0xFFFF
PFC_ETHERTYPE = 0x8808
PFC_OPCODE = 0x0101
PFC_DST_MAC = "01:80:c2:00:00:01"


def tos_byte(dscp: int, ecn: int) -> int:
    """The IPv4 ToS octet: DSCP in the upper 6 bits, ECN in the lower 2 (DSCP 24 + ECT(0) = 0x62)."""
    return ((dscp & 0x3F) << 2) | (ecn & 0b11)


def pfc_bit_time_s(link_bytes_per_s: float) -> float:
    return 1.0 / (link_bytes_per_s * BITS_PER_BYTE)


def pfc_quantum_s(link_bytes_per_s: float) -> float:
    """One pause quantum = 512 bit times (1.28 ns at 400 Gb/s, 50 GB/s)."""
    return PFC_QUANTUM_BITS / (link_bytes_per_s * BITS_PER_BYTE)


def pfc_pause_s(quanta: int, link_bytes_per_s: float) -> float:
    """Pause duration of `quanta` on a link of `link_bytes_per_s` (0xFFFF at 400 Gb/s = 83.8848 us)."""
    if not 0 <= quanta <= PFC_MAX_QUANTA:
        raise ValueError(f"PFC quanta must be 0..0xFFFF, got {quanta}")
    return quanta * PFC_QUANTUM_BITS / (link_bytes_per_s * BITS_PER_BYTE)


def pfc_class_enable_vector(priorities: list[int] | tuple[int, ...]) -> int:
    """CEV: bit i set pauses priority i; the rightmost bit is priority 0 (queue 3 -> 0b0000_1000)."""
    cev = 0
    for p in priorities:
        if not 0 <= p <= 7:
            raise ValueError(f"priority must be 0..7, got {p}")
        cev |= 1 << p
    return cev


@dataclass(frozen=True)
class Segment:
    """One packet of an RDMA Write message."""

    psn: int
    opcode: int
    payload_bytes: int
    offset_bytes: int  # where the payload lands, from the message's base virtual address
    has_reth: bool

    @property
    def wire_bytes(self) -> int:
        return self.payload_bytes + ROCE_HEADER_BYTES + (RETH_BYTES if self.has_reth else 0)


def segment_count(size_bytes: int, mtu_bytes: int) -> int:
    return max(1, -(-int(size_bytes) // mtu_bytes))


def opcode_of(index: int, count: int, write_only: bool) -> int:
    """Opcode of packet `index` (0-based) of a `count`-packet RDMA Write."""
    if write_only or count == 1:
        return OP_WRITE_ONLY
    if index == 0:
        return OP_WRITE_FIRST
    return OP_WRITE_LAST if index == count - 1 else OP_WRITE_MIDDLE


def has_reth(opcode: int) -> bool:
    return opcode in (OP_WRITE_FIRST, OP_WRITE_ONLY, OP_UC_WRITE_FIRST, OP_UC_WRITE_ONLY)


def segment_write(size_bytes: int, mtu_bytes: int, start_psn: int = 0, write_only: bool = False) -> list[Segment]:
    """Split an RDMA Write of `size_bytes` into MTU-sized packets (seeds Figures 12-1..12-3 and 12-7).

    First/Middle/Last: only the First packet carries the RETH (base VA); the receiver places each later
    packet at base + cumulative offset, so they must arrive in PSN order. Write Only: every packet
    carries a RETH with its own VA and can be placed on arrival, in any order.
    """
    if mtu_bytes <= 0:
        raise ValueError("mtu_bytes must be positive")
    n = segment_count(size_bytes, mtu_bytes)
    out = []
    for i in range(n):
        payload = min(mtu_bytes, int(size_bytes) - i * mtu_bytes) if size_bytes > 0 else 0
        op = opcode_of(i, n, write_only)
        out.append(Segment((start_psn + i) % PSN_MODULUS, op, payload, i * mtu_bytes, has_reth(op)))
    return out
