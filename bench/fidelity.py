"""The validation suite: every published measurement in bench/fidelity/cases.yaml, predicted and compared.

    python bench/fidelity.py                     # every case (about 25 minutes on 2 cores)
    python bench/fidelity.py --case K3 --case N2 # some
    python bench/fidelity.py --max-gpus 1024     # the cases up to 1,024 GPUs (about 2 minutes)
    python bench/fidelity.py --write-docs        # the table into docs/validation.md
    python bench/fidelity.py --case M4 --write-docs  # re-run some; the others' stored results stay

Every prediction is stored in bench/fidelity/results.json with the commit it ran at; the docs table is written
from the stored results of every case (a case re-run replaces its own), so a change that affects a few cases
is re-run on those alone.

Prints, per case, the predicted and the published figure, the error (predicted / published - 1: for an
iteration time positive means the simulator is slower than the real run, for a throughput or bandwidth
faster), and the wall time of the simulation; then the mean absolute and the largest error, overall and per
source. Cases too large to run here are listed with the time their simulation is estimated to take.

Nothing here is fitted: the simulator runs on its catalog (hardware characterization) and each case's
configuration as its source states it (assumptions listed per source in cases.yaml).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent
CASES = ROOT / "fidelity" / "cases.yaml"
DOCS = ROOT.parent / "docs" / "validation.md"
RESULTS = ROOT / "fidelity" / "results.json"
DEFAULT_MAX_GPUS = 16384  # every case: the largest, Llama 3 405B at its published 16,384 H100, in minutes
# wall seconds of the flow engine per (GPU x micro-batch x layer) of a plan, measured on the cases that ran;
# used to estimate the ones that did not (printed as "~ N min")
FALLBACK_S_PER_UNIT = 2e-6


@dataclass
class Outcome:
    case: dict
    predicted: float | None
    error: float | None
    wall_s: float
    note: str = ""
    estimated_s: float | None = None
    sweep: dict[int, float] | None = None  # virtual stages -> predicted, for a case whose source leaves them out


def load_cases(path: Path = CASES) -> tuple[dict, list[dict]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data["sources"], data["cases"]


def gpus_of(case: dict) -> int:
    return int(case.get("servers", 0)) * int(case.get("gpus_per_server", 8))


def scenario_of(case: dict) -> dict:
    """A scenario for an LLM-training case: its model, GPUs, network and plan."""
    servers = int(case["servers"])
    gps = int(case.get("gpus_per_server", 8))
    nic = float(case.get("nic_gbps", 200))
    segment = max(d for d in range(1, min(servers, 32) + 1) if servers % d == 0)  # servers per rail-switch set
    fabric = {
        "topology": "rail-optimized",
        "link_speed_gbps": nic,
        "switch_radix": 64,
        "leaf_oversubscription": 1,
        "servers_per_segment": segment,
        "transport": case.get("transport", "roce"),
    }
    if servers > segment:  # a spine port per segment's rail switch
        fabric["spine_radix"] = max(64, math.ceil(servers / segment) * 32)
    cluster = {"gpu": case["gpu"], "servers": servers, "gpus_per_server": gps, "nic_speed_gbps": nic}
    if "nics_per_server" in case and case["nics_per_server"] != gps:  # GPUs share NICs behind PCIe switches
        cluster.update(nic_layout="shared", nics_per_server=case["nics_per_server"])
    if "cpu_vendor" in case:  # the servers' CPUs, where the source names them (NCCL's LL ceiling across servers)
        cluster["cpu_vendor"] = case["cpu_vendor"]
    par = {
        k: case[k]
        for k in (
            "tp",
            "pp",
            "dp",
            "cp",
            "ep",
            "zero",
            "micro_batch_size",
            "sequence_parallel",
            "recompute",
            "overlap_grad_reduce",
            "grad_reduce_precision",
            "backward_prefetch",
        )
        if k in case
    }
    chunks = case.get("chunks", 1)
    if chunks > 1:
        par.update(schedule="interleaved", chunks=chunks)
    if case.get("end_stages_fewer"):  # the first and the last (virtual) stage hold that many blocks fewer
        stages = case["pp"] * chunks
        per = (case["layers"] + 2 * case["end_stages_fewer"]) // stages
        fewer = per - case["end_stages_fewer"]
        par["layers_per_stage"] = [fewer] + [per] * (stages - 2) + [fewer]
    if "model_name" in case:  # a zoo model, its own architecture
        model: dict | str = case["model_name"]
    else:
        model = {
            "kind": "transformer",
            "layers": case["layers"],
            "hidden": case["hidden"],
            "heads": case["heads"],
            "vocab": case["vocab"],
        }
    workload = {
        "kind": "llm-training",
        "model": model,
        "parallelism": par,
        "global_batch_size": case["global_batch_size"],
        "seq_len": case["seq_len"],
        "precision": case["precision"],
        "attention": case.get("attention", "flash"),
        "software": case.get("software", "current"),
        "memory_check": False,
    }
    if case["precision"] == "fp8" and "fp8_recipe" in case:  # Transformer Engine's scaling recipe, where stated
        workload["fp8_recipe"] = case["fp8_recipe"]
    return {
        "name": f"fidelity-{case['id']}",
        "seed": 0,
        "cluster": cluster,
        "fabric": fabric,
        "workload": workload,
        "engine": "flow",
    }


def narayanan_eq3_flops(case: dict) -> float:
    """Narayanan et al. 2021, eq. (3): 96 B s l h^2 (1 + s / 6h + V / 16 l h), recomputation included."""
    b, s, l, h, v = case["global_batch_size"], case["seq_len"], case["layers"], case["hidden"], case["vocab"]
    return 96.0 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def model_of(case: dict):
    """The case's model as the simulator builds it."""
    from aifabric.scenario import parse_scenario
    from aifabric.workload.from_spec import resolve_plan

    model, _, _ = resolve_plan(parse_scenario(scenario_of(case)))
    return model


