"""Build + plan a 32,768-GPU three-tier fabric: wall time and peak memory per stage.

4,096 servers x 8 H100, NIC per GPU at 400 Gb/s; radix-64 switches; rail-optimized segments of 32
servers (32 host ports + 32 uplinks per rail switch); pods of 4 segments (32 rail switches, 32 spines);
32 pods; super-spines in 32 planes, derived non-blocking (16 per plane, 2 links per spine = 512).

    python bench/bench_fabric.py [--servers 4096] [--routes 20000]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from aifabric.fabric import Router, build
from aifabric.fabric.cabling import cabling_rows
from aifabric.fabric.plan import make_plan
from aifabric.scenario.checks_fabric import check_fabric_spec
from aifabric.scenario.fabric_spec import ClusterSpec, FabricSpec


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--servers", type=int, default=4096)
    ap.add_argument("--routes", type=int, default=20000, help="random rank pairs to route after planning")
    args = ap.parse_args()
    cluster = ClusterSpec(gpu="H100", servers=args.servers, gpus_per_server=8, nic_speed_gbps=400)
    pods = max(1, args.servers // 128)
    fabric = FabricSpec(
        topology="multi-pod",
        pods=pods,
        servers_per_segment=32,
        spines=32,
        link_speed_gbps=400,
        superspine_planes=32,
        links_per_superspine=2,
        switch_radix=64,
    )
    t0 = time.perf_counter()
    problems = check_fabric_spec(cluster, fabric)
    assert not problems, problems
    t1 = time.perf_counter()
    f = build(cluster, fabric, "bench")
    t2 = time.perf_counter()
    plan = make_plan(f)
    t3 = time.perf_counter()
    n_cables = sum(1 for _ in cabling_rows(f))
    t4 = time.perf_counter()
    router = Router(f, per_switch_seed=True)
    rng = np.random.default_rng(0)
    pairs = rng.integers(0, f.world_size, size=(args.routes, 2))
    n = 0
    for a, b in pairs:
        if a != b:
            router.route(int(a), int(b))
            n += 1
    t5 = time.perf_counter()
    d = f.design
    print(
        f"GPUs {f.world_size:,}; switches {plan.bom.switches:,} (rail {d.leafs:,}, spine {d.spines:,}, "
        f"super-spine {d.superspines:,}); nodes {len(f.nodes):,}; directed links {len(f.links):,}; cables "
        f"{n_cables:,}"
    )
    print(f"verdict: {plan.capacity.verdict}")
    print(f"check {t1 - t0:6.2f} s")
    print(f"build {t2 - t1:6.2f} s")
    print(f"plan  {t3 - t2:6.2f} s   (BOM, capacity, failure domains)")
    print(f"build + plan {t3 - t1:6.2f} s   (target < 10 s)")
    print(f"cabling CSV rows {t4 - t3:6.2f} s")
    print(f"route {n:,} random pairs {t5 - t4:6.2f} s ({n / (t5 - t4):,.0f} routes/s)")
    print(f"peak RSS {peak_rss_mb():,.0f} MB")


if __name__ == "__main__":
    main()
