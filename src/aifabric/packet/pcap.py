"""Write the packets of selected flows to a pcap that Wireshark/tshark dissects (built with scapy).

- RDMA Write packets: Ethernet / IPv4 (DSCP 24, ECN 10 or 11 when CE-marked) / UDP (dport 4791, sport =
  the QP's entropy port) / BTH (opcode 0x06-0x0A, DestQP, AckReq, PSN) / RETH (on First and Only:
  VA, R_Key, DMA length) / payload (zeros) / ICRC;
- ACKs and NAKs: BTH opcode 0x11 + AETH (syndrome 0 = ACK, 0x60 = NAK PSN sequence error);
- CNPs: BTH opcode 0x81, DSCP 48, 16 reserved bytes;
- the BTH carries the QPs' P_Key, the destination QP (the responder's for data and CNPs, the requester's
  for ACKs and NAKs) and the PSN on the wire (the QP's initial PSN + the packet's index); the RETH the
  work request's target address and R_Key; a NAK remote access error is AETH syndrome 0x62;
- CM messages (REQ, REP, RTU; cm.py) when the connection is set up on the wire: BTH opcode 0x64 (UD SEND
  ONLY) to QP1, DETH (Q_Key 0x80010000, source QP 1), the 256-byte MAD;
- PFC: MAC control frame to 01:80:c2:00:00:01, Ethertype 0x8808, opcode 0x0101, class-enable vector
  and eight pause times (quanta; 0 = resume).

- LLDP (Ethertype 0x88cc, to 01:80:c2:00:00:0e) at time 0 on every link the traced flows cross, from each end:
  chassis and port IDs, TTL 120 s, and the DCBX TLVs of IEEE 802.1Qaz (OUI 00-80-C2) from the switch QoS
  profile: ETS Configuration (priority -> traffic class, bandwidth shares, strict or ETS per class), PFC
  Configuration (8 classes, the enable bitmap: `0000 1000` for CoS 3, Deep Learning for Network Engineers,
  Capture 11-1) and Application Priority (each class's DSCPs, selector 5, and RoCEv2's UDP port 4791,
  selector 3, to their priorities).

Packets are captured where they are received (data at the destination NIC, so CE marks show; CNPs and
ACKs at the source NIC; PFC frames when sent). Timestamps are simulated seconds.
"""

from __future__ import annotations

import struct
from pathlib import Path

from scapy.contrib.mac_control import MACControlClassBasedFlowControl
from scapy.contrib.roce import AETH, BTH
from scapy.fields import IntField, LongField
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw, bind_layers
from scapy.utils import wrpcap

from .cm import OP_UD_SEND_ONLY, REP, deth_bytes, mad_bytes
from .headers import (
    OP_CNP,
    OP_UC_WRITE_FIRST,
    OP_UC_WRITE_ONLY,
    OP_WRITE_FIRST,
    OP_WRITE_ONLY,
    PFC_DST_MAC,
    ROCEV2_UDP_DPORT,
    has_reth,
    tos_byte,
)
from .sim import ACK, CNP, DATA, MAD, NAK, NAK_ACCESS

AETH_NAK_PSN_SEQUENCE_ERROR = 0x60
AETH_NAK_REMOTE_ACCESS_ERROR = 0x62


class RETH(Packet):
    """RDMA Extended Transport Header (IBTA 9.3.3): virtual address, R_Key, DMA length."""

    name = "RETH"
    fields_desc = [LongField("va", 0), IntField("rkey", 0), IntField("dlen", 0)]


bind_layers(BTH, RETH, opcode=OP_WRITE_FIRST)
bind_layers(BTH, RETH, opcode=OP_WRITE_ONLY)
bind_layers(BTH, RETH, opcode=OP_UC_WRITE_FIRST)
bind_layers(BTH, RETH, opcode=OP_UC_WRITE_ONLY)


def _mac(ip: int) -> str:
    return "02:00:" + ":".join(f"{(ip >> s) & 0xFF:02x}" for s in (24, 16, 8, 0))


def _ip(ip: int) -> str:
    return ".".join(str((ip >> s) & 0xFF) for s in (24, 16, 8, 0))


