"""Connection manager messages (REQ, REP, RTU) as the bytes of InfiniBand management datagrams.

Deep Learning for Network Engineers, Chapter 9, Figure 9-4: the client sends a connection request carrying its
Local Communication ID, Local CA GUID, QP number, service type, starting PSN, P_Key and payload size; the
server replies with its communication ID, QP number and starting PSN; the client answers Ready To Use.

On RoCEv2 these are MADs (IBTA Vol. 1 §13.4, §12.6) sent to the general services QP (QP1) in a UD SEND
ONLY packet: Eth / IPv4 / UDP 4791 / BTH (opcode 0x64, DestQP 1) / DETH (Q_Key 0x80010000, source QP 1) /
MAD (256 bytes) / ICRC. The MAD is a 24-byte common header (base version 1, management class 0x07 =
Communication Management, class version 2, method 0x03 = Send, transaction ID, attribute ID REQ 0x0010,
REP 0x0013, RTU 0x0014) and 232 bytes of message; Wireshark decodes them as InfiniBand CM.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .headers import (
    BTH_BYTES,
    DETH_BYTES,
    ETH_BYTES,
    FCS_BYTES,
    ICRC_BYTES,
    IPV4_BYTES,
    OP_UD_SEND_ONLY,  # noqa: F401  (CM messages are UD SEND ONLY packets; pcap.py and connection.py import it here)
    UDP_BYTES,
)

REQ, REP, RTU = 0x0010, 0x0013, 0x0014
ATTR_NAMES = {REQ: "ConnectRequest", REP: "ConnectReply", RTU: "ReadyToUse"}
MAD_BASE_VERSION = 1
MGMT_CLASS_CM = 0x07
CM_CLASS_VERSION = 2
METHOD_SEND = 0x03
MAD_BYTES = 256
MAD_HEADER_BYTES = 24
GSI_QKEY = 0x80010000  # the well-known Q_Key of QP1
CM_FRAME_BYTES = ETH_BYTES + IPV4_BYTES + UDP_BYTES + BTH_BYTES + DETH_BYTES + MAD_BYTES + ICRC_BYTES + FCS_BYTES
SERVICE_RC, SERVICE_UC = 0, 1
MTU_CODES = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
CM_RESPONSE_TIMEOUT = 20  # 4.096 us x 2^20 = 4.3 s, rdma_cm's default (cma.c CMA_CM_RESPONSE_TIMEOUT)
MAX_CM_RETRIES = 15  # cma.c CMA_MAX_CM_RETRIES
CM_TIMEOUT_UNIT_S = 4.096e-6
RNR_RETRY = 7
RDMA_IP_PS_TCP = 0x0000_0000_0106_0000  # rdma_cm's service IDs: IP-based CM, TCP port space, the port below
RDMA_CM_PORT = 18515


@dataclass(frozen=True)
class CmMessage:
    """What one CM exchange carries; `kind` says which of its three messages."""

    kind: int
    tid: int  # transaction ID: the same in REQ, REP and RTU
    local_comm_id: int  # the active side's (the requester's)
    remote_comm_id: int  # the passive side's (0 in the REQ)
    src_ip: int
    dst_ip: int
    local_qpn: int  # the requester's QP
    remote_qpn: int  # the responder's QP
    start_psn: int  # the requester's initial send PSN
    remote_start_psn: int  # the responder's
    pkey: int
    mtu_bytes: int
    ack_timeout: int  # 5-bit exponent
    retry_cnt: int
    service: int = SERVICE_RC
    cm_response_timeout: int = CM_RESPONSE_TIMEOUT  # 5-bit exponent: the sender waits 4.096 us x 2^t for an answer
    max_cm_retries: int = MAX_CM_RETRIES

    @property
    def name(self) -> str:
        return {REQ: "REQ", REP: "REP", RTU: "RTU"}[self.kind]


def guid_of(ip: int) -> int:
    """A NIC's CA GUID, derived from its address (an EUI-64 with the locally administered bit)."""
    return (0x0200_00FF_FE00_0000 | (ip & 0xFFFFFFFF)) & 0xFFFF_FFFF_FFFF_FFFF


def gid_of(ip: int) -> bytes:
    """RoCEv2 GID of an IPv4 address: ::ffff:a.b.c.d."""
    return b"\x00" * 10 + b"\xff\xff" + struct.pack("!I", ip & 0xFFFFFFFF)


def mad_header(kind: int, tid: int) -> bytes:
    return struct.pack(
        "!BBBBHHQHHI", MAD_BASE_VERSION, MGMT_CLASS_CM, CM_CLASS_VERSION, METHOD_SEND, 0, 0, tid, kind, 0, 0
    )


def _u24(v: int, low8: int) -> bytes:
    return struct.pack("!I", ((v & 0xFFFFFF) << 8) | (low8 & 0xFF))


