"""The compiled packet core (packet/fastcore.py) against the Python engine it replays (issue 18, item 2).

Each case runs one network twice, `Network.loop = "python"` (the reference) and `"compiled"` (the compiled core where it
covers the network), and compares the SHA-256 of everything the run reports (tests/packet/test_golden_counters.py's
digest: every flow's FCT, retransmissions, CE marks, CNPs and DCQCN rate history; every port's bytes, packets, queue
maxima and depth series; ECN marks, drops, PFC frames and their times) and the events run. It also checks which core
ran, so a case meant for the compiled core cannot pass by falling back to the reference.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_golden_counters import _digest, _run_dict

from aifabric.compiled import pure_python
from aifabric.packet import fastcore
from aifabric.packet.config import DcqcnConfig, NicConfig, PacketConfig, SwitchConfig
from aifabric.packet.network import Network
from aifabric.packet.scenarios import run_scenario
from aifabric.packet.topo import ecmp_route, fat_tree, five_tuple

pytestmark = pytest.mark.skipif(
    not fastcore.AVAILABLE or pure_python(), reason="numba is not installed, or AIFABRIC_PURE_PYTHON is set"
)


def _traffic(hosts: int, pairs: list[tuple], cfg: PacketConfig, core: str, seed: int = 1):
    """`pairs` (source, destination, bytes[, DSCP]) as RDMA transfers on bench_packet.py's fat tree, all posted at 0."""
    per_leaf = min(16, hosts)
    f = fat_tree(hosts, per_leaf, max(1, min(8, hosts // per_leaf)), 400)
    net = Network(f, cfg.with_(seed=seed), hash_seed=seed)
    net.loop = core
    for i, (s, d, size_bytes, *dscp) in enumerate(pairs):
        qpn, rqpn = 0x100 + i, 0x800 + i
        flow = five_tuple(f, f"h{s}", f"h{d}", qpn, rqpn)
        route = ecmp_route(f, f"h{s}", f"h{d}", flow, hash_seed=seed)
        kw = {"dscp": dscp[0]} if dscp else {}
        net.add_transfer(route, size_bytes, name=f"{i}:h{s}->h{d}", qpn=qpn, sport=flow.src_port, **kw)
    stats = net.run()
    d, events = _run_dict(net, stats)
    return _digest(d), events, net


def _permutation(hosts: int, size_bytes: float, seed: int = 1) -> list[tuple[int, int, float]]:
    rng = np.random.default_rng(seed)
    while True:
        p = rng.permutation(hosts)
        if not np.any(p == np.arange(hosts)):
            return [(s, int(d), size_bytes) for s, d in enumerate(p)]


def _both(hosts, pairs, cfg, seed=1):
    ref = _traffic(hosts, pairs, cfg, "python", seed)
    fast = _traffic(hosts, pairs, cfg, "compiled", seed)
    assert ref[2].loop_used == "python"
    return ref, fast


INCAST = [(s, 0, 3e6) for s in (1, 2, 3, 4, 17, 18, 19, 20)]  # 8 senders, two leaves, into one 400 Gb/s port: ECN,
# CNPs, DCQCN, PFC pauses from the leaf to the spines and the NICs
SEVERAL_QPS = [(s, (s + 1 + k) % 16, 0.5e6) for s in range(16) for k in range(4)]  # 4 QPs per NIC port, in turns
# more QPs on a NIC port than the Python scheduler tests in turn (16): it finds them by index past those
MANY_QPS = [(s, (s + 1 + k % 3) % 16, 40e3) for s in range(16) for k in range(24)]
MANY_QPS_INCAST = [(s, 0, 60e3) for s in (1, 2, 17, 18) for _ in range(40)]  # PFC pauses the NICs: QPs wait
# half the incast's QPs in the default class (queue 0, lossy, no WRED): DWRR between queues 0 and 3 at every port
TWO_CLASSES = [(s, 0, 2e6, 0 if i % 2 else 24) for i, s in enumerate((1, 2, 3, 4, 17, 18, 19, 20))]
LOSSY = SwitchConfig(pfc_enabled=False, queue_limit_bytes=200_000)
BIG_QUEUES = SwitchConfig(queue_limit_bytes=60_000_000, buffer_bytes=128 * 1024 * 1024)

CASES = {
    "permutation-32": (32, _permutation(32, 2e6), PacketConfig()),
    "permutation-64-mtu-9000": (64, _permutation(64, 1e6), PacketConfig(nic=NicConfig(mtu_bytes=9000))),
    "permutation-32-mtu-1024": (32, _permutation(32, 0.5e6), PacketConfig(nic=NicConfig(mtu_bytes=1024))),
    "incast-8": (32, INCAST, PacketConfig()),
    "incast-8-no-dcqcn": (32, INCAST, PacketConfig(dcqcn=DcqcnConfig(enabled=False))),
    "incast-8-small-xoff": (
        32,
        INCAST,
        PacketConfig(switch=SwitchConfig(pfc_xon_bytes=60_000, pfc_xoff_bytes=400_000, wred_max_bytes=300_000)),
    ),
    "incast-8-byte-counter": (32, INCAST, PacketConfig(dcqcn=DcqcnConfig(byte_counter_bytes=64 * 1024))),
    "several-qps-per-port": (16, SEVERAL_QPS, PacketConfig()),
    "24-qps-per-port": (16, MANY_QPS, PacketConfig()),
    "40-qps-per-port-incast": (32, MANY_QPS_INCAST, PacketConfig()),
    "40-qps-per-port-incast-small-xoff": (
        32,
        MANY_QPS_INCAST,
        PacketConfig(switch=SwitchConfig(pfc_xon_bytes=60_000, pfc_xoff_bytes=400_000, wred_max_bytes=300_000)),
    ),
    "two-classes-dwrr": (32, TWO_CLASSES, PacketConfig(switch=BIG_QUEUES)),
    # lossy RoCE: drops at the queue limit, NAKs, go-back-N, timeouts
    "lossy-incast": (32, INCAST, PacketConfig(switch=LOSSY)),
    "lossy-incast-no-dcqcn": (32, INCAST, PacketConfig(switch=LOSSY, dcqcn=DcqcnConfig(enabled=False))),
    "lossy-incast-wred-drops": (32, INCAST, PacketConfig(switch=replace(LOSSY, wred_ecn=False))),
    "lossy-incast-buffer-full": (32, INCAST, PacketConfig(switch=replace(LOSSY, buffer_bytes=150_000))),
    "two-classes-dwrr-70-30": (
        32,
        TWO_CLASSES,
        PacketConfig(switch=replace(BIG_QUEUES, bandwidth_remaining_percent=(30, 0, 0, 70, 0, 0, 0, 0))),
    ),
    "several-qps-clamped": (16, SEVERAL_QPS, PacketConfig(dcqcn=DcqcnConfig(clamp_target_rate=True, g=1 / 256))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_compiled_core_equals_the_reference(case):
    hosts, pairs, cfg = CASES[case]
    ref, fast = _both(hosts, pairs, cfg)
    assert fast[2].loop_used == "compiled"
    assert fast[1] == ref[1], f"{case}: {fast[1]} events compiled, {ref[1]} in the reference"
    assert fast[0] == ref[0], f"{case}: the compiled core's results differ from the reference's"


def test_the_cases_exercise_what_the_core_replays():
    """The cases above reach the paths worth comparing: ECN marks, CNPs, PFC pauses and resumes, DCQCN increases by
    the byte counter, several QPs on one port."""
    default, _, net = _traffic(32, INCAST, PacketConfig(), "compiled")
    s = net.stats
    assert sum(s.ecn_marks.values()) > 100 and sum(s.pfc_pause_sent.values()) > 0 and sum(s.pfc_resume_sent.values())
    assert all(f.cnp_rx > 0 for f in net.flows)
    small, _, net = _traffic(32, INCAST, PacketConfig(dcqcn=DcqcnConfig(byte_counter_bytes=64 * 1024)), "compiled")
    assert net.loop_used == "compiled"
    assert small != default  # the byte counter's increases changed the run
    assert max(len(f.rate_log) for f in net.flows) > 2 * max(f.cnp_rx for f in net.flows)
    _, _, net = _traffic(32, TWO_CLASSES, PacketConfig(switch=BIG_QUEUES), "compiled")
    assert net.loop_used == "compiled"
    to_h0 = next(p for p in net.ports if p.is_switch_port and p.peer.id == "h0")
    assert to_h0.max_depth[0] > 100_000 and to_h0.max_depth[3] > 100_000  # both classes queued: DWRR between them
    _, _, net = _traffic(32, MANY_QPS_INCAST, CASES["40-qps-per-port-incast-small-xoff"][2], "compiled")
    senders = [p for p in net.ports if not p.is_switch_port and p.owner.id in ("h1", "h2", "h17", "h18")]
    assert net.loop_used == "compiled" and all(sum(p.pfc_rx) > 0 for p in senders)  # 40 QPs wait on a paused port
    for case, reason in (
        ("lossy-incast", "queue-limit"),
        ("lossy-incast-wred-drops", "wred"),
        ("lossy-incast-buffer-full", "buffer-full"),
    ):
        hosts, pairs, cfg = CASES[case]
        _, _, net = _traffic(hosts, pairs, cfg, "compiled")
        assert net.loop_used == "compiled" and any(r == reason for _, _, r in net.stats.drops)
        assert sum(f.timeouts + f.naks for f in net.flows) > 0  # go-back-N after the drops
    _, _, net = _traffic(16, SEVERAL_QPS, PacketConfig(), "compiled")
    assert not any(src.active for h in net.devices if h.kind == "host" for src in h.sources.values())  # all done
    assert len({f.src.idx for f in net.flows}) == 16 and len(net.flows) == 64


@pytest.mark.parametrize("name", ["incast", "dcqcn", "pfc-cascade", "polarization", "ecmp-uplink", "hol-blocking"])
def test_the_stories_equal_the_reference(name):
    """The book's stories without --explain: each of their runs on both engines (where the compiled core does not
    cover a run, both are the reference; the digests are equal either way)."""
    runs = {}
    for core in ("python", "compiled"):
        Network.default_loop = core
        try:
            r = run_scenario(name, PacketConfig())
        finally:
            Network.default_loop = "auto"  # the class's default
        runs[core] = [(label, _digest(_run_dict(net, stats)[0]), net.loop_used) for label, net, stats in r.runs]
    assert [x[:2] for x in runs["python"]] == [x[:2] for x in runs["compiled"]]
    assert all(used == "python" for _, _, used in runs["python"])


def test_the_incast_story_runs_compiled():
    Network.default_loop = "compiled"
    try:
        r = run_scenario("incast", PacketConfig())
    finally:
        Network.default_loop = "auto"
    assert [net.loop_used for _, net, _ in r.runs] == ["compiled"] * len(r.runs)


def test_what_the_core_does_not_cover_runs_on_the_reference_and_says_why():
    pairs = _permutation(16, 0.2e6)
    for cfg, why in (
        (PacketConfig(explain=True), "--explain"),
        (PacketConfig(nic=NicConfig(transport="uc")), "transport"),
        (PacketConfig(switch=SwitchConfig(wred_weight=4)), "WRED's average"),
    ):
        ref = _traffic(16, pairs, cfg, "python")
        fast = _traffic(16, pairs, cfg, "compiled")
        assert fast[2].loop_used.startswith("python: ") and why in fast[2].loop_used
        assert fast[:2] == ref[:2]


def test_auto_takes_the_compiled_core_for_large_runs_only():
    """`Network.loop = "auto"` (the default) keeps the Python engine for a run of fewer than COMPILED_MIN_HOPS data
    packet hops (over before numba is imported and the core loaded), the compiled core from there."""
    from aifabric.packet.network import COMPILED_MIN_HOPS

    small = _traffic(16, _permutation(16, 0.2e6), PacketConfig(), "auto")[2]
    assert small.loop_used.startswith("python: a small run (about ")
    large = _traffic(128, _permutation(128, 2e6), PacketConfig(), "auto")[2]  # the bench's case
    assert large.loop_used == "compiled"
    for net, over in ((small, False), (large, True)):
        assert (sum(f.n * len(f.path.links) for f in net.flows) >= COMPILED_MIN_HOPS) is over


def test_aifabric_pure_python_keeps_the_reference(monkeypatch):
    monkeypatch.setenv("AIFABRIC_PURE_PYTHON", "1")
    ref = _traffic(16, _permutation(16, 0.2e6), PacketConfig(), "python")
    fast = _traffic(16, _permutation(16, 0.2e6), PacketConfig(), "compiled")
    assert fast[2].loop_used == "python: AIFABRIC_PURE_PYTHON is set"
    assert fast[:2] == ref[:2]


def test_work_started_from_python_runs_on_the_reference_and_says_why():
    """The task-graph engine (engines/packet.py) starts a transfer when its task may start (an event in Python) and the
    next tasks from a transfer's completion callback: the Python engine runs such networks."""
    f = fat_tree(16, 16, 1, 400)
    results = {}
    for how in ("timed start", "callback"):
        for core in ("python", "compiled"):
            net = Network(f, PacketConfig(seed=1), hash_seed=1)
            net.loop = core
            done = []
            for s in range(4):
                flow = five_tuple(f, f"h{s}", f"h{s + 8}", 0x100 + s, 0x800 + s)
                route = ecmp_route(f, f"h{s}", f"h{s + 8}", flow, hash_seed=1)
                kw = {"name": f"h{s}", "qpn": 0x100 + s, "sport": flow.src_port}
                if how == "timed start":
                    net.start_at(1e-6 * s, route, 0.3e6, **kw)
                else:
                    net.add_transfer(route, 0.3e6, on_done=done.append, **kw)
            stats = net.run()
            results[how, core] = (_digest(_run_dict(net, stats)[0]), net.loop_used, done)
    assert results["timed start", "compiled"][1].startswith("python: events scheduled from Python")
    assert results["callback", "compiled"][1] == "python: a transfer's completion starts other work"
    for how in ("timed start", "callback"):
        assert results[how, "compiled"][0] == results[how, "python"][0]
    assert sorted(fl.name for fl in results["callback", "compiled"][2]) == ["h0", "h1", "h2", "h3"]


def test_a_run_the_core_stops_is_run_again_on_the_reference():
    """The PFC watchdog firing is found only while running: the compiled run stops, the generator is put back, the
    reference runs (and the watchdog discards the stuck queue there)."""
    quick = PacketConfig(
        switch=SwitchConfig(pfc_xon_bytes=60_000, pfc_xoff_bytes=400_000, wred_max_bytes=300_000, pfc_watchdog_s=5e-6)
    )
    ref = _traffic(32, INCAST, quick, "python")
    fast = _traffic(32, INCAST, quick, "compiled")
    assert fast[2].loop_used == "python: the run the PFC watchdog fired"
    assert fast[:2] == ref[:2]
    assert sum(fast[2].stats.watchdog.values()) > 0


def test_the_tables_grow_as_the_reference_runs_on(monkeypatch):
    """The packet rows, the heap and the logs start as small as they may and double while the run goes on (a long run's
    case): the results stay the reference's."""
    monkeypatch.setattr(fastcore, "INITIAL_ROWS", 0)
    monkeypatch.setattr(fastcore, "ROWS_PER_PORT", 0)
    monkeypatch.setattr(fastcore, "LOG_ROWS", (2 * fastcore.MARGIN,) * 3)
    grew = []
    original = fastcore._State.grow

    def grow(self):
        grew.append((self.arrs[9].shape[0], self.arrs[10].shape[0], self.arrs[13].shape[0]))
        original(self)

    monkeypatch.setattr(fastcore._State, "grow", grow)
    ref, fast = _both(32, INCAST, PacketConfig())
    assert fast[2].loop_used == "compiled" and len(grew) >= 3
    assert fast[:2] == ref[:2]


def test_the_compiled_core_is_deterministic():
    a = _traffic(32, _permutation(32, 1e6, seed=3), PacketConfig(), "compiled", seed=3)
    b = _traffic(32, _permutation(32, 1e6, seed=3), PacketConfig(), "compiled", seed=3)
    assert a[2].loop_used == b[2].loop_used == "compiled"
    assert a[:2] == b[:2]


def test_the_generator_is_left_where_the_reference_leaves_it():
    """WRED's draws come from the network's generator 4,096 at a time: after the run, the next draw is the same."""
    nets = [_traffic(32, INCAST, PacketConfig(), core)[2] for core in ("python", "compiled")]
    assert nets[1].loop_used == "compiled"
    assert [nets[0].uniform() for _ in range(5000)] == [nets[1].uniform() for _ in range(5000)]
    assert nets[0].rng.random() == nets[1].rng.random()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hosts=st.sampled_from([8, 16, 32]),
    n_flows=st.integers(1, 24),
    seed=st.integers(0, 2**16),
    mtu=st.sampled_from([1024, 4096, 9000]),
    dcqcn=st.booleans(),
    xoff_kb=st.sampled_from([400, 3200]),
)
def test_random_traffic_equals_the_reference(hosts, n_flows, seed, mtu, dcqcn, xoff_kb):
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n_flows):
        s, d = (int(x) for x in rng.choice(hosts, 2, replace=False))
        pairs.append((s, d, float(rng.integers(1, 1_500_000))))
    sw = SwitchConfig(pfc_xon_bytes=60_000, pfc_xoff_bytes=xoff_kb * 1000, wred_max_bytes=min(3_000_000, xoff_kb * 900))
    cfg = PacketConfig(nic=NicConfig(mtu_bytes=mtu), dcqcn=DcqcnConfig(enabled=dcqcn), switch=sw)
    ref, fast = _both(hosts, pairs, cfg, seed)
    assert fast[2].loop_used == "compiled" or fast[2].loop_used.startswith("python: the run")
    assert fast[:2] == ref[:2]
