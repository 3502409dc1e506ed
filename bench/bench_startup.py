"""Start-up of the command line: wall time of `aifabric --version`, `aifabric --help` and a command's `--help`,
each a fresh process, the median and the best of N runs (issue 14: under 0.3 s for the first two).

    python bench/bench_startup.py [--runs 15] [--command aifabric]

`--command` is what is run: the `aifabric` found on PATH by default (run from Python under pyenv, that is the
installed script itself; the shell's `aifabric` is pyenv's shim, a bash script that adds about 0.1 s before Python
starts: `--command ~/.pyenv/shims/aifabric` measures it); `--command python` runs `python -m aifabric`. The table also gives the
bare interpreter's start (`python -c pass`), which no change to aifabric can remove."""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

CASES = (["--version"], ["--help"], ["pipeline", "--help"], ["fabric", "--help"])


def wall_s(argv: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--command", default="aifabric", help="the command to run: a name on PATH, a path, or python")
    args = ap.parse_args()
    if args.command == "python":
        prefix = [sys.executable, "-m", "aifabric"]
    else:
        found = shutil.which(args.command)
        if found is None:
            raise SystemExit(f"{args.command}: not on PATH (pip install -e . puts it there)")
        prefix = [found]
    print(f"{' '.join(prefix)}: {args.runs} runs each, wall seconds")
    print("| command | median s | best s |\n|---|---|---|")
    rows = [("python -c pass", [sys.executable, "-c", "pass"])]
    rows += [(f"aifabric {' '.join(case)}", [*prefix, *case]) for case in CASES]
    for label, argv in rows:
        times = wall_s(argv, args.runs)
        print(f"| `{label}` | {statistics.median(times):.3f} | {min(times):.3f} |")


if __name__ == "__main__":
    main()
