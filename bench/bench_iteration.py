"""One training iteration at several GPU counts, on the flow engine (each size in its own process, so
its peak RSS is its own), as `aifabric simulate` runs it: simulate, then every report file. Prints build
(fabric + workload), lowering, run (event loop), results, report (the files), total wall time,
tasks, rate recomputations, events per second, the simulated iteration time and MFU, and peak RSS.

Plans (`--plan`):
- gpt3 (default): GPT-3 175B, TP 8, PP 8, 1F1B, sequence parallelism, selective recompute, global batch
  1,536 x 2,048 tokens, bf16, H100, two-tier rail-optimized 400 Gb/s; data parallelism = GPUs / 64.
- llama3: Llama 3 405B as published (Dubey et al. 2024, Table 4): TP 8, PP 16 (126 blocks: one fewer on
  the first and the last stage), DP = GPUs / 128, 16 sequences of 8,192 tokens per replica, gradients
  and optimizer sharded over DP (ZeRO-2), bf16, H100, a three-tier (multi-pod) rail-optimized 400 Gb/s.
- 1t: the 1T model of Narayanan et al. 2021 (128 layers, hidden 25,600, 160 heads): TP 8, PP 64, DP =
  GPUs / 512, micro-batch 1, batch = GPUs, full recomputation, fp16, A100 with 8 x 200 Gb/s.

    python bench/bench_iteration.py [--plan gpt3|llama3|1t] [--gpus 1024 8192 16384] [--engine flow] [--jsonl F]
    python bench/bench_iteration.py --table --jsonl F   # docs/performance.md's rows: TABLE below
    python bench/growth_svg.py F docs/img/iteration-growth.svg
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path


def _fabric(servers: int, nic_gbps: float) -> dict:
    """Non-blocking rail-optimized: two tiers up to 32 segments of 32 servers, pods of 256 servers beyond."""
    if servers <= 1024:
        fabric = {
            "topology": "rail-optimized",
            "servers_per_segment": min(32, servers),
            "leaf_oversubscription": 1,
            "link_speed_gbps": nic_gbps,
            "switch_radix": 64,
        }
        if servers > 32:  # spines need a port per rail switch: 8 per segment
            fabric["spine_radix"] = max(64, 8 * servers // 32)
        return fabric
    pods = servers // 256
    return {
        "topology": "multi-pod",
        "pods": pods,
        "servers_per_segment": 32,
        "leaf_oversubscription": 1,
        "spine_oversubscription": 1,
        "link_speed_gbps": nic_gbps,
        "switch_radix": 64,
        "spine_radix": 128,
        "superspine_radix": max(64, 64 * pods),
    }


# docs/performance.md's table of today's largest runs (1,024 to 32,768 GPUs): (plan, GPUs)
TABLE = (("gpt3", 1024), ("1t", 3072), ("gpt3", 8192), ("llama3", 16384), ("llama3", 32768))


def scenario(gpus: int, engine: str, plan: str = "gpt3"):
    from aifabric.scenario.schema import Scenario

    servers = gpus // 8
    if plan == "llama3":
        dp = gpus // 128
        workload = {
            "kind": "llm-training",
            "model": "llama3-405b",
            "parallelism": {
                "tp": 8,
                "pp": 16,
                "dp": dp,
                "micro_batch_size": 1,
                "zero": 2,
                "layers_per_stage": [7] + [8] * 14 + [7],
            },
            "global_batch_size": 16 * dp,
            "seq_len": 8192,
            "precision": "bf16",
            "memory_check": False,
        }
        cluster = {"gpu": "H100", "servers": servers, "gpus_per_server": 8, "nic_speed_gbps": 400}
        fabric = _fabric(servers, 400)
    elif plan == "1t":
        workload = {
            "kind": "llm-training",
            "model": {"kind": "transformer", "layers": 128, "hidden": 25600, "heads": 160, "vocab": 51200},
            "parallelism": {"tp": 8, "pp": 64, "dp": gpus // 512, "micro_batch_size": 1, "recompute": "full"},
            "global_batch_size": gpus,
            "seq_len": 2048,
            "precision": "fp16",
            "attention": "unfused",
            "memory_check": False,
        }
        cluster = {"gpu": "A100", "servers": servers, "gpus_per_server": 8, "nic_speed_gbps": 200}
        fabric = _fabric(servers, 200)
    else:
        workload = {
            "kind": "llm-training",
            "model": "gpt3-175b",
            "parallelism": {
                "tp": 8,
                "pp": 8,
                "dp": gpus // 64,
                "schedule": "1f1b",
                "micro_batch_size": 1,
                "sequence_parallel": True,
                "recompute": "selective",
            },
            "global_batch_size": 1536,
            "seq_len": 2048,
            "precision": "bf16",
        }
        cluster = {"gpu": "H100", "servers": servers, "gpus_per_server": 8, "nic_speed_gbps": 400}
        fabric = _fabric(servers, 400)
    return Scenario.model_validate(
        {
            "name": f"{plan}-{gpus}",
            "seed": 1,
            "cluster": cluster,
            "fabric": fabric,
            "workload": workload,
            "engine": engine,
        }
    )


def one(gpus: int, engine: str, plan: str = "gpt3") -> dict:
    """One size in this process: `aifabric simulate`'s path (simulate, then every report file), each stage
    timed through simulate's phase callback."""
    import tempfile

    from aifabric import simulate, write_report

    s = scenario(gpus, engine, plan)
    marks: list[tuple[str, float]] = []
    run = simulate(s, phase=lambda name: marks.append((name, time.perf_counter())))
    marks.append(("report", time.perf_counter()))
    with tempfile.TemporaryDirectory() as out:
        write_report(run, Path(out), None)
    marks.append(("end", time.perf_counter()))
    at = dict(marks)
    res, tl = run.results, run.timeline
    run_s = at["results"] - at["event loop"]
    events = len(run.graph) + tl.rate_recomputations
    return {
        "gpus": gpus,
        "build_s": at["task graph"] - at["fabric"],
        "lower_s": at["event loop"] - at["task graph"],
        "run_s": run_s,
        "results_s": at["report"] - at["results"],
        "report_s": at["end"] - at["report"],
        "total_s": at["end"] - at["fabric"],
        "tasks": len(run.graph),
        "recomputations": tl.rate_recomputations,
        "events_per_s": events / run_s,
        "iteration_s": res.iteration_time_s,
        "mfu": res.mfu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, nargs="+", default=[128, 1024, 8192])
    ap.add_argument("--engine", default="flow")
    ap.add_argument("--plan", default="gpt3", choices=("gpt3", "llama3", "1t"))
    ap.add_argument(
        "--jsonl", type=Path, help="append each size's row (with the plan) to this file (bench/growth_svg.py)"
    )
    ap.add_argument("--table", action="store_true", help="every row of docs/performance.md's table (TABLE)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.engine, args.plan)))
        return
    rows = list(TABLE) if args.table else [(args.plan, gpus) for gpus in args.gpus]
    print(
        f"{'plan':>6} {'GPUs':>6} {'build s':>8} {'lower s':>8} {'run s':>8} {'results s':>9} {'report s':>8} {'total s':>8} {'tasks':>9} "
        f"{'recomputes':>10} {'events/s':>9} {'iteration s':>11} {'MFU':>5} {'peak RSS MB':>11}"
    )
    for plan, gpus in rows:
        out = subprocess.run(
            [sys.executable, __file__, "--one", str(gpus), "--engine", args.engine, "--plan", plan],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
        if args.jsonl:
            with args.jsonl.open("a") as f:
                f.write(json.dumps({"plan": plan, **r}) + "\n")
        print(
            f"{plan:>6} {r['gpus']:6d} {r['build_s']:8.1f} {r['lower_s']:8.1f} {r['run_s']:8.1f} {r['results_s']:9.1f} {r['report_s']:8.1f} "
            f"{r['total_s']:8.1f} {r['tasks']:9,d} {r['recomputations']:10,d} {r['events_per_s']:9,.0f} "
            f"{r['iteration_s']:11.3f} {r['mfu']:5.2f} {r['peak_rss_mb']:11.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
