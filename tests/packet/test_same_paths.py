"""Both engines put a transfer on the same QP, so on the same 5-tuple and the same ECMP path: the packet engine
uses the Router's queue-pair numbers (their UDP source port is what the Router hashed)."""

from __future__ import annotations

import pytest

from aifabric.fabric.graph import TIER_PCIE
from aifabric.packet.nic import QpFlow


@pytest.fixture(params=[None, ["src_ip", "dst_ip"]], ids=["5-tuple", "ips"])
def across_spines(ch14_data, request):
    """4 servers x 2 GPUs, one leaf per server (both rails on it), 4 spines: every DP transfer crosses a spine,
    where ECMP picks one of 4 uplinks by the 5-tuple (or by the fields of `fabric.ecmp_hash_fields`)."""
    from aifabric.scenario import load_scenario

    d = ch14_data
    d["cluster"].update(servers=4, gpus_per_server=2)
    d["fabric"].update(rails_per_switch=2, servers_per_segment=1, spines=4)
    if request.param is not None:
        d["fabric"]["ecmp_hash_fields"] = request.param
    d["workload"]["model"]["layer_widths"] = [256, 512, 256]
    d["workload"]["global_batch_size"] = 64
    return load_scenario(d)


def _flow_engine_qps(scenario):
    """The QPs (QPN, UDP source port) per rank pair that the flow engine's lowering hashed."""
    from aifabric.engines.tasks import lower
    from aifabric.simulate import build_fabric, build_workload

    fabric, router = build_fabric(scenario)
    lower(build_workload(scenario), fabric, router, **scenario.lowering_options())  # the same seeded QPs
    qp_of: dict = {}
    for (src, dst, _), (qpn, _, sport) in router.queue_pairs().items():
        qp_of.setdefault((src, dst), set()).add((qpn, sport))
    return fabric, router, qp_of


def test_packet_engine_uses_the_routers_qps_and_the_flow_engines_paths(across_spines):
    from aifabric.simulate import simulate

    run = simulate(across_spines, "packet", keep_network=True)
    net = run.packet_network
    fabric, router, qp_of = _flow_engine_qps(across_spines)
    rank_of_nic = {fabric.rank_nic(r): r for r in range(len(fabric.rank_gpu))}
    qps = [f for f in net.flows if isinstance(f, QpFlow)]
    assert len(qps) > 8
    crossing = 0
    for flow in qps:
        src, dst = rank_of_nic[flow.src.id], rank_of_nic[flow.dst.id]
        assert (flow.qpn, flow.sport) in qp_of[src, dst]
        # the path its packets took is the one the flow engine's ECMP hash gives its 5-tuple
        rehashed = router.route_with_source_port(src, dst, flow.sport).links
        core = [li for li in rehashed if fabric.links[li].tier != TIER_PCIE]
        assert flow.path.links == core
        crossing += any(fabric.nodes[fabric.links[li].dst].kind == "spine" for li in core)
    assert crossing == len(qps)


def test_pcap_udp_source_port_is_the_routers(across_spines, tmp_path):
    """What Wireshark shows as the UDP source port is the entropy the Router hashed."""
    from scapy.all import UDP, rdpcap

    from aifabric.packet.config import PacketConfig
    from aifabric.packet.pcap import write_pcap
    from aifabric.simulate import simulate

    cfg = PacketConfig(trace_flows=(0,), trace_by="rdma")
    run = simulate(across_spines, "packet", packet_options=cfg, keep_network=True)
    net = run.packet_network
    write_pcap(tmp_path / "x.pcap", net.captured, net)
    fabric, _, qp_of = _flow_engine_qps(across_spines)
    sports = {p[UDP].sport for p in rdpcap(str(tmp_path / "x.pcap")) if UDP in p and p[UDP].dport == 4791}
    flow = next(f for f in net.flows if isinstance(f, QpFlow))
    assert flow.sport in sports
    rank_of_nic = {fabric.rank_nic(r): r for r in range(len(fabric.rank_gpu))}
    assert (flow.qpn, flow.sport) in qp_of[rank_of_nic[flow.src.id], rank_of_nic[flow.dst.id]]
