"""`aifabric fabric config`: NX-OS and SONiC configuration per switch from the plan and the QoS profile, parsed back
and checked against the plan (every port, address and neighbour) and the profile (every threshold); the NX-OS
QoS import round trip."""

from __future__ import annotations

import ipaddress
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.fabric import build
from aifabric.fabric.switch_config import NxosParseError, nxos, nxos_qos, parse_nxos_qos, sonic, switch_plans
from aifabric.packet.profile import switch_config
from aifabric.scenario.fabric_spec import ClusterSpec, FabricSpec
from aifabric.scenario.qos_spec import QosSpec

# Deep Learning for Network Engineers, Chapter 11, Examples 11-1..11-5 (the "..." is the book's)
BOOK_EXAMPLES = """
class-map type qos match-any ROCEv2
match dscp 24
class-map type qos match-any CNP
match dscp 48
policy-map type qos QOS_CLASSIFICATION
class ROCEv2
set qos-group 3 class CNP
set qos-group 7 class class-default
set qos-group 0
policy-map type queuing QOS_EGRESS_PORT
class type queuing c-out-8q-q6
bandwidth remaining percent 0
...
class type queuing c-out-8q-q3
bandwidth remaining percent 50
random-detect minimum-threshold 150 kbytes maximum-
threshold 3000 kbytes drop-probability 7 weight 0 ecn
...
class type queuing c-out-8q-q7
priority level 1
policy-map type network-qos qos_network class type network-
qos c-8q-nq3
mtu 9216
pause pfc-cos 3
priority-flow-control watch-dog-interval on
"""

CLUSTER = ClusterSpec(servers=16, gpus_per_server=8, nic_speed_gbps=400)
FABRIC = FabricSpec(
    rails_per_switch=2, servers_per_segment=16, spines=4, address_block="10.0.1.0/24", subnet_prefix_length=25
)


def _blocks(text: str) -> dict[str, list[str]]:
    """`interface X` / `router bgp N` / ... -> the indented lines under it."""
    out: dict[str, list[str]] = {}
    head = None
    for line in text.splitlines():
        if not line or line.startswith("!"):
            continue
        if not line.startswith(" "):
            head = line
            out.setdefault(head, [])
        elif head is not None:
            out[head].append(line.strip())
    return out


@pytest.fixture(scope="module")
def fabric():
    f = build(CLUSTER, FABRIC)
    return f, switch_plans(f, FABRIC)


def test_the_books_example_is_in_the_nxos(fabric):
    """WRED 150/3000 KB, drop-probability 7, weight 0, ecn, 50 % for queue 3, strict for queue 7, MTU 9216, PFC on
    CoS 3: the book's six steps with its values."""
    _, plans = fabric
    text = nxos(plans[0], FABRIC.qos, FABRIC, 80_000)
    b = _blocks(text)
    assert b["class-map type qos match-any ROCEv2"] == ["match dscp 24"]
    assert b["class-map type qos match-any CNP"] == ["match dscp 48"]
    assert b["policy-map type qos QOS_CLASSIFICATION"] == [
        "class ROCEv2",
        "set qos-group 3",
        "class CNP",
        "set qos-group 7",
        "class class-default",
        "set qos-group 0",
    ]
    q = b["policy-map type queuing QOS_EGRESS_PORT"]
    q3 = q[q.index("class type queuing c-out-8q-q3") + 1 : q.index("class type queuing c-out-8q-q2")]
    assert q3 == [
        "bandwidth remaining percent 50",
        "random-detect minimum-threshold 150 kbytes maximum-threshold 3000 kbytes drop-probability 7 weight 0 ecn",
    ]
    assert q[q.index("class type queuing c-out-8q-q7") + 1] == "priority level 1"
    nq = b["policy-map type network-qos qos_network"]
    nq3 = nq[nq.index("class type network-qos c-8q-nq3") + 1 :]
    assert nq3[:2] == ["mtu 9216", "pause pfc-cos 3"]
    assert "priority-flow-control watch-dog-interval on" in b
    assert b["system qos"] == [
        "service-policy type network-qos qos_network",
        "service-policy type queuing output QOS_EGRESS_PORT",
    ]


