"""Switch behaviour: classification, scheduling, WRED/ECN regimes, threshold order, PFC timers, watchdog."""

from __future__ import annotations

import numpy as np
import pytest

from aifabric.errors import InputError
from aifabric.packet.config import PacketConfig, SwitchConfig, validate
from aifabric.packet.headers import ECN_ECT0, pfc_pause_s
from aifabric.packet.network import Network
from aifabric.packet.sim import CNP, DATA, Pkt
from aifabric.packet.switch import DROP, FORWARD, MARK, wred_decision
from aifabric.packet.topo import leaf_spine, link_between

KB = 1000
BOOK = dict(kmin=150 * KB, kmax=3000 * KB, pmax=0.07)


def _one_switch(n_hosts=3, gbps=200, cfg=None):
    f = leaf_spine([[f"h{i}" for i in range(n_hosts)]], ["sw"], [], gbps)
    return f, Network(f, cfg or PacketConfig())


def test_classification_dscp_24_to_queue_3_48_to_queue_7_others_to_0():
    """Spec §12.2 test 3 (Examples 11-1/11-2): qos-group n -> queue n."""
    _, net = _one_switch()
    sw = net.devices[net.node_index["sw"]]
    assert {d: sw.dscp_map.get(d, 0) for d in (24, 48, 0, 10, 46)} == {24: 3, 48: 7, 0: 0, 10: 0, 46: 0}
    assert sw.lossless == {3}
    c = net.cfg.switch
    assert c.bandwidth_remaining_percent[3] == 50 and c.bandwidth_remaining_percent[6] == 0
    assert c.strict_priority_queues == (7,)


@pytest.mark.parametrize(
    "depth_kb, u, expected", [(100, 0.0, FORWARD), (149.9, 0.0, FORWARD), (3001, 0.99, MARK), (5000, 0.99, MARK)]
)
def test_wred_regimes_below_min_and_above_max(depth_kb, u, expected):
    """Spec §12.2 test 4 (Figures 11-1/11-2): < 150 KB unmodified; > 3000 KB every packet marked."""
    assert wred_decision(depth_kb * KB, **BOOK, drop_threshold=None, u=u) == expected


def test_wred_marks_randomly_between_min_and_max_rising_to_pmax():
    rng = np.random.default_rng(0)
    u = rng.random(200_000)
    for depth, p in ((150 * KB + 1, 0.0), (1575 * KB, 0.035), (2999 * KB, 0.07)):
        marked = np.mean([wred_decision(depth, **BOOK, drop_threshold=None, u=x) == MARK for x in u[:20_000]])
        assert marked == pytest.approx(p, abs=0.006)


def test_wred_drops_above_the_drop_threshold():
    assert wred_decision(6001 * KB, **BOOK, drop_threshold=6000 * KB, u=0.5) == DROP
    assert wred_decision(5999 * KB, **BOOK, drop_threshold=6000 * KB, u=0.5) == MARK


def test_threshold_order_xon_wred_min_wred_max_xoff():
    """Spec §12.2 test 5: accept xON < WRED min < WRED max < xOFF, reject otherwise, naming the field."""
    validate(PacketConfig())
    with pytest.raises(InputError) as e:
        validate(PacketConfig(switch=SwitchConfig(pfc_xoff_bytes=2_000_000)))  # xOFF below WRED max
    assert any(p.path == "switch.pfc_xoff_bytes" for p in e.value.problems)
    with pytest.raises(InputError) as e:
        validate(PacketConfig(switch=SwitchConfig(pfc_xon_bytes=200_000)))  # xON above WRED min
    assert any(p.path == "switch.wred_min_bytes" for p in e.value.problems)


def _pkt(net, kind=DATA, dscp=24, prio=3, size=4158):
    return Pkt(kind, None, 0, size, size - 62, dscp, prio, ECN_ECT0, 6, None)


def test_strict_priority_queue_7_overtakes_queued_data():
    f, net = _one_switch()
    port = net.ports[link_between(f, "sw", "h1")]
    sent = []
    port.peer_receive = sent.append
    port.peer = None
    for _ in range(5):
        port.enqueue(_pkt(net), 3)
    port.enqueue(_pkt(net, kind=CNP, dscp=48, prio=7, size=78), 7)
    net.sim.run()
    assert [p.kind for p in sent][:2] == [DATA, CNP]  # the frame on the wire, then the CNP


def test_bandwidth_remaining_weights_share_the_port():
    cfg = PacketConfig(switch=SwitchConfig(bandwidth_remaining_percent=(25, 0, 0, 75, 0, 0, 0, 0)))
    f, net = _one_switch(cfg=cfg)
    port = net.ports[link_between(f, "sw", "h1")]
    port.peer_receive = lambda p: None
    for _ in range(400):
        port.enqueue(_pkt(net, dscp=0, prio=0), 0)
        port.enqueue(_pkt(net), 3)
    sent = {0: 0, 3: 0}
    n = 0
    while n < 200:  # first 200 departures, both queues backlogged
        p = port._dequeue(port.scheduler.pick(port.queues, port.paused_until, net.sim.now))
        sent[p.prio] += 1
        n += 1
    assert sent[3] / sent[0] == pytest.approx(3, rel=0.1)


def test_pause_holds_only_its_priority_until_the_timer_expires():
    f, net = _one_switch()
    port = net.ports[link_between(f, "sw", "h1")]
    times = {}
    port.peer_receive = lambda p: times.setdefault(p.prio, net.sim.now)
    port.on_pfc((3, 1000, "test"))
    port.enqueue(_pkt(net), 3)
    port.enqueue(_pkt(net, dscp=0, prio=0), 0)
    net.sim.run()
    pause = pfc_pause_s(1000, 25e9)  # 200 Gb/s: 2.56 us
    assert times[0] < pause  # queue 0 is not paused
    assert times[3] >= pause - 1e-15
    port.finish(net.sim.now)
    assert port.paused_total[3] == pytest.approx(pause)


def test_resume_with_quanta_zero_releases_at_once():
    f, net = _one_switch()
    port = net.ports[link_between(f, "sw", "h1")]
    times = []
    port.peer_receive = lambda p: times.append(net.sim.now)
    port.on_pfc((3, 0xFFFF, "test"))  # 167.77 us at 200 Gb/s
    pkt = _pkt(net)
    port.enqueue(pkt, 3)
    net.sim.at(1e-6, port.on_pfc, (3, 0, "test"))
    net.sim.run()
    assert times[0] == pytest.approx(1e-6 + pkt.size * port.s_per_byte + port.delay)


def test_watchdog_discards_a_queue_paused_too_long():
    cfg = PacketConfig(switch=SwitchConfig(pfc_watchdog_s=50e-6))
    f, net = _one_switch(cfg=cfg)
    port = net.ports[link_between(f, "sw", "h1")]
    port.peer_receive = lambda p: None
    port.is_switch_port = False  # no shared-buffer bookkeeping for these hand-made packets
    for k in range(10):  # a stuck peer refreshing its pause every 20 us
        net.sim.at(k * 20e-6, port.on_pfc, (3, 0xFFFF, "stuck"))
    net.sim.at(1e-6, lambda _: [port.enqueue(_pkt(net), 3) for _ in range(4)])
    net.sim.run(70e-6)
    assert net.stats.watchdog[(port.name, 3)] == 1
    assert net.stats.drops[(port.name, 3, "pfc-watchdog")] == 4
