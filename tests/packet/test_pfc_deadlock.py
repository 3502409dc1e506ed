"""`aifabric packet pfc-deadlock`: down-up paths after two cable failures make a cyclic buffer dependency; PFC pauses
close it into a deadlock that the engine finds and names, and the PFC watchdog breaks (Deep Learning for Network
Engineers, Chapter 11; issue 19, item 4)."""

from __future__ import annotations

import pytest
from scapy.utils import rdpcap
from typer.testing import CliRunner

from aifabric.cli.app import app
from aifabric.packet.config import PacketConfig
from aifabric.packet.deadlock import find_cycle
from aifabric.packet.network import Network
from aifabric.packet.scenarios import _deadlock_fabric, run_scenario
from aifabric.packet.topo import link_between

runner = CliRunner()
CYCLE = ["spine0->leaf1", "leaf1->spine1", "spine1->leaf2", "leaf2->spine0"]


@pytest.fixture(scope="module")
def story():
    return run_scenario("pfc-deadlock", PacketConfig(explain=True))


def test_the_cycle_is_found_and_named(story):
    for _, _, st in story.runs:
        assert len(st.deadlocks) == 1
        dl = st.deadlocks[0]
        # each port is paused by the switch it feeds, which waits on the next port: back to the first
        assert dl["ports"] == CYCLE and dl["switches"] == ["spine0", "leaf1", "spine1", "leaf2"]
        assert dl["priority"] == 3 and dl["bytes_held"] > 4 * 60_000  # each ingress above xON
        assert dl["t_s"] - dl["since_s"] >= 1e-3  # no progress for the hold time before it is declared
    assert "PFC deadlock on priority 3: spine0->leaf1 paused by leaf1 -> leaf1->spine1" in " ".join(
        text for _, _, text in story.net.events_log
    )


def test_the_watchdog_breaks_it_and_every_byte_arrives(story):
    _, _, st = story.runs[0]
    dl = st.deadlocks[0]
    assert dl["broken_by"] in CYCLE and 0.1 <= dl["broken_at_s"] < 0.11  # the watchdog's 100 ms
    assert all(f["status"] == "success" and f["done_s"] is not None for f in st.flows)
    assert sum(v for k, v in st.drops.items() if k[2] == "pfc-watchdog") > 0


def test_without_the_watchdog_the_flows_never_finish_and_the_run_stops(story):
    label, net, st = story.runs[1]
    assert label == "no watchdog" and net.deadlocked
    assert all(f["done_s"] is None for f in st.flows)  # nothing ever completes
    assert not net.sim.heap and net.sim.now < 2e-3  # stopped at the deadlock, not run forever
    assert st.total_drops() == 0


def test_find_cycle_ignores_ports_that_are_not_paused():
    f = _deadlock_fabric()
    net = Network(f, PacketConfig())
    assert find_cycle(net, net.ports[link_between(f, "spine0", "leaf1")], 3, 0.0) is None


def test_cli_explains_and_captures_the_deadlock(tmp_path):
    pcap = tmp_path / "deadlock.pcap"
    res = runner.invoke(app, ["packet", "pfc-deadlock", "--explain", "--max-events", "5000", "--pcap", str(pcap)])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "PFC deadlock on priority 3" in out and "PFC deadlock broken: the watchdog on" in out
    assert "no PFC watchdog: nothing will ever move again; the run stops here" in out
    frames = rdpcap(str(pcap))
    assert any(bytes(fr)[12:14] == b"\x88\x08" for fr in frames)  # PFC frames in the capture


def test_the_engine_adapter_reports_the_cycle_as_bad_input(story):
    """`simulate --engine packet` with no watchdog: the run stops at the deadlock, exit 2 naming the cycle."""
    from aifabric.engines.packet import _deadlock_error

    _, net, _ = story.runs[1]
    text = str(_deadlock_error(net))
    assert "fabric.qos.pfc.watchdog_ms" in text and "PFC deadlock at" in text
    assert "spine0->leaf1 paused by leaf1 -> leaf1->spine1 paused by spine1" in text and "Chapter 11" in text


@pytest.fixture(scope="module")
def loop():
    return run_scenario("pfc-deadlock-loop", PacketConfig(explain=True))


def test_a_routing_loop_deadlocks_and_outlives_the_loop(loop):
    """leafA still sends the flow to spine1, which sends it back: the two ports pause each other; leafA's convergence
    (1 ms) removes the loop from its routing but not the looped packets from the queues."""
    for _, _, st in loop.runs:
        (dl,) = st.deadlocks
        assert sorted(dl["ports"]) == ["leafA->spine1", "spine1->leafA"] and dl["priority"] == 3
        assert dl["t_s"] > 1e-3  # declared after leafA converged: convergence did not undo it
    _, _, st = loop.runs[0]
    assert st.deadlocks[0]["broken_at_s"] >= 0.1 and st.flows[0]["status"] == "success"
    label, net, st = loop.runs[1]
    assert net.deadlocked and st.flows[0]["done_s"] is None and not net.sim.heap
    assert "leafA has converged" in " ".join(text for _, _, text in loop.runs[0][1].events_log)


def test_the_loop_drops_packets_whose_ttl_runs_out():
    """Without PFC the loop is lossy: each packet bounces until its TTL (64) runs out; no deadlock."""
    from dataclasses import replace

    from aifabric.packet.scenarios import _loop_run

    base = PacketConfig()
    cfg = replace(
        base,
        switch=replace(base.switch, pfc_enabled=False, ecn_enabled=False),
        dcqcn=replace(base.dcqcn, enabled=False),
        until_s=0.002,
    )
    net, st = _loop_run(cfg, 0.2, 0.001)
    assert sum(v for k, v in st.drops.items() if k[2] == "ttl-expired") > 0 and not st.deadlocks