def test_every_port_of_the_cabling_plan_is_configured(fabric):
    from aifabric.fabric.cabling import cabling_rows

    f, plans = fabric
    want: dict[str, set[str]] = {}
    for row in cabling_rows(f, FABRIC.port_layout):
        want.setdefault(row[4], set()).add(row[5])
        if row[1] != "host":
            want.setdefault(row[2], set()).add(row[3])
    for sw in plans:
        b = _blocks(nxos(sw, FABRIC.qos, FABRIC))
        got = {h.split()[1] for h in b if h.startswith("interface Ethernet")}
        assert got == want[sw.id], sw.id
        for h, body in b.items():
            if h.startswith("interface Ethernet"):  # step 6 on every interface
                assert {
                    "priority-flow-control mode auto",
                    "priority-flow-control watch-dog",
                    "service-policy type qos input QOS_CLASSIFICATION",
                    "mtu 9216",
                } <= set(body)


def test_addresses_vlans_and_bgp_agree_across_switches(fabric):
    f, plans = fabric
    by_id = {sw.id: sw for sw in plans}
    ends: dict[ipaddress.IPv4Network, list] = {}
    for sw in plans:
        for p in sw.ports:
            if p.ip is not None:
                ends.setdefault(p.ip.network, []).append((sw.id, p))
    assert all(len(v) == 2 for v in ends.values())  # every /31 has its two ends, nothing else
    for sw in plans:
        b = _blocks(nxos(sw, FABRIC.qos, FABRIC))
        bgp = b[f"router bgp {sw.asn}"]
        neighbors = {line.split()[1] for line in bgp if line.startswith("neighbor ")}
        for (a, pa), (c, pc) in ends.values():
            if sw.id in (a, c):
                mine, other, other_id = (pa, pc, c) if a == sw.id else (pc, pa, a)
                assert str(other.ip.ip) in neighbors
                i = bgp.index(f"neighbor {other.ip.ip}")
                assert bgp[i + 1] == f"remote-as {by_id[other_id].asn}"
        if sw.role == "rail":
            assert f"aggregate-address {sw.aggregates[0]} summary-only" in bgp
            for v, gw in sw.svis:
                assert b[f"interface Vlan{v}"][0] == f"ip address {gw}"
    # the book's dual-rail switch: two /25s, summarized as 10.0.1.0/24 (Figure 13-11)
    assert [str(n) for n in by_id["leaf0"].networks] == ["10.0.1.0/25", "10.0.1.128/25"]
    assert str(by_id["leaf0"].aggregates[0]) == "10.0.1.0/24"
    # a host port's VLAN is its NIC's rail's, and the NIC's address is in that VLAN's subnet
    nic_ip = {n: ipaddress.IPv4Address(node.ip) for n, node in f.nodes.items() if node.kind == "nic"}
    for sw in plans:
        subnet_of = {v: gw.network for v, gw in sw.svis}
        for p in sw.ports:
            if p.kind == "host":
                assert nic_ip[p.peer] in subnet_of[p.vlan]


