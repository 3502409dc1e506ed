"""`aifabric packet pfc-storm`: a NIC that keeps sending PFC pauses spreads them through the fabric to flows that
never go near it, until the PFC watchdog acts (Deep Learning for Network Engineers, Chapter 11; issue 19, item 4)."""

from __future__ import annotations

import pytest
from scapy.contrib.mac_control import MACControlClassBasedFlowControl
from scapy.utils import rdpcap
from typer.testing import CliRunner

from aifabric.cli.app import app
from aifabric.packet.config import PacketConfig
from aifabric.packet.scenarios import STORM_NIC, run_scenario

runner = CliRunner()


@pytest.fixture(scope="module")
def storm():
    return run_scenario("pfc-storm", PacketConfig(explain=True))


def _first_pauses(st) -> dict[str, float]:
    first: dict[str, float] = {}
    for t, port, prio, quanta in st.pfc_frames:
        if quanta and prio == 3:
            first.setdefault(port, t)
    return first


def test_the_pauses_spread_from_the_nic_upstream_in_order(storm):
    first = _first_pauses(storm.stats)
    assert first[f"{STORM_NIC}->railA"] == pytest.approx(10e-6)
    # the NIC pauses Rail A, Rail A the spine, the spine Rail B, Rail B the NICs behind it
    order = [f"{STORM_NIC}->railA", "railA->spine1", "spine1->railB"]
    assert [first[p] for p in order] == sorted(first[p] for p in order)
    assert first["spine1->railB"] < min(first["railB->hostB1"], first["railB->hostB2"])
    assert max(first.values()) < 100e-6  # spread within microseconds, long before the watchdog


def test_the_watchdog_unwinds_it_and_the_victim_recovers(storm):
    (label, _, st), (label_off, _, off) = storm.runs
    assert (label, label_off) == ("watchdog 100 ms", "no watchdog")
    assert st.watchdog.get(("railA->hostA3", 3), 0) >= 1 and not off.watchdog
    victim = next(f for f in st.flows if "victim" in f["name"])
    victim_off = next(f for f in off.flows if "victim" in f["name"])
    # held for the watchdog's interval, not the storm's length; without a watchdog, the storm's end (150 ms)
    assert 0.1 < victim["fct_s"] < 0.11 and victim_off["fct_s"] > 0.15
    # nothing is lost before the watchdog; after it, what the queue held is discarded
    assert off.total_drops() == 0 and st.drops.get(("railA->hostA3", 3, "pfc-watchdog"), 0) > 0
    assert all(f["status"] == "success" for f in st.flows + off.flows)


def test_cli_explains_and_captures_the_storm(tmp_path):
    pcap = tmp_path / "storm.pcap"
    res = runner.invoke(app, ["packet", "pfc-storm", "--explain", "--max-events", "1000", "--pcap", str(pcap)])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert (
        "PFC storm: the NIC sends pause frames" in out and "PFC watchdog: priority 3 paused longer than 100 ms" in out
    )
    assert "no watchdog" in out and "victim" in out
    frames = rdpcap(str(pcap))
    pfc = [f for f in frames if MACControlClassBasedFlowControl in f]
    assert pfc and all(f[MACControlClassBasedFlowControl].c3_enabled for f in pfc)
    assert len({f.src for f in pfc}) >= 4  # the NIC's frames and the switches' answers
