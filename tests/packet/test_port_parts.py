"""The parts a port is made of, each on its own: the per-class queues and WRED's average, the egress scheduler,
the PFC state, the load estimator, and the monitors attached from outside (depth sampling, link load, narration)."""

from __future__ import annotations

from math import exp, inf

import pytest

from aifabric.packet import port_monitors
from aifabric.packet.class_queues import ClassQueues
from aifabric.packet.config import PacketConfig
from aifabric.packet.egress_scheduler import EgressScheduler
from aifabric.packet.load_estimator import LoadEstimator
from aifabric.packet.network import Network
from aifabric.packet.pfc_state import EXTENDED, IGNORED, PAUSED, RESUMED, WATCHDOG, PfcState
from aifabric.packet.port_monitors import DepthSampler, LinkLoad, PortNarrator
from aifabric.packet.sim import DATA, Pkt
from aifabric.packet.topo import fat_tree, link_between


def _pkt(size: int = 1000, prio: int = 3) -> Pkt:
    return Pkt(DATA, None, 0, size, size, 26, prio, 1, 0, None)


# -- the per-class queues ---------------------------------------------------------------------------
def test_queues_count_bytes_per_class_and_in_all():
    qs = ClassQueues()
    assert qs.push(_pkt(1000), 3) == 1000
    assert qs.push(_pkt(500), 3) == 1500
    assert qs.push(_pkt(200, prio=0), 0) == 200
    assert qs.backlog == 1700 and qs.depth_bytes[3] == 1500
    first = qs.pop(3)
    assert first.size == 1000 and qs.depth_bytes[3] == 500 and qs.backlog == 700


def test_wred_average_moves_by_the_gain_at_each_arrival():
    qs = ClassQueues()
    gain = 2.0**-2
    assert qs.average(3, gain) == 0.0  # an empty queue
    qs.push(_pkt(4000), 3)
    assert qs.average(3, gain) == 1000.0  # 0 + (4000 - 0) / 4
    assert qs.average(3, gain) == 1750.0  # 1000 + (4000 - 1000) / 4


# -- the egress scheduler ---------------------------------------------------------------------------
def _fifos(counts: dict[int, int], size: int = 1000):
    qs = ClassQueues()
    for q, n in counts.items():
        for _ in range(n):
            qs.push(_pkt(size, q), q)
    return qs


def test_strict_priority_first_and_paused_queues_skipped():
    sched = EgressScheduler((7,), (50, 0, 0, 50, 0, 0, 0, 0), 1000)
    qs = _fifos({0: 1, 3: 1, 7: 1})
    none_paused = [0.0] * 8
    assert sched.pick(qs.fifos, none_paused, 0.0) == 7
    paused7 = [0.0] * 7 + [1.0]
    assert sched.pick(qs.fifos, paused7, 0.0) in (0, 3)
    all_paused = [1.0] * 8
    assert sched.pick(qs.fifos, all_paused, 0.0) == -1
    assert sched.pick(ClassQueues().fifos, none_paused, 0.0) == -1


def test_dwrr_shares_by_bandwidth_remaining_and_zero_percent_waits():
    sched = EgressScheduler((7,), (25, 0, 0, 75, 0, 0, 0, 0), 1000)
    qs = _fifos({0: 300, 3: 300, 1: 5})
    sent = {0: 0, 1: 0, 3: 0}
    for _ in range(200):
        q = sched.pick(qs.fifos, [0.0] * 8, 0.0)
        qs.pop(q)
        sent[q] += 1
    assert sent[1] == 0  # 0 %: only when no weighted queue has traffic
    assert sent[3] / sent[0] == pytest.approx(3, rel=0.1)
    only_zero = _fifos({1: 1})
    assert sched.pick(only_zero.fifos, [0.0] * 8, 0.0) == 1


# -- PFC state --------------------------------------------------------------------------------------
def test_pause_extend_resume_and_the_time_paused():
    pfc = PfcState()
    assert pfc.receive(3, 1000, 1.0, 2.0, None) == PAUSED
    assert pfc.paused_until[3] == 3.0
    assert pfc.receive(3, 1000, 2.0, 2.0, None) == EXTENDED
    assert pfc.paused_until[3] == 4.0
    assert pfc.receive(3, 0, 2.5, 0.0, None) == RESUMED
    assert pfc.paused_until[3] == 2.5 and pfc.paused_total_s[3] == 1.5
    assert pfc.receive(3, 1000, 10.0, 1.0, None) == PAUSED  # a new pause
    pfc.finish(20.0)  # it expired at 11: counted to its end
    assert pfc.paused_total_s[3] == 2.5 and pfc.frames_rx[3] == 4
    assert pfc.paused_until[0] == 0.0 and pfc.frames_rx[0] == 0