def req_body(m: CmMessage) -> bytes:
    """IBTA Table 99 (CM REQ): 232 bytes."""
    b = struct.pack("!II", m.local_comm_id, 0)
    b += struct.pack("!Q", RDMA_IP_PS_TCP | RDMA_CM_PORT)  # Service ID: rdma_cm's IP port space, TCP, port
    b += struct.pack("!Q", guid_of(m.src_ip))
    b += struct.pack("!I", 0)  # reserved
    b += struct.pack("!I", 0)  # Local Q_Key (unused by RC)
    b += _u24(m.local_qpn, 16)  # Local QPN | Responder Resources
    b += _u24(0, 16)  # Local EECN | Initiator Depth
    b += _u24(
        0, (m.cm_response_timeout << 3) | (m.service << 1) | 1
    )  # Remote EECN | Remote CM Resp. Timeout | Service Type | E2E FC
    b += _u24(
        m.start_psn, (m.cm_response_timeout << 3) | (m.retry_cnt & 7)
    )  # Starting PSN | Local CM Resp. Timeout | Retry Count
    b += struct.pack(
        "!HBB",
        m.pkey,
        (MTU_CODES.get(m.mtu_bytes, 5) << 4) | RNR_RETRY,  # P_Key | Path MTU, RDC, RNR Retry
        (m.max_cm_retries & 0xF) << 4,
    )  # Max CM Retries | SRQ | Extended Transport Type
    b += struct.pack("!HH", 0, 0)  # primary local / remote port LID: none on RoCE (Linux writes 0; routed by GID)
    b += gid_of(m.src_ip) + gid_of(m.dst_ip)
    b += struct.pack("!I", 2)  # Primary Flow Label (20 bits) | reserved | Packet Rate (6 bits, IBTA rate code)
    b += struct.pack(
        "!BBBB", 0, 64, 0, (m.ack_timeout & 0x1F) << 3
    )  # Traffic Class, Hop Limit, SL | Subnet Local, Local ACK Timeout
    b += b"\x00" * 44  # alternate path: none
    b += ip_cm_private_data(m.src_ip, m.dst_ip).ljust(92, b"\x00")
    assert len(b) == 232
    return b


def ip_cm_private_data(src_ip: int, dst_ip: int, src_port: int = RDMA_CM_PORT) -> bytes:
    """rdma_cm's header at the start of a REQ's private data (IBTA Annex A11, IP addressing): version 0, IP
    version 4 in the high nibble, source port, then source and destination addresses (IPv4 in the last 4 of 16
    bytes)."""
    return (
        bytes([0x00, 0x40])
        + struct.pack("!H", src_port)
        + b"\x00" * 12
        + struct.pack("!I", src_ip & 0xFFFFFFFF)
        + b"\x00" * 12
        + struct.pack("!I", dst_ip & 0xFFFFFFFF)
    )


def rep_body(m: CmMessage) -> bytes:
    """IBTA Table 103 (CM REP): 232 bytes."""
    b = struct.pack(
        "!III", m.remote_comm_id, m.local_comm_id, 0
    )  # Local Comm ID (the replier's), Remote Comm ID, Q_Key
    b += _u24(m.remote_qpn, 0) + _u24(0, 0) + _u24(m.remote_start_psn, 0)  # Local QPN, Local EECN, Starting PSN
    b += struct.pack(
        "!BBBB", 16, 16, (m.ack_timeout & 0x1F) << 3 | 1, (RNR_RETRY << 5)
    )  # resources, depth, Target ACK Delay | Failover | E2E FC, RNR Retry | SRQ
    b += struct.pack("!Q", guid_of(m.dst_ip))
    b += b"\x00" * 196
    assert len(b) == 232
    return b


def rtu_body(m: CmMessage) -> bytes:
    """IBTA Table 106 (CM RTU): 232 bytes."""
    return struct.pack("!II", m.local_comm_id, m.remote_comm_id) + b"\x00" * 224


def mad_bytes(m: CmMessage) -> bytes:
    body = {REQ: req_body, REP: rep_body, RTU: rtu_body}[m.kind](m)
    out = mad_header(m.kind, m.tid) + body
    assert len(out) == MAD_BYTES
    return out


def deth_bytes(src_qpn: int = 1, qkey: int = GSI_QKEY) -> bytes:
    return struct.pack("!II", qkey, src_qpn & 0xFFFFFF)


def parse_mad(data: bytes) -> dict:
    """The fields of a CM MAD as a reader decodes them (tests and the connect story use it)."""
    base, cls, cver, method, status, _, tid, attr, _, _ = struct.unpack("!BBBBHHQHHI", data[:MAD_HEADER_BYTES])
    d = data[MAD_HEADER_BYTES:]
    out = {
        "base_version": base,
        "mgmt_class": cls,
        "class_version": cver,
        "method": method,
        "status": status,
        "tid": tid,
        "attribute_id": attr,
    }
    if attr == REQ:
        out.update(
            local_comm_id=struct.unpack("!I", d[0:4])[0],
            service_id=struct.unpack("!Q", d[8:16])[0],
            local_ca_guid=struct.unpack("!Q", d[16:24])[0],
            local_qpn=struct.unpack("!I", d[32:36])[0] >> 8,
            service_type=(d[43] >> 1) & 3,
            starting_psn=struct.unpack("!I", d[44:48])[0] >> 8,
            retry_count=d[47] & 7,
            local_cm_response_timeout=d[47] >> 3,
            max_cm_retries=d[51] >> 4,
            pkey=struct.unpack("!H", d[48:50])[0],
            path_mtu=d[50] >> 4,
            primary_local_gid=d[56:72],
            primary_remote_gid=d[72:88],
            local_ack_timeout=d[95] >> 3,
        )
    elif attr == REP:
        out.update(
            local_comm_id=struct.unpack("!I", d[0:4])[0],
            remote_comm_id=struct.unpack("!I", d[4:8])[0],
            local_qpn=struct.unpack("!I", d[12:16])[0] >> 8,
            starting_psn=struct.unpack("!I", d[20:24])[0] >> 8,
            local_ca_guid=struct.unpack("!Q", d[28:36])[0],
        )
    elif attr == RTU:
        out.update(local_comm_id=struct.unpack("!I", d[0:4])[0], remote_comm_id=struct.unpack("!I", d[4:8])[0])
    return out
