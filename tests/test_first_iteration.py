"""The job's first iteration (scenario `iteration: first`): each RDMA connection set up before its first use, as
NCCL connects at a communicator's first collective (Deep Learning for Network Engineers, Chapters 9 and 14;
engines/setup_tasks.py). The default, `steady`, is any later iteration: nothing changes."""

from __future__ import annotations

import io
from importlib.resources import files

import numpy as np
import pytest
import yaml
from rich.console import Console

from aifabric.collectives.connection_setup import SetupCosts
from aifabric.engines.setup_tasks import add_connection_setup
from aifabric.engines.taskgraph import COMPUTE, TRANSFER, CollectiveInstance, TaskGraph
from aifabric.errors import InputError
from aifabric.packet.job_connections import SETUP_NAME, job_connection_setup, job_links
from aifabric.scenario.load import load_scenario
from aifabric.simulate import build_fabric, simulate


def _small_ch14(iteration: str | None) -> dict:
    """The Chapter 14 cluster (2 servers x 4 H100, rail-optimized) with a small model: the setup dominates."""
    d = yaml.safe_load((files("aifabric.scenarios") / "ch14.yaml").read_text())
    d["workload"]["model"]["layer_widths"] = [256, 512, 256]
    d["workload"]["global_batch_size"] = 64
    if iteration is not None:
        d["iteration"] = iteration
    return d


@pytest.mark.parametrize("engine", ["flow", "analytic", "packet", "hybrid"])
def test_the_first_iteration_is_longer_by_the_connection_setup_and_steady_state_is_unchanged(engine):
    default = simulate(_small_ch14(None), engine=engine)
    steady = simulate(_small_ch14("steady"), engine=engine)
    first = simulate(_small_ch14("first"), engine=engine)
    assert np.array_equal(default.timeline.end_s, steady.timeline.end_s)  # the default is steady state, bit for bit
    assert len(steady.graph) == len(default.graph)
    cs = first.connection_setup
    # one collective (the gradient AllReduce) opens every connection: the job's setup time, before its data moves
    assert cs["connections"] > 0 and cs["in_iteration"] is True and steady.connection_setup["in_iteration"] is False
    assert first.results.iteration_time_s - steady.results.iteration_time_s == pytest.approx(cs["time_s"], rel=1e-6)
    # no byte more on any link; the collective's time holds its setup
    assert np.array_equal(first.timeline.link_bytes, steady.timeline.link_bytes)
    (c_first,), (c_steady,) = first.results.collectives, steady.results.collectives
    assert c_first.end_s - c_first.start_s == pytest.approx(c_steady.end_s - c_steady.start_s + cs["time_s"], rel=1e-6)


def test_every_network_transfer_waits_for_its_connections_setup_and_none_inside_a_server():
    run = simulate(_small_ch14("first"), engine="analytic")
    g, tl = run.graph, run.timeline
    setups = [t for t in range(len(g)) if g.name[t].startswith(SETUP_NAME)]
    assert len(setups) == len({(g.rank[t], g.dst[t]) for t in setups})  # one communicator: one per rank pair
    assert all(g.size_bytes[t] == 0 and g.kind[t] == TRANSFER and g.collective[t] == 0 for t in setups)
    by_pair = {(g.rank[t], g.dst[t]): t for t in setups}
    nic = run.fabric.rank_nic
    for t in range(len(g)):
        if g.kind[t] != TRANSFER or t in setups:
            continue
        s = by_pair.get((g.rank[t], g.dst[t]))
        if nic(g.rank[t]).split("/")[0] == nic(g.dst[t]).split("/")[0]:
            assert s is None  # NVLink: no queue pair
        else:
            assert s in g.deps[t] and tl.start_s[t] >= tl.end_s[s]
    # the setup tasks are not counted as connections themselves
    assert job_connection_setup(g, run.fabric).connections == run.connection_setup["connections"]


def _graph(router):
    g = TaskGraph()
    g.collectives.append(CollectiveInstance("c0", "all-reduce", "ring", tuple(range(8)), 1, ""))

    def add(kind, src, dst, deps, coll=-1, step=-1, channel=0):
        route = router.route(src, dst, channel).links if kind == TRANSFER else ()
        t = g.add(kind, src, dst, f"t{len(g)}", deps, size_bytes=1e6, route=route, step=step, collective=coll)
        if coll >= 0:
            g.collectives[coll].tasks.append(t)
        return t

    a3 = add(COMPUTE, 3, -1, [])
    a4 = add(COMPUTE, 4, -1, [])
    x = add(TRANSFER, 3, 4, [a3, a4], coll=0, step=0, channel=0)  # c0, step 0: two channels 3 -> 4 ...
    y = add(TRANSFER, 3, 4, [a3, a4], coll=0, step=0, channel=1)
    z = add(TRANSFER, 4, 3, [x, y], coll=0, step=1)  # ... and back, later in the collective
    p = add(TRANSFER, 7, 0, [z])  # a pipeline send, twice: one connection
    q = add(TRANSFER, 7, 0, [z])
    return g, (a3, a4, x, y, z, p, q)