def palm_flops(case: dict) -> float:
    """PaLM's model FLOPs (Chowdhery et al. 2022, Appendix B): 6N + 12 L H Q T per token, N the parameters
    that multiply (all but the input embedding and positions), attention over the full T x T square."""
    model = model_of(case)
    n = model.params - model.embedding_params - model.position_params
    t = case["seq_len"]
    return case["global_batch_size"] * t * (6.0 * n + 12.0 * model.layers * model.hidden * t)


def nemo_flops(case: dict, causal: bool = False) -> float:
    """NeMo's model FLOPs (the NeMo Framework performance summary's 'Model TFLOP / sec / GPU'), per token: GPT-3,
    72 L h^2 + 12 L s h + 6 h V (forward and backward, attention over the full s x s square, the logits); Llama,
    L h^2 (12 + 12 G / A + 18 F / h + 12 s / h + 6 V / (L h)) with G key-value groups of A heads and FFN width F
    (three matrices, SwiGLU). `causal`: Megatron Bridge's count (NeMo 25.x), the causal half of the square,
    6 s / h (its tables' tokens/s give their TFLOP/s so, test)."""
    s = case["seq_len"]
    tokens = case["global_batch_size"] * s
    if "model_name" not in case:
        layers, h, v = case["layers"], case["hidden"], case["vocab"]
        return tokens * (72.0 * layers * h * h + 12.0 * layers * s * h + 6.0 * h * v)
    model = model_of(case)
    layers, h, v = model.layers, model.hidden, model.vocab
    groups = model.kv_heads or model.heads
    attention = (6.0 if causal else 12.0) * s / h
    ratio = 12.0 + 12.0 * groups / model.heads + 18.0 * model.ffn_hidden / h + attention + 6.0 * v / (layers * h)
    return tokens * layers * h * h * ratio


FLOPS = {
    "narayanan-eq3": narayanan_eq3_flops,
    "palm": palm_flops,
    "nemo": nemo_flops,
    "nemo-causal": lambda case: nemo_flops(case, causal=True),
}


TRAINING_METRICS = ("iteration_time_s", "tflops_per_gpu", "tokens_per_s_per_gpu")
"""The metrics of a whole training iteration (a case of a model, GPUs, network and plan)."""


def run_iteration(case: dict) -> float:
    from aifabric.scenario import parse_scenario
    from aifabric.simulate import simulate

    run = simulate(parse_scenario(scenario_of(case)), engine="flow")
    if not run.results.complete:
        raise KeyboardInterrupt
    return run.results.iteration_time_s


