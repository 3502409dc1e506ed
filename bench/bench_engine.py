"""Flow/analytic engine scaling on the data-parallel skeleton workload (one flat ring AllReduce).

Prints wall time split into build (fabric + workload + lowering) and run (event loop), transfers,
rate recomputations, transfers per second and peak RSS, for several GPU counts.

    python bench/bench_engine.py [--gpus 8 64 256 512] [--engine flow analytic]
"""

from __future__ import annotations

import argparse
import resource
import time

from aifabric.engines import lower, run
from aifabric.scenario import ch14_scenario
from aifabric.simulate import build_fabric, build_workload


def scenario(gpus: int):
    base = ch14_scenario()
    servers = max(1, gpus // 8)
    data = base.model_dump()
    data["cluster"].update(servers=servers, gpus_per_server=min(8, gpus))
    data["fabric"].update(spines=8, switch_radix=max(64, servers + 16))
    data["workload"].update(global_batch_size=gpus * 256)
    return type(base).model_validate(data)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, nargs="+", default=[8, 64, 256, 512])
    ap.add_argument("--engine", nargs="+", default=["flow", "analytic"])
    args = ap.parse_args()
    print(
        f"{'engine':8} {'GPUs':>6} {'transfers':>10} {'recomputes':>10} {'build s':>8} {'run s':>8} "
        f"{'transfers/s':>12} {'peak RSS MB':>11}"
    )
    for engine in args.engine:
        for gpus in args.gpus:
            s = scenario(gpus)
            t0 = time.perf_counter()
            fabric, router = build_fabric(s)
            graph = lower(build_workload(s), fabric, router)
            t1 = time.perf_counter()
            tl = run(graph, fabric, engine)
            t2 = time.perf_counter()
            transfers = len(graph) - 2 * gpus
            rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(
                f"{engine:8} {gpus:6d} {transfers:10d} {tl.rate_recomputations:10d} {t1 - t0:8.2f} {t2 - t1:8.2f} "
                f"{transfers / (t2 - t1):12.0f} {rss_mb:11.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