def test_sonic_config_db_has_the_tables_and_the_profiles_values(fabric):
    _, plans = fabric
    qos = FABRIC.qos
    for sw in plans:
        db = json.loads(json.dumps(sonic(sw, qos, FABRIC, 80_000)))
        for table in (
            "DSCP_TO_TC_MAP",
            "TC_TO_QUEUE_MAP",
            "WRED_PROFILE",
            "BUFFER_PROFILE",
            "PORT_QOS_MAP",
            "PFC_WD",
            "PORT",
            "BGP_NEIGHBOR",
            "DEVICE_METADATA",
            "SCHEDULER",
            "QUEUE",
        ):
            assert db[table], (sw.id, table)
        assert set(db["PORT"]) == set(db["PORT_QOS_MAP"]) and len(db["PORT"]) == len(sw.ports)
        assert {v["alias"] for v in db["PORT"].values()} == {p.name for p in sw.ports}
        assert db["DSCP_TO_TC_MAP"]["AIFABRIC"]["24"] == "3" and db["DSCP_TO_TC_MAP"]["AIFABRIC"]["48"] == "7"
        wred = db["WRED_PROFILE"]["AIFABRIC_ECN"]
        assert (
            wred["green_min_threshold"],
            wred["green_max_threshold"],
            wred["green_drop_probability"],
            wred["ecn"],
        ) == ("150000", "3000000", "7", "ecn_all")
        prof = db["BUFFER_PROFILE"]["pg_lossless_profile"]
        assert (prof["xon"], prof["xoff"], prof["size"]) == ("100000", "80000", "3280000")
        assert all(v["pfc_enable"] == "3" for v in db["PORT_QOS_MAP"].values())
        assert db["SCHEDULER"]["scheduler.7"] == {"type": "STRICT"} and db["SCHEDULER"]["scheduler.3"]["weight"] == "50"
        assert all(db["QUEUE"][f"{p}|3"]["wred_profile"] == "AIFABRIC_ECN" for p in db["PORT"])
        if sw.role == "rail":
            assert db["BGP_AGGREGATE_ADDRESS"] and set(db["VLAN"]) == {f"Vlan{v}" for v, _ in sw.svis}
        assert set(db["BGP_NEIGHBOR"]) == {str(n.ip) for n in sw.neighbors}


def test_a_priority_with_its_own_pfc_thresholds_in_nxos_and_sonic(fabric):
    """fabric.qos.pfc.per_priority: its own network-qos pause line, its own SONiC buffer profile; NX-OS reads back."""
    _, plans = fabric
    qos = QosSpec.model_validate(
        {
            "classes": [
                {"name": "ROCEv2", "dscp": [24], "qos_group": 3},
                {"name": "STORAGE", "dscp": [26], "qos_group": 5},
                {"name": "CNP", "dscp": [48], "qos_group": 7},
            ],
            "bandwidth_remaining_percent": {0: 40, 3: 30, 5: 30},
            "wred": {"queues": [3, 5], "per_queue": {5: {"min_kb": 100, "max_kb": 300}}},
            "pfc": {"priorities": [3, 5], "per_priority": {5: {"xon_kb": 50, "xoff_kb": 400, "headroom_kb": 120}}},
        }
    )
    text = "\n".join(nxos_qos(qos, 80_000))
    nq5 = text.split("c-8q-nq5")[1]
    assert "pause buffer-size 520000 pause-threshold 400000 resume-threshold 50000" in nq5
    assert "pause buffer-size 3280000 pause-threshold 3200000 resume-threshold 100000" in text.split("c-8q-nq5")[0]
    back = QosSpec.model_validate(parse_nxos_qos(text))
    assert back.pfc.of(5) == (50, 400, 120) and back.pfc.of(3) == (100, 3200, 80)
    db = json.loads(json.dumps(sonic(plans[0], qos, FABRIC, 80_000)))
    assert (
        db["BUFFER_PROFILE"]["pg_lossless_profile_5"]["xon"],
        db["BUFFER_PROFILE"]["pg_lossless_profile_5"]["size"],
    ) == (
        "50000",
        "520000",
    )
    port = next(iter(db["PORT"]))
    assert db["BUFFER_PG"][f"{port}|3"] == {"profile": "pg_lossless_profile"}
    assert db["BUFFER_PG"][f"{port}|5"] == {"profile": "pg_lossless_profile_5"}


def test_the_books_examples_import_into_its_profile():
    imported = QosSpec.model_validate(parse_nxos_qos(BOOK_EXAMPLES))
    w = imported.wred
    assert (w.queues, w.min_kb, w.max_kb, w.drop_probability_percent, w.weight, w.ecn) == ([3], 150, 3000, 7, 0, True)
    assert imported.strict_priority_queues == [7] and imported.bandwidth_remaining_percent == {3: 50}
    assert imported.pfc.priorities == [3] and imported.mtu_bytes == 9216
    assert imported.dscp_to_queue() == {24: 3, 48: 7} and imported.default_qos_group == 0
    with pytest.raises(NxosParseError):
        parse_nxos_qos("hostname leaf1\ninterface Ethernet1/1\n  no shutdown\n")


