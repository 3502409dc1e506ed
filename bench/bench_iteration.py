"""One training iteration of GPT-3 175B (TP 8, PP 8, 1F1B, sequence parallelism, selective recompute,
global batch 1,536 x 2,048 tokens, bf16) on H100s with a two-tier rail-optimized 400 Gb/s fabric, at
several GPU counts (data parallelism = GPUs / 64), on the flow engine.

Each size runs in its own process so its peak RSS is its own. Prints build (fabric + workload),
lowering, run (event loop), total wall time, tasks, rate recomputations, events per second, the
simulated iteration time and MFU, and peak RSS.

    python bench/bench_iteration.py [--gpus 128 1024 8192] [--engine flow]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def scenario(gpus: int, engine: str):
    from aifabric.scenario.schema import Scenario

    servers = gpus // 8
    dp = gpus // 64
    fabric = {"topology": "rail-optimized", "servers_per_segment": min(32, servers), "leaf_oversubscription": 1,
              "link_speed_gbps": 400, "switch_radix": 64}
    if servers > 32:  # spines need a port per rail switch: 8 per segment
        fabric["spine_radix"] = max(64, 8 * servers // 32)
    return Scenario.model_validate({
        "name": f"gpt3-175b-{gpus}", "seed": 1,
        "cluster": {"gpu": "H100", "servers": servers, "gpus_per_server": 8, "nic_speed_gbps": 400},
        "fabric": fabric,
        "workload": {"kind": "llm-training", "model": "gpt3-175b",
                     "parallelism": {"tp": 8, "pp": 8, "dp": dp, "schedule": "1f1b", "micro_batch_size": 1,
                                     "sequence_parallel": True, "recompute": "selective"},
                     "global_batch_size": 1536, "seq_len": 2048, "precision": "bf16"},
        "engine": engine,
    })


def one(gpus: int, engine: str) -> dict:
    from aifabric.catalog import gpu
    from aifabric.engines import lower, run
    from aifabric.results import summarize
    from aifabric.simulate import build_fabric, build_workload

    s = scenario(gpus, engine)
    t0 = time.perf_counter()
    fabric, router = build_fabric(s)
    workload = build_workload(s)
    t1 = time.perf_counter()
    graph = lower(workload, fabric, router, **s.lowering_options())
    t2 = time.perf_counter()
    tl = run(graph, fabric, engine)
    t3 = time.perf_counter()
    res = summarize(engine, workload, graph, fabric, tl, peak_flops_per_gpu=gpu("H100").peak_flops("bf16"))
    t4 = time.perf_counter()
    events = len(graph) + tl.rate_recomputations
    return {"gpus": gpus, "build_s": t1 - t0, "lower_s": t2 - t1, "run_s": t3 - t2, "results_s": t4 - t3,
            "total_s": t4 - t0, "tasks": len(graph), "recomputations": tl.rate_recomputations,
            "events_per_s": events / (t3 - t2), "iteration_s": res.iteration_time_s, "mfu": res.mfu,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, nargs="+", default=[128, 1024, 8192])
    ap.add_argument("--engine", default="flow")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.engine)))
        return
    print(f"{'GPUs':>6} {'build s':>8} {'lower s':>8} {'run s':>8} {'results s':>9} {'total s':>8} {'tasks':>9} "
          f"{'recomputes':>10} {'events/s':>9} {'iteration s':>11} {'MFU':>5} {'peak RSS MB':>11}")
    for gpus in args.gpus:
        out = subprocess.run([sys.executable, __file__, "--one", str(gpus), "--engine", args.engine],
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{r['gpus']:6d} {r['build_s']:8.1f} {r['lower_s']:8.1f} {r['run_s']:8.1f} {r['results_s']:9.1f} "
              f"{r['total_s']:8.1f} {r['tasks']:9,d} {r['recomputations']:10,d} {r['events_per_s']:9,.0f} "
              f"{r['iteration_s']:11.3f} {r['mfu']:5.2f} {r['peak_rss_mb']:11.0f}", flush=True)


if __name__ == "__main__":
    main()
