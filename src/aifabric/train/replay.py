"""A trace -> a Workload the engines run on any fabric.

Per rank, in time order: each traced collective becomes a `Collective` (same op, group, elements, bytes
per element; its key is the group and the count of collectives on that group so far, which every member
agrees on); a send / recv becomes a `Send` / `Recv` (key: the pair and the count of messages between them,
FIFO as in gloo and NCCL); a collective launched without waiting becomes a non-blocking `Collective`
followed, where the rank waited for it, by a `Wait`. The time between two ops of a rank (and from the
last op to the end of the step: the optimizer) becomes a `Compute` of that measured duration, or nothing
with compute="zero" (communication alone, as if computing were free).
"""

from __future__ import annotations

from collections import defaultdict

from ..errors import InputError, Problem
from ..workload.ops import Collective, Compute, Op, Recv, Send, Wait, Workload
from .tracer import Trace

BYTES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "uint8": 1, "int8": 1}
DIM_OF_TAG = (("grad-bucket", "dp"), ("init/", "dp"), ("tp/", "tp"), ("pp/", "pp"))


def _dim(tag: str) -> str:
    return next((d for prefix, d in DIM_OF_TAG if tag.startswith(prefix)), "")


def trace_to_workload(trace: Trace, compute: str = "measured", name: str = "replay") -> Workload:
    if compute not in ("measured", "zero"):
        raise InputError(Problem("--compute", f"must be measured or zero (got {compute!r})"))
    world = trace.world_size
    ranks: list[list[Op]] = [[] for _ in range(world)]
    steps = max((len(s) for s in trace.steps.values()), default=1)
    for r in range(world):
        items = []  # (time, order, what, event)
        for s in trace.steps.get(r, []):
            items.append((s["start_s"], 0, "step-start", s))
            items.append((s["end_s"], 3, "step-end", s))
        for e in trace.comms.get(r, []):
            items.append((e["start_s"], 1, "comm", e))
            if e.get("async_op"):
                items.append((e["end_s"], 2, "wait", e))
        items.sort(key=lambda it: (it[0], it[1]))
        coll_count: dict[tuple, int] = defaultdict(int)
        p2p_count: dict[tuple[int, int], int] = defaultdict(int)
        cursor = None
        ops = ranks[r]
        for t, _, what, e in items:
            gap = 0.0 if cursor is None else max(0.0, t - cursor)
            if what == "step-start":
                cursor = t
                continue
            if gap > 0 and compute == "measured":
                ops.append(Compute(f"step{e['step']}/compute", 0.0, gap))
            if what == "step-end":
                cursor = t
                continue
            if what == "wait":
                ops.append(Wait("comm"))
                cursor = t
                continue
            op, group, tag = e["op"], tuple(e["group"]), e["tag"]
            bpe = BYTES.get(e["dtype"], max(1, e["bytes"] // max(1, e["elements"])))
            if op in ("send", "recv"):
                pair = (group[0], group[1])
                key = f"p2p {pair[0]}->{pair[1]} #{p2p_count[pair]}"
                p2p_count[pair] += 1
                cls = Send if op == "send" else Recv
                ops.append(cls(key, pair[0], pair[1], e["bytes"], tag, _dim(tag) or "pp"))
            else:
                key = f"{','.join(map(str, group))} #{coll_count[group]}"
                coll_count[group] += 1
                ops.append(
                    Collective(key, op, group, e["elements"], bpe, tag, blocking=not e.get("async_op"), dim=_dim(tag))
                )
            cursor = t if e.get("async_op") else e["end_s"]
    meta = next(iter(trace.meta.values()), {})
    layout = meta.get("layout", {})
    model = meta.get("config", {}).get("model", "?")
    return Workload(
        name=name,
        ranks=ranks,
        params=0,
        iterations=steps,
        flops_per_iteration=0.0,
        description=f"replayed trace: {model}, dp {layout.get('dp', '?')} x tp {layout.get('tp', '?')} x "
        f"pp {layout.get('pp', '?')}, {steps} steps, compute {compute}",
    )


def check_fits(trace: Trace, gpus: int) -> None:
    if trace.world_size > gpus:
        raise InputError(
            Problem(
                "cluster",
                f"the trace has {trace.world_size} ranks but the scenario has "
                f"{gpus} GPUs (cluster.servers x cluster.gpus_per_server)",
            )
        )


def unsupported_ops(workload: Workload, fabric, router) -> set[str]:
    """Collective ops the engines cannot lower yet (tried one by one on a 2-rank group)."""
    from ..engines import lower

    missing = set()
    kinds = {op.op for ops in workload.ranks for op in ops if isinstance(op, Collective)}
    for kind in kinds:
        group = (0, 1)
        probe = Workload("probe", [[Collective("p", kind, group, 8, 4)] for _ in group], 0, 1, 0.0)
        try:
            lower(probe, fabric, router)
        except NotImplementedError:
            missing.add(kind)
    return missing


def without_ops(workload: Workload, kinds: set[str]) -> Workload:
    ranks = [[op for op in ops if not (isinstance(op, Collective) and op.op in kinds)] for ops in workload.ranks]
    return Workload(
        workload.name,
        ranks,
        workload.params,
        workload.iterations,
        workload.flops_per_iteration,
        workload.description + f" (left out, not supported by the engines yet: {', '.join(sorted(kinds))})",
    )


PLACEMENTS = ("packed", "spread")


def placement(ranks: int, servers: int, gpus_per_server: int, how: str = "packed") -> list[int]:
    """The GPU of each trace rank. packed: rank r on GPU r (torchrun order: the first servers filled first);
    spread: round-robin over servers (rank r on server r mod servers), so ranks that shared a server in
    the traced run talk over the network."""
    if how not in PLACEMENTS:
        raise InputError(Problem("--placement", f"must be one of {', '.join(PLACEMENTS)} (got {how!r})"))
    if how == "packed":
        return list(range(ranks))
    return [(r % servers) * gpus_per_server + r // servers for r in range(ranks)]


def place(trace: Trace, gpu_of: list[int], world: int) -> Trace:
    """The trace with rank r renamed `gpu_of[r]` in a world of `world` GPUs (the others idle)."""

    def rec(r: dict) -> dict:
        out = dict(r, rank=gpu_of[int(r["rank"])])
        if "group" in out:
            out["group"] = [gpu_of[int(g)] for g in out["group"]]
        return out

    meta = {gpu_of[r]: {**rec(m), "world_size": world} for r, m in trace.meta.items()}
    comms = {gpu_of[r]: [rec(e) for e in es] for r, es in trace.comms.items()}
    steps = {gpu_of[r]: [rec(s) for s in ss] for r, ss in trace.steps.items()}
    return Trace(meta, comms, steps)