@pytest.mark.parametrize("cnp", [48, 46])
def test_import_takes_the_nics_dscps_from_the_lossless_and_strict_classes(cnp, tmp_path, capsys):
    """A fabric that carries RoCEv2 on DSCP 26 (not the book's 24): the imported profile puts the NICs' data on the
    lossless class's DSCP (and CNPs on the strict-priority class's), so it validates and runs RoCE lossless."""
    text = BOOK_EXAMPLES.replace("match dscp 24", "match dscp 26").replace("match dscp 48", f"match dscp {cnp}")
    data = parse_nxos_qos(text)
    qos = QosSpec.model_validate(data)
    assert (qos.data_dscp, qos.cnp_dscp) == (26, cnp)
    assert qos.queue_of(qos.data_dscp) in qos.pfc.priorities and qos.queue_of(qos.cnp_dscp) == 7
    assert "data_dscp" not in parse_nxos_qos(BOOK_EXAMPLES)  # the book's own: the defaults, not repeated
    path = tmp_path / "leaf.cfg"
    path.write_text(text, encoding="utf-8")
    assert run_app(app, ["fabric", "config", "--import", str(path)]) == 0
    assert "data_dscp: 26" in capsys.readouterr().out


@st.composite
def profiles(draw):
    xon, wmin, wmax, xoff = sorted(draw(st.lists(st.integers(1, 20_000), min_size=4, max_size=4, unique=True)))
    queues = draw(st.lists(st.integers(0, 7), min_size=1, max_size=3, unique=True))
    strict = draw(st.lists(st.integers(0, 7), max_size=2, unique=True))
    free = [q for q in range(8) if q not in strict]
    shares, left = {}, 100
    for q in draw(st.lists(st.sampled_from(free), max_size=3, unique=True)) if free else []:
        shares[q] = draw(st.integers(0, left))
        left -= shares[q]
    dscps = draw(st.lists(st.integers(0, 63), min_size=2, max_size=4, unique=True))
    classes = [{"name": f"C{i}", "dscp": [d], "qos_group": draw(st.integers(0, 7))} for i, d in enumerate(dscps)]
    per_queue = {}
    for q in queues[1:]:
        if xoff - xon >= 3 and draw(st.booleans()):
            lo, hi = sorted(draw(st.lists(st.integers(xon + 1, xoff - 1), min_size=2, max_size=2, unique=True)))
            per_queue[q] = {"min_kb": lo, "max_kb": hi, "drop_probability_percent": draw(st.integers(0, 100))}
    priorities = draw(st.lists(st.integers(0, 7), min_size=1, max_size=3, unique=True))
    per_priority = {}
    for q in sorted(priorities)[1:]:  # the lowest keeps the block's thresholds, as NX-OS reads back
        if draw(st.booleans()):
            a, b = sorted(draw(st.lists(st.integers(1, 20_000), min_size=2, max_size=2, unique=True)))
            per_priority[q] = {
                "xon_kb": a,
                "xoff_kb": b,
                "headroom_kb": draw(st.one_of(st.none(), st.integers(50, 500))),
            }
    return QosSpec.model_validate(
        {
            "classes": classes,
            "default_qos_group": draw(st.integers(0, 7)),
            "strict_priority_queues": strict,
            "bandwidth_remaining_percent": shares,
            "wred": {
                "queues": queues,
                "min_kb": wmin,
                "max_kb": wmax,
                "drop_probability_percent": draw(st.integers(0, 100)),
                "ecn": draw(st.booleans()),
                "per_queue": per_queue,
            },
            "pfc": {
                "priorities": priorities,
                "per_priority": per_priority,
                "xon_kb": xon,
                "xoff_kb": xoff,
                "headroom_kb": draw(st.integers(50, 500)),
                "watchdog_ms": draw(st.one_of(st.none(), st.integers(1, 1000))),
            },
            "mtu_bytes": draw(st.integers(4200, 9216)),
        }
    )


@settings(max_examples=60, deadline=None)
@given(qos=profiles())
def test_import_of_the_export_is_the_profile(qos):
    """fabric.qos -> NX-OS -> fabric.qos: the switch runs the same settings (what NX-OS holds)."""
    back = QosSpec.model_validate(parse_nxos_qos("\n".join(nxos_qos(qos))))
    assert switch_config(back) == switch_config(qos)
    assert back.dscp_to_queue() == qos.dscp_to_queue() and back.mtu_bytes == qos.mtu_bytes


