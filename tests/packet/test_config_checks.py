"""Every check of the packet engine's configuration (packet/config.py `validate`): each bad value is an InputError
naming its field, and one bad configuration lists all its problems at once."""

from __future__ import annotations

from dataclasses import replace

import pytest

from aifabric.errors import InputError
from aifabric.packet.config import DcqcnConfig, LbConfig, NicConfig, PacketConfig, SwitchConfig, validate
from aifabric.packet.network import Network
from aifabric.packet.topo import fat_tree

BASE = PacketConfig()

# (section, field, bad value, the problem's path, words of its message)
BAD = [
    ("switch", "dynamic_threshold_alpha", 0.0, "switch.dynamic_threshold_alpha", "(0, 64]"),
    ("switch", "dynamic_threshold_alpha", 65.0, "switch.dynamic_threshold_alpha", "(0, 64]"),
    ("switch", "wred_weight", 16, "switch.wred_weight", "0..15"),
    ("switch", "wred_weight", -1, "switch.wred_weight", "0..15"),
    ("switch", "wred_pmax", 1.5, "switch.wred_pmax", "probability"),
    ("switch", "pfc_quanta", 0x10000, "switch.pfc_quanta", "0..65535"),
    ("switch", "bandwidth_remaining_percent", (50, 50), "switch.bandwidth_remaining_percent", "8 percentages"),
    ("switch", "bandwidth_remaining_percent", (60, 0, 0, 50, 0, 0, 0, 0), "switch.bandwidth_remaining_percent", "100"),
    ("switch", "strict_priority_queues", (7, 8), "switch.strict_priority_queues[1]", "queue 8 is not 0..7"),
    ("switch", "ecn_queues", (-1,), "switch.ecn_queues[0]", "queue -1 is not 0..7"),
    ("switch", "pfc_priorities", (3, 9), "switch.pfc_priorities[1]", "queue 9"),
    ("switch", "dscp_to_queue", ((24, 3), (48, 8)), "switch.dscp_to_queue[1][1]", "queue 8"),
    ("switch", "default_queue", 8, "switch.default_queue", "queue 8"),
    ("dcqcn", "g", 0.0, "dcqcn.g", "(0, 1]"),
    ("dcqcn", "g", 1.5, "dcqcn.g", "(0, 1]"),
    ("dcqcn", "alpha_update_interval_s", 0.0, "dcqcn.alpha_update_interval_s", "positive"),
    ("dcqcn", "rate_increase_timer_s", -1e-6, "dcqcn.rate_increase_timer_s", "positive"),
    ("dcqcn", "cnp_interval_s", 0.0, "dcqcn.cnp_interval_s", "positive"),
    ("nic", "mtu_bytes", 128, "nic.mtu_bytes", "256..9000"),
    ("nic", "mtu_bytes", 9216, "nic.mtu_bytes", "256..9000"),
    ("nic", "transport", "tcp", "nic.transport", "rc, uc, ud, uet"),
    ("nic", "ack_every_packets", 0, "nic.ack_every_packets", "at least 1"),
    ("nic", "pkey", 0, "nic.pkey", "P_Key"),
    ("nic", "pkey", 0x8000, "nic.pkey", "non-zero partition"),
    ("nic", "pkey", 0x1FFFF, "nic.pkey", "16-bit"),
    ("nic", "retry_cnt", 8, "nic.retry_cnt", "3 bits"),
    ("nic", "cm_processing_s", -1e-6, "nic.cm_processing_s", ">= 0"),
    ("nic", "cm_response_timeout", 32, "nic.cm_response_timeout", "5-bit"),
    ("nic", "max_cm_retries", 16, "nic.max_cm_retries", "4 bits"),
    ("lb", "mode", "random", "lb.mode", "ecmp, flowlet, spray, adaptive"),
    (None, "trace_max_packets", -1, "trace_max_packets", ">= 0"),
]


def _with(section: str | None, name: str, value) -> PacketConfig:
    if section is None:
        return replace(BASE, **{name: value})
    return replace(BASE, **{section: replace(getattr(BASE, section), **{name: value})})


def test_the_defaults_pass_and_validate_returns_the_configuration_itself():
    cfg = PacketConfig(seed=3)
    assert validate(cfg) is cfg


@pytest.mark.parametrize(("section", "name", "value", "path", "words"), BAD, ids=[f"{b[3]}={b[2]!r}" for b in BAD])
def test_each_bad_value_is_an_input_error_naming_its_field(section, name, value, path, words):
    with pytest.raises(InputError) as e:
        validate(_with(section, name, value))
    assert [p.path for p in e.value.problems] == [path]
    assert words in e.value.problems[0].message


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("dynamic_threshold_alpha", 64.0),
        ("wred_weight", 15),
        ("wred_pmax", 1.0),
        ("pfc_quanta", 0),
        ("bandwidth_remaining_percent", (25, 0, 0, 75, 0, 0, 0, 0)),
    ],
)
def test_the_bounds_themselves_are_accepted(name, value):
    validate(_with("switch", name, value))


def test_every_problem_of_one_configuration_is_listed_at_once():
    cfg = PacketConfig(
        switch=SwitchConfig(pfc_xoff_bytes=2_000_000, wred_weight=16, ecn_queues=(3, 9)),
        dcqcn=DcqcnConfig(g=0.0),
        nic=NicConfig(transport="tcp", retry_cnt=8),
        lb=LbConfig(mode="random"),
        trace_max_packets=-1,
    )
    with pytest.raises(InputError) as e:
        validate(cfg)
    assert sorted(p.path for p in e.value.problems) == sorted(
        [
            "switch.pfc_xoff_bytes",  # the threshold rule, across fields
            "switch.wred_weight",
            "switch.ecn_queues[1]",
            "dcqcn.g",
            "nic.transport",
            "nic.retry_cnt",
            "lb.mode",
            "trace_max_packets",
        ]
    )


def test_the_threshold_rule_per_queue_names_the_queues_own_thresholds():
    """A lossless WRED queue with its own thresholds is held to xON < its WRED min < its max < xOFF."""
    ok = SwitchConfig(ecn_queues=(3,), wred_per_queue=((3, 200_000, 2_000_000, 0.05, None),))
    validate(PacketConfig(switch=ok))
    bad = replace(ok, wred_per_queue=((3, 50_000, 2_000_000, 0.05, None),))  # its min below xON
    with pytest.raises(InputError) as e:
        validate(PacketConfig(switch=bad))
    assert [p.path for p in e.value.problems] == ["switch.wred_per_queue[3].wred_min_bytes"]
    # the rule is for queues both lossless and ECN-marked: without PFC, or without ECN, nothing to order
    validate(PacketConfig(switch=replace(bad, pfc_enabled=False)))
    validate(PacketConfig(switch=SwitchConfig(ecn_enabled=False, pfc_xoff_bytes=1_000)))


def test_a_network_refuses_a_bad_configuration_with_the_input_error():
    with pytest.raises(InputError, match="nic.mtu_bytes"):
        Network(fat_tree(2, 2, 1, 100), _with("nic", "mtu_bytes", 100))
