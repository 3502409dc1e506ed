"""The hybrid engine (engines/hybrid.py) against the flow and packet engines: wall time, the iteration, what ran
packet by packet, and the error against the full packet run where that run is affordable.

    python bench/bench_hybrid.py                 # demo (auto window) and ch14 (dp window) with their packet runs
    python bench/bench_hybrid.py --gpt3 1024     # also GPT-3 175B on 1,024 GPUs, its gradient phase (dp window)
    python bench/bench_hybrid.py --no-packet     # skip the full packet runs (the demo's takes ~8 minutes)
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path


def _timed(fn, *args, **kw):
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0


def _row(label: str, engine: str, wall_s: float, run, ref_s: float | None) -> None:
    it = run.results.iteration_time_s
    err = f"{100 * (it - ref_s) / ref_s:+.2f} %" if ref_s else "-"
    windows = "; ".join(
        f"{w.spec.text}: {w.transfers} transfers, {w.packet_s * 1e3:.2f} ms packet by packet, "
        f"{w.extrapolated} extrapolated"
        for w in (run.packet_windows or ())
    )
    print(f"{label:<22} {engine:<18} {wall_s:9.1f} {it:14.6f} {err:>10}  {windows}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpt3", type=int, nargs="*", default=[], help="GPU counts of the GPT-3 175B plan (dp window)")
    ap.add_argument("--no-packet", action="store_true", help="skip the full packet runs")
    args = ap.parse_args()
    from aifabric.scenario import embedded_scenario
    from aifabric.simulate import simulate

    print(f"{'scenario':<22} {'engine':<18} {'wall s':>9} {'iteration s':>14} {'vs packet':>10}  windows")
    for name, window in (("ch14", "dp"), ("demo", "auto")):
        s = embedded_scenario(name)
        flow, w_flow = _timed(simulate, s, "flow")
        _row(name, "flow", w_flow, flow, None)
        ref = None
        if not args.no_packet:
            packet, w_packet = _timed(simulate, s, "packet")
            ref = packet.results.iteration_time_s
            _row(name, "packet", w_packet, packet, None)
        for cap in (1e-3, None):
            hyb, w_h = _timed(simulate, s, "hybrid", packet_windows=[window], packet_max_s=cap)
            _row(name, f"hybrid {window} " + ("1 ms" if cap else "all"), w_h, hyb, ref)
            if cap is None and name == "demo" and args.no_packet:
                break
    if args.gpt3:
        sys.path.insert(0, str(Path(__file__).parent))
        from bench_iteration import scenario

        for gpus in args.gpt3:
            s = scenario(gpus, "flow", "gpt3")
            hyb, w_h = _timed(simulate, s, "hybrid", packet_windows=["dp"])
            _row(f"gpt3-175b {gpus}", "hybrid dp 1 ms", w_h, hyb, None)
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
