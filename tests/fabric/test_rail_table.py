"""`fabric plan`'s rail -> interface table is cabling.csv's (issue 17: it printed the Figure 13-6 interleave for
rail-major layouts: Rail-1 = 1, 3, 5, 7 against cabling.csv's 1-4)."""

from __future__ import annotations

import csv
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.fabric import build
from aifabric.fabric.cabling import cabling_rows, layout_used, rail_interfaces
from aifabric.scenario.fabric_spec import ClusterSpec, FabricSpec


def _from_cabling(f, layout: str) -> dict[int, list[int]]:
    """Rail slot -> interfaces on the first rail switch, read from the cabling rows."""
    d = f.design
    first = None
    out: dict[int, set[int]] = {}
    for row in cabling_rows(f, layout):
        if row[1] != "host":
            continue
        first = first or row[4]
        if row[4] != first:
            continue
        port_k = int(row[3].removeprefix("port")) - 1
        rail = (int(row[8]) - 1) % d.rails_per_switch
        out.setdefault(rail * d.ports_per_nic_per_plane + (port_k // d.planes if d.planes > 1 else port_k), set()).add(
            int(row[5].split("/")[1])
        )
    return {k: sorted(v) for k, v in sorted(out.items())}


@settings(max_examples=40, deadline=None)
@given(
    hosts=st.integers(1, 6),
    rails_per_switch=st.sampled_from([1, 2, 4, 8]),
    layout=st.sampled_from(["rail-major", "host-major", "interleaved"]),
    radix=st.sampled_from([32, 48, 64]),
)
def test_rail_table_is_the_cabling_plans(hosts, rails_per_switch, layout, radix):
    cluster = ClusterSpec(servers=hosts, gpus_per_server=8, nic_speed_gbps=400)
    fab = FabricSpec(
        rails_per_switch=rails_per_switch, servers_per_segment=hosts, spines=2, switch_radix=radix, port_layout=layout
    )
    f = build(cluster, fab)
    assert rail_interfaces(f.design, layout) == _from_cabling(f, layout)


def test_rail_major_table_by_hand():
    f = build(
        ClusterSpec(servers=4, gpus_per_server=8, nic_speed_gbps=400),
        FabricSpec(rails_per_switch=2, servers_per_segment=4, spines=4, port_layout="rail-major"),
    )
    assert rail_interfaces(f.design, "rail-major") == {0: [1, 2, 3, 4], 1: [5, 6, 7, 8]}
    assert layout_used(f.design, "rail-major") == "rail-major"


def test_fabric_plan_prints_the_table_cabling_csv_has(write_scenario, tmp_path, capsys):
    from aifabric.cli import run_app
    from aifabric.cli.app import app

    path = write_scenario(
        {
            "name": "rm",
            "cluster": {"gpu": "H100", "servers": 4, "gpus_per_server": 8},
            "fabric": {"rails_per_switch": 2, "servers_per_segment": 4, "spines": 4, "port_layout": "rail-major"},
        }
    )
    assert run_app(app, ["fabric", "plan", str(path), "--out", str(tmp_path / "plan")]) == 0
    out = capsys.readouterr().out
    printed = {
        int(m[1]): [int(x) for x in m[2].split(",")] for m in re.finditer(r"Rail-(\d+)\s*\S\s*(\d[\d, ]*\d)\s*\S", out)
    }
    rows = list(csv.DictReader((tmp_path / "plan" / "cabling.csv").open()))
    csv_rails: dict[int, list[int]] = {}
    for r in rows:
        if r["kind"] == "host" and r["b_device"] == rows[0]["b_device"]:
            csv_rails.setdefault((int(r["rail"]) - 1) % 2 + 1, []).append(int(r["b_port"].split("/")[1]))
    assert printed == {k: sorted(v) for k, v in csv_rails.items()} == {1: [1, 2, 3, 4], 2: [5, 6, 7, 8]}
    assert "port_layout: rail-major" in out