def run_layer(case: dict) -> float:
    """One decoder layer's forward or backward pass on one tensor-parallel rank, milliseconds: its kernels
    (the compute model) and its tensor-parallel collectives timed as the simulator folds them."""
    from aifabric.engines.fold import ScaleUpFolder
    from aifabric.kernels.transformer import TransformerKernels
    from aifabric.scenario import parse_scenario
    from aifabric.simulate import build_fabric, kernel_model
    from aifabric.workload.from_spec import resolve_plan
    from aifabric.workload.ops import Collective

    s = parse_scenario(scenario_of(case))
    model, plan, _ = resolve_plan(s)
    fabric, router = build_fabric(s)
    tk = TransformerKernels(
        kernel_model(s),
        model,
        tp=plan.tp,
        cp=plan.cp,
        micro_batch=plan.micro_batch_size,
        seq_len=plan.seq_len,
        sequence_parallel=plan.sequence_parallel,
        attention=plan.attention,
    )
    folder = ScaleUpFolder(fabric, router)
    group = tuple(range(plan.tp))
    elements = plan.micro_batch_size * plan.seq_len * model.hidden
    bpe = 2

    def exchanges() -> float:  # the two of a pass: AllReduce each, or AllGather + ReduceScatter each
        ops = ["all-gather", "reduce-scatter"] if plan.sequence_parallel else ["all-reduce"]
        return 2 * sum(folder.fold(Collective(f"x{op}", op, group, elements, bpe, dim="tp")) for op in ops)

    forward = tk.op("fwd/attn").time_s + tk.op("fwd/mlp").time_s + exchanges()
    if case["pass"] == "forward":
        return forward * 1e3
    backward = tk.op("bwd/attn").time_s + tk.op("bwd/mlp").time_s + exchanges()
    if plan.recompute == "full":
        backward += forward
    elif plan.recompute == "selective":
        backward += tk.op("recompute/attn-core").time_s
    return backward * 1e3


def run_collective(case: dict) -> float:
    """nccl-tests' bus bandwidth of one collective on the case's servers, GB/s."""
    from aifabric.collectives.cost import busbw_factor
    from aifabric.engines import lower, run
    from aifabric.engines.lower_collective import CollectiveCall
    from aifabric.scenario import parse_scenario
    from aifabric.simulate import build_fabric
    from aifabric.workload.ops import Collective, Recv, Send, Workload

    d = scenario_of(
        {
            **case,
            "layers": 1,
            "hidden": 64,
            "heads": 1,
            "vocab": 64,
            "tp": 1,
            "pp": 1,
            "micro_batch_size": 1,
            "global_batch_size": case["servers"] * 8,
            "seq_len": 64,
            "precision": "bf16",
        }
    )
    fabric, router = build_fabric(parse_scenario(d))
    n, size, op = case["ranks"], int(case["size_bytes"]), case["collective"]
    ranks: list[list] = [[] for _ in range(fabric.world_size)]
    if op == "send-recv":  # sendrecv_perf: every GPU sends to the next and receives from the previous
        for r in range(n):
            ranks[r].append(Send(f"p{r}", r, (r + 1) % n, size))
        for r in range(n):
            ranks[(r + 1) % n].append(Recv(f"p{r}", r, (r + 1) % n, size))
    else:
        group = tuple(range(n))
        elements = size // 4
        algorithm = case.get("algorithm")  # where the source states NCCL's algorithm (NCCL_ALGO)
        call = (
            Collective("c", op, group, elements, 4)
            if algorithm is None
            else CollectiveCall(
                "c",
                op,
                group,
                elements,
                4,
                algorithm=algorithm,
                channels=fabric.gpus_per_server if algorithm == "ring" else 0,  # a ring on one channel per NIC
            )
        )
        for r in group:
            ranks[r].append(call)
    graph = lower(Workload("bench", ranks, 0, 1, 0.0), fabric, router)
    tl = run(graph, fabric, "flow")
    t = float(tl.makespan_s)
    return size / t * (1.0 if op == "send-recv" else busbw_factor(op, n)) / 1e9


