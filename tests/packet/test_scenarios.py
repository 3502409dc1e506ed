"""The seeds' scenarios on the packet engine (spec §12.2 tests 6-9 and Figures 10-2, 10-5, 11-7, 12-6/7)."""

from __future__ import annotations

import pytest

from aifabric.packet.config import PacketConfig
from aifabric.packet.scenarios import run_scenario


@pytest.fixture(scope="module")
def cascade():
    return run_scenario("pfc-cascade", PacketConfig(explain=True))


def test_incast_figure_10_2_offers_800_gbps_to_a_200_gbps_port():
    """WE-04: 4 remote GPUs at 200 Gb/s toward E1 on Host-2: 800 Gb/s offered, 4:1. With the book's
    thresholds (xON < WRED min < WRED max < xOFF) ECN marks come before any PFC pause, nothing drops,
    and the port stays busy (delivered close to 200 Gb/s)."""
    r = run_scenario("incast", PacketConfig(explain=True))
    assert "800 Gb/s" in r.findings[0] and "4:1" in r.findings[0]
    st = r.stats
    assert st.total_drops() == 0
    assert st.total_ecn_marks() > 0 and sum(f["cnp_sent"] for f in st.flows) > 0
    log = r.net.events_log
    first_mark = next(t for t, c, _ in log if c == "ecn" and "marked" in _)
    first_pause = next((t for t, c, x in log if c == "pfc" and "PFC pause (" in x), float("inf"))
    assert first_mark < first_pause
    end = max(f["done_s"] for f in st.flows)
    delivered_gbps = 4 * 4e6 * 8 / end / 1e9
    assert 150 < delivered_gbps <= 200


def test_polarization_figure_10_5_ecmp_puts_both_flows_on_spine_1():
    """WE-05: the hash picks the Spine 1 uplink for both 200 Gb/s flows; the Spine 2 uplink stays idle.
    Spraying and adaptive routing use both uplinks and finish about twice as fast."""
    r = run_scenario("polarization", PacketConfig())
    rows = {row["lb"]: row for row in r.table}
    assert rows["ecmp"]["railA->spine2_MB"] == 0
    assert rows["ecmp"]["railA->spine1_MB"] > 8
    for mode in ("spray", "adaptive"):
        a, b = rows[mode]["railA->spine1_MB"], rows[mode]["railA->spine2_MB"]
        assert a == pytest.approx(b, rel=0.1)
        assert rows[mode]["max_fct_us"] < 0.6 * rows["ecmp"]["max_fct_us"]


def test_pfc_cascade_rail_c_pauses_spine_1_which_pauses_rails_a_and_b(cascade):
    """Spec §12.2 test 6 (Figures 11-4..11-6): Rail C pauses Spine 1 on queue 3 only, then Spine 1 pauses
    Rail A and Rail B; recovery below xON with quanta 0; no drops."""
    st = cascade.stats
    assert st.pfc_pause_sent[("railC->spine1", 3)] > 0
    assert st.pfc_pause_sent[("spine1->railA", 3)] > 0 and st.pfc_pause_sent[("spine1->railB", 3)] > 0
    assert st.pfc_resume_sent[("railC->spine1", 3)] > 0
    assert {prio for _, prio in st.pfc_pause_sent} == {3}
    assert st.total_drops() == 0
    log = [(t, x) for t, c, x in cascade.net.events_log if c == "pfc"]
    t_railc = next(t for t, x in log if x.startswith("railC: ingress") and "PFC pause" in x)
    t_spine = next(t for t, x in log if x.startswith("spine1: ingress") and "PFC pause" in x)
    t_resume = next(t for t, x in log if x.startswith("railC: ingress") and "resume" in x)
    assert t_railc < t_spine < t_resume


def test_pfc_cascade_other_priorities_keep_flowing(cascade):
    """Queue 0 on the paused Spine 1 -> Rail C link is never paused; the DSCP-0 flow runs at full speed."""
    net = cascade.net
    port = next(p for p in net.ports if p.name == "spine1->railC")
    assert port.paused_total[3] > 0 and port.paused_total[0] == 0
    lossy = next(f for f in cascade.stats.flows if "DSCP 0" in f["name"])
    assert lossy["fct_s"] < 1.1 * 2e6 * 8 / 200e9 + 5e-6


