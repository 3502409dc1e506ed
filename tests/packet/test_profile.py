"""`fabric.qos`, the switch QoS profile in the scenario: validated with the book's threshold order (Deep Learning
for Network Engineers, Chapter 11), run by the packet engine instead of built-in values."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.packet.config import PacketConfig
from aifabric.packet.nic import QpFlow
from aifabric.packet.profile import apply_qos
from aifabric.scenario.checks_qos import check_qos
from aifabric.scenario.qos_spec import QosSpec


def test_the_default_profile_is_the_engines_defaults():
    """No profile given: the packet engine runs what it ran before (the book's values and documented defaults)."""
    base = PacketConfig()
    cfg = apply_qos(base, QosSpec())
    assert cfg.switch == base.switch and cfg.dcqcn == base.dcqcn and cfg.nic == base.nic


@settings(max_examples=200, deadline=None)
@given(xs=st.lists(st.integers(1, 5000), min_size=4, max_size=4))
def test_threshold_order_is_the_rule(xs):
    """xON < WRED min < WRED max < xOFF, or problems naming the fields out of order."""
    xon, wmin, wmax, xoff = xs
    qos = QosSpec.model_validate({"wred": {"min_kb": wmin, "max_kb": wmax}, "pfc": {"xon_kb": xon, "xoff_kb": xoff}})
    fields = {p.path for p in check_qos(qos)}
    assert (not fields) == (xon < wmin < wmax < xoff)
    if not xon < wmin:
        assert "fabric.qos.wred.min_kb" in fields
    if not wmin < wmax:
        assert "fabric.qos.wred.max_kb" in fields
    if not wmax < xoff:
        assert "fabric.qos.pfc.xoff_kb" in fields


@pytest.mark.parametrize(
    "qos, field",
    [
        ({"pfc": {"xon_kb": 200}}, "fabric.qos.wred.min_kb"),
        ({"pfc": {"xoff_kb": 2500}}, "fabric.qos.pfc.xoff_kb"),
        ({"pfc": {"headroom_kb": 5}}, "fabric.qos.pfc.headroom_kb"),
        ({"mtu_bytes": 4100}, "fabric.qos.mtu_bytes"),
        ({"bandwidth_remaining_percent": {0: 60, 3: 50}}, "fabric.qos.bandwidth_remaining_percent"),
        (
            {"classes": [{"name": "A", "dscp": [24], "qos_group": 3}, {"name": "B", "dscp": [24], "qos_group": 7}]},
            "fabric.qos.classes",
        ),
        ({"wred": {"weight": 16}}, "fabric.qos.wred.weight"),
        ({"roce_mtu_bytes": 9000}, "fabric.qos.roce_mtu_bytes"),
        ({"buffer": {"shared_mib": 2}}, "fabric.qos.pfc.xoff_kb"),
        # where the NICs' packets land: CNPs apart from the data, data lossless under PFC, marked under DCQCN
        ({"cnp_dscp": 24}, "fabric.qos.cnp_dscp"),
        ({"classes": [{"name": "ROCEv2", "dscp": [24, 48], "qos_group": 3}]}, "fabric.qos.cnp_dscp"),
        ({"pfc": {"priorities": [4]}}, "fabric.qos.pfc.priorities"),
        ({"wred": {"queues": [4]}}, "fabric.qos.wred.queues"),
        ({"wred": {"ecn": False}}, "fabric.qos.wred.ecn"),
    ],
)
def test_validate_exits_2_naming_the_field(ch14_data, write_scenario, capsys, qos, field):
    ch14_data["fabric"]["qos"] = qos
    assert run_app(app, ["validate", str(write_scenario(ch14_data))]) == 2
    out = capsys.readouterr()
    assert field in out.out + out.err


@pytest.mark.parametrize(
    "qos",
    [
        {"pfc": {"priorities": [4], "enabled": False}},  # lossy RoCE, said so
        {"wred": {"ecn": False}, "congestion_control": "none"},  # WRED drops, no DCQCN
        {
            "data_dscp": 26,
            "classes": [{"name": "R", "dscp": [26], "qos_group": 3}, {"name": "C", "dscp": [48], "qos_group": 7}],
        },
    ],
)
def test_consistent_classes_validate(ch14_data, write_scenario, qos):
    ch14_data["fabric"]["qos"] = qos
    assert run_app(app, ["validate", str(write_scenario(ch14_data))]) == 0


def test_headroom_is_checked_against_the_cables(ch14_data, write_scenario, capsys):
    """The same headroom fits 100 ns cables and not 1 us ones (about 200 m) at 400 Gb/s."""
    ch14_data["fabric"]["qos"] = {"pfc": {"headroom_kb": 100}}
    assert run_app(app, ["validate", str(write_scenario(ch14_data))]) == 0
    ch14_data["fabric"]["link_latency_ns"] = 1000
    assert run_app(app, ["validate", str(write_scenario(ch14_data))]) == 2
    assert "fabric.qos.pfc.headroom_kb" in capsys.readouterr().err


def test_simulate_packet_runs_the_scenarios_profile(ch14_data):
    from aifabric.scenario import load_scenario
    from aifabric.simulate import simulate

    ch14_data["workload"]["model"]["layer_widths"] = [256, 512, 256]
    ch14_data["fabric"]["load_balancing"] = "flowlet"
    ch14_data["fabric"]["flowlet_gap_us"] = 12
    ch14_data["fabric"]["qos"] = {
        "classes": [{"name": "RDMA", "dscp": [10], "qos_group": 5}, {"name": "CNP", "dscp": [46], "qos_group": 6}],
        "data_dscp": 10,
        "cnp_dscp": 46,
        "strict_priority_queues": [6],
        "bandwidth_remaining_percent": {5: 80},
        "wred": {"queues": [5], "min_kb": 200, "max_kb": 2000},
        "pfc": {"priorities": [5], "xoff_kb": 2400},
        "roce_mtu_bytes": 2048,
        "dcqcn": {"g": 0.125},
    }
    run = simulate(load_scenario(ch14_data), "packet", keep_network=True)
    stats = run.packet_stats
    net = run.packet_network
    c = net.cfg
    assert (c.switch.wred_min_bytes, c.switch.wred_max_bytes, c.switch.pfc_xoff_bytes) == (
        200_000,
        2_000_000,
        2_400_000,
    )
    assert c.switch.pfc_priorities == (5,) and c.switch.bandwidth_remaining_percent[5] == 80
    assert c.dcqcn.g == 0.125 and c.nic.mtu_bytes == 2048
    assert c.lb.mode == "flowlet" and c.lb.flowlet_gap_s == pytest.approx(12e-6)
    qps = [f for f in net.flows if isinstance(f, QpFlow)]
    assert qps and all(f.prio == 5 and f.dscp == 10 for f in qps)
    busy = {q["queue"] for p in stats.ports if p["switch_port"] for q in p["queues"] if q["max_depth_bytes"] > 0}
    assert busy <= {5, 6}


def test_a_story_runs_on_a_files_profile(write_scenario, tmp_path, capsys):
    """`aifabric packet incast --qos FILE`: congestion control none means no CNPs; the default profile has them."""
    import json

    hw = {
        "name": "p",
        "cluster": {"gpu": "H100", "servers": 2, "gpus_per_server": 8},
        "fabric": {"qos": {"congestion_control": "none"}},
    }
    for name, cc in (("none", "none"), ("dcqcn", "dcqcn")):
        hw["fabric"]["qos"]["congestion_control"] = cc
        path = write_scenario(hw, f"{name}.yaml")
        assert run_app(app, ["packet", "incast", "--qos", str(path), "--out", str(tmp_path / name)]) == 0
    cnps = {
        n: json.loads((tmp_path / n / "packet-stats.json").read_text())["runs"]["incast"]["totals"]["cnps"]
        for n in ("none", "dcqcn")
    }
    assert cnps["none"] == 0 < cnps["dcqcn"]
    capsys.readouterr()
    assert run_app(app, ["packet", str(path), "--qos", str(path)]) == 2
    assert "--qos" in capsys.readouterr().err


@pytest.mark.parametrize("story", ["polarization", "ecmp-uplink", "spraying"])
def test_a_dlb_profile_is_refused_by_the_stories_that_compare_load_balancings(story, write_scenario, capsys):
    hw = {
        "name": "p",
        "cluster": {"gpu": "H100", "servers": 2, "gpus_per_server": 8},
        "fabric": {"qos": {"dlb": {"mode": "per-packet"}}},
    }
    assert run_app(app, ["packet", story, "--qos", str(write_scenario(hw))]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--qos" in err and "fabric.qos.dlb.mode per-packet" in err


def test_a_story_says_the_qos_files_load_balancing_is_not_used(write_scenario, capsys):
    hw = {
        "name": "p",
        "cluster": {"gpu": "H100", "servers": 2, "gpus_per_server": 8},
        "fabric": {"load_balancing": "spray", "qos": {}},
    }
    assert run_app(app, ["packet", "dcqcn", "--qos", str(write_scenario(hw))]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "note: --qos takes" in err and "fabric.load_balancing is not used" in err
    hw["fabric"]["load_balancing"] = "ecmp"  # the stories' own: nothing to say
    assert run_app(app, ["packet", "dcqcn", "--qos", str(write_scenario(hw))]) == 0
    assert "note:" not in capsys.readouterr().err


def test_dynamic_threshold_drops_a_lossy_incast_the_static_limit_holds():
    """fabric.qos.buffer.dynamic_threshold_alpha: a lossy queue may hold alpha x the free shared buffer."""
    from aifabric.packet.network import Network
    from aifabric.packet.topo import leaf_spine, link_between

    def run(alpha):
        qos = QosSpec.model_validate({"buffer": {"dynamic_threshold_alpha": alpha}} if alpha else {})
        f = leaf_spine([["a", "b", "c", "d", "e"]], ["sw"], [], 100)
        net = Network(f, apply_qos(PacketConfig(), qos))
        for h in "abcd":
            net.add_transfer((link_between(f, h, "sw"), link_between(f, "sw", "e")), 1e6, dscp=0)
        st = net.run()
        return {reason: n for (_, _, reason), n in st.drops.items()}, st

    static, st = run(None)
    assert not static and all(fl["done_s"] for fl in st.flows)
    dynamic, st = run(1 / 128)  # 64 MiB x 1/128 = 512 KiB while the buffer is nearly free
    assert dynamic.get("dynamic-threshold", 0) > 0 and all(fl["done_s"] for fl in st.flows)
    assert set(dynamic) == {"dynamic-threshold"}


def test_per_queue_wred_thresholds_are_each_queues_own():
    """wred.per_queue: queue 5's thresholds apply to queue 5 alone; the order rule is checked for it too."""
    from aifabric.packet.network import Network
    from aifabric.packet.topo import leaf_spine, link_between

    def marks(per_queue):
        qos = QosSpec.model_validate(
            {
                "classes": [
                    {"name": "A", "dscp": [24], "qos_group": 3},
                    {"name": "B", "dscp": [26], "qos_group": 5},
                    {"name": "CNP", "dscp": [48], "qos_group": 7},
                ],
                "bandwidth_remaining_percent": {3: 50, 5: 50},
                "wred": {"queues": [3, 5], "per_queue": per_queue},
                "pfc": {"priorities": [3, 5]},
            }
        )
        assert not check_qos(qos)
        cfg = apply_qos(PacketConfig(), qos)
        f = leaf_spine([["a", "b", "c"]], ["sw"], [], 100)
        net = Network(f, cfg)
        for h in "ab":
            net.add_transfer((link_between(f, h, "sw"), link_between(f, "sw", "c")), 1e6, dscp=26)
        st = net.run()
        return sum(n for (_, q), n in st.ecn_marks.items() if q == 5), cfg

    low, cfg = marks({5: {"min_kb": 150, "max_kb": 300}})
    assert cfg.wred_of(5)[:2] == (150_000, 300_000) and cfg.wred_of(3)[:2] == (150_000, 3_000_000)
    high, _ = marks({})
    assert low > high
    bad = QosSpec.model_validate({"wred": {"queues": [3], "per_queue": {3: {"min_kb": 50, "max_kb": 300}}}})
    assert {p.path for p in check_qos(bad)} == {"fabric.qos.wred.per_queue.3.min_kb"}  # below xON 100 KB


def _two_lossless(per_priority: dict, per_queue: dict) -> QosSpec:
    return QosSpec.model_validate(
        {
            "classes": [
                {"name": "R", "dscp": [24], "qos_group": 3},
                {"name": "R5", "dscp": [26], "qos_group": 5},
                {"name": "CNP", "dscp": [48], "qos_group": 7},
            ],
            "bandwidth_remaining_percent": {0: 40, 3: 30, 5: 30},
            "wred": {"queues": [3, 5], "per_queue": per_queue},
            "pfc": {"priorities": [3, 5], "per_priority": per_priority},
        }
    )


def test_a_priority_pauses_and_resumes_at_its_own_thresholds():
    """fabric.qos.pfc.per_priority: priority 5 with xOFF 400 KB / xON 50 KB beside priority 3 on the block's 3,200 /
    100 KB; the same two incasts (2 senders each, 2 MB) into one 100 Gb/s port."""
    from aifabric.packet.network import Network
    from aifabric.packet.topo import leaf_spine, link_between

    def pfc_log(qos):
        f = leaf_spine([["a", "b", "c", "d", "e"]], ["sw"], [], 100)
        net = Network(f, apply_qos(PacketConfig(explain=True), qos))
        for h, dscp in zip("abcd", (24, 24, 26, 26)):
            net.add_transfer((link_between(f, h, "sw"), link_between(f, "sw", "e")), 2e6, dscp=dscp)
        net.run()
        return [text for _, cat, text in net.events_log if cat == "pfc" and text.startswith("sw: ingress")]

    assert pfc_log(_two_lossless({}, {})) == []  # the block's xOFF (3,200 KB) is never reached
    log = pfc_log(_two_lossless({5: {"xon_kb": 50, "xoff_kb": 400}}, {5: {"min_kb": 100, "max_kb": 300}}))
    pauses = [t for t in log if "PFC pause" in t]
    resumes = [t for t in log if "PFC resume" in t]
    assert pauses and all("priority 5" in t and "> xOFF 400 KB" in t for t in pauses)
    assert resumes and all("priority 5" in t and "< xON 50 KB" in t for t in resumes)


@pytest.mark.parametrize(
    "per_priority, per_queue, field",
    [
        ({5: {"xon_kb": 50, "xoff_kb": 400}}, {}, "fabric.qos.pfc.per_priority.5.xoff_kb"),  # below WRED max 3,000
        (
            {5: {"xon_kb": 200, "xoff_kb": 400}},
            {5: {"min_kb": 100, "max_kb": 300}},
            "fabric.qos.wred.per_queue.5.min_kb",
        ),
        ({4: {"xon_kb": 50, "xoff_kb": 400}}, {}, "fabric.qos.pfc.per_priority.4"),  # not a lossless priority
        ({5: {"xon_kb": 50, "xoff_kb": 70_000}}, {}, "fabric.qos.pfc.per_priority.5.xoff_kb"),  # past the buffer
    ],
)
def test_per_priority_thresholds_are_checked(ch14_data, write_scenario, capsys, per_priority, per_queue, field):
    qos = _two_lossless(per_priority, per_queue).model_dump(mode="json")
    ch14_data["fabric"]["qos"] = qos
    assert run_app(app, ["validate", str(write_scenario(ch14_data))]) == 2
    assert field in capsys.readouterr().err
