"""Expansion of one AllReduce into its schedule: wall time, moves and memory at 1k, 4k, 16k ranks.

For every rank count: the algorithm the tuner picks (auto, 1 GiB and 1 MiB), then every algorithm whose
move count stays under --max-moves (a flat ring at 16,384 ranks would be 2·16383·16384 ≈ 5.4e8 moves,
~13 GB of arrays: the reason auto never picks it there). Memory = bytes of the schedule's move arrays
(24 per move) and the process's peak RSS growth. Also the time to lower the auto schedule into transfers
(merged per step/src/dst/channel), without a fabric.

    python bench/bench_collectives.py [--ranks 1024 4096 16384] [--gpus-per-server 8] [--max-moves 1e8]
"""

from __future__ import annotations

import argparse
import resource
import time

from aifabric.collectives import ALGORITHMS, Layout, build_schedule
from aifabric.collectives.cost import Paths, Shape
from aifabric.collectives.tuning import choose
from aifabric.engines.lower_collective import transfers

GiB = 1 << 30


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def expected_moves(algorithm: str, n: int, g: int) -> float:
    s = n // g
    return {
        "ring": 2 * (n - 1) * n,
        "direct": 2 * n * (n - 1),
        "nvls": 2 * n * (n - 1) * 4,  # 4 pieces
        "hierarchical": 2 * s * g * (g - 1) + 2 * g * s * (s - 1),
    }.get(algorithm, 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--gpus-per-server", type=int, default=8)
    ap.add_argument("--max-moves", type=float, default=1e8)
    args = ap.parse_args()
    g = args.gpus_per_server
    layout = Layout(g)
    paths = Paths.simple(g, 450, 400)
    print(
        f"{'ranks':>6} {'algorithm':<18} {'moves':>12} {'steps':>7} {'expand s':>9} {'arrays MB':>10} "
        f"{'B/move':>7} {'peak RSS MB':>12}"
    )
    for n in args.ranks:
        shape = Shape.full(n, g)
        picks = {size: choose("all-reduce", shape, size, paths) for size in (1 << 20, GiB)}
        for size, c in picks.items():
            t0 = time.perf_counter()
            sched = build_schedule(
                "all-reduce", c.algorithm, range(n), size // 4, layout, channels=c.channels, pieces=c.pieces
            )
            t1 = time.perf_counter()
            tr = transfers(sched)
            t2 = time.perf_counter()
            print(
                f"{n:>6} {'auto@' + ('1MiB' if size < GiB else '1GiB') + '=' + c.algorithm:<18} {sched.n_moves:>12,} "
                f"{sched.n_steps:>7} {t1 - t0:>9.3f} {sched.nbytes / 1e6:>10.1f} {sched.nbytes / max(1, sched.n_moves):>7.0f}"
                f" {rss_mb():>12.0f}   (+ merge into {len(tr[0]):,} transfers {t2 - t1:.3f} s)"
            )
            del sched, tr
        for alg in ALGORITHMS["all-reduce"]:
            if expected_moves(alg, n, g) > args.max_moves:
                print(f"{n:>6} {alg:<18} {int(expected_moves(alg, n, g)):>12,}   skipped (> --max-moves)")
                continue
            t0 = time.perf_counter()
            sched = build_schedule("all-reduce", alg, range(n), GiB // 4, layout, channels=1, pieces=4)
            t1 = time.perf_counter()
            print(
                f"{n:>6} {alg:<18} {sched.n_moves:>12,} {sched.n_steps:>7} {t1 - t0:>9.3f} "
                f"{sched.nbytes / 1e6:>10.1f} {sched.nbytes / max(1, sched.n_moves):>7.0f} {rss_mb():>12.0f}"
            )
            del sched


if __name__ == "__main__":
    main()