def test_fabric_config_cli(write_scenario, tmp_path, capsys):
    hw = {
        "name": "book",
        "cluster": {"gpu": "H100", "servers": 16, "gpus_per_server": 8},
        "fabric": {
            "rails_per_switch": 2,
            "servers_per_segment": 16,
            "spines": 4,
            "subnet_prefix_length": 25,
            "load_balancing": "spray",
            "qos": {"wred": {"min_kb": 200, "max_kb": 2500}},
        },
    }
    path = write_scenario(hw)
    out = tmp_path / "cfg"
    assert run_app(app, ["fabric", "config", str(path), "--out", str(out)]) == 0
    index = json.loads((out / "fabric-config.json").read_text())
    assert len(index["switches"]) == 8 and index["format"] == "nxos"
    leaf = (out / "leaf0.cfg").read_text()
    assert "random-detect minimum-threshold 200 kbytes maximum-threshold 2500 kbytes" in leaf
    assert "hardware profile dlb" in leaf and "mode per-packet" in leaf
    assert re.search(r"dlb-interface Eth1/3[3-6]", leaf)
    capsys.readouterr()
    assert run_app(app, ["fabric", "config", str(path), "--switch", "spine1", "--format", "sonic"]) == 0
    assert json.loads(capsys.readouterr().out)["DEVICE_METADATA"]["localhost"]["hostname"] == "spine1"
    # import the generated NX-OS back: the scenario's thresholds
    assert run_app(app, ["fabric", "config", "--import", str(out / "leaf0.cfg")]) == 0
    import yaml

    data = yaml.safe_load(capsys.readouterr().out)
    assert (data["fabric"]["qos"]["wred"]["min_kb"], data["fabric"]["qos"]["wred"]["max_kb"]) == (200, 2500)
    for args, field in ((["--switch", "leaf99"], "--switch"), (["--format", "junos"], "--format")):
        assert run_app(app, ["fabric", "config", str(path), *args]) == 2
        assert field in capsys.readouterr().err
    bad = tmp_path / "bad.cfg"
    bad.write_text(
        "policy-map type queuing X\n  class type queuing c-out-8q-q3\n    random-detect minimum-threshold "
        "3000 kbytes maximum-threshold 4000 kbytes ecn\npolicy-map type network-qos N\n  class type network-qos c-8q-nq3\n"
        "    pause pfc-cos 3\n"
    )  # WRED max 4,000 KB above the default xOFF 3,200 KB
    assert run_app(app, ["fabric", "config", "--import", str(bad)]) == 2
    assert "fabric.qos.pfc.xoff_kb" in capsys.readouterr().err


def test_dual_port_nics_give_both_planes_the_rail_gateways():
    """Figure 13-5/13-7: each NIC's two ports on two switches; both hold the rail's gateway, and say so."""
    cluster = ClusterSpec(servers=4, gpus_per_server=8, nic_ports=2)
    fab = FabricSpec(rails_per_switch=8, spines=2)
    plans = {sw.id: sw for sw in switch_plans(build(cluster, fab), fab)}
    a, b = plans["leaf0-A"], plans["leaf0-B"]
    assert a.svis == b.svis and a.svis and a.loopback != b.loopback
    assert "anycast / MLAG gateway pair" in nxos(a, fab.qos, fab)
    assert not plans["spine0"].notes


def test_sonic_dynamic_threshold_is_log2_alpha():
    fab = FABRIC.model_copy(update={"qos": QosSpec.model_validate({"buffer": {"dynamic_threshold_alpha": 0.25}})})
    sw = switch_plans(build(CLUSTER, fab), fab)[0]
    assert sonic(sw, fab.qos, fab)["BUFFER_PROFILE"]["egress_lossy_profile"]["dynamic_th"] == "-2"
    assert "egress_lossy_profile" not in sonic(sw, FABRIC.qos, FABRIC)["BUFFER_PROFILE"]