def roce_frame(
    src_ip: int,
    dst_ip: int,
    sport: int,
    dscp: int,
    ecn: int,
    opcode: int,
    dqpn: int,
    psn: int,
    payload_bytes: int = 0,
    reth: tuple[int, int, int] | None = None,
    aeth_syndrome: int | None = None,
    msn: int = 0,
    pkey: int = 0xFFFF,
):
    """One RoCEv2 frame as a scapy packet."""
    bth = BTH(opcode=opcode, pkey=pkey, dqpn=dqpn & 0xFFFFFF, ackreq=int(opcode < 0x11), psn=psn & 0xFFFFFF)
    pkt = (
        Ether(src=_mac(src_ip), dst=_mac(dst_ip))
        / IP(src=_ip(src_ip), dst=_ip(dst_ip), tos=tos_byte(dscp, ecn))
        / UDP(sport=sport, dport=ROCEV2_UDP_DPORT)
        / bth
    )
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


LLDP_DST_MAC = "01:80:c2:00:00:0e"
LLDP_TTL_S = 120
OUI_8021 = b"\x00\x80\xc2"
DCBX_ETS_CONFIG, DCBX_PFC_CONFIG, DCBX_APP_PRIORITY = 0x09, 0x0B, 0x0C
TSA_STRICT, TSA_ETS = 0, 2
APP_SEL_UDP, APP_SEL_DSCP = 3, 5


def _tlv(kind: int, value: bytes) -> bytes:
    return struct.pack("!H", (kind << 9) | len(value)) + value


def dcbx_tlvs(cfg) -> bytes:
    """The 802.1Qaz ETS Configuration, PFC Configuration and Application Priority TLVs of a PacketConfig."""
    sw = cfg.switch
    prio_tc = bytes(((2 * i) << 4 | (2 * i + 1)) for i in range(4))  # priority p -> traffic class p (QoS group = CoS)
    bw = bytes(0 if q in sw.strict_priority_queues else sw.bandwidth_remaining_percent[q] for q in range(8))
    tsa = bytes(TSA_STRICT if q in sw.strict_priority_queues else TSA_ETS for q in range(8))
    ets = OUI_8021 + bytes([DCBX_ETS_CONFIG, 0x00 | 0]) + prio_tc + bw + tsa  # willing 0, CBS 0, max TCs 0 (= 8)
    enabled = sum(1 << p for p in sw.pfc_priorities) if sw.pfc_enabled else 0
    pfc = OUI_8021 + bytes([DCBX_PFC_CONFIG, 8, enabled])  # willing 0, MBC 0, PFC cap 8
    entries = [(q, APP_SEL_DSCP, dscp) for dscp, q in sw.dscp_to_queue]
    entries.append((cfg.queue_of(cfg.nic.data_dscp), APP_SEL_UDP, ROCEV2_UDP_DPORT))
    app = (
        OUI_8021
        + bytes([DCBX_APP_PRIORITY, 0])
        + b"".join(bytes([(prio << 5) | sel]) + struct.pack("!H", proto) for prio, sel, proto in entries)
    )
    return _tlv(127, ets) + _tlv(127, pfc) + _tlv(127, app)


def lldp_frame(src_mac: str, chassis: str, port: str, cfg):
    """An LLDPDU with the DCBX TLVs of the profile."""
    mac = bytes(int(x, 16) for x in src_mac.split(":"))
    body = (
        _tlv(1, b"\x04" + mac)
        + _tlv(2, b"\x05" + port.encode()[:255])
        + _tlv(3, struct.pack("!H", LLDP_TTL_S))
        + _tlv(5, chassis.encode()[:255])
        + dcbx_tlvs(cfg)
        + _tlv(0, b"")
    )
    return Ether(src=src_mac, dst=LLDP_DST_MAC, type=0x88CC) / Raw(body)


def _port_mac(link: int) -> str:
    return f"02:00:00:00:{(link >> 8) & 0xFF:02x}:{link & 0xFF:02x}"


def lldp_frames(net) -> list:
    """LLDP from both ends of every link the traced flows cross, at time 0 (every RDMA transfer traced: the links
    of those with a packet in the capture, so a capped capture stays bounded)."""
    links: set[int] = set()
    shown = {rec[3] for rec in net.captured if rec[1] == "pkt"} if net.cfg.trace_all else None
    for flow in net.flows:
        if getattr(flow, "traced", False) and (shown is None or flow in shown):
            links.update(flow.path.links)
            if getattr(flow, "rpath", None) is not None:
                links.update(flow.rpath.links)
    out = []
    for li in sorted(links):
        port = net.ports[li]
        frame = lldp_frame(_port_mac(li), port.owner.id if hasattr(port, "owner") else str(li), port.name, net.cfg)
        frame.time = 0.0
        out.append(frame)
    return out


