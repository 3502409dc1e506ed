"""ECMP: which of several equal-cost next hops a flow takes, from its 5-tuple.

The hash (documented, so users can reproduce and reason about polarization):

    key  = src_ip (4 B) | dst_ip (4 B) | protocol (1 B) | src_port (2 B) | dst_port (2 B), big-endian
           (only the fields of `fabric.ecmp_hash_fields`, in this order, when it names fewer)
    h    = fmix32(CRC-32(key) XOR seed)        CRC-32: zlib / IEEE 802.3; fmix32: MurmurHash3's finalizer
    port = next_hops[h mod len(next_hops)]

Why the finalizer: CRC is affine over GF(2), so CRC(k1) XOR CRC(k2) does not depend on any seed mixed in
linearly (as initial value, prefix or XOR). Two flows that share one of 2^k uplinks under one seed would
share it under every seed. The non-linear finalizer makes the seed matter, as switch ASICs' seeded hash
functions intend.

A switch's seed is the fabric's `ecmp_hash_seed`; with `per_switch_hash_seed` the switch's name is
mixed in (seed XOR CRC-32(name)), which is how operators break polarization between tiers.

RoCEv2 flows all go to UDP port 4791, so the entropy is the UDP source port, which the NIC derives
from the queue pair numbers as the Linux RDMA stack does (`rdma_calc_flow_label` and
`rdma_flow_label_to_udp_sport`): one QP = one 5-tuple = one path.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

ROCEV2_UDP_PORT = 4791
IPPROTO_UDP = 17
_FLOW_LABEL_MASK = 0xFFFFF
_ROCE_SPORT_MIN = 0xC000


@dataclass(frozen=True)
class FiveTuple:
    src_ip: int
    dst_ip: int
    src_port: int
    dst_port: int = ROCEV2_UDP_PORT
    protocol: int = IPPROTO_UDP

    def key(self, fields: tuple[str, ...] | None = None) -> bytes:
        """The hashed bytes: every field (the default), or only `fields` (the switch's hash configuration), in
        the order of HASH_FIELDS."""
        if fields is None or fields == HASH_FIELDS:
            return struct.pack(">IIBHH", self.src_ip, self.dst_ip, self.protocol, self.src_port, self.dst_port)
        return b"".join(struct.pack(_FIELD_FORMAT[name], getattr(self, name)) for name in HASH_FIELDS if name in fields)


HASH_FIELDS = ("src_ip", "dst_ip", "protocol", "src_port", "dst_port")
_FIELD_FORMAT = {"src_ip": ">I", "dst_ip": ">I", "protocol": ">B", "src_port": ">H", "dst_port": ">H"}


def fmix32(h: int) -> int:
    """MurmurHash3's 32-bit finalizer: every input bit affects every output bit."""
    h &= 0xFFFFFFFF
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h


def ecmp_hash(flow: FiveTuple, seed: int, fields: tuple[str, ...] | None = None) -> int:
    """`fields`: the header fields the switches hash (default all five; `fabric.ecmp_hash_fields`)."""
    return fmix32(zlib.crc32(flow.key(fields)) ^ (seed & 0xFFFFFFFF))


def switch_seed(base_seed: int, switch_name: str, per_switch: bool) -> int:
    if not per_switch:
        return base_seed & 0xFFFFFFFF
    return (base_seed ^ zlib.crc32(switch_name.encode())) & 0xFFFFFFFF


def flow_label(local_qpn: int, remote_qpn: int) -> int:
    v = (local_qpn * remote_qpn) & 0xFFFFFFFFFFFFFFFF
    v ^= v >> 20
    v ^= v >> 40
    return v & _FLOW_LABEL_MASK


def roce_udp_source_port(local_qpn: int, remote_qpn: int) -> int:
    """UDP source port of a RoCEv2 QP (0xC000..0xFFFF), from its 20-bit flow label."""
    fl = flow_label(local_qpn, remote_qpn)
    low = (fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14)
    return low | _ROCE_SPORT_MIN
