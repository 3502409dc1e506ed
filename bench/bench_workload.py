"""Workload construction at scale: GPT-3 175B training plans -> every rank's op list.

Prints build wall time, CPU time, ops, distinct objects and peak RSS. The issue's target: GPT-3 175B on
8,192 GPUs (TP 8, PP 16, DP 64) in under 10 s.

    python bench/bench_workload.py [--dp 8 64]
"""

from __future__ import annotations

import argparse
import resource
import time

from aifabric.catalog import gpu
from aifabric.models import MODELS
from aifabric.workload.llm import build_llm_training
from aifabric.workload.plan import Plan


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dp", type=int, nargs="+", default=[8, 64])
    args = ap.parse_args()
    print("| GPUs | tp | pp | dp | micro-batches | ops (all ranks) | ops per rank | build s | cpu s | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for dp in args.dp:
        plan = Plan(tp=8, pp=16, dp=dp, global_batch_size=24 * dp, seq_len=2048, micro_batch_size=1)
        t, c = time.perf_counter(), time.process_time()
        w = build_llm_training(MODELS["gpt3-175b"], plan, gpu("H100"))
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        ops = sum(len(r) for r in w.ranks)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"| {w.world_size:,} | 8 | 16 | {dp} | {plan.micro_batches} | {ops:,} | {len(w.ranks[0]):,} | "
            f"{wall:.2f} | {cpu:.2f} | {rss:.0f} |"
        )
        del w


if __name__ == "__main__":
    main()
