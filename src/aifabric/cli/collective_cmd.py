"""`aifabric collective`: one collective, step by step (--explain) or timed on a fabric (bench)."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

import typer

from ..catalog import CPU_VENDORS
from ..collectives.names import ALGORITHMS, REDUCE_OPS
from ..errors import InputError, Problem
from .app import app
from .console import make_console

if TYPE_CHECKING:
    from rich.table import Table

    from ..collectives.schedule import Schedule

console = make_console()
collective_app = typer.Typer(
    help="One collective on a fabric: step tables (--explain), nccl-tests-style sweeps (bench).", no_args_is_help=True
)
app.add_typer(collective_app, name="collective")

EXPLAIN_MAX_RANKS = 32
EXPLAIN_MAX_CHUNKS = 64
OP_NAMES = {
    "allreduce": "all-reduce",
    "reducescatter": "reduce-scatter",
    "allgather": "all-gather",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "alltoall": "all-to-all",
    "alltoallv": "all-to-allv",
    "sendrecv": "send-recv",
    "barrier": "barrier",
}
TITLES = {
    "all-reduce": "AllReduce",
    "reduce-scatter": "ReduceScatter",
    "all-gather": "AllGather",
    "broadcast": "Broadcast",
    "reduce": "Reduce",
    "all-to-all": "AllToAll",
    "all-to-allv": "AllToAllv",
    "send-recv": "Send/Recv",
    "barrier": "Barrier",
}
DEFAULT_EXPLAIN = {
    "broadcast": "tree",
    "reduce": "tree",
    "all-to-all": "direct",
    "all-to-allv": "direct",
    "send-recv": "direct",
    "barrier": "dissemination",
}
DTYPES = {"float": 4, "half": 2, "bfloat16": 2, "double": 8, "int8": 1, "int32": 4}


def _network(src: int, dst: int, gpus_per_server: int) -> str:
    from ..collectives import Layout, network_of

    net = network_of(src, dst, Layout(gpus_per_server))
    return f"{net} (no QP)" if net == "NVLink" else f"{net} (RDMA QP)"


def _check(problems: list[Problem], name: str, value: int, low: int, high: int | None = None) -> None:
    if value < low:
        problems.append(Problem(name, f"must be >= {low} (got {value})"))
    elif high is not None and value > high:
        problems.append(Problem(name, f"must be <= {high:,} (got {value:,})"))


MAX_RANKS = 4096  # the schedules hold rank x rank tables (AlltoAll counts): 100,000 ranks wanted 37 GiB
MAX_ELEMENTS = 1 << 40  # counts stay exact in int64 sums (2^63 elements printed negative sends)


def _op(name: str) -> str:
    op = OP_NAMES.get(name.replace("-", "").replace("_", "").lower())
    if op is None:
        raise InputError(Problem("--op", f"unknown operation {name!r}; one of {', '.join(OP_NAMES)}"))
    return op


def _schedule(
    op: str,
    algorithm: str,
    ranks: int,
    elements: int,
    gpus_per_server: int,
    channels: int,
    pieces: int,
    root: int,
    nic_gbps: float = 400,
    nvlink_gBps: float = 450,
) -> Schedule:
    import numpy as np

    from ..collectives import Layout, build_schedule, not_applicable
    from ..collectives.cost import Paths, Shape
    from ..collectives.tuning import choose

    layout = Layout(gpus_per_server)
    group = list(range(ranks)) if op != "send-recv" else [0, ranks - 1]
    if algorithm == "auto":
        choice = choose(
            op,
            Shape.of(group, gpus_per_server),
            elements * 4,
            Paths.simple(gpus_per_server, nvlink_gBps, nic_gbps),
            channels=channels,
            pieces=pieces,
            runnable=lambda a: not_applicable(op, a, group, layout) is None,
        )
        algorithm, channels, pieces = choice.algorithm, channels or choice.channels, pieces or choice.pieces
    reason = not_applicable(op, algorithm, group, layout)
    if reason:
        raise InputError(Problem("--algorithm", reason))
    if op in ("broadcast", "reduce") and not 0 <= root < ranks:
        raise InputError(Problem("--root", f"must be a rank of the group, 0 .. {ranks - 1} (got {root})"))
    counts = None
    if op == "all-to-allv":  # a skewed pattern: position i sends (i + j) mod 3 + 1 parts to j
        i, j = np.indices((ranks, ranks))
        counts = ((i + j) % 3 + 1) * max(1, elements // (2 * ranks * ranks))
    return build_schedule(
        op,
        algorithm,
        group,
        elements,
        layout,
        channels=max(1, channels),
        pieces=max(1, pieces),
        root=root,
        counts=counts,
    )


def _by_network(sched: Schedule, gpus_per_server: int) -> Table:
    """Moves and elements per network: NVLink, one rail, or across rails through a spine."""
    import numpy as np
    from rich.table import Table

    src, dst = sched.src.astype(np.int64), sched.dst.astype(np.int64)
    same_server = src // gpus_per_server == dst // gpus_per_server
    same_rail = src % gpus_per_server == dst % gpus_per_server
    kind = np.where(same_server, 0, np.where(same_rail, 1, 2))
    elements = sched.move_elements()
    table = Table(title="traffic by network", title_justify="left")
    for col in ("network", "moves", "elements"):
        table.add_column(col, justify="left" if col == "network" else "right")
    cross = (
        "NVLink, then the destination's rail (PXN relay)"
        if sched.algorithm == "pxn"
        else "rail → spine → rail (RDMA QP)"
    )
    for k, name in enumerate(("NVLink (no QP)", "one rail (RDMA QP)", cross)):
        table.add_row(name, f"{int((kind == k).sum()):,}", f"{int(elements[kind == k].sum()):,}")
    return table


def print_explanation(sched: Schedule, gpus_per_server: int) -> None:
    from rich.table import Table

    from ..collectives.explain import chunk_letter, explain

    n = len(sched.ranks)
    letters = [chunk_letter(c) for c in range(sched.n_chunks)]
    rs_steps = n - 1 if sched.op == "all-reduce" and sched.algorithm == "ring" else -1
    phase_start: dict[str, int] = {}
    for st in explain(sched):
        phase_start.setdefault(st.phase, st.step)
        title = f"step {st.step + 1}: {st.phase} iteration {st.step - phase_start[st.phase] + 1}"
        sends = Table(title=title, title_justify="left")
        for col in ("sender", "receiver", "chunk", "value sent", "elements", "network"):
            sends.add_column(col)
        for s in st.sends:
            sends.add_row(
                f"rank {s.src}",
                f"rank {s.dst}",
                letters[s.chunk],
                s.value,
                str(s.elements),
                _network(s.src, s.dst, gpus_per_server),
            )
        console.print(sends)
        if sched.n_chunks > EXPLAIN_MAX_CHUNKS or sched.op == "barrier":
            continue
        console.print(f"after step {st.step + 1}: what each rank holds (bold = final)")
        held = Table()
        held.add_column("rank")
        for x in letters:
            held.add_column(x)
        for r in sorted(sched.ranks):
            cells = [f"[bold]{h}[/]" if c in st.full[r] else h for c, h in enumerate(st.holdings[r])]
            held.add_row(str(r), *cells)
        console.print(held)
        if st.step == rs_steps - 1:
            owners = ", ".join(f"rank {r} holds {letters[c]}" for r in sorted(sched.ranks) for c in st.full[r])
            console.print(f"ReduceScatter done: {owners} (fully reduced)\n")


def _explain_command(name: str):
    op = OP_NAMES[name]

    def command(
        ranks: int = typer.Option(4 if op != "broadcast" else 8, "--ranks", "-n", help="ranks in the group"),
        elements: int = typer.Option(1024, "--elements", help="elements (nccl-tests count)"),
        gpus_per_server: int = typer.Option(
            8 if op != "broadcast" else 4, "--gpus-per-server", help="ranks per server (NVLink inside)"
        ),
        algorithm: str = typer.Option(
            DEFAULT_EXPLAIN.get(op, "ring"), "--algorithm", "-a", help="auto or one of: " + ", ".join(ALGORITHMS[op])
        ),
        channels: int = typer.Option(1, "--channels", help="rings / tree pairs (0: auto)"),
        pieces: int = typer.Option(1, "--pieces", help="pipeline chunks per channel (0: auto)"),
        root: int = typer.Option(0, "--root", help="Broadcast / Reduce root"),
        explain_steps: bool = typer.Option(False, "--explain", help="print every step: who sends what, who holds what"),
    ) -> int:
        problems: list[Problem] = []
        _check(problems, "--ranks", ranks, 2 if op == "send-recv" else 1, MAX_RANKS)
        _check(problems, "--elements", elements, 0, MAX_ELEMENTS)
        _check(problems, "--gpus-per-server", gpus_per_server, 1, 72)
        _check(problems, "--channels", channels, 0, 64)
        _check(problems, "--pieces", pieces, 0, 1024)
        if algorithm != "auto" and algorithm not in ALGORITHMS[op]:
            problems.append(
                Problem("--algorithm", f"{op} has no {algorithm!r}; auto or one of {', '.join(ALGORITHMS[op])}")
            )
        if op not in ("broadcast", "reduce") and root != 0:
            problems.append(Problem("--root", f"{op} has no root (Broadcast and Reduce have one)"))
        elif op in ("broadcast", "reduce") and not 0 <= root < max(1, ranks):
            problems.append(Problem("--root", f"must be a rank of the group, 0 .. {ranks - 1} (got {root})"))
        if explain_steps and ranks > EXPLAIN_MAX_RANKS:
            problems.append(Problem("--ranks", f"--explain prints per-rank tables: at most {EXPLAIN_MAX_RANKS} ranks"))
        if problems:
            raise InputError(problems)
        sched = _schedule(op, algorithm, ranks, elements, gpus_per_server, channels, pieces, root)
        sizes = sorted({sched.chunk_elements(c) for c in range(sched.n_chunks)})
        order = " → ".join(map(str, sched.ranks))
        head = (
            f"[bold]{sched.algorithm} {TITLES[op]}[/]: {len(sched.ranks)} ranks, {elements} elements, "
            f"{sched.n_chunks} chunks of {' or '.join(map(str, sizes[:4]))} elements; {sched.n_steps} steps, "
            f"{sched.n_moves} moves"
        )
        if sched.algorithm == "ring" and op == "all-reduce" and sched.n_channels == 1:
            head += (
                f"; ring {order} → {sched.ranks[0]}; {ranks - 1} ReduceScatter + {ranks - 1} AllGather "
                f"= {sched.n_steps} steps"
            )
        elif sched.notes:
            head += f"; {sched.notes}"
        console.print(head)
        if not explain_steps:
            per_rank = int(sched.move_elements()[sched.src == sched.ranks[0]].sum())
            console.print(
                f"rank {sched.ranks[0]} sends {per_rank} elements"
                + (" = 2(n−1)/n × " + str(elements) if op == "all-reduce" and sched.algorithm == "ring" else "")
            )
            console.print(_by_network(sched, gpus_per_server))
            return 0
        print_explanation(sched, gpus_per_server)
        if op == "all-reduce":
            console.print(
                f"AllReduce done: every rank holds all {elements} summed elements; divide by {ranks} for "
                "the average (local, no communication)."
            )
        return 0

    command.__doc__ = f"{TITLES[op]}: the schedule of any algorithm, step by step with --explain."
    return command


for _name in OP_NAMES:
    collective_app.command(_name)(_explain_command(_name))


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def parse_size(text: str, field: str) -> int:
    """nccl-tests' sizes: 8, 64K, 1M, 8G (powers of 1024)."""
    m = _SIZE.match(text)
    if not m:
        raise InputError(Problem(field, f"not a size: {text!r} (e.g. 8, 64K, 1M, 8G)"))
    return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " "))


