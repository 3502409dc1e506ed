"""The job's one-time connection setup (Deep Learning for Network Engineers, Chapters 9 and 14): queue pairs per
channel per network peer, each set up by QP creation, INIT -> RTR -> RTS and the CM's REQ -> REP -> RTU, NICs
working through theirs a bounded number at a time; in summary.json, the terminal summary and the bootstrap
story, in the iteration time only of the first iteration (tests/test_first_iteration.py)."""

from __future__ import annotations

import io
from importlib.resources import files

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.collectives.bootstrap import Launch, rendezvous, ring_connections
from aifabric.collectives.connection_setup import NicPair, SetupCosts, connection_setup
from aifabric.engines.taskgraph import TRANSFER, CollectiveInstance, TaskGraph
from aifabric.packet.job_connections import job_connection_setup, job_links
from aifabric.scenario.load import load_scenario
from aifabric.simulate import build_fabric, simulate

runner = CliRunner()


def test_one_connection_is_two_creates_six_transitions_three_cm_messages_and_one_and_a_half_round_trips():
    c = SetupCosts(qp_create_s=100e-6, qp_modify_s=50e-6, cm_processing_s=10e-6)
    rtt = 8e-6
    assert c.connection_s(rtt) == pytest.approx(2 * 100e-6 + 6 * 50e-6 + 3 * 10e-6 + 1.5 * rtt)
    req, rep, rtu, up = c.legs_s(rtt)
    assert req == pytest.approx(100e-6 + 50e-6 + 10e-6)  # active: create, RESET -> INIT, REQ
    assert rep - req == pytest.approx(rtt / 2 + 100e-6 + 2 * 50e-6 + 10e-6)  # passive: create, INIT, RTR, REP
    assert rtu - rep == pytest.approx(rtt / 2 + 2 * 50e-6 + 10e-6)  # active: RTR, RTS, RTU
    assert up == pytest.approx(c.connection_s(rtt))
    # NCCL_IB_QPS_PER_CONNECTION = 4: four QPs at each end, one exchange for all
    assert SetupCosts(qps_per_connection=4).connection_s(0) == pytest.approx(4 * 8 * 100e-6 + 3 * 10e-6)


def test_a_nic_sets_up_its_connections_a_bounded_number_at_a_time_and_the_job_waits_for_the_busiest():
    links = [NicPair("a", f"b{i}", 4e-6) for i in range(5)] + [NicPair("c", "d", 10e-6)]
    one = SetupCosts()
    cs = connection_setup(links, one)
    assert (cs.connections, cs.queue_pairs, cs.nics, cs.busiest_nic, cs.busiest_nic_connections) == (6, 12, 8, "a", 5)
    assert cs.time_s == pytest.approx(5 * one.connection_s(4e-6)) and cs.rounds == 5
    two = SetupCosts(concurrency=2)
    assert connection_setup(links, two).time_s == pytest.approx(3 * two.connection_s(4e-6))
    assert cs.per_connection_s == pytest.approx(one.connection_s(10e-6)) and cs.rtt_max_s == 10e-6
    assert cs.cm_messages == 18 and cs.cm_bytes == 18 * 326
    assert connection_setup([]).time_s == 0.0
    with pytest.raises(ValueError):
        SetupCosts(concurrency=0)


def _ch14():
    return load_scenario((files("aifabric.scenarios") / "ch14.yaml").read_text())


