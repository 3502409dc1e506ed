"""Lowering collectives onto a real fabric: every (operation, algorithm) runs on the engines, transfers
carry the schedule's bytes, inter-server hops stay on rails, PXN keeps cross-rail traffic off spines."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.collectives import ALGORITHMS
from aifabric.collectives.cost import NVLS_EFFICIENCY
from aifabric.engines import lower, run
from aifabric.engines.lower_collective import CollectiveCall, plan
from aifabric.engines.taskgraph import TRANSFER
from aifabric.fabric.graph import TIER_SPINE
from aifabric.scenario import ch14_scenario
from aifabric.simulate import build_fabric
from aifabric.workload.ops import Collective, Wait, Workload


def fabric_of(servers: int, gpus: int, nic_gbps: float = 400):
    data = ch14_scenario().model_dump()
    data["cluster"].update(servers=servers, gpus_per_server=gpus, nic_speed_gbps=nic_gbps)
    data["fabric"].update(spines=gpus, link_speed_gbps=nic_gbps)
    return build_fabric(type(ch14_scenario()).model_validate(data))


def one(op, n=None):
    return Workload("t", [[op] for _ in range(n or len(op.group))], params=0, iterations=1, flops_per_iteration=0.0)


def collective_time(graph, timeline) -> float:
    return float(np.nanmax(timeline.end_s) - np.nanmin(timeline.start_s))


@pytest.fixture(scope="module")
def small():
    return fabric_of(2, 4)


PAIRS = [(op, a) for op, algs in ALGORITHMS.items() for a in algs if op != "send-recv"]


@pytest.mark.parametrize("op,algorithm", PAIRS)
def test_every_algorithm_lowers_and_runs_with_the_schedules_bytes(small, op, algorithm):
    fabric, router = small
    group = tuple(range(8))
    counts = tuple(int(x) for x in (np.arange(64) % 5)) if op == "all-to-allv" else ()
    call = CollectiveCall(
        "c", op, group, 1000, 4, algorithm=algorithm, protocol="simple", channels=2, pieces=2, root=3, counts=counts
    )
    sched, _ = plan(call, fabric, router)
    graph = lower(one(call), fabric, router)
    timeline = run(graph, fabric, "analytic")
    assert not np.isnan(timeline.end_s).any()
    moved = sum(graph.size_bytes)
    expected = int(sched.move_elements().sum()) * 4
    if algorithm == "pxn":  # relayed blocks cross NVLink first: counted twice, never more
        assert expected <= moved <= 2 * expected
    elif algorithm == "nvls":  # in-switch: a task per link (up, down) instead of per GPU pair
        assert moved > 0
    else:
        assert moved == expected
    assert graph.collectives[0].algorithm == algorithm


def test_ring_inter_server_hops_stay_on_rails():
    fabric, router = fabric_of(4, 4)
    call = CollectiveCall(
        "c", "all-reduce", tuple(range(16)), 4096, 4, algorithm="ring", protocol="simple", channels=4, pieces=1
    )
    graph = lower(one(call), fabric, router)
    tiers = {fabric.links[li].tier for route in graph.route for li in route}
    assert TIER_SPINE not in tiers and "host" in tiers and "nvlink" in tiers
    # 4 channels use every NIC of every server
    nic_links = {li for route in graph.route for li in route if fabric.links[li].tier == "host"}
    assert len(nic_links) == 4 * 4 * 2  # every NIC's cable, both directions


def test_pxn_relays_cross_rail_traffic_over_nvlink():
    fabric, router = fabric_of(2, 4)
    group = tuple(range(8))
    plain = lower(one(CollectiveCall("c", "all-to-all", group, 8000, 4, algorithm="direct")), fabric, router)
    pxn = lower(one(CollectiveCall("c", "all-to-all", group, 8000, 4, algorithm="pxn")), fabric, router)
    assert any(fabric.links[li].tier == TIER_SPINE for route in plain.route for li in route)
    assert not any(fabric.links[li].tier == TIER_SPINE for route in pxn.route for li in route)


def test_plain_collectives_are_tuned_as_nccl_tunes_them():
    """A workload's collective (plain `Collective`) gets NCCL's tuner: the fastest of NCCL's own algorithms
    on this fabric, the protocol and one channel per NIC, the same choice `collective bench` shows."""
    from aifabric.collectives.cost import Paths, Shape
    from aifabric.collectives.tuning import NCCL_ALGORITHMS, choose

    fabric, router = fabric_of(2, 4)
    group = tuple(range(8))
    paths = Paths.from_fabric(fabric, router)
    for op in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast"):
        for elements in (800, 1 << 26):
            graph = lower(one(Collective("c", op, group, elements, 2)), fabric, router)
            expected = choose(op, Shape.of(group, 4), elements * 2, paths, algorithm="nccl")
            assert graph.collectives[0].algorithm == expected.algorithm in NCCL_ALGORITHMS[op]
            assert run(graph, fabric, "flow").makespan_s > 0
    large = plan(Collective("c", "all-reduce", group, 1 << 29, 2), fabric, router)[1]  # 1 GiB
    assert (large.protocol, large.channels) == ("simple", 4)  # a ring per NIC of the server


def test_engine_ring_busbw_approaches_the_nic_bandwidth():
    """Analytic engine, non-blocking rail fabric, one ring: busbw -> the NIC's 50 GB/s (within 10%)."""
    fabric, router = fabric_of(2, 4, nic_gbps=400)
    size = 1 << 30
    call = CollectiveCall(
        "c", "all-reduce", tuple(range(8)), size // 4, 4, algorithm="ring", protocol="simple", channels=1, pieces=1
    )
    graph = lower(one(call), fabric, router)
    t = collective_time(graph, run(graph, fabric, "analytic"))
    busbw = size / t * 2 * 7 / 8
    assert busbw == pytest.approx(50e9, rel=0.10) and busbw <= 50e9