def to_scapy(captured: list, net) -> list:
    out = []
    for rec in captured:
        t = rec[0]
        if rec[1] == "pfc":
            _, _, port, prio, quanta = rec
            frame = pfc_frame(_port_mac(port.link), {prio: quanta})
        elif rec[2] == MAD:
            conn, kind = rec[3], rec[4]
            fwd = kind != REP
            src, dst = (conn.src, conn.dst) if fwd else (conn.dst, conn.src)
            frame = cm_frame(src.ip, dst.ip, conn.sport, rec[8], conn.path_pkey, conn.message(kind))
        else:
            _, _, kind, flow, psn, opcode, payload, ecn, dscp = rec
            fwd = kind == DATA
            src, dst = (flow.src, flow.dst) if fwd else (flow.dst, flow.src)
            reth = None
            wr, conn = flow.wr, flow.conn
            if fwd and has_reth(opcode):  # RC or UC Write First / Only
                dlen = flow.size if opcode in (OP_WRITE_FIRST, OP_UC_WRITE_FIRST) or flow.n == 1 else payload
                reth = (wr.remote_addr + psn * flow.mtu, wr.rkey, dlen)
            aeth = None
            if kind == ACK:
                aeth = 0
            elif kind == NAK:
                aeth = AETH_NAK_PSN_SEQUENCE_ERROR
            elif kind == NAK_ACCESS:
                aeth = AETH_NAK_REMOTE_ACCESS_ERROR
            # data to the responder's QP with the requester's P_Key; ACKs, NAKs and CNPs (which name the QP to
            # slow down) back to the requester's QP
            dqpn = conn.resp.qpn if fwd else conn.req.qpn
            pkey = conn.req.pkey if fwd else conn.resp.pkey
            # an ACK names the last PSN it acknowledges, a NAK the PSN it refuses (the expected one, or the bad one)
            wire_psn = 0 if kind == CNP else flow.wire_psn(psn - 1 if kind == ACK else psn)
            frame = roce_frame(
                src.ip,
                dst.ip,
                flow.sport,
                dscp,
                ecn,
                opcode,
                dqpn,
                wire_psn,
                payload if fwd else 0,
                reth,
                aeth,
                pkey=pkey,
            )
            if kind == CNP:
                frame[IP].tos = tos_byte(dscp, 0)
            elif fwd and opcode == OP_UD_SEND_ONLY:  # UD: DETH (Q_Key, source QP) before the datagram's payload
                frame[BTH].remove_payload()
                frame = frame / Raw(deth_bytes(conn.req.qpn, conn.resp.qkey or 0) + b"\x00" * payload)
        frame.time = t
        out.append(frame)
    return out


def cm_frame(src_ip: int, dst_ip: int, sport: int, dscp: int, pkey: int, message):
    """A CM message (REQ, REP, RTU) to QP1: BTH UD SEND ONLY / DETH / the 256-byte MAD."""
    bth = BTH(opcode=OP_UD_SEND_ONLY, pkey=pkey, dqpn=1, ackreq=0, psn=0)
    return (
        Ether(src=_mac(src_ip), dst=_mac(dst_ip))
        / IP(src=_ip(src_ip), dst=_ip(dst_ip), tos=tos_byte(dscp, 0))
        / UDP(sport=sport, dport=ROCEV2_UDP_DPORT)
        / bth
        / Raw(deth_bytes() + mad_bytes(message))
    )


def capture_note(net, option: str | None = None) -> str | None:
    """What the packet-count cap left out of the capture, or None when everything traced is in it; `option` names
    the flag that raises the cap."""
    if not net.capture_missed:
        return None
    return (
        f"capture capped at {net.cfg.trace_max_packets:,} packets: the {net.capture_missed:,} later packets and "
        "PFC frames of the traced flows are not in the file" + (f" (raise {option} to keep them)" if option else "")
    )


def write_pcap(path: str | Path, captured: list, net, lldp: bool = True) -> int:
    frames = (lldp_frames(net) if lldp else []) + to_scapy(captured, net)
    wrpcap(str(path), frames)
    return len(frames)
