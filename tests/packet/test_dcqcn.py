"""DCQCN reaction point (spec §11.2) and a two-flow fairness check on the packet engine."""

from __future__ import annotations

import pytest

from aifabric.packet.config import PacketConfig
from aifabric.packet.dcqcn import RpState, decay_alpha, increase, on_cnp
from aifabric.packet.network import Network
from aifabric.packet.topo import leaf_spine, link_between

G = 1 / 256
GBPS = 1e9 / 8  # bytes per second in one Gb/s: DCQCN works in bytes per second, its papers in Gb/s
LINE = 200 * GBPS


def test_self_check_one_cnp_halves_and_five_fast_recovery_steps_give_196_875():
    """Spec §11.2 self-check (derived from Zhu et al., not the book): 200 Gb/s, alpha 1, one CNP ->
    100 Gb/s, alpha (1-g)*1 + g = 1; five fast-recovery steps -> 200 - 100/2^5 = 196.875 Gb/s."""
    s = RpState(LINE, LINE, 1.0)
    on_cnp(s, G, 0.1 * GBPS)
    assert s.rc_bytes_per_s == pytest.approx(100 * GBPS)
    assert s.rt_bytes_per_s == pytest.approx(200 * GBPS)
    assert s.alpha == pytest.approx(1.0)
    phases = []
    for _ in range(5):
        s.i_t += 1
        phases.append(increase(s, 5, 0.005 * GBPS, 0.05 * GBPS, LINE))
    assert phases == ["fast-recovery"] * 5
    assert s.rc_bytes_per_s == pytest.approx(196.875 * GBPS)


def test_after_fast_recovery_additive_then_hyper_increase_raise_the_target():
    s = RpState(100 * GBPS, 150 * GBPS, 0.5, i_t=5)
    s.i_t = 6
    assert increase(s, 5, 0.005 * GBPS, 0.05 * GBPS, LINE) == "additive-increase"
    assert s.rt_bytes_per_s == pytest.approx(150 * GBPS + 0.005 * GBPS)
    s.i_t, s.i_b = 7, 7
    assert increase(s, 5, 0.005 * GBPS, 0.05 * GBPS, LINE) == "hyper-increase"
    assert s.rt_bytes_per_s == pytest.approx(150 * GBPS + 0.005 * GBPS + 2 * 0.05 * GBPS)


def test_alpha_decays_without_cnps_and_rates_never_pass_line_rate():
    s = RpState(LINE, LINE, 1.0)
    decay_alpha(s, 1 / 16, periods=16)
    assert s.alpha == pytest.approx((15 / 16) ** 16)
    s.i_t = 20
    for _ in range(50):
        increase(s, 5, 5 * GBPS, 50 * GBPS, LINE)
    assert s.rc_bytes_per_s <= LINE and s.rt_bytes_per_s <= LINE


def test_target_clamping_follows_the_rate_only_after_an_increase():
    """ns-3 ClampTargetRate off: a second CNP before any increase keeps RT; the paper (clamp on) sets it."""
    s = RpState(LINE, LINE, 1.0)
    on_cnp(s, G, 0.1 * GBPS, clamp_target_rate=False)
    on_cnp(s, G, 0.1 * GBPS, clamp_target_rate=False)
    assert s.rt_bytes_per_s == pytest.approx(LINE) and s.rc_bytes_per_s == pytest.approx(50 * GBPS)
    p = RpState(LINE, LINE, 1.0)
    on_cnp(p, G, 0.1 * GBPS)
    on_cnp(p, G, 0.1 * GBPS)
    assert p.rt_bytes_per_s == pytest.approx(100 * GBPS)


def test_two_dcqcn_flows_on_one_bottleneck_converge_to_a_fair_share():
    """A starts alone at line rate; B joins 300 us later. Between 3 and 5 ms each gets about half."""
    f = leaf_spine([["a", "b", "c"]], ["sw"], [], 100)
    net = Network(f, PacketConfig())
    a = net.add_transfer((link_between(f, "a", "sw"), link_between(f, "sw", "c")), 100e6, name="A")
    flows = {}
    net.at(
        300e-6,
        lambda _: flows.setdefault(
            "b", net.add_transfer((link_between(f, "b", "sw"), link_between(f, "sw", "c")), 100e6, name="B")
        ),
    )
    snap = {}
    net.at(3e-3, lambda _: snap.update(a=a.n_got, b=flows["b"].n_got))
    net.sim.run(5e-3)
    da, db = a.n_got - snap["a"], flows["b"].n_got - snap["b"]
    assert a.cnp_rx > 0 and flows["b"].cnp_rx > 0  # DCQCN, not luck, shares the link
    assert da / (da + db) == pytest.approx(0.5, abs=0.1)
