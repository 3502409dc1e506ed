"""Faults during an iteration (the scenario's `faults:`; *Deep Learning for Network Engineers*, Chapter 10): what
breaks, how the fabric and the job react, and what it costs against the same iteration without them.

- `link_down`: the cable's two directions leave the fabric; routing has converged around them: shortest paths
  over what is left, ECMP re-hashing only the flows whose next hop is gone (resilient hashing:
  `Router.fail`). A dual-port NIC whose one port's cable is down keeps going on the other (its LAG).
- `switch_down`: every cable of the switch down. `nic_down`: every cable of the NIC down.
- `link_degraded`: the cable runs at `factor` of its rate (a lane down, FEC errors, a renegotiated speed).
- `gpu_slow`: the rank's kernels take `factor` x as long (a straggler: thermal throttling, a weak part); a
  tensor-parallel group runs in lockstep, so its merged tasks take the slowest member's time, and every
  collective it is in waits for it.
- A rank left with no path to a peer it must reach: NCCL cannot complete the collective; its watchdog ends the
  job after its timeout (torch.distributed's default for NCCL: 10 minutes). The run is refused with that
  reason (which rank, which peer, which fault).

Every fault holds from the start of the iteration (`at_s: 0`); faults at a later time (detection and convergence
during the run, transfers in flight lost) are not simulated yet.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace

from .errors import InputError, Problem
from .fabric.graph import NIC, Fabric
from .fabric.routing import Router


@dataclass
class FaultEffects:
    down: set[int] = field(default_factory=set)  # links
    degraded: dict[int, float] = field(default_factory=dict)  # link -> fraction of its rate left
    slow: dict[int, float] = field(default_factory=dict)  # rank -> slowdown
    applied: list[dict] = field(default_factory=list)  # per fault: kind, target, links / rank


def _near(name: str, names) -> str:
    close = difflib.get_close_matches(str(name), list(names), n=4, cutoff=0.5)
    return f"; near: {', '.join(close)}" if close else ""


def _cable(fabric: Fabric, target: str) -> list[int] | None:
    for sep in ("<->", "--", "->"):
        if sep in target:
            a, b = (x.strip() for x in target.split(sep, 1))
            return [li for li in fabric.out_links.get(a, []) if fabric.links[li].dst == b] + \
                   [li for li in fabric.out_links.get(b, []) if fabric.links[li].dst == a]
    return None


def _node_links(fabric: Fabric, node: str, to_switches_only: bool) -> list[int]:
    out = [li for li in fabric.out_links.get(node, []) if not to_switches_only or fabric.is_switch(fabric.links[li].dst)]
    back = [li for li in range(len(fabric.links)) if fabric.links[li].dst == node and
            (not to_switches_only or fabric.is_switch(fabric.links[li].src))]
    return out + back


def resolve_faults(fabric: Fabric, faults) -> FaultEffects:
    """Each fault's links or rank on this fabric; InputError naming `faults[i].target` (with near names) for
    anything the fabric does not have."""
    fx = FaultEffects()
    problems = []
    cables = sorted({f"{link.src}--{link.dst}" for link in fabric.links if link.tier not in ("nvlink", "pcie")})
    for i, fault in enumerate(faults):
        path, t = f"faults[{i}].target", fault.target
        if fault.kind in ("link_down", "link_degraded"):
            links = _cable(fabric, str(t))
            if not links:
                problems.append(Problem(path, f"no cable {t!r} (name it A--B with two node names){_near(t, cables)}"))
                continue
            if fault.kind == "link_down":
                fx.down.update(links)
            else:
                for li in links:
                    fx.degraded[li] = min(fx.degraded.get(li, 1.0), float(fault.factor))
            fx.applied.append({"kind": fault.kind, "target": str(t), "links": [fabric.links[li].id for li in links]})
        elif fault.kind in ("switch_down", "nic_down"):
            node = fabric.nodes.get(str(t))
            ok = node is not None and (fabric.is_switch(str(t)) if fault.kind == "switch_down" else node.kind == NIC)
            if not ok:
                kinds = [n for n, nd in fabric.nodes.items()
                         if (fabric.is_switch(n) if fault.kind == "switch_down" else nd.kind == NIC)]
                what = "switch" if fault.kind == "switch_down" else "NIC"
                problems.append(Problem(path, f"no {what} {t!r}{_near(t, kinds)}"))
                continue
            links = _node_links(fabric, str(t), to_switches_only=fault.kind == "nic_down")
            fx.down.update(links)
            fx.applied.append({"kind": fault.kind, "target": str(t), "links": [fabric.links[li].id for li in links]})
        else:  # gpu_slow
            rank = None
            if isinstance(t, int) or str(t).isdigit():
                rank = int(t)
            elif str(t) in fabric.rank_gpu:
                rank = fabric.rank_gpu.index(str(t))
            if rank is None or not 0 <= rank < fabric.world_size:
                problems.append(Problem(path, f"no GPU {t!r}: a rank 0..{fabric.world_size - 1} or a GPU's name"
                                              f"{_near(t, fabric.rank_gpu)}"))
                continue
            fx.slow[rank] = max(fx.slow.get(rank, 1.0), float(fault.factor))
            fx.applied.append({"kind": fault.kind, "target": str(t), "rank": rank, "factor": float(fault.factor)})
    if problems:
        raise InputError(problems)
    return fx


def apply_to_fabric(fabric: Fabric, router: Router, fx: FaultEffects) -> None:
    """Degraded cables at their fraction of the rate; failed links out of routing (converged)."""
    for li, frac in fx.degraded.items():
        link = fabric.links[li]
        fabric.links[li] = replace(link, efficiency=link.efficiency * frac)
    if fx.down:
        router.fail(fx.down)


def slow_down(graph, slow: dict[int, float]) -> int:
    """Stragglers: every compute task on a slow rank (merged lockstep tasks: the slowest member) takes `factor` x
    its compute time; the collectives folded into it keep theirs. Returns the tasks changed."""
    if not slow:
        return 0
    changed = 0
    for t, kind in enumerate(graph.kind):
        if kind != 0:  # COMPUTE
            continue
        factor = max(slow.get(r, 1.0) for r in graph.ranks_of(t))
        if factor == 1.0:
            continue
        comm = graph.comm_s.get(t, 0.0)
        graph.duration_s[t] = comm + (graph.duration_s[t] - comm) * factor
        changed += 1
    return changed


def unreachable(fabric: Fabric, fx: FaultEffects, exc: Exception) -> InputError:
    """The job cannot run: the router found no path (a NIC or every uplink down)."""
    what = "; ".join(f"{a['kind']} {a['target']}" for a in fx.applied if a["kind"] != "gpu_slow")
    return InputError(Problem("faults", f"the job fails: {exc} after {what}. NCCL cannot complete a collective "
                                        "without a path; its watchdog ends the job after its timeout "
                                        "(torch.distributed's default for NCCL: 10 minutes)"))


def report(fx: FaultEffects, run, baseline, router: Router | None) -> dict:
    """What happened and what it cost: each fault, the iteration against the fault-free one, the bytes that
    crossed the failed links without the faults (rerouted), the QPs whose path changed."""
    t, t0 = run.results.iteration_time_s, baseline.results.iteration_time_s
    rerouted = float(sum(baseline.timeline.link_bytes[li] for li in fx.down)) / max(1, run.workload.iterations)
    moved = len(router.rerouted) if router is not None else 0
    return {"faults": fx.applied, "iteration_time_s": t, "fault_free_iteration_time_s": t0,
            "slowdown": t / t0 if t0 > 0 else float("nan"), "bytes_rerouted_per_iteration": rerouted,
            "qps_rerouted": moved, "links_down": len(fx.down), "links_degraded": len(fx.degraded),
            "slow_ranks": {str(r): f for r, f in sorted(fx.slow.items())}}
