"""Options that used to be accepted and ignored, and numbers that could not be right.

- `aifabric packet FILE.yaml --pcap F` (and --transport, --write-only, --seed, --flow) ran with exit 0 and
  wrote no pcap: each works for a scenario file now, and --size-mb (the stories' flow size) is refused;
- `aifabric replay` of an 8-rank trace on a 32-GPU scenario ran silently on server 0 ("network 0 B") with
  the CPU run's compute gaps on an "H100": it says where the ranks run and what the compute is, and
  `--placement spread` puts the ranks on different servers;
- the packet engine's links.csv: a PCIe link with bytes and `peak_gbps 0.0`, links peaking above their
  capacity (403.3 of 400 Gb/s; NVLink 3,604 of 3,600).
"""

from __future__ import annotations

import csv

import pytest

from .conftest import cli, synthetic_trace


def _frames(path):
    from scapy.utils import rdpcap

    return rdpcap(str(path))


def test_packet_file_writes_the_pcap_of_the_transfer_asked_for(inputs, tmp_path):
    pcap = tmp_path / "iteration.pcap"
    code, text, err = cli(
        "packet", inputs["scenario"], "--pcap", pcap, "--flow", "1", "--seed", "3", "--explain", "--max-events", "5"
    )
    assert code == 0, err
    frames = _frames(pcap)
    assert len(frames) > 2 and "RDMA transfer 1" in text
    from scapy.layers.inet import UDP

    data = [f for f in frames if UDP in f and f[UDP].dport == 4791]
    assert data and len({(f[UDP].sport) for f in data}) == 1  # one transfer: one QP's 5-tuple


def test_packet_file_transport_and_write_only_change_the_packets(inputs, tmp_path):
    from scapy.contrib.roce import BTH

    opcodes = {}
    for label, extra in (("rc", []), ("write-only", ["--write-only"]), ("uet", ["--transport", "uet"])):
        pcap = tmp_path / f"{label}.pcap"
        code, _, err = cli("packet", inputs["scenario"], "--pcap", pcap, *extra)
        assert code == 0, err
        opcodes[label] = {f[BTH].opcode for f in _frames(pcap) if BTH in f and f[BTH].opcode < 0x11}
    assert opcodes["rc"] >= {0x06, 0x08}  # RDMA Write First ... Last
    assert opcodes["write-only"] == {0x0A} and opcodes["uet"] == {0x0A}  # every packet a Write Only


def test_packet_file_refuses_what_applies_to_the_stories_only(inputs, tmp_path):
    code, _, err = cli("packet", inputs["scenario"], "--size-mb", "2")
    assert code == 2 and "--size-mb" in err
    code, _, err = cli("packet", inputs["scenario"], "--pcap", tmp_path / "x.pcap", "--flow", "999")
    assert code == 2 and "--flow" in err and "RDMA transfers" in err
    code, _, err = cli("packet", "spraying", "--transport", "uet")
    assert code == 2 and "--transport" in err


def test_replay_says_where_the_ranks_run_and_what_the_compute_is(tmp_path):
    from aifabric.scenario import embedded_scenario_text

    demo = tmp_path / "demo.yaml"
    demo.write_text(embedded_scenario_text("demo"))
    trace = synthetic_trace(tmp_path / "trace.jsonl", world=8)
    code, text, err = cli("replay", trace, "--scenario", demo, "--engine", "analytic", "--out", tmp_path / "a")
    assert code == 0, err
    flat = " ".join(text.split())
    assert "placement packed" in flat and "(server 0)" in flat and "24 of the scenario's 32 GPUs idle" in flat
    assert "backend gloo, on CPU" in flat and "--compute zero" in flat
    assert "no transfer crossed the network" in flat and "--placement spread" in flat

    code, text, err = cli(
        "replay",
        trace,
        "--scenario",
        demo,
        "--engine",
        "analytic",
        "--placement",
        "spread",
        "--compute",
        "zero",
        "--out",
        tmp_path / "b",
    )
    assert code == 0, err
    import json

    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["flows"]["scale_out_bytes"] > 0  # the ranks talk over the network now
    assert "4 of 4 servers" in " ".join(text.split())


def test_replay_documents_compute_and_placement():
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert "--compute measured" in readme and "--compute zero" in readme and "--placement spread" in readme


@pytest.fixture(scope="module")
def packet_links(tmp_path_factory, inputs):
    out = tmp_path_factory.mktemp("pk") / "run"
    code, _, err = cli("simulate", inputs["scenario"], "--engine", "packet", "--out", out)
    assert code == 0, err
    with open(out / "links.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def test_packet_engine_peaks_are_within_capacity_and_pcie_has_one(packet_links):
    used = [r for r in packet_links if float(r["bytes"]) > 0]
    assert {r["tier"] for r in used} >= {"pcie", "host", "nvlink"}
    for r in used:
        cap, peak = float(r["capacity_gbps"]), float(r["peak_gbps"])
        assert 0 < peak <= cap, r  # every link that carried bytes had a rate, never above its capacity
    host = [float(r["peak_gbps"]) for r in used if r["tier"] == "host"]
    assert max(host) == pytest.approx(400.0, rel=0.01)  # a NIC link runs at line rate while it sends
