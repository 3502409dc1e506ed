"""`aifabric simulate FILE --engine packet --pcap FILE`: a capture of the run, bounded by --pcap-max-packets."""

from __future__ import annotations

import json

from scapy.contrib.roce import BTH
from scapy.layers.inet import UDP
from scapy.utils import rdpcap
from typer.testing import CliRunner

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.packet.headers import OP_WRITE_FIRST, OP_WRITE_LAST, OP_WRITE_MIDDLE, OP_WRITE_ONLY

runner = CliRunner()
WRITES = {OP_WRITE_FIRST, OP_WRITE_MIDDLE, OP_WRITE_LAST, OP_WRITE_ONLY}


def _small(ch14_data, write_scenario):
    ch14_data["workload"]["model"]["layer_widths"] = [512, 1024, 512]  # ~1 M parameters: a fast run
    return write_scenario(ch14_data)


def test_simulate_pcap_holds_the_runs_rocev2_packets(ch14_data, write_scenario, tmp_path):
    path = _small(ch14_data, write_scenario)
    pcap = tmp_path / "run.pcap"
    res = runner.invoke(
        app, ["simulate", str(path), "--engine", "packet", "--out", str(tmp_path / "o"), "--pcap", str(pcap)]
    )
    assert res.exit_code == 0, res.output
    assert "run.pcap" in res.output and "capped" not in res.output
    flows = [f for f in json.loads((tmp_path / "o" / "summary.json").read_text())["packet"]["flows"] if "qpn" in f]
    frames = rdpcap(str(pcap))
    roce = [f for f in frames if UDP in f and f[UDP].dport == 4791]
    data = [f for f in roce if BTH in f and f[BTH].opcode in WRITES]
    assert data, "no RDMA Write packets in the capture"
    # every packet of every RDMA transfer of the run, from the QPs the run used (their UDP source ports, QPNs)
    assert len(data) == sum(f["packets"] + f["retransmissions"] for f in flows)
    assert {f[UDP].sport for f in data} == {f["udp_sport"] for f in flows}
    assert {f[BTH].dqpn for f in data} == {f["qpn"] for f in flows}
    times = [float(f.time) for f in frames]
    assert times == sorted(times)


def test_simulate_pcap_cap_is_reached_and_said(ch14_data, write_scenario, tmp_path):
    path = _small(ch14_data, write_scenario)
    pcap = tmp_path / "capped.pcap"
    res = runner.invoke(
        app,
        [
            "simulate",
            str(path),
            "--engine",
            "packet",
            "--out",
            str(tmp_path / "o"),
            "--pcap",
            str(pcap),
            "--pcap-max-packets",
            "100",
        ],
    )
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "capture capped at 100 packets" in out and "--pcap-max-packets" in out
    frames = rdpcap(str(pcap))
    lldp = [f for f in frames if f.type == 0x88CC]
    assert len(frames) - len(lldp) == 100
    assert any(UDP in f and f[UDP].dport == 4791 for f in frames)


def test_simulate_pcap_refused_off_the_packet_engine(ch14_data, write_scenario, tmp_path, capsys):
    path = _small(ch14_data, write_scenario)
    assert run_app(app, ["simulate", str(path), "--pcap", str(tmp_path / "x.pcap"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr()
    assert "--pcap" in err.out + err.err and "packet" in err.out + err.err
    assert (
        run_app(
            app,
            [
                "simulate",
                str(path),
                "--engine",
                "packet",
                "--pcap",
                str(tmp_path / "x.pcap"),
                "--pcap-max-packets",
                "0",
            ],
        )
        == 2
    )
    assert "--pcap-max-packets" in "".join(capsys.readouterr())
    assert not (tmp_path / "x.pcap").exists() and not (tmp_path / "o").exists()