def _sizes(lo: int, hi: int, factor: int) -> list[int]:
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def _bench_fabric(
    ranks: int,
    gpus_per_server: int,
    nic_gbps: float,
    scenario_path: str | None,
    gpu_name: str = "H100",
    nvlink_gBps: float | None = None,
    cpu_vendor: str | None = None,
):
    """The fabric of a scenario file, or a rail-optimized one of `gpu_name` servers with one spine per rail
    and links at NIC speed; links at their achievable rates either way (fabric/achievable.py)."""
    from ..scenario import ch14_scenario, load_scenario
    from ..simulate import build_fabric

    if scenario_path:
        fabric, router = build_fabric(load_scenario(scenario_path))
        if ranks > fabric.world_size:
            raise InputError(Problem("--ranks", f"the scenario's fabric has {fabric.world_size} GPUs (got {ranks})"))
        return fabric, router
    base = ch14_scenario().model_dump()
    servers = math.ceil(ranks / gpus_per_server)
    base["cluster"].update(
        servers=servers,
        gpus_per_server=gpus_per_server,
        nic_speed_gbps=nic_gbps,
        gpu=gpu_name,
        nvlink_bandwidth_gBps=2 * nvlink_gBps if nvlink_gBps else None,
        cpu_vendor=cpu_vendor,
    )
    base["fabric"].update(spines=gpus_per_server, link_speed_gbps=nic_gbps, switch_radix=max(64, 2 * servers + 8))
    base["workload"]["global_batch_size"] = servers * gpus_per_server  # the bench uses the fabric alone
    return build_fabric(load_scenario(base, "the bench's fabric"))  # every check, as a scenario file gets