def test_watchdog_fires_past_its_interval_then_pauses_are_ignored_for_one():
    pfc = PfcState()
    assert pfc.receive(3, 1000, 0.0, 1.0, 5.0) == PAUSED
    for t in (0.5 * i for i in range(1, 11)):  # refreshed before it expires, up to 5.0
        assert pfc.receive(3, 1000, t, 1.0, 5.0) == EXTENDED
    assert pfc.receive(3, 1000, 5.5, 1.0, 5.0) == WATCHDOG
    pfc.disable(3, 5.5, 5.0)
    assert pfc.paused_until[3] == 5.5 and pfc.paused_total_s[3] == 5.5
    assert pfc.receive(3, 1000, 6.0, 1.0, 5.0) == IGNORED
    assert pfc.receive(3, 1000, 11.0, 1.0, 5.0) == PAUSED


# -- load estimator ---------------------------------------------------------------------------------
def test_load_is_backlog_plus_sent_bytes_decaying():
    dre = LoadEstimator(tau_s=1e-6)
    assert dre.load(0.0, 500) == 500
    dre.sent(0.0, 0, 1000)
    assert dre.load(0.0, 0) == 1000
    assert dre.load(1e-6, 200) == pytest.approx(200 + 1000 * exp(-1))


# -- monitors ---------------------------------------------------------------------------------------
def test_depth_sampler_keeps_the_maximum_and_samples_at_its_rate(monkeypatch):
    s = DepthSampler(sample_s=1.0)
    s.rose(3, 1000, 1000, 0.0)
    s.rose(3, 2000, 1000, 0.5)  # within the interval: no sample, the maximum still counts
    s.fell(3, 1000, 1000, 0.7)
    s.fell(3, 0, 1000, 0.8)  # emptied: always sampled
    assert s.max_depth[3] == 2000
    assert s.series[3] == [(0.0, 1000), (0.8, 0)]
    monkeypatch.setattr(port_monitors, "MAX_DEPTH_SAMPLES", 4)
    for i in range(10):
        s.rose(3, i, 1, 10.0 + 4 * i)
    assert len(s.series[3]) <= 4 and s.sample_s > 1.0


def test_link_load_splits_a_frame_over_its_bins_and_merges_past_the_cap(monkeypatch):
    rec = LinkLoad({}, 1.0)
    rec.sent(0.5, 1.5, 100)  # half in bin 0, half in bin 1
    rec.sent(1.5, 1.75, 40)
    assert rec.bins == {0: 50.0, 1: 90.0}
    monkeypatch.setattr(port_monitors, "MAX_BINS", 2)
    rec.sent(2.0, 2.5, 10)
    assert rec.bin_s == 2.0 and sum(rec.bins.values()) == pytest.approx(150)


class _Log:
    def __init__(self):
        self.lines: list[tuple[float, str, str]] = []

    def log(self, t, text, category=""):
        self.lines.append((t, category, text))


def test_narrator_tells_wred_min_crossings_and_pfc_events():
    net = _Log()
    n = PortNarrator(net, "sw->h1", [None, None, None, 1500, None, None, None, None])
    n.rose(3, 1000, 1000, 0.0)  # below min
    n.rose(3, 2000, 1000, 1.0)  # crosses it
    n.rose(0, 5000, 5000, 1.5)  # no WRED on queue 0
    n.fell(3, 1000, 1000, 2.0)
    n.pfc_paused(3, 1000, 200e9, "sw2", 3.0)
    n.pfc_resumed(3, "sw2", 4.0)
    n.watchdog(3, 7, 0.1, 5.0)
    assert [c for _, c, _ in net.lines] == ["ecn", "ecn", "pfc", "pfc", "pfc"]
    assert "rises above WRED min (2 KB)" in net.lines[0][2]
    assert "falls below WRED min" in net.lines[1][2]
    assert "7 queued packets discarded" in net.lines[4][2]


def test_monitors_are_attached_from_outside():
    f = fat_tree(2, 2, 1, 200)
    quiet = Network(f, PacketConfig())
    told = Network(f, PacketConfig(explain=True))
    host, sw = link_between(f, "h0", "leaf0"), link_between(f, "leaf0", "h1")
    assert quiet.ports[host].depth_watchers == () and quiet.ports[host].narrator is None
    assert quiet.ports[sw].sampler is not None and quiet.ports[sw].narrator is None
    assert told.ports[host].narrator is not None and told.ports[host].depth_watchers == ()
    assert told.ports[sw].depth_watchers == (told.ports[sw].sampler, told.ports[sw].narrator)
    port = quiet.ports[host]
    assert port.bins is None and port.max_depth[3] == 0 and not port.depth_series[3]
    port.bins = {}
    assert port.load_record is not None and port.bins == {} and port.bin_s == quiet.link_bin_s
    assert port.wake_t == inf
