"""Tracing overhead of `aifabric train`: median step time with and without the communication tracer,
for a few plans (first step excluded: connection set-up). Runs alternate untraced / traced `--repeat`
times so background load hits both alike.

    python bench/bench_train.py [--steps 30] [--repeat 2] [--plans fnn:2:1:1 fnn:2:2:2 gpt:1:2:2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

from aifabric.train.launcher import launch
from aifabric.train.tracer import tracer_cost_s
from aifabric.train.worker import TrainConfig


def steady(run) -> list[float]:
    return run.step_times_s[1:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--plans", nargs="+", default=["fnn:2:1:1", "fnn:2:2:2", "gpt:1:2:2"], help="model:dp:tp:pp")
    a = ap.parse_args()
    print(f"tracer cost: {tracer_cost_s(100_000) * 1e6:.1f} µs per operation (begin + end, no communication)")
    print(f"{'plan':<14}{'ops/step/rank':>14}{'untraced ms':>13}{'traced ms':>11}{'overhead':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for plan in a.plans:
            model, dp, tp, pp = plan.split(":")
            cfg = TrainConfig(model=model, dp=int(dp), tp=int(tp), pp=int(pp), steps=a.steps, out=tmp)
            off, on, ops = [], [], 0
            for k in range(a.repeat):
                u = launch(replace(cfg, trace=False, out=str(Path(tmp) / f"u{k}")))
                t = launch(replace(cfg, trace=True, out=str(Path(tmp) / f"t{k}")))
                off += steady(u)
                on += steady(t)
                ops = max(r["comm_ops"] for r in t.results) / a.steps
            mu, mt = statistics.median(off), statistics.median(on)
            print(f"{plan:<14}{ops:>14.1f}{mu * 1e3:>13.2f}{mt * 1e3:>11.2f}{(mt - mu) / mu * 100:>9.1f}%")


if __name__ == "__main__":
    main()
