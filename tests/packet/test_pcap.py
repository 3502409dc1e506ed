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
    first = next(p for p in data if p[BTH].psn == flow.ipsn)
    assert first[UDP].dport == 4791 and first[UDP].sport == flow.sport
    assert first[BTH].opcode == 0x06 and RETH in first and first[RETH].dlen == 400_000
    assert first[BTH].dqpn == flow.qpn and first[BTH].ackreq == 1
    assert first[IP].tos >> 2 == 24
    middle = next(p for p in data if p[BTH].psn == flow.wire_psn(1))
    assert middle[BTH].opcode == 0x07 and RETH not in middle
    last = next(p for p in data if p[BTH].psn == flow.wire_psn(flow.n - 1))
    assert last[BTH].opcode == 0x08
    assert {p[IP].tos & 3 for p in data} <= {0b10, 0b11}
    assert any(p[IP].tos == 0x63 for p in data)  # some arrived CE-marked


def test_acks_and_cnps(frames):
    pkts, flow = frames
    acks = [p for p in pkts if BTH in p and p[BTH].opcode == 0x11]
    assert acks and all(AETH in p for p in acks)
    assert acks[-1][BTH].psn == flow.wire_psn(flow.n - 1)  # the last PSN acknowledged
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
    assert struct.unpack(">H", bytes(pause)[18 + 3 * 2 : 18 + 4 * 2])[0] == 0xFFFF
    assert resume[MACControlClassBasedFlowControl].c3_enabled == 1  # resume = the same frame with quanta 0


def test_pfc_frame_builder_encodes_the_book_example():
    raw = bytes(pfc_frame("02:00:00:00:00:01", {3: 0xFFFF}))
    assert raw[12:18] == bytes.fromhex("880801010008")


def _lldp_tlvs(pkt) -> list[tuple[int, bytes]]:
    data, out = bytes(pkt[Ether].payload), []
    while data:
        head = struct.unpack("!H", data[:2])[0]
        kind, length = head >> 9, head & 0x1FF
        out.append((kind, data[2 : 2 + length]))
        data = data[2 + length :]
        if kind == 0:
            break
    return out


def _dcbx(tlvs, subtype: int) -> bytes:
    return next(v[4:] for k, v in tlvs if k == 127 and v[:3] == b"\x00\x80\xc2" and v[3] == subtype)


@pytest.mark.parametrize("pfc_prio", [3, 5])
def test_lldp_dcbx_tlvs_carry_the_profile(tmp_path, pfc_prio):
    """LLDP with the 802.1Qaz TLVs of the switch profile on the traced flow's links (Deep Learning for Network
    Engineers, Capture 11-1: PFC capability 8, only priority 3 enabled, TTL 120 s)."""
    from aifabric.packet.profile import apply_qos
    from aifabric.scenario.qos_spec import QosSpec

    qos = QosSpec.model_validate(
        {
            "classes": [
                {"name": "R", "dscp": [24], "qos_group": pfc_prio},
                {"name": "CNP", "dscp": [48], "qos_group": 7},
            ],
            "pfc": {"priorities": [pfc_prio]},
            "wred": {"queues": [pfc_prio]},
            "bandwidth_remaining_percent": {0: 40, pfc_prio: 60},
        }
    )
    cfg = apply_qos(PacketConfig(trace_flows=(0,)), qos)
    f = leaf_spine([["a", "b"]], ["sw"], [], 100)
    net = Network(f, cfg)
    net.add_transfer((link_between(f, "a", "sw"), link_between(f, "sw", "b")), 100e3)
    net.run()
    path = tmp_path / "l.pcap"
    write_pcap(path, net.captured, net)
    lldp = [p for p in rdpcap(str(path)) if Ether in p and p[Ether].type == 0x88CC]
    # both ends of both links of the path (a->sw, sw->b) and of the ACKs' path
    assert {p[Ether].dst for p in lldp} == {"01:80:c2:00:00:0e"} and len(lldp) == 4
    for p in lldp:
        tlvs = _lldp_tlvs(p)
        assert [k for k, _ in tlvs][:3] == [1, 2, 3] and tlvs[-1][0] == 0
        assert struct.unpack("!H", tlvs[2][1])[0] == 120
        pfc = _dcbx(tlvs, 0x0B)
        assert pfc[0] & 0x0F == 0b1000 and pfc[1] == 1 << pfc_prio
        ets = _dcbx(tlvs, 0x09)
        bw, tsa = ets[5:13], ets[13:21]
        assert bw[pfc_prio] == 60 and bw[0] == 40 and tsa[7] == 0 and tsa[pfc_prio] == 2
        app = _dcbx(tlvs, 0x0C)[1:]
        entries = {(app[i] & 7, struct.unpack("!H", app[i + 1 : i + 3])[0]): app[i] >> 5 for i in range(0, len(app), 3)}
        assert entries[(5, 24)] == pfc_prio and entries[(5, 48)] == 7 and entries[(3, 4791)] == pfc_prio
