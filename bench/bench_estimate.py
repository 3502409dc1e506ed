"""The packet engine's cost per packet hop on this machine, on training iterations: what aifabric/estimate.py's
PACKET_HOP_S and CHUNK_HOP_S are, and how its estimate compares with the run.

For each scenario: the estimate (its packets, NVLink chunks and hops counted in the task graph, the flow engine's
iteration time, the estimated wall time), then the packet engine's run of it (simulate(s, "packet"): building, lowering,
the event loop; no report), its wall and CPU time, and the wall seconds per hop it implies.

    python bench/bench_estimate.py                      # ch14 (about 20 s)
    python bench/bench_estimate.py --scenario ch14 demo # the demo's packet run too (minutes)
"""

from __future__ import annotations

import argparse
import time

from aifabric.estimate import PACKET_HOP_S, estimate_packet_run
from aifabric.scenario import embedded_scenario
from aifabric.simulate import simulate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", nargs="+", default=["ch14"], help="embedded scenarios (demo, fabric, ch14)")
    args = ap.parse_args()
    print(f"PACKET_HOP_S in use: {PACKET_HOP_S * 1e6:.2f} us")
    print(
        f"{'scenario':10} {'packets':>11} {'hops':>12} {'chunk hops':>11} {'iter_s':>9} {'est_wall_s':>10} "
        f"{'run_wall_s':>10} {'run_cpu_s':>9} {'us/hop':>7} {'cpu us/hop':>10} {'est/run':>7}"
    )
    for name in args.scenario:
        s = embedded_scenario(name)
        est = estimate_packet_run(s)
        w0, c0 = time.perf_counter(), time.process_time()
        run = simulate(s, "packet")
        wall_s, cpu_s = time.perf_counter() - w0, time.process_time() - c0
        w = est.work
        hops = w.packet_hops + w.chunk_hops
        print(
            f"{name:10} {w.packets:>11,} {w.packet_hops:>12,} {w.chunk_hops:>11,} {est.iteration_s:>9.4f} "
            f"{est.wall_s:>10.1f} {wall_s:>10.1f} {cpu_s:>9.1f} {wall_s / max(hops, 1) * 1e6:>7.2f} "
            f"{cpu_s / max(hops, 1) * 1e6:>10.2f} "
            f"{est.wall_s / wall_s:>7.2f}"
        )
        print(
            f"{'':10} packet run's iteration {run.results.iteration_time_s:.4f} s (flow engine "
            f"{est.iteration_s:.4f} s); flow estimate itself took {est.flow_wall_s:.1f} s"
        )


if __name__ == "__main__":
    main()
