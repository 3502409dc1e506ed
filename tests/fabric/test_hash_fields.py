"""`fabric.ecmp_hash_fields`: the header fields the switches hash. Without the source port, every QP between two
NICs takes one path (the low entropy of Deep Learning for Network Engineers, Chapters 10 and 13)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.fabric import Router, build
from aifabric.fabric.ecmp import HASH_FIELDS, FiveTuple, ecmp_hash
from aifabric.fabric.switch_config import nxos, nxos_load_sharing, sonic, switch_plans
from aifabric.scenario.fabric_spec import ClusterSpec, FabricSpec

CLUSTER = ClusterSpec(servers=4, gpus_per_server=8)


def _paths(fields) -> int:
    kw = {} if fields is None else {"ecmp_hash_fields": fields}
    r = Router(build(CLUSTER, FabricSpec(rails_per_switch=8, servers_per_segment=1, spines=4, **kw)))
    return len({r.route_with_source_port(0, 9, p).links for p in range(0xC000, 0xC080)})


def test_without_ports_one_path_per_nic_pair():
    assert _paths(None) == 4 and _paths(list(HASH_FIELDS)) == 4
    assert _paths(["src_ip", "dst_ip"]) == 1 and _paths(["src_ip", "dst_ip", "protocol", "dst_port"]) == 1
    assert _paths(["src_port"]) == 4


@settings(max_examples=200, deadline=None)
@given(
    src=st.integers(0, 2**32 - 1),
    dst=st.integers(0, 2**32 - 1),
    sport=st.integers(0, 0xFFFF),
    seed=st.integers(0, 2**32 - 1),
)
def test_all_five_fields_is_the_documented_hash(src, dst, sport, seed):
    """Naming every field changes nothing: the same bytes, the same hash as before the option existed."""
    ft = FiveTuple(src, dst, sport)
    assert ecmp_hash(ft, seed, HASH_FIELDS) == ecmp_hash(ft, seed)
    assert ft.key(HASH_FIELDS) == ft.key()
    assert ecmp_hash(ft, seed, ("src_ip", "dst_ip")) == ecmp_hash(
        FiveTuple(src, dst, sport ^ 0x1234), seed, ("src_ip", "dst_ip")
    )


def test_the_configuration_carries_the_fields():
    fab = FabricSpec(rails_per_switch=8, servers_per_segment=1, spines=4, ecmp_hash_fields=["src_ip", "dst_ip"])
    sw = switch_plans(build(CLUSTER, fab), fab)[0]
    assert "ip load-sharing address source-destination\n" in nxos(sw, fab.qos, fab)
    assert sonic(sw, fab.qos, fab)["SWITCH_HASH"]["GLOBAL"]["ecmp_hash"] == ["SRC_IP", "DST_IP"]
    assert nxos_load_sharing(HASH_FIELDS) == "ip load-sharing address source-destination port source-destination"


def test_a_field_named_twice_is_refused():
    with pytest.raises(ValueError, match="named twice"):
        FabricSpec(ecmp_hash_fields=["src_ip", "src_ip"])