def predict(case: dict) -> float:
    metric = case["metric"]
    if metric == "layer_ms":
        return run_layer(case)
    if metric == "busbw_gBps":
        return run_collective(case)
    t = run_iteration(case)
    if metric == "iteration_time_s":
        return t
    if metric == "tflops_per_gpu":
        return FLOPS[case["flops"]](case) / (t * gpus_of(case)) / 1e12
    if metric == "tokens_per_s_per_gpu":  # no FLOP formula in between: the tokens the iteration trains
        return case["global_batch_size"] * case["seq_len"] / (t * gpus_of(case))
    raise ValueError(f"unknown metric {metric}")


def predict_sweep(case: dict, console: Console) -> dict[int, float]:
    """A case whose source does not give the number of virtual stages (model chunks per pipeline stage): the
    prediction at each count the plan allows, none chosen."""
    out = {}
    for v in case["sweep_chunks"]:
        console.print(f"[dim] V={v}[/]", end="")
        out[v] = predict({**case, "chunks": v})
    return out


def sweep_error(published: float, sweep: dict[int, float]) -> float:
    """0 when the published figure lies within the predictions, else its distance to the nearest one
    (nearest / published - 1)."""
    lo, hi = min(sweep.values()), max(sweep.values())
    if lo <= published <= hi:
        return 0.0
    return (lo if published < lo else hi) / published - 1


def sweep_text(sweep: dict[int, float], metric: str) -> str:
    return "; ".join(f"V={v}: {_fmt(p, metric)}" for v, p in sorted(sweep.items()))


def sweep_range(sweep: dict[int, float], metric: str) -> str:
    v = sorted(sweep)
    return f"{_fmt(min(sweep.values()), metric)}-{_fmt(max(sweep.values()), metric)} (V {v[0]}-{v[-1]})"


