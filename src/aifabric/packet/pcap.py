"""Write the packets of selected flows to a pcap that Wireshark/tshark dissects (built with scapy).

- RDMA Write packets: Ethernet / IPv4 (DSCP 24, ECN 10 or 11 when CE-marked) / UDP (dport 4791, sport =
  the QP's entropy port) / BTH (opcode 0x06-0x0A, DestQP, AckReq, PSN) / RETH (on First and Only:
  VA, R_Key, DMA length) / payload (zeros) / ICRC;
- ACKs and NAKs: BTH opcode 0x11 + AETH (syndrome 0 = ACK, 0x60 = NAK PSN sequence error);
- CNPs: BTH opcode 0x81, DSCP 48, 16 reserved bytes;
- PFC: MAC control frame to 01:80:c2:00:00:01, Ethertype 0x8808, opcode 0x0101, class-enable vector
  and eight pause times (quanta; 0 = resume).

Packets are captured where they are received (data at the destination NIC, so CE marks show; CNPs and
ACKs at the source NIC; PFC frames when sent). Timestamps are simulated seconds.
"""

from __future__ import annotations

from pathlib import Path

from scapy.contrib.mac_control import MACControlClassBasedFlowControl
from scapy.contrib.roce import AETH, BTH
from scapy.fields import IntField, LongField
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw, bind_layers
from scapy.utils import wrpcap

from .headers import (
    OP_CNP,
    OP_WRITE_FIRST,
    OP_WRITE_ONLY,
    PFC_DST_MAC,
    ROCEV2_UDP_DPORT,
    tos_byte,
)
from .sim import ACK, CNP, DATA, NAK

AETH_NAK_PSN_SEQUENCE_ERROR = 0x60
BASE_VA = 0x7F00_0000_0000
R_KEY = 0x1234


class RETH(Packet):
    """RDMA Extended Transport Header (IBTA 9.3.3): virtual address, R_Key, DMA length."""

    name = "RETH"
    fields_desc = [LongField("va", 0), IntField("rkey", 0), IntField("dlen", 0)]


bind_layers(BTH, RETH, opcode=OP_WRITE_FIRST)
bind_layers(BTH, RETH, opcode=OP_WRITE_ONLY)


def _mac(ip: int) -> str:
    return "02:00:" + ":".join(f"{(ip >> s) & 0xFF:02x}" for s in (24, 16, 8, 0))


def _ip(ip: int) -> str:
    return ".".join(str((ip >> s) & 0xFF) for s in (24, 16, 8, 0))


def roce_frame(src_ip: int, dst_ip: int, sport: int, dscp: int, ecn: int, opcode: int, dqpn: int, psn: int,
               payload_bytes: int = 0, reth: tuple[int, int, int] | None = None, aeth_syndrome: int | None = None,
               msn: int = 0):
    """One RoCEv2 frame as a scapy packet."""
    bth = BTH(opcode=opcode, pkey=0xFFFF, dqpn=dqpn & 0xFFFFFF, ackreq=int(opcode < 0x11), psn=psn & 0xFFFFFF)
    pkt = (Ether(src=_mac(src_ip), dst=_mac(dst_ip)) / IP(src=_ip(src_ip), dst=_ip(dst_ip), tos=tos_byte(dscp, ecn))
           / UDP(sport=sport, dport=ROCEV2_UDP_DPORT) / bth)
    if reth is not None:
        pkt = pkt / RETH(va=reth[0], rkey=reth[1], dlen=reth[2])
    if aeth_syndrome is not None:
        pkt = pkt / AETH(syndrome=aeth_syndrome, msn=msn)
    if opcode == OP_CNP:
        pkt = pkt / Raw(b"\x00" * 16)
    elif payload_bytes:
        pkt = pkt / Raw(b"\x00" * payload_bytes)
    return pkt


def pfc_frame(src_mac: str, priorities_quanta: dict[int, int]):
    """A PFC (802.1Qbb) frame pausing (quanta > 0) or resuming (0) the given priorities."""
    fields = {}
    for p, quanta in priorities_quanta.items():
        fields[f"c{p}_enabled"] = 1
        fields[f"c{p}_pause_time"] = quanta
    return Ether(src=src_mac, dst=PFC_DST_MAC, type=0x8808) / MACControlClassBasedFlowControl(**fields)


def to_scapy(captured: list, net) -> list:
    out = []
    for rec in captured:
        t = rec[0]
        if rec[1] == "pfc":
            _, _, port, prio, quanta = rec
            frame = pfc_frame("02:00:00:00:%02x:%02x" % ((port.link >> 8) & 0xFF, port.link & 0xFF), {prio: quanta})
        else:
            _, _, kind, flow, psn, opcode, payload, ecn, dscp = rec
            fwd = kind == DATA
            src, dst = (flow.src, flow.dst) if fwd else (flow.dst, flow.src)
            reth = None
            if fwd and opcode in (OP_WRITE_FIRST, OP_WRITE_ONLY):
                dlen = flow.size if opcode == OP_WRITE_FIRST else payload
                reth = (BASE_VA + psn * flow.mtu, R_KEY, dlen)
            aeth = None
            if kind == ACK:
                aeth = 0
            elif kind == NAK:
                aeth = AETH_NAK_PSN_SEQUENCE_ERROR
            dqpn = flow.qpn
            frame = roce_frame(src.ip, dst.ip, flow.sport, dscp, ecn, opcode, dqpn, psn,
                               payload if fwd else 0, reth, aeth)
            if kind == CNP:
                frame[IP].tos = tos_byte(dscp, 0)
        frame.time = t
        out.append(frame)
    return out


def write_pcap(path: str | Path, captured: list, net) -> int:
    frames = to_scapy(captured, net)
    wrpcap(str(path), frames)
    return len(frames)