def test_dcqcn_timeline_figure_11_7_in_the_books_order_on_the_books_thresholds():
    """Deep Learning for Network Engineers, Chapter 11, Figure 11-7: t1 WRED min, t2 ECN marks, t3 CNP, t4 rate
    cut, t5 PFC pause, t6 Spine-A's paused queue congested, t7 Rail-1's egress below WRED min, t8 resume; then
    no more pauses. Run on the default profile, which is the book's (WRED 150 KB / 3,000 KB)."""
    cfg = PacketConfig()
    assert (cfg.switch.wred_min_bytes, cfg.switch.wred_max_bytes) == (150_000, 3_000_000)
    r = run_scenario("dcqcn", cfg)  # the timeline does not need --explain
    t = {row["figure"]: row["t_us"] for row in r.table}
    assert list(t) == [f"t{i}" for i in range(1, 9)]
    assert None not in t.values(), t
    assert t["t1"] <= t["t2"] < t["t3"] < t["t4"] < t["t5"] < t["t6"] < t["t7"] < t["t8"], t
    pauses = [x for x in r.stats.pfc_frames if x[3] > 0]
    assert pauses and max(x[0] for x in pauses) < t["t8"] * 1e-6  # PFC quiet after the resume
    assert r.net.cfg.switch.wred_max_bytes == 3_000_000 and r.net.cfg.switch.pfc_xoff_bytes > 3_000_000
    assert r.stats.total_drops() == 0
    assert all(f["final_rate_gbps"] < 200 for f in r.stats.flows)


def test_dcqcn_story_uses_the_given_thresholds():
    """The story runs the switch profile it is given (a scenario's), not thresholds of its own."""
    from dataclasses import replace

    base = PacketConfig()
    cfg = base.with_(switch=replace(base.switch, wred_max_bytes=2_000_000, pfc_xoff_bytes=2_500_000))
    r = run_scenario("dcqcn", cfg)
    assert r.net.cfg.switch.wred_max_bytes == 2_000_000 and r.net.cfg.switch.pfc_xoff_bytes == 2_500_000
    assert any("xOFF 2,500 KB" in line for line in r.findings)


def test_spraying_breaks_first_middle_last_but_not_write_only():
    """Spec §12.2 test 9 / Figures 12-6, 12-7: sprayed Middle/Last packets that overtake are discarded
    and NAKed (go-back-N); Write Only packets are placed on arrival, whatever their order."""
    r = run_scenario("spraying", PacketConfig())
    rows = {row["variant"]: row for row in r.table}
    ecmp, fml, wo, uet = (
        rows["ecmp, Write First/Middle/Last"],
        rows["spray, Write First/Middle/Last"],
        rows["spray, Write Only"],
        rows["UET (per-packet entropy)"],
    )
    assert ecmp["out_of_order"] == 0 and ecmp["retransmissions"] == 0
    assert fml["out_of_order"] > 0 and fml["naks"] > 0 and fml["retransmissions"] > 0
    assert wo["out_of_order"] > 0 and wo["retransmissions"] == 0
    assert uet["out_of_order"] > 0 and uet["retransmissions"] == 0
    assert wo["max_fct_us"] < 0.6 * ecmp["max_fct_us"] < fml["max_fct_us"]