def test_the_job_opens_one_connection_per_channel_per_network_peer_per_communicator():
    s = _ch14()
    fabric, router = build_fabric(s)
    g = TaskGraph()
    g.collectives.append(CollectiveInstance("c0", "all-reduce", "ring", tuple(range(8)), 1, ""))
    g.collectives.append(CollectiveInstance("c1", "all-reduce", "ring", (3, 4), 1, ""))

    def transfer(src, dst, channel, coll, step):
        g.kind.append(TRANSFER)
        g.rank.append(src)
        g.dst.append(dst)
        g.route.append(router.route(src, dst, channel).links)
        g.collective.append(coll)
        g.step.append(step)
        g.name.append(f"t{len(g.name)}")
        g.size_bytes.append(1e6)

    transfer(3, 4, 0, 0, 0)  # communicator c0: two channels between ranks 3 and 4 in step 0 ...
    transfer(3, 4, 1, 0, 0)
    transfer(3, 4, 0, 0, 1)  # ... one in step 1: still two connections
    transfer(0, 1, 0, 0, 0)  # NVLink: no queue pair
    transfer(3, 4, 0, 1, 0)  # another communicator between the same ranks: its own connection
    transfer(7, 0, 0, -1, 0)  # a pipeline send: one ...
    transfer(7, 0, 0, -1, 0)  # ... however many sends
    links = job_links(g, fabric)
    assert len(links) == 4
    assert {(p.src_nic, p.dst_nic) for p in links} == {
        (fabric.rank_nic(3), fabric.rank_nic(4)),
        (fabric.rank_nic(7), fabric.rank_nic(0)),
    }
    assert all(p.rtt_s > 0 for p in links)


def test_summary_terminal_and_iteration_time():
    from aifabric.report.summary import build_summary
    from aifabric.report.terminal import print_summary

    run = simulate(_ch14())
    cs = build_summary(run)["connection_setup"]
    direct = job_connection_setup(run.graph, run.fabric)
    assert cs["connections"] == direct.connections > 0 and cs["queue_pairs"] == 2 * cs["connections"]
    assert cs["time_s"] == pytest.approx(direct.time_s) and cs["time_s"] >= cs["per_connection_s"] > 0
    assert cs["one_time"] is True
    # a one-time cost: the iteration is what it is without it
    assert build_summary(run)["iteration_time_s"] == run.results.iteration_time_s
    assert cs["time_s"] != pytest.approx(0.0) and run.results.iteration_time_s < 1.0
    out = io.StringIO()
    print_summary(run, Console(file=out, width=250))
    text = out.getvalue()
    assert "connection setup" in text and "once, before the first collective (not in the iteration time)" in text
    assert f"{cs['connections']:,} connections" in text


def test_the_bootstrap_story_connects_the_rings_after_the_unique_id_and_before_the_first_collective():
    launch = Launch(2, 4)
    rv = rendezvous(launch, np.random.default_rng(0))
    rc = ring_connections(launch, rv.done_s, channels=2, rtt_s=5e-6)
    # rank 3 -> 4 and rank 7 -> 0 cross nodes; two channels: four connections, each NIC at a node boundary has two
    assert rc.setup.connections == 4 and rc.setup.busiest_nic_connections == 2
    assert [e.kind for e in rc.events].count("cm-req") == 4 and len(rc.events) == 12
    assert min(e.t_s for e in rc.events) > rv.done_s
    assert {(e.src_rank, e.dst_rank) for e in rc.events if e.kind == "cm-req"} == {(3, 4), (7, 0)}
    assert all(e.network == "backend" and e.dst_port == 4791 for e in rc.events)
    assert rc.done_s == pytest.approx(rv.done_s + 2 * SetupCosts().connection_s(5e-6))
    assert ring_connections(Launch(1, 8), 0.0).setup.connections == 0


def test_bootstrap_command_shows_the_ring_connections():
    res = runner.invoke(app, ["collective", "bootstrap", "--nnodes", "2", "--nproc-per-node", "2", "--channels", "1"])
    assert res.exit_code == 0, res.output
    assert "CM REQ" in res.output and "CM RTU" in res.output and "2 connections (4 QPs)" in res.output
    text = " ".join(res.output.split())
    assert "first iteration pays it" in text and "later iterations reuse the connections" in text
    assert run_app(app, ["collective", "bootstrap", "--channels", "0"]) == 2