def _engine_times(
    op: str,
    algorithm: str,
    group: tuple[int, ...],
    fabric,
    router,
    sizes: list[int],
    type_bytes: int,
    engine: str,
    protocol: str,
    in_switch: bool,
) -> list[tuple[float, str]]:
    """Time of one collective of each size, simulated by the analytic or flow engine on the fabric."""
    import numpy as np

    from ..engines import lower, run
    from ..engines.lower_collective import CollectiveCall, plan
    from ..workload.ops import Workload

    out = []
    for size in sizes:
        call = CollectiveCall(
            f"bench/{size}",
            op,
            group,
            max(1, size // type_bytes),
            type_bytes,
            algorithm=algorithm,
            protocol=protocol,
            in_switch=in_switch,
        )
        members = set(group)
        workload = Workload(
            "bench",
            [[call] if r in members else [] for r in range(max(group) + 1)],
            params=0,
            iterations=1,
            flops_per_iteration=0.0,
        )
        graph = lower(workload, fabric, router)
        timeline = run(graph, fabric, engine)
        sched, choice = plan(call, fabric, router)
        name = f"{sched.algorithm}/{choice.protocol}/{choice.channels}ch" if choice else sched.algorithm
        out.append((float(np.nanmax(timeline.end_s) - np.nanmin(timeline.start_s)) if len(graph) else 0.0, name))
    return out


@collective_app.command("bench")
def bench(
    op_name: str = typer.Option(
        "allreduce", "--op", help="allreduce, reducescatter, allgather, broadcast, reduce, alltoall, sendrecv"
    ),
    algorithm: str = typer.Option(
        "nccl",
        "--algorithm",
        "-a",
        help="nccl (NCCL's own choice: ring, tree, NVLS), auto "
        "(the fastest this tool knows) or an algorithm of the operation",
    ),
    gpu_name: str = typer.Option("H100", "--gpu", help="GPU of the servers (its NVLink and efficiencies)"),
    ranks: int = typer.Option(16, "--ranks", "-n", help="ranks (whole servers first, torchrun order)"),
    gpus_per_server: int = typer.Option(8, "--gpus-per-server", help="GPUs per server"),
    nic_gbps: float = typer.Option(400, "--nic-gbps", help="NIC (and fabric link) speed, Gb/s"),
    nvlink_gBps: float = typer.Option(0, "--nvlink-gBps", help="NVLink per direction, GB/s (0: the GPU's)"),
    cpu_vendor: str = typer.Option(
        "auto",
        "--cpu-vendor",
        help="the servers' CPU vendor, which sets NCCL's LL ceiling across servers (intel, amd, arm, other; auto: "
        "the GPU's reference server; with --scenario, its cluster.cpu_vendor)",
    ),
    min_bytes: str = typer.Option("8", "--min-bytes", "-b", help="smallest size (8, 64K, 1M, 8G)"),
    max_bytes: str = typer.Option("128M", "--max-bytes", "-e", help="largest size"),
    factor: int = typer.Option(2, "--step-factor", "-f", help="multiply the size by this between rows"),
    dtype: str = typer.Option("float", "--datatype", "-d", help=", ".join(DTYPES)),
    redop: str = typer.Option("sum", "--op-reduce", "-o", help=", ".join(REDUCE_OPS)),
    protocol: str = typer.Option("auto", "--protocol", help="auto, simple, ll128, ll"),
    in_switch: bool = typer.Option(
        None,
        "--in-switch/--no-in-switch",
        help="NVLS / SHARP available (default: NVLink SHARP on H100 and later for a group inside one server, as NCCL)",
    ),
    engine: str = typer.Option(
        "model", "--engine", help="model (α-β formulas), analytic or flow (simulated on a rail-optimized fabric)"
    ),
    scenario: str = typer.Option(None, "--scenario", help="take the fabric (and GPUs per server) from this scenario"),
) -> int:
    """A size sweep in nccl-tests' layout: size, count, type, redop, time, algbw, busbw."""
    from rich.table import Table

    from ..collectives import Layout, not_applicable
    from ..collectives.cost import Paths, Shape, busbw_factor
    from ..collectives.tuning import choose

    op = _op(op_name)
    problems: list[Problem] = []
    lo, hi = parse_size(min_bytes, "--min-bytes"), parse_size(max_bytes, "--max-bytes")
    _check(problems, "--ranks", ranks, 2, 32_768)
    _check(problems, "--gpus-per-server", gpus_per_server, 1, 72)
    _check(problems, "--step-factor", factor, 2, 1 << 20)
    _check(problems, "--min-bytes", lo, 1, 1 << 40)
    _check(problems, "--max-bytes", hi, 1, 1 << 40)
    if hi < lo:
        problems.append(Problem("--max-bytes", f"must be >= --min-bytes ({lo})"))
    if not (math.isfinite(nic_gbps) and 0.001 <= nic_gbps <= 1e6):
        problems.append(Problem("--nic-gbps", f"must be a number from 0.001 to 1,000,000 (got {nic_gbps:g})"))
    if not (math.isfinite(nvlink_gBps) and (nvlink_gBps == 0 or 0.001 <= nvlink_gBps <= 1e6)):
        problems.append(Problem("--nvlink-gBps", f"must be a number >= 0, 0 for the GPU's own (got {nvlink_gBps:g})"))
    if cpu_vendor not in ("auto", *CPU_VENDORS):
        problems.append(Problem("--cpu-vendor", f"auto or one of {', '.join(CPU_VENDORS)} (got {cpu_vendor!r})"))
    elif cpu_vendor != "auto" and scenario:
        problems.append(Problem("--cpu-vendor", "the scenario's cluster.cpu_vendor says it: set it there"))
    if dtype not in DTYPES:
        problems.append(Problem("--datatype", f"one of {', '.join(DTYPES)}"))
    if redop not in REDUCE_OPS:
        problems.append(Problem("--op-reduce", f"one of {', '.join(REDUCE_OPS)}"))
    if protocol not in ("auto", "simple", "ll128", "ll"):
        problems.append(Problem("--protocol", "one of auto, simple, ll128, ll"))
    if engine not in ("model", "analytic", "flow"):
        problems.append(Problem("--engine", "one of model, analytic, flow"))
    if op in ("all-to-allv", "barrier"):
        problems.append(Problem("--op", f"{op} has no size sweep"))
    if op not in ALGORITHMS or (algorithm not in ("auto", "nccl") and algorithm not in ALGORITHMS.get(op, ())):
        problems.append(Problem("--algorithm", f"nccl, auto or one of {', '.join(ALGORITHMS.get(op, ()))}"))
    from ..catalog import GPUS

    if gpu_name.upper() not in GPUS:
        problems.append(Problem("--gpu", f"one of {', '.join(GPUS)} (got {gpu_name!r})"))
    if problems:
        raise InputError(problems)
    group = list(range(ranks)) if op != "send-recv" else [0, ranks - 1]
    layout = Layout(gpus_per_server)
    if algorithm not in ("auto", "nccl") and (reason := not_applicable(op, algorithm, group, layout)):
        raise InputError(Problem("--algorithm", reason))
    type_bytes = DTYPES[dtype]
    sizes = [s for s in _sizes(lo, hi, factor) if s >= type_bytes]
    fabric, router = _bench_fabric(
        ranks,
        gpus_per_server,
        nic_gbps,
        scenario,
        gpu_name.upper(),
        nvlink_gBps,
        None if cpu_vendor == "auto" else cpu_vendor,
    )
    gpus_per_server = fabric.gpus_per_server
    layout = Layout(gpus_per_server)
    shape = Shape.of(group, gpus_per_server)
    paths = Paths.from_fabric(fabric, router)
    if in_switch is None:
        in_switch = fabric.nvls and shape.servers == 1
    if engine == "model":
        rows = []
        for size in sizes:
            c = choose(
                op,
                shape,
                size,
                paths,
                algorithm=algorithm,
                protocol=protocol,
                in_switch=in_switch,
                runnable=lambda a: not_applicable(op, a, group, layout) is None,
            )
            rows.append((c.time_s, f"{c.algorithm}/{c.protocol}/{c.channels}ch"))
    else:
        rows = _engine_times(
            op, algorithm, tuple(group), fabric, router, sizes, type_bytes, engine, protocol, in_switch
        )
    n = len(group)
    where = f"fabric of {scenario}" if scenario else f"{nic_gbps:g} Gb/s NICs"
    table = Table(
        title=f"{TITLES[op]}: {n} ranks, {gpus_per_server} per server, {where}, "
        f"engine {engine}  (busbw = algbw × {_factor_text(op)})",
        title_justify="left",
    )
    for col in (
        "size (B)",
        "count (elements)",
        "type",
        "redop",
        "root",
        "time (us)",
        "algbw (GB/s)",
        "busbw (GB/s)",
        "algorithm",
    ):
        table.add_column(col, justify="right" if col not in ("type", "redop", "algorithm") else "left")
    for size, (t, alg) in zip(sizes, rows):
        algbw = size / t / 1e9 if t > 0 else 0.0
        table.add_row(
            str(size),
            str(size // type_bytes),
            dtype,
            redop if op in ("all-reduce", "reduce-scatter", "reduce") else "none",
            "0" if op in ("broadcast", "reduce") else "-1",
            f"{t * 1e6:.2f}",
            f"{algbw:.2f}",
            f"{algbw * busbw_factor(op, n):.2f}",
            alg,
        )
    console.print(table)
    if any("/ll/" in alg for _, alg in rows):
        console.print(_ll_ceiling_line(fabric, shape.servers), highlight=False)
    return 0


def _ll_ceiling_line(fabric, servers: int) -> str:
    """Which of NCCL's LL ceilings (tuning.cc `llMaxBws`) held the rows that ran LL."""
    gBps = (fabric.ll_max_bytes_per_s if servers < 2 else fabric.ll_max_across_bytes_per_s[min(servers, 3) - 2]) / 1e9
    if not gBps:
        return "LL: half the links' rate (its flags), no ceiling known for this GPU's collective library"
    if servers < 2:
        return f"LL: at most {gBps:g} GB/s of bus bandwidth inside one server (NCCL's ceiling for the GPU)"
    return (
        f"LL: at most {gBps:g} GB/s of bus bandwidth across {servers} servers (NCCL's ceiling for the servers' "
        "CPU vendor: --cpu-vendor, cluster.cpu_vendor)"
    )


def _factor_text(op: str) -> str:
    return {"all-reduce": "2(n−1)/n", "broadcast": "1", "reduce": "1", "send-recv": "1"}.get(op, "(n−1)/n")


@collective_app.command("bootstrap")
def bootstrap(
    nnodes: int = typer.Option(2, "--nnodes", help="nodes (torchrun --nnodes)"),
    nproc_per_node: int = typer.Option(4, "--nproc-per-node", help="processes = GPUs per node"),
    master_addr: str = typer.Option("192.168.10.101", "--master-addr", help="rank 0's frontend address"),
    master_port: int = typer.Option(12345, "--master-port", help="rendezvous TCP port"),
    network: str = typer.Option("frontend", "--network", help="frontend or management"),
    seed: int = typer.Option(0, "--seed", help="seed of the unique ID"),
    channels: int = typer.Option(2, "--channels", help="NCCL channels: ring connections per pair of ranks"),
) -> int:
    """Communicator bootstrap (Deep Learning for Network Engineers, Ch. 14, Figures 14-2 and 14-3): ranks, the
    TCP rendezvous, the unique ID, then the ring's RDMA connections (Ch. 9: QPs, CM REQ -> REP -> RTU), once,
    before the first collective."""
    import ipaddress

    import numpy as np
    from rich.table import Table

    from ..collectives.bootstrap import Launch, processes, rendezvous, ring_connections

    problems: list[Problem] = []
    _check(problems, "--nnodes", nnodes, 1)
    _check(problems, "--nproc-per-node", nproc_per_node, 1)
    _check(problems, "--seed", seed, 0)
    _check(problems, "--channels", channels, 1)
    if not 1 <= master_port <= 65535:
        problems.append(Problem("--master-port", f"a TCP port, 1 .. 65535 (got {master_port})"))
    try:
        ipaddress.IPv4Address(master_addr)
    except ValueError:
        problems.append(Problem("--master-addr", f"an IPv4 address (got {master_addr!r})"))
    if network not in ("frontend", "management"):
        problems.append(Problem("--network", "one of frontend, management"))
    if problems:
        raise InputError(problems)
    launch = Launch(nnodes, nproc_per_node, master_addr, master_port)
    if launch.world_size > 4096:
        raise InputError(Problem("--nnodes", "at most 4096 processes in this table"))
    ranks = Table(title=f"torchrun: global rank = node_rank × {nproc_per_node} + local_rank", title_justify="left")
    for col in ("node", "address", "local rank", "computation", "global rank"):
        ranks.add_column(col)
    for p in processes(launch):
        ranks.add_row(
            str(p.node_rank),
            p.host_addr,
            str(p.local_rank),
            f"{p.node_rank}*{nproc_per_node}+{p.local_rank}",
            str(p.rank),
        )
    console.print(ranks)
    rv = rendezvous(launch, np.random.default_rng(seed), network=network)
    console.print(
        f"rank 0 listens on {rv.listener[0]}:{rv.listener[1]} and expects {rv.expected_connections} connections"
    )
    events = Table(title="bootstrap messages", title_justify="left")
    for col in ("t (us)", "message", "from", "to", "destination", "network", "bytes"):
        events.add_column(col)
    for e in rv.events:
        events.add_row(
            f"{e.t_s * 1e6:.1f}",
            e.kind,
            f"rank {e.src_rank} ({e.src_addr})",
            f"rank {e.dst_rank}",
            f"{e.dst_addr}:{e.dst_port}",
            e.network,
            str(e.size_bytes),
        )
    console.print(events)
    console.print(
        f"NCCL unique ID ({len(rv.unique_id)} bytes): {rv.unique_id[:16].hex()}…; every rank joins the "
        f"communicator with it; done after {rv.done_s * 1e6:.1f} µs"
    )
    rc = ring_connections(launch, rv.done_s, channels)
    cs = rc.setup
    if not cs.connections:
        console.print("ring connections: every ring neighbour is on the same node (NVLink): no queue pair")
        return 0
    conns = Table(
        title=f"ring connections over the backend ({channels} channel{'s' * (channels > 1)}: rank r -> r + 1; "
        "Deep Learning for Network Engineers, Ch. 9: QPs RESET -> INIT -> RTR -> RTS around the CM "
        "exchange)",
        title_justify="left",
    )
    for col in ("t (us)", "message", "from", "to", "network", "bytes"):
        conns.add_column(col)
    shown = rc.events[:60]
    for e in shown:
        conns.add_row(
            f"{e.t_s * 1e6:.1f}",
            "CM " + e.kind[3:].upper(),
            f"rank {e.src_rank} ({e.src_addr})",
            f"rank {e.dst_rank} ({e.dst_addr}) UDP {e.dst_port}",
            e.network,
            str(e.size_bytes),
        )
    if len(rc.events) > len(shown):
        conns.caption = f"... and {len(rc.events) - len(shown)} more CM messages"
    console.print(conns)
    console.print(
        f"{cs.connections} connections ({cs.queue_pairs} QPs), {cs.per_connection_s * 1e6:.1f} µs each "
        f"(2 QPs created, 6 state changes, 3 CM messages, 1.5 round trips); the busiest NIC "
        f"({cs.busiest_nic}) sets up {cs.busiest_nic_connections}, one at a time: connected at "
        f"{rc.done_s * 1e6:.1f} µs. The first collective starts after that: the job's first iteration pays "
        "it (a scenario's `iteration: first`), later iterations reuse the connections"
    )
    return 0
