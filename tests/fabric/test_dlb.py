"""DLB (Deep Learning for Network Engineers, Chapter 12, Example 12-1) as its own setting of the switch profile,
`fabric.qos.dlb`: validated, run by the packet engine's switches, spread by the flow engine, written as NX-OS and
read back."""

from __future__ import annotations

import copy

import pytest

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.fabric import build
from aifabric.fabric.switch_config import nxos, parse_nxos_qos, switch_plans
from aifabric.packet.profile import apply_qos
from aifabric.scenario import load_scenario
from aifabric.scenario.fabric_spec import ClusterSpec, FabricSpec
from aifabric.scenario.qos_spec import QosSpec

CLUSTER = ClusterSpec(servers=16, gpus_per_server=8, nic_speed_gbps=400)


def _leaf_nxos(**fabric) -> str:
    spec = FabricSpec(rails_per_switch=2, servers_per_segment=16, spines=4, **fabric)
    plans = switch_plans(build(CLUSTER, spec), spec)
    leaf = next(p for p in plans if p.uplinks())
    return nxos(leaf, spec.qos, spec)


@pytest.mark.parametrize(
    "qos, lb, field",
    [
        ({"dlb": {"mode": "flowlet"}}, "spray", "fabric.qos.dlb.mode"),
        ({"dlb": {"mode": "per-packet"}}, "flowlet", "fabric.qos.dlb.mode"),
        ({"dlb": {"mode": "per-packet", "flowlet_aging_us": 100}}, "ecmp", "fabric.qos.dlb.flowlet_aging_us"),
        ({"dlb": {"flowlet_aging_us": 100}}, "ecmp", "fabric.qos.dlb.flowlet_aging_us"),
        ({"dlb": {"mode": "random"}}, "ecmp", "fabric.qos.dlb.mode"),
        ({"dlb": {"mode": "flowlet", "mac_address": "01:00:5e:00:00:01"}}, "ecmp", "fabric.qos.dlb.mac_address"),
    ],
)
def test_validate_names_the_dlb_field(ch14_data, write_scenario, capsys, qos, lb, field):
    ch14_data["fabric"]["qos"] = qos
    ch14_data["fabric"]["load_balancing"] = lb
    assert run_app(app, ["validate", str(write_scenario(ch14_data))]) == 2
    out = capsys.readouterr()
    assert field in out.out + out.err


def test_dlb_over_ecmp_validates(ch14_data, write_scenario):
    ch14_data["fabric"]["qos"] = {"dlb": {"mode": "flowlet", "flowlet_aging_us": 30}}
    assert run_app(app, ["validate", str(write_scenario(ch14_data))]) == 0


def test_the_packet_engines_switches_run_dlb():
    spec = FabricSpec(flowlet_gap_us=50)
    assert apply_qos(None, spec.qos, spec).lb.mode == "ecmp"
    flowlet = QosSpec.model_validate({"dlb": {"mode": "flowlet", "flowlet_aging_us": 30}})
    lb = apply_qos(None, flowlet, spec).lb
    assert lb.mode == "flowlet" and lb.flowlet_gap_s == pytest.approx(30e-6)
    lb = apply_qos(None, QosSpec.model_validate({"dlb": {"mode": "flowlet"}}), spec).lb
    assert lb.flowlet_gap_s == pytest.approx(50e-6)  # the fabric's flowlet gap when DLB names none
    per_packet = QosSpec.model_validate({"dlb": {"mode": "per-packet"}})
    assert apply_qos(None, per_packet, spec).lb.mode == "adaptive"  # the least-loaded uplink, packet by packet


def test_dlb_changes_the_packet_run_as_the_switch_policy_does(ch14_data):
    """A scenario with DLB per-packet runs as the same scenario with the switches choosing per packet by load
    (`--lb adaptive`), not as ECMP's hash."""
    from aifabric.simulate import simulate

    ch14_data["workload"]["model"]["layer_widths"] = [512, 1024, 512]
    ch14_data["fabric"].update(rails_per_switch=4, servers_per_segment=1)  # one leaf a server: across the spines
    plain = load_scenario(copy.deepcopy(ch14_data))
    ch14_data["fabric"]["qos"] = {"dlb": {"mode": "per-packet"}}
    dlb = load_scenario(ch14_data)
    runs = {
        "ecmp": simulate(plain, "packet"),
        "adaptive": simulate(plain, "packet", lb="adaptive"),
        "dlb": simulate(dlb, "packet"),
    }
    t = {k: r.results.iteration_time_s for k, r in runs.items()}
    assert t["dlb"] == t["adaptive"] and t["dlb"] != t["ecmp"]


def test_the_flow_engine_spreads_under_dlb(ch14_data):
    from aifabric.simulate import simulate

    ch14_data["workload"]["model"]["layer_widths"] = [2048, 4096, 2048]
    ch14_data["fabric"].update(rails_per_switch=4, servers_per_segment=1)
    ecmp = copy.deepcopy(ch14_data)
    flowlet = copy.deepcopy(ch14_data)
    flowlet["fabric"]["load_balancing"] = "flowlet"
    ch14_data["fabric"]["qos"] = {"dlb": {"mode": "flowlet"}}
    t = {
        k: simulate(load_scenario(d), engine="flow").results.iteration_time_s
        for k, d in (("ecmp", ecmp), ("flowlet", flowlet), ("dlb", ch14_data))
    }
    assert t["dlb"] == t["flowlet"] < t["ecmp"]  # ECMP's hash collides on an uplink; the spread does not


def test_nxos_writes_the_chosen_dlb_and_imports_it_back():
    assert "hardware profile dlb" not in _leaf_nxos()
    text = _leaf_nxos(qos={"dlb": {"mode": "per-packet", "mac_address": "02:aa:bb:cc:dd:ee"}})
    assert "hardware profile dlb" in text and "  mode per-packet" in text and "mac-address 02:aa:bb:cc:dd:ee" in text
    assert "flowlet-aging" not in text
    back = QosSpec.model_validate(parse_nxos_qos(text))
    assert (back.dlb.mode, back.dlb.mac_address) == ("per-packet", "02:AA:BB:CC:DD:EE")
    text = _leaf_nxos(qos={"dlb": {"mode": "flowlet", "flowlet_aging_us": 30}})
    assert "  mode flowlet" in text and "  flowlet-aging 30" in text and "mac-address 00:cc:cc:cc:cc:cc" in text
    back = QosSpec.model_validate(parse_nxos_qos(text))
    assert (back.dlb.mode, back.dlb.flowlet_aging_us) == ("flowlet", 30)
    # the book's Example 12-1 as printed
    book = parse_nxos_qos(
        "class-map type qos match-any ROCEv2\n match dscp 24\npolicy-map type qos Q\n class ROCEv2\n"
        "  set qos-group 3\nhardware profile dlb\n dlb-interface Eth1/1\n dlb-interface Eth1/2\n"
        " mac-address aa:bb:cc:dd:ee:ff\n mode per-packet\n"
    )
    assert book["dlb"] == {"mode": "per-packet", "mac_address": "AA:BB:CC:DD:EE:FF"}