def test_a_collective_connects_all_its_connections_at_its_start_each_nic_one_at_a_time():
    s = load_scenario(_small_ch14(None))
    fabric, router = build_fabric(s)
    g, (a3, a4, x, y, z, p, q) = _graph(router)
    n = len(g)
    assert len(job_links(g, fabric)) == 4  # 2 channels 3 -> 4, 1 connection 4 -> 3, 1 for the sends 7 -> 0
    added = add_connection_setup(g, fabric)
    assert (added.connections, added.tasks, added.first_task) == (4, 3, n)
    s34, s43, s70 = range(n, n + 3)
    assert [(g.rank[t], g.dst[t]) for t in (s34, s43, s70)] == [(3, 4), (4, 3), (7, 0)]
    one = SetupCosts().connection_s
    rtt = job_links(g, fabric)[0].rtt_s
    # rank 3's and rank 4's NICs open 3 connections each for c0: 3 rounds; the send's pair 1
    assert g.latency_s[s34] == pytest.approx(3 * one(rtt)) and g.latency_s[s43] == pytest.approx(3 * one(rtt))
    assert g.latency_s[s70] == pytest.approx(one(job_links(g, fabric)[-1].rtt_s))
    # both of c0's setups start when ranks 3 and 4 reach it (the way back too), not after the way there
    assert g.deps[s34] == [a3, a4] and g.deps[s43] == [a3, a4]
    assert g.deps[s70] == [z]
    assert s34 in g.deps[x] and s34 in g.deps[y] and s43 in g.deps[z] and s70 in g.deps[p] and s70 in g.deps[q]
    assert g.collectives[0].tasks[-2:] == [s34, s43] and g.collective[s70] == -1
    assert len(job_links(g, fabric)) == 4  # unchanged: a setup task is not a use of a connection


def test_the_field_is_checked():
    with pytest.raises(InputError, match="iteration"):
        load_scenario(_small_ch14("warm"))


def test_the_terminal_says_the_setup_is_in_this_iteration():
    from aifabric.report.terminal import print_summary

    out = io.StringIO()
    print_summary(simulate(_small_ch14("first"), engine="analytic"), Console(file=out, width=250))
    assert "this first iteration sets each connection up before its first use, in its time" in out.getvalue()


def test_with_the_cm_on_the_packet_wire_the_setup_tasks_hold_only_the_qps_own_work():
    from dataclasses import replace

    from aifabric.packet.config import PacketConfig

    base = PacketConfig()
    cm = replace(base, nic=replace(base.nic, cm_setup=True))
    steady = simulate(_small_ch14("steady"), engine="packet", packet_options=cm)
    first = simulate(_small_ch14("first"), engine="packet", packet_options=cm)
    cs = first.connection_setup
    g = first.graph
    setups = [t for t in range(len(g)) if g.name[t].startswith(SETUP_NAME)]
    # REQ -> REP -> RTU already run on the simulated wire (in both runs): the tasks add the busiest NIC's rounds of
    # QP creations and state changes, not the exchange again
    work = cs["rounds"] * SetupCosts().qp_work_s()
    assert setups and all(g.latency_s[t] == pytest.approx(work) for t in setups)
    assert first.results.iteration_time_s - steady.results.iteration_time_s == pytest.approx(work, rel=1e-3)
    assert work < cs["time_s"]


def test_the_compiled_loop_runs_the_setup_tasks_as_the_reference_does():
    from aifabric.engines import fastloop
    from aifabric.engines.executor import run_reference

    if not fastloop.AVAILABLE:
        pytest.skip("numba not installed")
    run = simulate(_small_ch14("first"), engine="analytic")  # a small graph: the reference loop ran it
    for engine in ("flow", "analytic"):
        ref = run_reference(run.graph, run.fabric, engine)
        fast = fastloop.run(run.graph, run.fabric, engine)
        assert np.array_equal(ref.start_s, fast.start_s) and np.array_equal(ref.end_s, fast.end_s)


def test_on_one_server_nothing_crosses_a_nic_and_the_first_iteration_is_the_steady_one():
    one = _small_ch14("first")
    one["cluster"]["servers"] = 1
    first = simulate(one, engine="analytic")
    one["iteration"] = "steady"
    steady = simulate(one, engine="analytic")
    assert len(first.graph) == len(steady.graph) and first.connection_setup["connections"] == 0
    assert first.results.iteration_time_s == steady.results.iteration_time_s