def work_units(case: dict) -> float:
    """GPUs x micro-batches x layers per stage: what the flow engine's wall time grows with."""
    if case.get("metric") not in TRAINING_METRICS or "layers" not in case:
        return 0.0
    tp, pp = case.get("tp", 1), case.get("pp", 1)
    dp = case.get("dp") or max(1, gpus_of(case) // (tp * pp))
    m = case["global_batch_size"] / (dp * case.get("micro_batch_size", 1))
    return gpus_of(case) / tp * m * case["layers"] / pp * len(case.get("sweep_chunks", (1,)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", default=[], help="run only these case ids (repeatable)")
    ap.add_argument("--max-gpus", type=int, default=DEFAULT_MAX_GPUS, help="skip (and estimate) larger cases")
    ap.add_argument("--write-docs", action="store_true", help="write the table into docs/validation.md")
    args = ap.parse_args(argv)
    console = Console()
    sources, cases = load_cases()
    if args.case:
        wanted = set(args.case)
        unknown = wanted - {c["id"] for c in cases}
        if unknown:
            console.print(f"[red]unknown case(s): {', '.join(sorted(unknown))}")
            return 2
        cases = [c for c in cases if c["id"] in wanted]
    outcomes: list[Outcome] = []
    rate = []  # (wall s, work units) of the cases that ran
    try:
        for case in cases:
            if case.get("runnable", True) is False or gpus_of(case) > args.max_gpus:
                outcomes.append(Outcome(case, None, None, 0.0, case.get("note", "")))
                continue
            console.print(f"[dim]{case['id']}: {gpus_of(case) or case.get('ranks')} GPUs ...[/]", end="")
            t0 = time.perf_counter()
            if "sweep_chunks" in case:
                sweep = predict_sweep(case, console)
                wall = time.perf_counter() - t0
                err = sweep_error(case["published"], sweep)
                console.print(
                    f"\r{case['id']}: {sweep_text(sweep, case['metric'])} vs {case['published']:g} "
                    f"({'within' if err == 0 else f'{100 * err:+.1f} % outside'}), {wall:.1f} s"
                )
                outcomes.append(Outcome(case, None, None, wall, sweep=sweep))
                continue
            predicted = predict(case)
            wall = time.perf_counter() - t0
            units = work_units(case)
            if units:
                rate.append((wall, units))
            err = predicted / case["published"] - 1
            console.print(
                f"\r{case['id']}: {_fmt(predicted, case['metric'])} vs {case['published']:g} ({100 * err:+.1f} %), {wall:.1f} s"
            )
            outcomes.append(Outcome(case, predicted, err, wall))
    except KeyboardInterrupt:
        console.print("\n[yellow]interrupted: the cases so far[/]")
    s_per_unit = (sum(w for w, _ in rate) / sum(u for _, u in rate)) if rate else FALLBACK_S_PER_UNIT
    for o in outcomes:
        if o.predicted is None and work_units(o.case):
            o.estimated_s = work_units(o.case) * s_per_unit
    table = render(outcomes, sources, console)
    if args.write_docs:
        stored = store(outcomes)
        everything = [
            next((o for o in outcomes if o.case["id"] == c["id"] and (o.predicted or o.sweep) is not None), None)
            or stored_outcome(c, stored)
            or next((o for o in outcomes if o.case["id"] == c["id"]), Outcome(c, None, None, 0.0))
            for c in load_cases()[1]
        ]
        write_docs(everything, sources)
        console.print(f"stored the results in {RESULTS}; wrote the table of every stored case into {DOCS}")
    return 0 if table else 1


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def store(outcomes: list[Outcome]) -> dict:
    """Add the predictions just made to results.json (replacing those cases' earlier ones); all stored."""
    stored = json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.exists() else {}
    commit, day = _commit(), datetime.date.today().isoformat()
    for o in outcomes:
        if o.sweep is not None:
            stored[o.case["id"]] = {
                "sweep": {str(v): p for v, p in o.sweep.items()},
                "published": o.case["published"],
                "wall_s": round(o.wall_s, 1),
                "commit": commit,
                "date": day,
            }
        if o.predicted is not None:
            stored[o.case["id"]] = {
                "predicted": o.predicted,
                "published": o.case["published"],
                "wall_s": round(o.wall_s, 1),
                "commit": commit,
                "date": day,
            }
    RESULTS.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return stored


def stored_outcome(case: dict, stored: dict) -> Outcome | None:
    r = stored.get(case["id"])
    if r is None or r.get("published") != case["published"]:
        return None
    if "sweep" in r:
        if "sweep_chunks" not in case:
            return None
        return Outcome(case, None, None, r["wall_s"], sweep={int(v): p for v, p in r["sweep"].items()})
    return Outcome(case, r["predicted"], r["predicted"] / case["published"] - 1, r["wall_s"])


ALL_TRAINING = "iteration time / throughput, all sources"
DENSE_TRAINING = "iteration time / throughput, dense models (all but mixture of experts)"
A100_TRAINING = "iteration time / throughput, A100 (fp16 and bf16)"


def is_moe_case(case: dict) -> bool:
    from aifabric.models.zoo import MODELS

    return getattr(MODELS.get(case.get("model_name", "")), "moe", None) is not None


def summary_rows(outcomes: list[Outcome]) -> list[tuple[str, int, float, float]]:
    """(group, cases, mean |error|, max |error|) per source, then over the A100 training cases (those the targets
    were first met on), the dense models' and every training case, of the cases that ran."""
    groups: dict[str, list[float]] = {}
    overall: dict[str, list[float]] = {A100_TRAINING: [], DENSE_TRAINING: [], ALL_TRAINING: []}
    for o in outcomes:
        if o.error is None:
            continue
        key = "collectives (nccl-tests)" if o.case["metric"] == "busbw_gBps" else o.case["source"]
        groups.setdefault(key, []).append(abs(o.error))
        if o.case["metric"] != "busbw_gBps":
            overall[ALL_TRAINING].append(abs(o.error))
            if not is_moe_case(o.case):
                overall[DENSE_TRAINING].append(abs(o.error))
            if str(o.case.get("gpu", "")).startswith("A100"):
                overall[A100_TRAINING].append(abs(o.error))
    groups.update((k, v) for k, v in overall.items() if v)
    return [(k, len(v), sum(v) / len(v), max(v)) for k, v in groups.items()]


def _fmt(v: float | None, metric: str) -> str:
    if v is None:
        return "-"
    if metric == "iteration_time_s":
        return f"{v:.2f}"
    return f"{v:,.0f}" if v >= 1000 else f"{v:.3g}"


def render(outcomes: list[Outcome], sources: dict, console: Console) -> bool:
    table = Table(
        title="aifabric against published measurements (error = predicted / published - 1)", title_justify="left"
    )
    for col in ("case", "source", "GPUs", "metric", "published", "predicted", "error", "wall"):
        table.add_column(col, justify="right" if col in ("GPUs", "published", "predicted", "error", "wall") else "left")
    for o in outcomes:
        c = o.case
        gpus = str(gpus_of(c) or c.get("ranks", "-"))
        if o.sweep is not None:
            err = sweep_error(c["published"], o.sweep)
            where = "within" if err == 0 else f"{100 * err:+.1f} % (out)"
            table.add_row(
                c["id"],
                c["source"],
                gpus,
                c["metric"],
                f"{c['published']:g}",
                sweep_range(o.sweep, c["metric"]),
                where,
                f"{o.wall_s:.1f} s",
            )
            continue
        if o.predicted is None:
            wall = f"~{o.estimated_s / 60:.0f} min (est.)" if o.estimated_s else "not run"
            table.add_row(c["id"], c["source"], gpus, c["metric"], f"{c['published']:g}", "-", "-", wall)
            continue
        table.add_row(
            c["id"],
            c["source"],
            gpus,
            c["metric"],
            f"{c['published']:g}",
            _fmt(o.predicted, c["metric"]),
            f"{100 * o.error:+.1f} %",
            f"{o.wall_s:.1f} s",
        )
    console.print(table)
    agg = Table(title="mean and largest absolute error", title_justify="left")
    for col in ("cases", "n", "mean |error|", "max |error|"):
        agg.add_column(col, justify="left" if col == "cases" else "right")
    rows = summary_rows(outcomes)
    for k, n, mean, worst in rows:
        agg.add_row(k, str(n), f"{100 * mean:.1f} %", f"{100 * worst:.1f} %")
    console.print(agg)
    if line := sweep_summary(outcomes):
        console.print(line)
    return bool(rows) or bool(line)


def sweep_summary(outcomes: list[Outcome]) -> str:
    """How many swept cases (not in the aggregate) have their published figure within the predictions."""
    swept = [o for o in outcomes if o.sweep is not None]
    if not swept:
        return ""
    within = [o.case["id"] for o in swept if sweep_error(o.case["published"], o.sweep) == 0]
    return (
        f"virtual stages swept (not published; not in the aggregate): the published figure lies within the "
        f"predictions in {len(within)} of {len(swept)} cases ({', '.join(within) or 'none'})"
    )


def write_docs(outcomes: list[Outcome], sources: dict) -> None:
    lines = [
        "| case | source, where | quote | GPUs | metric | published | predicted | error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        c = o.case
        pred = "not run" if o.predicted is None else _fmt(o.predicted, c["metric"])
        if o.predicted is None and o.estimated_s:
            pred = f"not run (~{o.estimated_s / 60:.0f} min)"
        err = "-" if o.error is None else f"{100 * o.error:+.1f} %"
        if o.sweep is not None:  # not a prediction: the range over what the source leaves out
            pred = sweep_text(o.sweep, c["metric"])
            gap = sweep_error(c["published"], o.sweep)
            err = "within the range" if gap == 0 else f"{100 * gap:+.1f} % outside the range"
        quote = c["quote"].replace("|", "\\|")
        lines.append(
            f"| {c['id']} | {sources[c['source']]['title'].split(',')[0]}, {c['where']} | `{quote}` | "
            f"{gpus_of(c) or c.get('ranks', '-')} | {c['metric']} | {c['published']:g} | {pred} | {err} |"
        )
    lines += ["", "| cases | n | mean \\|error\\| | max \\|error\\| |", "|---|---|---|---|"]
    lines += [f"| {k} | {n} | {100 * m:.1f} % | {100 * w:.1f} % |" for k, n, m, w in summary_rows(outcomes)]
    if line := sweep_summary(outcomes):
        lines += ["", line[0].upper() + line[1:] + "."]
    text = DOCS.read_text(encoding="utf-8")
    begin, end = "<!-- fidelity:begin -->", "<!-- fidelity:end -->"
    block = begin + "\n" + "\n".join(lines) + "\n" + end
    if begin in text and end in text:
        text = text[: text.index(begin)] + block + text[text.index(end) + len(end) :]
    else:
        text += "\n" + block + "\n"
    DOCS.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