def test_auto_on_the_fabric_picks_and_records_an_algorithm():
    fabric, router = fabric_of(2, 4)
    small_call = CollectiveCall("c", "all-reduce", tuple(range(8)), 2, 4)
    large_call = CollectiveCall("c", "all-reduce", tuple(range(8)), 1 << 28, 4)
    (_, small_choice), (_, large_choice) = plan(small_call, fabric, router), plan(large_call, fabric, router)
    assert small_choice.protocol == "ll" and large_choice.protocol == "simple"
    assert large_choice.algorithm in ALGORITHMS["all-reduce"]


def test_nvls_puts_the_buffer_once_on_every_nvlink_direction():
    fabric, router = fabric_of(1, 8)
    size = 64 * 1024 * 1024  # large enough for bandwidth, not per-transfer latency, to dominate
    loads = {}
    for alg in ("nvls", "direct"):
        call = CollectiveCall(
            "c", "all-reduce", tuple(range(8)), size // 4, 4, algorithm=alg, protocol="simple", channels=1, pieces=8
        )
        graph = lower(one(call), fabric, router)
        timeline = run(graph, fabric, "flow")  # max-min sharing: the analytic engine ignores contention
        nv = [timeline.link_bytes[link.index] for link in fabric.links if link.tier == "nvlink"]
        loads[alg] = (min(nv), max(nv), collective_time(graph, timeline))
    # the buffer once per NVLink direction, at NVLink SHARP's measured rate (1 / NVLS_EFFICIENCY wire bytes)
    assert loads["nvls"][0] == loads["nvls"][1] == pytest.approx(size / NVLS_EFFICIENCY)
    assert loads["direct"][1] == pytest.approx(2 * 7 / 8 * size)
    # the time: the buffer over one NVLink direction at NVLS's rate, plus the pipeline's fill over 8 pieces
    # (each piece's multicast waits for its sum to come down): within 1.5 x the bound, never below it
    rate = min(link.rate_bytes_per_s for link in fabric.links if link.tier == "nvlink") * NVLS_EFFICIENCY
    assert size / rate < loads["nvls"][2] < 1.5 * size / rate


