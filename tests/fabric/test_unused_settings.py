"""Settings a run would not use are said, not ignored in silence: `fabric.flowlet_gap_us` without flowlets or on the
analytic engine (no contention; the flow engine switches flowlets at the gap), the switch profile's packet-level
fields on the flow engine (validate and simulate print a note on stderr; the run goes on, exit 0)."""

from __future__ import annotations

import pytest

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.scenario import load_scenario
from aifabric.scenario.checks_qos import unused_settings


def _notes(data: dict, engine: str | None = None, lb: str | None = None) -> list[str]:
    s = load_scenario(data)
    return unused_settings(s, engine or s.engine, lb)


def test_a_flowlet_gap_without_flowlets_is_said(ch14_data):
    ch14_data["fabric"]["flowlet_gap_us"] = 20  # load_balancing: ecmp, DLB off
    for engine in ("flow", "packet"):
        (note,) = _notes(ch14_data, engine)
        assert note.startswith("fabric.flowlet_gap_us is not used (load_balancing: ecmp")
    assert _notes(ch14_data, "packet", lb="flowlet") == []  # `aifabric packet FILE --lb flowlet` uses it
    ch14_data["fabric"]["qos"] = {"dlb": {"mode": "flowlet", "flowlet_aging_us": 30}}  # DLB's own aging wins
    (note,) = _notes(ch14_data, "packet")
    assert "flowlet_aging_us 30" in note
    ch14_data["fabric"]["qos"] = {"dlb": {"mode": "flowlet"}}  # DLB's aging is the gap
    assert _notes(ch14_data, "packet") == []


def test_a_flowlet_gap_is_said_on_the_analytic_engine_alone(ch14_data):
    ch14_data["fabric"].update(load_balancing="flowlet", flowlet_gap_us=20)
    # the packet engine's switches and the flow engine's flowlets (engines/flowlet.py) both run the gap
    assert _notes(ch14_data, "packet") == _notes(ch14_data, "hybrid") == _notes(ch14_data, "flow") == []
    (note,) = _notes(ch14_data, "analytic")
    assert note.startswith("fabric.flowlet_gap_us acts on the flow and packet engines") and "analytic engine" in note
    ch14_data["fabric"].update(load_balancing="ecmp", qos={"dlb": {"mode": "flowlet"}})  # the gap as DLB's aging
    assert _notes(ch14_data, "flow") == []
    del ch14_data["fabric"]["flowlet_gap_us"]  # the default, not given: nothing to say
    assert _notes(ch14_data, "analytic") == []


@pytest.mark.parametrize(
    "qos, said",
    [
        ({"roce_mtu_bytes": 1024, "dlb": {"mode": "flowlet"}}, None),  # both act on the flow engine
        ({"roce_mtu_bytes": 1024, "wred": {"min_kb": 200}}, "wred acts"),
        ({"pfc": {"xoff_kb": 3100}, "dcqcn": {"g": 0.5}}, "dcqcn, pfc act"),
    ],
)
def test_the_switch_profile_on_the_flow_engine(ch14_data, qos, said):
    ch14_data["fabric"]["qos"] = qos
    notes = _notes(ch14_data, "flow")
    assert (notes == []) if said is None else (len(notes) == 1 and said in notes[0])
    assert _notes(ch14_data, "packet") == []


def test_validate_and_simulate_print_the_notes(ch14_data, write_scenario, tmp_path, capsys):
    ch14_data["workload"]["model"]["layer_widths"] = [256, 512, 256]
    ch14_data["fabric"]["flowlet_gap_us"] = 20
    path = write_scenario(ch14_data)
    assert run_app(app, ["validate", str(path)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "note: fabric.flowlet_gap_us is not used" in err
    assert run_app(app, ["simulate", str(path), "--out", str(tmp_path / "o")]) == 0
    assert "note: fabric.flowlet_gap_us is not used" in " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize(
    "fabric, said",
    [
        ({"load_balancing": "spray"}, "fabric.load_balancing: spray: not used"),
        ({"qos": {"dlb": {"mode": "flowlet"}}}, "fabric.qos.dlb.mode: flowlet: not used"),
        ({"flowlet_gap_us": 20}, "fabric.flowlet_gap_us: not used"),
        ({}, None),
    ],
)
def test_load_balancing_without_spines_is_said(ch14_data, fabric, said):
    ch14_data["fabric"]["topology"] = "rail-only"
    del ch14_data["fabric"]["spines"]
    ch14_data["fabric"].update(fabric)
    notes = _notes(ch14_data, "packet")
    assert notes == [] if said is None else (len(notes) == 1 and notes[0].startswith(said) and "rail-only" in notes[0])