def test_flowlets_move_a_colliding_qp_after_an_idle_gap():
    """Figure 12-5: with idle gaps longer than the flowlet timer between messages, the second flowlet of
    a QP goes to the least-loaded uplink; ECMP keeps both QPs on the hashed uplink."""
    from dataclasses import replace

    from aifabric.packet.network import Network
    from aifabric.packet.scenarios import _fig10_fabric, colliding_qpns
    from aifabric.packet.topo import ecmp_route, five_tuple, link_between

    pairs = [("host1/E1", "host3/E2"), ("host2/E1", "host1/E2")]
    used = {}
    for mode in ("ecmp", "flowlet"):
        f = _fig10_fabric(200, ["spine1", "spine2"])
        up = [link_between(f, "railA", "spine1"), link_between(f, "railA", "spine2")]
        qpns = colliding_qpns(f, pairs, "railA", up, 0)
        cfg = PacketConfig()
        net = Network(f, replace(cfg, lb=replace(cfg.lb, mode=mode, flowlet_gap_s=20e-6)))
        for (s, d), q in zip(pairs, qpns):
            ft = five_tuple(f, s, d, q, q + 0x1000)
            route = ecmp_route(f, s, d, ft)
            for k in range(3):  # three 256 KB messages per QP, 60 us apart (idle gaps > 20 us)
                net.start_at(k * 60e-6 + 1e-9, route, 256e3, qpn=q, sport=ft.src_port)
        net.run()
        used[mode] = [net.ports[li].tx_bytes for li in up]
    assert used["ecmp"][1] == 0
    assert min(used["flowlet"]) > 0.25 * sum(used["flowlet"])


def test_hol_blocking_figure_10_4_the_relayed_transfer_waits_at_gpu_1s_nic():
    """Chapter 10, Figure 10-4: GPU-0's transfer to another host's GPU-1 goes NVLink -> GPU-1 -> GPU-1's NIC (PXN);
    while GPU-1 sends its own gradients from that NIC, GPU-0's transfer takes about twice as long."""
    r = run_scenario("hol-blocking", PacketConfig())
    alone, behind = r.table
    assert alone["own_fct_us"] is None and behind["own_fct_us"] > 0
    assert 1.8 < behind["relayed_fct_us"] / alone["relayed_fct_us"] < 2.2
    assert behind["nic1_uplink_MB"] == pytest.approx(2 * alone["nic1_uplink_MB"])
    # alone it runs at the NIC's line rate, not at NVLink speed (the relayed QP is paced at its line rate)
    assert 4e6 * 8 / (alone["relayed_fct_us"] * 1e-6) == pytest.approx(200e9, rel=0.05)
    net = r.runs[1][1]
    relayed = next(f for f in net.flows if "via GPU-1" in f.name)
    ids = [net.fabric.links[li].id for li in relayed.path.links]
    assert ids[:3] == ["s0/gpu0->s0/nvswitch", "s0/nvswitch->s0/gpu1", "s0/gpu1->s0/nic1"] and "s0/nic1->rail1" in ids


def test_ecmp_uplink_figure_12_4_three_flows_on_one_uplink():
    """Chapter 12, Figure 12-4: Rail-1's 5-tuple hash puts the three flows on one uplink; flowlets, spraying and
    adaptive routing (Figure 12-5) use both."""
    from aifabric.fabric.ecmp import ecmp_hash
    from aifabric.packet.scenarios import _fig12_fabric
    from aifabric.packet.topo import five_tuple

    r = run_scenario("ecmp-uplink", PacketConfig())
    rows = {row["lb"]: row for row in r.table}
    e = rows["ecmp"]
    assert e["rail1->spine2_MB"] == 0 and e["rail1->spine1_MB"] > 6.0
    for mode in ("flowlet", "spray", "adaptive"):
        assert rows[mode]["rail1->spine2_MB"] > 1.5, mode
    f = _fig12_fabric(0)
    net = r.runs[0][1]
    hashes = {ecmp_hash(five_tuple(f, fl.src.id, fl.dst.id, fl.qpn, fl.qpn + 0x1000), 0) % 2 for fl in net.flows}
    assert hashes == {0}  # the same uplink by the documented hash, not by construction of the route


def test_the_new_stories_run_from_the_cli(capsys):
    from aifabric.cli import run_app
    from aifabric.cli.app import app

    assert run_app(app, ["packet", "ecmp-uplink"]) == 0
    assert "Figure 12-4" in capsys.readouterr().out
    assert run_app(app, ["packet", "ecmp-uplink", "--lb", "spray"]) == 2
    assert "--lb" in capsys.readouterr().err
    assert run_app(app, ["packet", "hol-blocking", "--size-mb", "1"]) == 0
    assert "Figure 10-4" in capsys.readouterr().out