def test_protocol_puts_its_wire_bytes_on_the_links():
    fabric, router = fabric_of(2, 4)
    sizes = {}
    for proto in ("simple", "ll128", "ll"):
        call = CollectiveCall(
            "c", "all-reduce", tuple(range(8)), 1 << 16, 4, algorithm="ring", protocol=proto, channels=1, pieces=1
        )
        sizes[proto] = sum(lower(one(call), fabric, router).size_bytes)
    # NCCL's protocol factors (tuning.cc): LL carries data in half of each 8-byte line, LL128 at 0.92
    assert sizes["ll"] == pytest.approx(2 * sizes["simple"]) and sizes["ll128"] == pytest.approx(sizes["simple"] / 0.92)


@pytest.mark.parametrize("algorithm", ["ring", "tree", "rhd", "hierarchical", "hierarchical-rhd"])
def test_the_analytic_engine_agrees_with_the_cost_model(algorithm):
    """Same schedule, same paths (measured on the fabric), same protocol: the α-β model and the flow
    engine running the lowered transfers agree within 25%."""
    from aifabric.collectives.cost import Paths, Shape, collective_time_s

    fabric, router = fabric_of(4, 4)
    paths = Paths.from_fabric(fabric, router)
    for size in (1 << 20, 1 << 26):
        call = CollectiveCall(
            "c",
            "all-reduce",
            tuple(range(16)),
            size // 4,
            4,
            algorithm=algorithm,
            protocol="simple",
            channels=1,
            pieces=4,
        )
        graph = lower(one(call), fabric, router)
        engine = collective_time(graph, run(graph, fabric, "flow"))
        model = collective_time_s("all-reduce", algorithm, Shape.full(16, 4), size, paths, channels=1, pieces=4)
        assert engine == pytest.approx(model, rel=0.25), (size, engine, model)


def test_sharp_puts_one_shard_on_every_nic_and_nothing_on_spines():
    """NVLS + SHARP over 4 servers x 8 GPUs: NVLink links carry B, every NIC cable B / 8 each way
    (its shard up to the rail switch, the sum back), spines nothing; faster than the flat ring."""
    fabric, router = fabric_of(4, 8)
    size = 64 * 1024 * 1024
    out = {}
    for alg, channels in (("nvls", 1), ("ring", 8)):
        call = CollectiveCall(
            "c",
            "all-reduce",
            tuple(range(32)),
            size // 4,
            4,
            algorithm=alg,
            protocol="simple",
            channels=channels,
            pieces=8,
        )
        graph = lower(one(call), fabric, router)
        timeline = run(graph, fabric, "flow")
        by_tier = {}
        for link in fabric.links:
            by_tier.setdefault(link.tier, []).append(timeline.link_bytes[link.index])
        out[alg] = (by_tier, collective_time(graph, timeline))
    tiers = out["nvls"][0]
    assert min(tiers["nvlink"]) == pytest.approx(size / NVLS_EFFICIENCY) == max(tiers["nvlink"])
    assert min(tiers["host"]) == pytest.approx(size / 8) == max(tiers["host"])
    assert max(tiers["spine"]) == 0
    assert out["nvls"][1] < out["ring"][1]


@settings(max_examples=40, deadline=None)
@given(
    op_alg=st.sampled_from(
        [(op, a) for op, algs in ALGORITHMS.items() for a in algs if op not in ("send-recv", "all-to-allv")]
    ),
    n=st.integers(1, 12),
    gpus=st.integers(1, 4),
    elements=st.integers(0, 500),
    channels=st.integers(1, 3),
)
def test_merged_transfers_carry_every_moved_element_once(op_alg, n, gpus, elements, channels):
    from aifabric.collectives import Layout, build_schedule, not_applicable
    from aifabric.engines.lower_collective import transfers

    op, alg = op_alg
    layout = Layout(gpus)
    group = list(range(n))
    if not_applicable(op, alg, group, layout):
        return
    sched = build_schedule(op, alg, group, elements, layout, channels=channels, pieces=2)
    step, src, dst, channel, elems = transfers(sched)
    assert int(elems.sum()) == int(sched.move_elements().sum())
    keys = set(zip(step.tolist(), src.tolist(), dst.tolist(), channel.tolist()))
    assert len(keys) == len(step)  # one transfer per (step, src, dst, channel)
    assert (src != dst).all()


