"""Checks before anything runs (each problem names its field), and `aifabric fabric ...` end to end."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.fabric import Router, build
from aifabric.fabric.design import resolve
from aifabric.fabric.draw import fabric_svg
from aifabric.scenario.checks_fabric import check_fabric_spec
from aifabric.scenario.fabric_spec import ClusterSpec, FabricSpec

POD = {
    "name": "pod",
    "cluster": {"gpu": "H100", "servers": 8, "gpus_per_server": 8, "nic_ports": 2, "nic_speed_gbps": 100},
    "fabric": {
        "topology": "rail-optimized",
        "servers_per_segment": 4,
        "rails_per_switch": 8,
        "spines": 4,
        "link_speed_gbps": 800,
    },
}


def paths_of(problems):
    return {p.path for p in problems}


def test_ports_beyond_radix_name_the_field():
    problems = check_fabric_spec(
        ClusterSpec(servers=8, gpus_per_server=8), FabricSpec(rails_per_switch=8, spines=4, switch_radix=32)
    )
    (p,) = [p for p in problems if p.path == "fabric.switch_radix"]
    assert "needs 68 ports" in p.message and "has 32" in p.message  # 8 servers x 8 rails + 4 uplinks


def test_spine_and_superspine_radix():
    problems = check_fabric_spec(
        ClusterSpec(servers=64, gpus_per_server=8),
        FabricSpec(
            topology="multi-pod",
            pods=2,
            servers_per_segment=8,
            spines=8,
            superspines=4,
            spine_radix=16,
            superspine_radix=8,
        ),
    )
    assert {"fabric.spine_radix", "fabric.superspine_radix"} <= paths_of(problems)


def test_gpu_counts_that_do_not_fill():
    assert "fabric.servers_per_segment" in paths_of(
        check_fabric_spec(ClusterSpec(servers=10, gpus_per_server=8), FabricSpec(servers_per_segment=4))
    )
    assert "fabric.pods" in paths_of(
        check_fabric_spec(
            ClusterSpec(servers=9, gpus_per_server=8), FabricSpec(topology="multi-pod", pods=2, superspines=2)
        )
    )
    assert "cluster.nics_per_server" in paths_of(
        check_fabric_spec(
            ClusterSpec(servers=2, gpus_per_server=8, nic_layout="shared", nics_per_server=3), FabricSpec()
        )
    )
    assert "cluster.gpus_per_server" in paths_of(
        check_fabric_spec(ClusterSpec(servers=2, gpus_per_server=8, scale_up="nvl72"), FabricSpec())
    )
    assert "fabric.rails_per_switch" in paths_of(
        check_fabric_spec(ClusterSpec(servers=2, gpus_per_server=8), FabricSpec(rails_per_switch=3))
    )


def test_speeds_that_do_not_match():
    assert "fabric.link_speed_gbps" in paths_of(
        check_fabric_spec(
            ClusterSpec(servers=2, gpus_per_server=8, nic_speed_gbps=400), FabricSpec(link_speed_gbps=100)
        )
    )
    assert "cluster.nic_speed_gbps" in paths_of(
        check_fabric_spec(ClusterSpec(servers=2, gpus_per_server=8, nic_speed_gbps=300), FabricSpec())
    )
    custom = {
        "switches": [{"id": "sw"}],
        "links": [{"a": "s0/nic0", "b": "sw", "speed_gbps": 200}, {"a": "s1/nic0", "b": "sw"}],
    }
    problems = check_fabric_spec(
        ClusterSpec(servers=2, gpus_per_server=1, nic_speed_gbps=400), FabricSpec(topology="custom", custom=custom)
    )
    assert paths_of(problems) == {"fabric.custom.links[0].speed_gbps"}


def test_custom_topology_problems():
    custom = {
        "switches": [{"id": "sw", "radix": 1}],
        "links": [{"a": "s0/nic0", "b": "sw"}, {"a": "s1/nic0", "b": "swx"}],
    }
    problems = check_fabric_spec(
        ClusterSpec(servers=2, gpus_per_server=1), FabricSpec(topology="custom", custom=custom)
    )
    assert "fabric.custom.links[1].b" in paths_of(problems)
    custom["links"][1]["b"] = "sw"
    problems = check_fabric_spec(
        ClusterSpec(servers=2, gpus_per_server=1), FabricSpec(topology="custom", custom=custom)
    )
    assert paths_of(problems) == {"fabric.custom.switches[0].radix"}


def test_validate_reports_fabric_problems_with_exit_2(ch14_data, write_scenario, capsys):
    ch14_data["fabric"].update(rails_per_switch=3)
    code = run_app(app, ["validate", str(write_scenario(ch14_data))])
    assert code == 2
    assert "fabric.rails_per_switch" in capsys.readouterr().err


def test_plan_command_writes_its_files(tmp_path, capsys):
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(POD))
    out = tmp_path / "plan"
    assert run_app(app, ["fabric", "plan", str(path), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "NON-BLOCKING" in text and "3.2 Tb/s" in text
    assert {p.name for p in out.iterdir()} == {"plan.json", "bom.csv", "cabling.csv", "addressing.csv"}
    cabling = (out / "cabling.csv").read_text().splitlines()
    assert len(cabling) == 1 + 128 + 16  # header, host cables, rail-spine cables
    assert cabling[1].startswith("1,host,s0/nic0,port1,seg0/leaf0-A,Ethernet1/")


def test_plan_command_bad_input_exit_2(tmp_path, capsys):
    data = yaml.safe_load(yaml.safe_dump(POD))
    data["fabric"]["switch_radix"] = 16
    data["fabric"]["spinez"] = 1
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    assert run_app(app, ["fabric", "plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert "fabric.spinez" in err and "Traceback" not in err


def test_polarization_command(tmp_path, capsys):
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(POD))
    out = tmp_path / "pol.json"
    assert (
        run_app(app, ["fabric", "polarization", str(path), "--pattern", "incast", "--trials", "5", "--out", str(out)])
        == 0
    )
    text = capsys.readouterr().out
    assert "ideal spread" in text and "per-switch hash seeds" in text
    import json

    data = json.loads(out.read_text())
    assert [v["trials"] for v in data["variants"]] == [5, 5]
    assert data["variants"][0]["ideal"]["max_gbps"] <= data["variants"][0]["ecmp"]["max_gbps"]
    assert run_app(app, ["fabric", "polarization", str(path), "--pattern", "nope"]) == 2


def test_draw_command_and_collapsed_svg(tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(POD))
    out = tmp_path / "topo.svg"
    assert run_app(app, ["fabric", "draw", str(path), "--out", str(out)]) == 0
    root = ET.fromstring(out.read_text())
    texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert "Spine-4" in texts and "Rails 1-8 A" in texts and "800G" in texts
    big = resolve(
        ClusterSpec(servers=4096, gpus_per_server=8),
        FabricSpec(
            topology="multi-pod",
            pods=32,
            servers_per_segment=32,
            spines=32,
            superspine_planes=32,
            links_per_superspine=2,
        ),
    )
    svg = fabric_svg(big)
    ET.fromstring(svg)
    assert "× 29 servers" in svg and "× 30 more pods" in svg and len(svg) < 200_000


def test_rail_map_command(capsys):
    assert run_app(app, ["fabric", "rail-map", "--ports", "48", "--hosts", "4", "--rails", "8"]) == 0
    assert "25, 28, 31, 34" in capsys.readouterr().out


def test_custom_islands_that_cannot_reach_each_other():
    custom = {"switches": [{"id": "a"}, {"id": "b"}], "links": [{"a": "s0/nic0", "b": "a"}, {"a": "s1/nic0", "b": "b"}]}
    problems = check_fabric_spec(
        ClusterSpec(servers=2, gpus_per_server=1), FabricSpec(topology="custom", custom=custom)
    )
    assert paths_of(problems) == {"fabric.custom.links"}
    # two rails, each island reaching every server: rail-only by hand, PXN joins them
    custom = {
        "switches": [{"id": "a"}, {"id": "b"}],
        "links": [{"a": f"s{s}/nic{n}", "b": "ab"[n]} for s in range(2) for n in range(2)],
    }
    cluster = ClusterSpec(servers=2, gpus_per_server=2)
    assert check_fabric_spec(cluster, FabricSpec(topology="custom", custom=custom)) == []
    f = build(cluster, FabricSpec(topology="custom", custom=custom))
    assert Router(f).route(0, 3).relay_rank == 1


def test_the_html_report_embeds_the_topology():
    from aifabric.report.html import topology_svg
    from aifabric.scenario import ch14_scenario
    from aifabric.simulate import build_fabric

    class _Run:  # topology_svg reads only run.fabric
        fabric = build_fabric(ch14_scenario())[0]

    svg = topology_svg(_Run())
    assert svg.startswith("<svg") and "Spine-2" in svg and "Rail-4" in svg


@settings(max_examples=60, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "topology": st.sampled_from(["single-switch", "rail-only", "rail-optimized", "multi-pod"]),
            "servers": st.sampled_from([2, 4, 6, 8]),
            "gpus": st.sampled_from([2, 4, 8]),
            "ports": st.sampled_from([1, 2]),
            "rps": st.sampled_from([1, 2, 4]),
            "spines": st.integers(1, 6),
            "links": st.integers(1, 3),
            "per_segment": st.sampled_from([None, 1, 2, 4]),
            "radix": st.sampled_from([8, 16, 32, 64]),
            "superspines": st.integers(0, 6),
            "planes": st.sampled_from([1, 2]),
        }
    )
)
def test_what_is_checked_is_what_is_built(p):
    """A design the checks accept builds with no switch beyond its radix; a rejected one names a radix field
    whenever the built graph would exceed a radix."""
    multi = p["topology"] == "multi-pod"
    cluster = ClusterSpec(servers=p["servers"], gpus_per_server=p["gpus"], nic_ports=p["ports"])
    fabric = FabricSpec(
        topology=p["topology"],
        rails_per_switch=p["rps"],
        spines=p["spines"],
        links_per_spine=p["links"],
        servers_per_segment=None if p["topology"] in ("single-switch", "rail-only") else p["per_segment"],
        switch_radix=p["radix"],
        pods=2 if multi else 1,
        superspines=p["superspines"] if multi else 0,
        superspine_planes=p["planes"] if multi else 1,
    )
    problems = check_fabric_spec(cluster, fabric)
    f = build(cluster, fabric)
    over = [n for n, node in f.nodes.items() if f.is_switch(n) and len(f.out_links[n]) > node.radix]
    if not problems:
        assert over == []
    elif over:
        assert any(pr.path.endswith("radix") for pr in problems)


DESIGNS = sorted((Path(__file__).parent / "designs").glob("*.yaml"))


@pytest.mark.parametrize("path", [p for p in DESIGNS if not p.name.startswith("32k")], ids=lambda p: p.stem)
def test_example_designs_plan_and_draw(path, tmp_path, capsys):
    assert run_app(app, ["fabric", "plan", str(path), "--out", str(tmp_path / "plan")]) == 0
    assert run_app(app, ["fabric", "draw", str(path), "--out", str(tmp_path / "t.svg")]) == 0
    ET.fromstring((tmp_path / "t.svg").read_text())
    assert "BLOCKING" in capsys.readouterr().out


def test_the_32k_design_resolves_and_passes_the_checks():
    from aifabric.cli.fabric_cmd import load_hardware

    (path,) = [p for p in DESIGNS if p.name.startswith("32k")]
    hw = load_hardware(path)
    d = resolve(hw.cluster, hw.fabric)
    assert (d.gpus, d.leafs, d.spines, d.superspines) == (32768, 1024, 1024, 512)
    assert d.leaf_host_ports + d.leaf_up_ports == 64 == d.spine_down_ports + d.spine_up_ports
    assert d.superspine_down_ports == 64
