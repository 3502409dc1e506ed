"""The pcap: written with scapy, read back with scapy, layers and fields as a dissector sees them."""

from __future__ import annotations

import struct

import pytest
from scapy.contrib.mac_control import MACControlClassBasedFlowControl
from scapy.contrib.roce import AETH, BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap

from aifabric.packet.config import PacketConfig, SwitchConfig
from aifabric.packet.network import Network
from aifabric.packet.pcap import RETH, pfc_frame, write_pcap
from aifabric.packet.topo import leaf_spine, link_between


@pytest.fixture(scope="module")
def frames(tmp_path_factory):
    """Two senders into one 100 Gb/s port with small thresholds: data, ACKs, CNPs and PFC frames."""
    f = leaf_spine([["a", "b", "c"]], ["sw"], [], 100)
    sw = SwitchConfig(pfc_xon_bytes=20_000, wred_min_bytes=30_000, wred_max_bytes=50_000, pfc_xoff_bytes=60_000)
    net = Network(f, PacketConfig(switch=sw, trace_flows=(0,), trace_pfc=True, trace_max_packets=5000))
    for h in ("a", "b"):
        net.add_transfer((link_between(f, h, "sw"), link_between(f, "sw", "c")), 400e3, name=h)
    net.run()
    path = tmp_path_factory.mktemp("pcap") / "x.pcap"
    n = write_pcap(path, net.captured, net)
    pkts = rdpcap(str(path))
    assert len(pkts) == n
    return pkts, net.flows[0]


def test_data_packets_are_rocev2_with_bth_and_reth_on_the_first_only(frames):
    pkts, flow = frames
    data = [p for p in pkts if BTH in p and p[BTH].opcode in (6, 7, 8, 10)]
    assert len(data) == flow.n
    first = next(p for p in data if p[BTH].psn == 0)
    assert first[UDP].dport == 4791 and first[UDP].sport == flow.sport
    assert first[BTH].opcode == 0x06 and RETH in first and first[RETH].dlen == 400_000
    assert first[BTH].dqpn == flow.qpn and first[BTH].ackreq == 1
    assert first[IP].tos >> 2 == 24
    middle = next(p for p in data if p[BTH].psn == 1)
    assert middle[BTH].opcode == 0x07 and RETH not in middle
    last = next(p for p in data if p[BTH].psn == flow.n - 1)
    assert last[BTH].opcode == 0x08
    assert {p[IP].tos & 3 for p in data} <= {0b10, 0b11}
    assert any(p[IP].tos == 0x63 for p in data)  # some arrived CE-marked


def test_acks_and_cnps(frames):
    pkts, flow = frames
    acks = [p for p in pkts if BTH in p and p[BTH].opcode == 0x11]
    assert acks and all(AETH in p for p in acks)
    assert acks[-1][BTH].psn == flow.n
    cnps = [p for p in pkts if BTH in p and p[BTH].opcode == 0x81]
    assert len(cnps) == flow.cnp_rx > 0
    assert all(p[IP].tos >> 2 == 48 and p[IP].src == "10.0.0.3" for p in cnps)  # from the receiver c


def test_pfc_frames_are_mac_control_0x8808_opcode_0x0101_cev_bit_3(frames):
    pkts, _ = frames
    pfc = [p for p in pkts if p[Ether].type == 0x8808]
    assert pfc
    pause = next(p for p in pfc if p[MACControlClassBasedFlowControl].c3_pause_time)
    resume = next(p for p in pfc if not p[MACControlClassBasedFlowControl].c3_pause_time)
    for p in (pause, resume):
        raw = bytes(p)
        assert p[Ether].dst == "01:80:c2:00:00:01"
        assert raw[12:14] == b"\x88\x08" and raw[14:16] == b"\x01\x01"
        assert raw[16:18] == b"\x00\x08"  # class-enable vector: 0000 1000 = queue 3
    assert struct.unpack(">H", bytes(pause)[18 + 3 * 2:18 + 4 * 2])[0] == 0xFFFF
    assert resume[MACControlClassBasedFlowControl].c3_enabled == 1  # resume = the same frame with quanta 0


def test_pfc_frame_builder_encodes_the_book_example():
    raw = bytes(pfc_frame("02:00:00:00:00:01", {3: 0xFFFF}))
    assert raw[12:18] == bytes.fromhex("8808" "0101" "0008")
