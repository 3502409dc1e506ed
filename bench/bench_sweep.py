"""A 200-case sweep of the Chapter 14 scenario (`aifabric demo --scenario ch14`): wall time by backend and
number of workers.

The 200 cases: fabric.spines 1..5 x fabric.load_balancing ecmp, spray x workload.global_batch_size 4,096 to
32,768 (4 values) x fabric.ecmp_hash_seed 0..4, every combination (--grid). Each case is simulated (flow
engine), its summary.json (power and cost included) and, unless --no-reports, its report.html written.

    python bench/bench_sweep.py [--workers 1 2] [--backend local ray] [--no-reports] [--cases 200]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

from aifabric.scenario import ch14_scenario_text
from aifabric.sweep.backends import ray_available
from aifabric.sweep.cases import build_cases
from aifabric.sweep.run import make_backend, run_sweep

VARY = [
    "fabric.spines=1..5",
    "fabric.load_balancing=ecmp,spray",
    "workload.global_batch_size=4096,8192,16384,32768",
    "fabric.ecmp_hash_seed=0..4",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--backend", nargs="+", default=["local", "ray"], choices=["local", "ray"])
    ap.add_argument("--no-reports", action="store_true", help="summary.json and the table only")
    ap.add_argument("--cases", type=int, default=200, help="the first N of the 200 combinations")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    scenario = work / "ch14.yaml"
    scenario.write_text(ch14_scenario_text(), encoding="utf-8")
    t0 = time.perf_counter()
    cases, _ = build_cases(scenario, VARY, grid=True)
    cases = cases[: args.cases]
    print(
        f"{len(cases)} cases of {scenario.name}; validated in {time.perf_counter() - t0:.2f} s; reports: "
        f"{'no' if args.no_reports else 'yes'}"
    )
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    print(
        "| backend | workers | wall s | cases/s | ok | backend start s | driver CPU s | cases' CPU s | cores used | "
        "load avg after |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for backend in args.backend:
        if backend == "ray" and not ray_available():
            print("| ray | – | not installed | | | | | | | |")
            continue
        for n in args.workers:
            out = work / f"{backend}-{n}"
            out.mkdir()
            pool, _ = make_backend(backend, workers=n)
            started: list[float] = []
            me = resource.getrusage(resource.RUSAGE_SELF)
            t = time.perf_counter()
            result = run_sweep(
                cases,
                out,
                pool,
                reports=not args.no_reports,
                on_start=lambda *a: started.append(time.perf_counter()),  # noqa: B023 - called in this turn
            )
            wall = time.perf_counter() - t
            me2 = resource.getrusage(resource.RUSAGE_SELF)
            driver = me2.ru_utime + me2.ru_stime - me.ru_utime - me.ru_stime
            cpu = sum(r.get("cpu_s", 0.0) for r in result.rows)  # each case's CPU time in its worker
            ok = sum(r["status"] == "ok" for r in result.rows)
            # cores used: the cases' CPU time over the wall time once the backend ran (other jobs on the machine
            # take the rest); load average: the machine's, other users included
            busy = wall - (started[0] - t)
            print(
                f"| {backend} | {n} | {wall:.1f} | {len(cases) / wall:.2f} | {ok} | {started[0] - t:.1f} | "
                f"{driver:.1f} | {cpu:.1f} | {cpu / busy:.2f} | {os.getloadavg()[0]:.1f} |",
                flush=True,
            )
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
