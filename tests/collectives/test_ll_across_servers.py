"""NCCL's LL ceiling across servers: a bus bandwidth indexed by the servers' CPU vendor, not by the GPU.

NCCL's tuner (src/graph/tuning.cc 2.28) takes `llMaxBws[index1][index2]` with, across servers, index1 = 1 for AMD
(or mixed) CPUs and 0 otherwise, index2 = 1 for two nodes and 2 for more: AMD 22.5 / 19.0 GB/s, others 39.0 /
20.4 GB/s; LL ring's bus bandwidth is `min(llMaxBw, busBw * .5)`. Here a network hop keeps `ll_network_scale` of
LL's half rate: the ceiling spread over the NICs the channels use.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.catalog import NCCL_LL_MAX_ACROSS_GBPS, server_cpu_vendor
from aifabric.collectives.cost import Paths, Shape, busbw_factor, collective_time_s, ll_network_scale
from aifabric.engines import lower, run
from aifabric.engines.lower_collective import CollectiveCall
from aifabric.scenario import ch14_scenario
from aifabric.simulate import build_fabric
from aifabric.workload.ops import Workload

MB = 1 << 20


def _fabric(gpu: str, servers: int, cpu_vendor: str | None = None, nic_gbps: float = 200):
    data = ch14_scenario().model_dump()
    data["cluster"].update(gpu=gpu, servers=servers, gpus_per_server=8, nic_speed_gbps=nic_gbps, cpu_vendor=cpu_vendor)
    data["fabric"].update(spines=8, link_speed_gbps=nic_gbps, switch_radix=64)
    return build_fabric(type(ch14_scenario()).model_validate(data))


def _busbw(op: str, n: int, size: float, t_s: float) -> float:
    return size / t_s * busbw_factor(op, n)


def test_the_ceiling_follows_the_servers_cpu_vendor_not_the_gpu():
    # DGX A100 has AMD EPYC CPUs, DGX H100 Intel Xeons: the defaults; a scenario's cpu_vendor overrides them
    assert server_cpu_vendor("A100") == "amd" and server_cpu_vendor("H100") == "intel"
    assert server_cpu_vendor("H100-PCIE") == "other"  # no reference server: NCCL's non-AMD row
    cases = [("A100", None, "amd"), ("H100", None, "other"), ("H100", "amd", "amd"), ("A100", "intel", "other")]
    for gpu, vendor, row in cases:
        fabric, _ = _fabric(gpu, 2, vendor)
        expected = tuple(x * 1e9 for x in NCCL_LL_MAX_ACROSS_GBPS[row])
        assert fabric.ll_max_across_bytes_per_s == pytest.approx(expected), (gpu, vendor)
    assert NCCL_LL_MAX_ACROSS_GBPS == {"amd": (22.5, 19.0), "other": (39.0, 20.4)}  # tuning.cc's llMaxBws
    upper, _ = _fabric("H100", 2, "AMD")  # any case, as GPU names
    assert upper.ll_max_across_bytes_per_s == pytest.approx((22.5e9, 19.0e9))
    mi300x, _ = _fabric("MI300X", 2)  # RCCL: none of NCCL's ceilings
    assert mi300x.ll_max_across_bytes_per_s == (0.0, 0.0)


@pytest.mark.parametrize("servers, ceiling_gBps", [(2, 22.5), (3, 19.0), (4, 19.0)])
def test_a_large_ll_ring_across_a100_servers_reaches_nccls_ceiling(servers, ceiling_gBps):
    # 8 channels over 8 NICs of 200 Gb/s: LL's half rate alone would give ~96 GB/s of bus bandwidth
    fabric, router = _fabric("A100", servers)
    paths = Paths.from_fabric(fabric, router)
    n = 8 * servers
    size = 256 * MB  # bandwidth-bound
    t = collective_time_s("all-reduce", "ring", Shape.full(n, 8), size, paths, protocol="ll", channels=8)
    assert _busbw("all-reduce", n, size, t) == pytest.approx(ceiling_gBps * 1e9, rel=0.03)
    simple = collective_time_s("all-reduce", "ring", Shape.full(n, 8), size, paths, protocol="simple", channels=8)
    assert _busbw("all-reduce", n, size, simple) > 4 * ceiling_gBps * 1e9  # LL is far from the link here


def test_one_channel_stays_under_the_ceiling_so_it_binds_nothing():
    # one channel over one 200 Gb/s NIC: LL's half rate (12 GB/s) is under AMD's 22.5: the ceiling leaves it alone
    fabric, router = _fabric("A100", 2)
    paths = Paths.from_fabric(fabric, router)
    assert ll_network_scale(paths.rail.bandwidth_bytes_per_s, 22.5e9, 1) == 1.0
    assert paths.ll_across(2, 1) is paths
    uncapped = Paths(**{**paths.__dict__, "ll_max_across_bytes_per_s": (0.0, 0.0)})
    args = ("all-reduce", "ring", Shape.full(16, 8), 64 * MB)
    assert collective_time_s(*args, paths, protocol="ll", channels=1) == pytest.approx(
        collective_time_s(*args, uncapped, protocol="ll", channels=1)
    )


@settings(max_examples=40, deadline=None)
@given(
    servers=st.integers(2, 6),
    channels=st.sampled_from([1, 2, 4, 8]),
    log_size=st.integers(10, 30),
    op=st.sampled_from(["all-reduce", "all-gather", "reduce-scatter"]),
    vendor=st.sampled_from(["amd", "other"]),
)
def test_no_ll_collective_across_servers_beats_nccls_ceiling(servers, channels, log_size, op, vendor):
    ceiling = NCCL_LL_MAX_ACROSS_GBPS[vendor][0 if servers == 2 else 1] * 1e9
    paths = Paths.simple(8, 232.8, 200)
    paths = Paths(
        **{**paths.__dict__, "ll_max_across_bytes_per_s": tuple(x * 1e9 for x in NCCL_LL_MAX_ACROSS_GBPS[vendor])}
    )
    uncapped = Paths.simple(8, 232.8, 200)
    n = 8 * servers
    size = float(1 << log_size)
    t = collective_time_s(op, "ring", Shape.full(n, 8), size, paths, protocol="ll", channels=channels)
    t_free = collective_time_s(op, "ring", Shape.full(n, 8), size, uncapped, protocol="ll", channels=channels)
    assert _busbw(op, n, size, t) <= ceiling * (1 + 1e-9)
    assert t >= t_free * (1 - 1e-12)  # a ceiling only ever slows
    inside = collective_time_s(op, "ring", Shape.full(8, 8), size, paths, protocol="ll", channels=channels)
    assert inside == collective_time_s(op, "ring", Shape.full(8, 8), size, uncapped, protocol="ll", channels=channels)


def test_the_lowered_ring_holds_the_ceiling_as_the_model_does():
    # the flow engine runs what the lowering built: network transfers carry 1 / scale more wire bytes, NVLink ones
    # LL's plain 2x; its bus bandwidth agrees with the model's
    fabric, router = _fabric("A100", 2)
    size = 64 * MB
    group = tuple(range(16))
    call = CollectiveCall("c", "all-reduce", group, size // 4, 4, algorithm="ring", protocol="ll", channels=8)
    graph = lower(
        Workload("t", [[call] for _ in group], params=0, iterations=1, flops_per_iteration=0.0), fabric, router
    )
    timeline = run(graph, fabric, "flow")
    t_flow = float(np.nanmax(timeline.end_s) - np.nanmin(timeline.start_s))
    t_model = collective_time_s(
        "all-reduce", "ring", Shape.full(16, 8), size, Paths.from_fabric(fabric, router), protocol="ll", channels=8
    )
    assert t_flow == pytest.approx(t_model, rel=0.05)
    assert _busbw("all-reduce", 16, size, t_flow) <= 22.5e9 * 1.01
    wires = {float(w) for w in graph.wire.values()}
    assert 2.0 in wires and max(wires) > 2.0  # NVLink hops at LL's 2x, network hops at more


def test_bench_takes_the_cpu_vendor_and_amd_servers_hold_ll_lower(capsys):
    from aifabric.cli import run_app
    from aifabric.cli.app import app

    said = {}

    def row(vendor: str) -> tuple[float, str]:
        args = ["collective", "bench", "--gpu", "A100", "-n", "16", "--nic-gbps", "200", "-b", "512K", "-e", "512K"]
        assert run_app(app, [*args, "--cpu-vendor", vendor]) == 0
        out = capsys.readouterr().out
        said[vendor] = " ".join(out.split())
        cells = [c.strip() for c in next(x for x in out.splitlines() if "524288" in x).split("│")]
        return float(cells[6]), cells[9]  # time (us), algorithm

    (t_amd, alg_amd), (t_intel, alg_intel), (t_auto, _) = row("amd"), row("intel"), row("auto")
    assert alg_amd == alg_intel == "ring/ll/8ch"
    assert t_amd > 1.2 * t_intel  # 22.5 GB/s against 39.0 of bus bandwidth on two servers
    assert t_auto == t_amd  # DGX A100's EPYCs
    # the rows ran LL: the bench says which ceiling held them
    assert "at most 22.5 GB/s of bus bandwidth across 2 servers" in said["amd"]
    assert "at most 39 GB/s of bus bandwidth across 2 servers" in said["intel"]