@pytest.mark.parametrize("size", [256 * 2**20, 2**30])
def test_nvls_streams_in_fine_pieces_inside_a_server(size):
    # NCCL's NVLS streams 128 KiB chunks (NCCL_NVLS_CHUNKSIZE): a large buffer's pipeline barely fills. The tuner
    # gives NVLS inside one server up to 64 pieces (never more than the GPU's shard has chunks), so the simulated
    # time is the buffer over one NVLink direction at NVLS's rate plus at most ~3 / 64 of it (with 16 pieces
    # the fill alone was 3 / 16: 8 x H200 at 1 GiB 10.8 % under nccl-tests' busbw)
    fabric, router = fabric_of(1, 8)
    call = Collective("c", "all-reduce", tuple(range(8)), size // 4, 4)
    sched, choice = plan(call, fabric, router)
    assert choice is not None and choice.algorithm == "nvls" and choice.pieces == 64
    timeline = run(lower(one(call), fabric, router), fabric, "flow")
    rate = min(link.rate_bytes_per_s for link in fabric.links if link.tier == "nvlink") * NVLS_EFFICIENCY
    t = collective_time(None, timeline)
    assert size / rate < t < (1 + 4 / 64) * size / rate + 100e-6
    # a small buffer: no more pieces than 128 KiB chunks per GPU
    small = Collective("s", "all-reduce", tuple(range(8)), 2**20 // 4, 4)  # 1 MiB: one 128 KiB chunk per GPU
    _, choice = plan(small, fabric, router)
    assert choice is None or choice.algorithm != "nvls" or choice.pieces == 1


def test_nvls_pushes_stream_without_waiting_for_each_pieces_latency():
    # a GPU pushes its pieces up in order; NCCL's NVLS channels keep pieces in flight, so each push waits for the
    # last one's bytes to have left (drain), not for its arrival; the push after a GPU's first waits for that one
    # to arrive: the first carries NCCL's NVLS latency (25 us), a start-up cost every piece stands behind
    fabric, router = fabric_of(1, 4)
    size = 16 * 2**20
    call = CollectiveCall("c", "all-reduce", tuple(range(4)), size // 4, 4, algorithm="nvls", pieces=16, channels=1)
    graph = lower(one(call), fabric, router)
    gpu0 = fabric.rank_gpu[0]
    ups = [  # GPU 0's pushes: its contributions and its multicasts, up its NVLink to the NVSwitch
        t
        for t in range(len(graph.kind))
        if graph.kind[t] == TRANSFER and graph.route[t] and fabric.links[graph.route[t][0]].src == gpu0
    ]
    drained = [t for t in ups if t in graph.drain_deps]
    # 16 pieces x (3 contributions + 1 multicast); waited for to their end: the first step's 3 contributions, the
    # second step's 3 (behind the first push) and the first multicast (nothing before it)
    assert len(ups) == 64 and len(ups) - len(drained) == 3 + 3 + 1
    assert all(set(graph.drain_deps[t]) <= set(graph.deps[t]) for t in drained)
    first = min(ups)
    assert not any(first in graph.drain_deps.get(t, ()) for t in ups)  # the first push is waited for to its end
    t = collective_time(graph, run(graph, fabric, "flow"))
    rate = min(link.rate_bytes_per_s for link in fabric.links if link.tier == "nvlink") * NVLS_EFFICIENCY
    assert 25e-6 + size / rate < t < 25e-6 + (1 + 4 / 16) * size / rate


def test_in_switch_pieces_list_earlier_work_once_and_run_exactly_as_when_each_does(monkeypatch):
    # data-parallel AllReduces in NVLS pieces on 8 H100, back to back, with an AllGather, a ReduceScatter and compute: a piece whose dependencies already waited for its GPU's earlier work does not list that work again.
    # Listing it on every piece made the graph quadratic (a Llama 2 7B iteration on 8 H100: 461 million dependency
    # edges, 3 minutes, 22 GB); the timeline must be the one where every piece lists all of it.
    import aifabric.engines.lower_collective as lc
    from aifabric.workload.ops import Compute

    group = tuple(range(8))
    ops = []
    sequence = [("all-reduce", 64), ("all-reduce", 48), ("all-gather", 32), ("all-reduce", 40), ("reduce-scatter", 16)]
    for i, (op, mib) in enumerate(sequence):  # gradient buckets back to back, as after a backward pass
        if i in (0, 3):
            ops.append(Compute(f"c{i}", 0.0, 1e-4))
        elements = mib * 2**20 // 2
        if op == "all-reduce":
            ops.append(CollectiveCall(f"x{i}", op, group, elements, 2, algorithm="nvls", pieces=64))
        else:  # as the tuner lowers it
            ops.append(Collective(f"x{i}", op, group, elements, 2))
    workload = Workload("t", [list(ops) for _ in group], params=0, iterations=1, flops_per_iteration=0.0)

    def lowered(fast: bool):  # fast: pieces anchored, the next op waiting for each GPU's last tasks, templates
        for flag in ("ANCHOR_DONE", "FRONTIER_DONE", "IN_SWITCH_TEMPLATES"):
            monkeypatch.setattr(lc, flag, fast)
        fab, rt = fabric_of(1, 8)
        graph = lower(workload, fab, rt)
        return graph, {engine: run(graph, fab, engine) for engine in ("flow", "analytic")}

    graph, timelines = lowered(True)
    reference, expected = lowered(False)
    assert graph.deps != reference.deps
    edges = sum(map(len, graph.deps))
    assert edges < sum(map(len, reference.deps)) / 8  # 12 times fewer here; 15 in that Llama 2 iteration
    for engine, timeline in timelines.items():
        np.testing.assert_array_equal(timeline.start_s, expected[engine].start_s)
        np.testing.assert_array_equal(timeline.end_s, expected[engine].end_s)


def test_a_repeated_in_switch_collective_is_the_same_graph_from_its_template(monkeypatch):
    # gradient buckets of the same size, again and again (a data-parallel job inside each of two H100 servers): the
    # second and later are built from the first one's template, renumbered, their GPUs' earlier work filled in (a
    # list by rank on the main stream, a dict by member off it); the graph must be the one lowering each afresh
    # gives, column by column, drains and collectives' tasks included
    import aifabric.engines.lower_collective as lc
    from aifabric.workload.ops import Compute

    def ops_of(server: int) -> list:
        group = tuple(range(8 * server, 8 * server + 8))
        ops: list = [Compute(f"{server}c", 0.0, 1e-4)]
        for i, mib in enumerate([64, 64, 48, 64, 48]):
            size = mib * 2**20 // 2
            ops.append(CollectiveCall(f"{server}b{i}", "all-reduce", group, size, 2, algorithm="nvls", pieces=64))
            if i == 2:
                ops.append(Compute(f"{server}d", 0.0, 2e-4))
        for i, mib in enumerate([32, 32]):  # off the main stream, overlapping compute, as overlapped buckets are
            size = mib * 2**20 // 2
            call = CollectiveCall(
                f"{server}s{i}", "all-reduce", group, size, 2, algorithm="nvls", pieces=64, blocking=False
            )
            ops += [call, Compute(f"{server}e{i}", 0.0, 1e-4)]
        return ops + [Wait("comm")]

    per_server = [ops_of(0), ops_of(1)]
    workload = Workload(
        "t", [list(per_server[r // 8]) for r in range(16)], params=0, iterations=1, flops_per_iteration=0.0
    )

    def lowered(templates: bool):
        monkeypatch.setattr(lc, "IN_SWITCH_TEMPLATES", templates)
        fab, rt = fabric_of(2, 8)  # a fresh router: no template from another test
        return lower(workload, fab, rt)

    graph, reference = lowered(True), lowered(False)
    columns = ("kind", "rank", "dst", "name", "deps", "duration_s", "size_bytes", "route", "latency_s", "step")
    for column in columns + ("collective", "dim", "wire", "drain_deps"):
        assert getattr(graph, column) == getattr(reference, column), column
    assert [c.tasks for c in graph.collectives] == [c.tasks for c in reference.collectives]
    assert all(c.algorithm == "nvls" for c in graph.collectives)
    assert len({(c.group, c.size_bytes) for c in graph.collectives}) < len(graph.collectives)  # templates reused


def test_the_tuner_sees_gpus_sharing_nics():
    # 8 GPUs behind 4 NICs (two per PCIe switch): a ring's 8 channels leave each server through 4 NICs, two
    # channels per NIC. The cost model the tuner chooses with must count that, or it expects twice the
    # bandwidth the lowered run gets (it did: 1.56 ms chosen, 2.98 ms simulated, 3 x 8 A100 at 128 MB)
    data = ch14_scenario().model_dump()
    data["cluster"].update(servers=3, gpus_per_server=8, nic_speed_gbps=200, nic_layout="shared", nics_per_server=4)
    data["fabric"].update(spines=4, link_speed_gbps=200)
    fabric, router = build_fabric(type(ch14_scenario()).model_validate(data))
    size = 128 * 2**20
    call = Collective("c", "all-reduce", tuple(range(24)), size // 4, 4)
    _, choice = plan(call, fabric, router)
    timeline = run(lower(one(call), fabric, router), fabric, "flow")
    assert choice.time_s == pytest.approx(collective_time(None, timeline), rel=0.05)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast"]),
    st.integers(0, 3),
    st.integers(2, 8),
    st.integers(1, 3),
    st.integers(1, 5000),
)
def test_a_schedule_built_once_serves_every_translate_of_its_group(op, offset, n, stride, elements):
    # plan() builds a group's schedule on its ranks relative to its first rank's server and shifts it onto every
    # group that is the same shape whole servers away: identical to building it on the group itself
    from aifabric.collectives import Layout, build_schedule

    fabric, router = fabric_of(4, 4)
    for servers in (0, 1, 2):
        group = tuple(offset + i * stride + 4 * servers for i in range(n))
        if group[-1] >= fabric.world_size:
            continue
        sched, choice = plan(Collective("c", op, group, elements, 4), fabric, router)
        direct = build_schedule(
            op, sched.algorithm, group, elements, Layout(4), channels=choice.channels, pieces=min(16, choice.pieces)
        )
        assert sched.ranks == direct.ranks and sched.root == direct.root
        for field in (
            "step",
            "src",
            "dst",
            "chunk",
            "count",
            "mode",
            "phase",
            "channel",
            "source",
            "target",
            "chunk_bounds",
        ):
            np.testing.assert_array_equal(getattr(sched, field), getattr(direct, field), err_msg=field)


def test_ll_inside_one_server_reaches_no_more_than_nccls_ceiling():
    # NCCL's tuner holds LL inside one node to llMaxBws of bus bandwidth (src/graph/tuning.cc: Ampere 87.7 GB/s),
    # where LL's flags alone would leave half of an A100's NVLink (116 GB/s): the cost model and the lowered run
    # both hold it there; the same ring across two servers is not capped by it.
    from aifabric.collectives.cost import Paths, Shape, collective_time_s

    data = ch14_scenario().model_dump()
    data["cluster"].update(gpu="A100", servers=1, gpus_per_server=8, nic_speed_gbps=200)
    data["fabric"].update(spines=8, link_speed_gbps=200)
    fabric, router = build_fabric(type(ch14_scenario()).model_validate(data))
    assert fabric.ll_max_bytes_per_s == pytest.approx(87.7e9)
    size = 64 * 1024 * 1024  # bandwidth-bound
    call = CollectiveCall("c", "all-reduce", tuple(range(8)), size // 4, 4, algorithm="ring", protocol="ll", channels=1)
    graph = lower(one(call), fabric, router)
    busbw = size / collective_time(graph, run(graph, fabric, "flow")) * 2 * 7 / 8
    assert 0.9 * 87.7e9 < busbw <= 87.7e9
    model_s = collective_time_s(
        "all-reduce", "ring", Shape.full(8, 8), size, Paths.from_fabric(fabric, router), protocol="ll"
    )
    assert size / model_s * 2 * 7 / 8 == pytest.approx(busbw, rel=0.05)
    two, router2 = fabric_of(2, 4)
    sizes = {
        p: sum(
            lower(
                one(
                    CollectiveCall(
                        "c", "all-reduce", tuple(range(8)), 1 << 16, 4, algorithm="ring", protocol=p, channels=1
                    )
                ),
                two,
                router2,
            ).size_bytes
        )
        for p in ("simple", "ll")
    }
    assert sizes["ll"] == pytest.approx(2 * sizes["simple"])


def test_a_rings_steps_wait_for_their_own_channel_and_its_last_sends_bytes():
    # 3 servers x 8 GPUs behind 4 NICs: the ring's 8 channels cross the servers on different GPUs, so a GPU
    # always has some channel crossing the network. Each step of a channel waits for what that channel received
    # at the last step (to arrive) and for its own last send (to have left), not for the GPU's other channels:
    # NCCL runs each channel as a thread block of its own, several steps in flight
    data = ch14_scenario().model_dump()
    data["cluster"].update(servers=3, gpus_per_server=8, nic_speed_gbps=200, nic_layout="shared", nics_per_server=4)
    data["fabric"].update(spines=4, link_speed_gbps=200)
    fabric, router = build_fabric(type(ch14_scenario()).model_validate(data))
    call = Collective("c", "all-reduce", tuple(range(24)), 2**25 // 4, 4)
    g = lower(one(call), fabric, router)
    xfer = [t for t in range(len(g)) if g.kind[t] == TRANSFER and g.step[t] > 0]
    assert xfer and all(len(g.deps[t]) == 2 for t in xfer)
    for t in xfer:
        (own,) = g.drain_deps[t]
        (came,) = [d for d in g.deps[t] if d != own]
        assert g.rank[own] == g.rank[t] and g.step[own] == g.step[t] - 1  # its channel's last send
        assert g.dst[came] == g.rank[t] and g.step[came] == g.step[t] - 1  # what its channel received
    # the GPU's channels do not wait for one another: steps of one GPU start at different times
    tl = run(g, fabric, "flow")
    starts = {(g.rank[t], g.step[t]): set() for t in xfer}
    for t in xfer:
        starts[(g.rank[t], g.step[t])].add(round(float(tl.start_s[t]), 12))
    assert any(len(s) > 1 for s in starts.values())


@pytest.mark.parametrize("merge", [True, False])
@pytest.mark.parametrize("op", ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast"])
def test_a_collective_lowered_again_is_lowered_alike(op, merge):
    """A run lowers each group's collectives thousands of times (every layer, every micro-batch), from what the first
    lowering cached: plan, protocol and, for a merged ring, its edges per placement. Lowered again (and on another
    server's translate of the group), every transfer is what a fresh router makes of it."""
    from aifabric.engines.lower_collective import lower_collective
    from aifabric.engines.taskgraph import TaskGraph

    def lowered(router, fabric, ops):
        g = TaskGraph()
        done: list[list[int]] = [[] for _ in range(fabric.world_size)]
        for o in ops:
            lower_collective(g, o, fabric, router, done, merge_ring_steps=merge)
        return [  # all but the dependencies, which chain one collective to the next
            (g.rank[t], g.dst[t], g.name[t], g.size_bytes[t], g.route[t], g.latency_s[t], g.wire.get(t))
            for t in range(len(g))
        ]

    fabric, warm = fabric_of(4, 4)
    ops = [Collective(f"c{i}", op, group, 1 << 20, 2, dim="dp") for i in range(3) for group in ((0, 4), (1, 5, 9, 13))]
    ops += [Collective("c9", op, (8, 12), 1 << 20, 2, dim="dp")]  # the first group two servers on
    ops += [Collective("c10", op, (0, 4), 1 << 20, 1, dim="dp")]  # the same elements in one byte each
    again = lowered(warm, fabric, ops)  # most of these from what the first ones cached
    fresh = [row for o in ops for row in lowered(fabric_of(4, 4)[1], fabric, [o])]  # each on a router of its own
    assert again == fresh
