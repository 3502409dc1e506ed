"""The book's partial-mesh fix (Deep Learning for Network Engineers, Chapter 13: hash polarization in a Clos): when
every leaf's hash gives the same index for flows to one endpoint, a full mesh sends them all to one spine, a
partial mesh cannot."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.fabric import Router, build
from aifabric.fabric.polarization import same_index_spines
from aifabric.scenario.fabric_spec import ClusterSpec, FabricSpec

CLUSTER = ClusterSpec(servers=4, gpus_per_server=8, nic_speed_gbps=400)


def _picks(cabling: str, index: int, spines: int = 4) -> tuple[object, dict[str, str]]:
    kw = {"spine_cabling": "partial-mesh", "spines_per_leaf": spines // 2} if cabling == "partial-mesh" else {}
    f = build(CLUSTER, FabricSpec(rails_per_switch=8, servers_per_segment=1, spines=spines, **kw))
    return f, same_index_spines(Router(f), "seg0/leaf0", index)


@settings(max_examples=30, deadline=None)
@given(index=st.integers(0, 1000), spines=st.sampled_from([4, 8]))
def test_full_mesh_sends_every_leaf_to_one_spine(index, spines):
    _, full = _picks("full-mesh", index, spines)
    assert len(full) == 3 and len(set(full.values())) == 1


@settings(max_examples=30, deadline=None)
@given(index=st.integers(0, 1000))
def test_the_books_4x4_partial_mesh_never_does(index):
    """4 leaves x 4 spines, 2 spines per leaf: whatever the common index, the three leaves reach three spines."""
    f, partial = _picks("partial-mesh", index)
    assert len(partial) == 3 and len(set(partial.values())) == 3
    for leaf, spine in partial.items():  # every pick is one of the leaf's own spines
        assert any(f.links[li].dst == spine for li in f.out_links[leaf])


def test_polarization_same_index_cli(write_scenario, capsys, tmp_path):
    path = write_scenario(
        {
            "name": "clos",
            "cluster": {"gpu": "H100", "servers": 4, "gpus_per_server": 8},
            "fabric": {"rails_per_switch": 8, "servers_per_segment": 1, "spines": 4},
        }
    )
    assert run_app(app, ["fabric", "polarization", str(path), "--same-index", "0"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "full-mesh (the file's): 3 leaves -> 1 distinct spine" in out
    assert "partial-mesh, 2 spines per leaf: 3 leaves -> 3 distinct spines" in out
    assert run_app(app, ["fabric", "polarization", str(path), "--same-index", "-1"]) == 2
    assert "--same-index" in capsys.readouterr().err
    assert (
        run_app(app, ["fabric", "polarization", str(path), "--same-index", "0", "--out", str(tmp_path / "x.json")]) == 2
    )
