"""`aifabric collective ...`: explain tables for every operation and algorithm, the nccl-tests sweep,
and bad flags exiting 2 with the flag named.

The explain tables are read back (who sends what to whom, what every rank holds after each step) and checked
against what each operation means (Deep Learning for Network Engineers, Ch. 14; NCCL's definitions): the final
holdings follow from the operation alone, the volumes from the algorithm's definition (ring AllReduce on n ranks:
each rank sends 2(n-1) chunks of size/n), the network of a send from the rank numbering (torchrun order, rails
by local index). The bench rows are checked with nccl-tests' own arithmetic (algbw = size / time, busbw = algbw x
2(n-1)/n for AllReduce, (n-1)/n for AllGather, ReduceScatter and AllToAll, 1 for Broadcast, Reduce, Send/Recv)."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import pytest
from rich.console import Console

import aifabric.cli.collective_cmd as collective_cmd
from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.cli.collective_cmd import OP_NAMES, parse_size
from aifabric.collectives import ALGORITHMS

CASES = [(name, alg) for name, op in OP_NAMES.items() for alg in ALGORITHMS[op]]
N, GPUS_PER_SERVER, ELEMENTS = 6, 2, 24  # the explain cases: 3 servers of 2 GPUs, 24 elements


@pytest.fixture
def wide(monkeypatch):
    """The command's console as wide as its tables (a pipe gets 132 columns: long holdings would wrap or be cut)."""
    monkeypatch.setattr(collective_cmd, "console", Console(width=3000))


# ---------------------------------------------------------------- reading the tables back


@dataclass
class Step:
    sends: list[tuple[int, int, str, str, int, str]] = field(
        default_factory=list
    )  # src, dst, chunk, value, elements, net
    holdings: dict[int, dict[str, str]] = field(default_factory=dict)  # rank -> chunk -> value


def _cells(line: str, sep: str) -> list[str]:
    return [c.strip() for c in line.strip().strip(sep).split(sep)]


def read_explain(out: str) -> list[Step]:
    """Every step's sends table and, when printed, the holdings table after it."""
    steps: list[Step] = []
    lines = out.splitlines()
    i = 0
    while i < len(lines):
        title = lines[i]
        if re.match(r"^(step \d+:|after step \d+:)", title):
            header = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("┃"))
            columns = _cells(lines[header], "┃")
            rows = []
            j = header + 2  # past the header's rule
            while lines[j].startswith("│"):
                rows.append(dict(zip(columns, _cells(lines[j], "│"))))
                j += 1
            if title.startswith("step "):
                assert int(title.split()[1].rstrip(":")) == len(steps) + 1, title
                steps.append(
                    Step(
                        [
                            (
                                int(r["sender"].split()[1]),
                                int(r["receiver"].split()[1]),
                                r["chunk"],
                                r["value sent"],
                                int(r["elements"]),
                                r["network"],
                            )
                            for r in rows
                        ]
                    )
                )
            else:
                steps[-1].holdings = {int(r["rank"]): {c: r[c] for c in columns[1:]} for r in rows}
            i = j
        i += 1
    return steps


def contributions(chunk: str, value: str) -> list[int]:
    """The ranks whose copies of `chunk` a value adds up: "B3" -> [3], "B=B1+B3" and "B (full sum: B1+B3)" -> [1, 3]."""
    terms = value.split("full sum: ")[1].rstrip(")") if "full sum: " in value else value.split("=")[-1]
    out = []
    for term in terms.split("+"):
        assert term.startswith(chunk) and term[len(chunk) :].isdigit(), (chunk, value)
        out.append(int(term[len(chunk) :]))
    return sorted(out)


def network(src: int, dst: int, gpus_per_server: int = GPUS_PER_SERVER) -> str:
    """What a send crosses, from the rank numbering alone (torchrun order; rail = local index)."""
    if src // gpus_per_server == dst // gpus_per_server:
        return "NVLink (no QP)"
    a, b = src % gpus_per_server, dst % gpus_per_server
    return f"rail {a} (RDMA QP)" if a == b else f"rail {a} → spine → rail {b} (RDMA QP)"


def explain(
    capsys, name: str, algorithm: str, ranks: int = N, gpus_per_server: int = GPUS_PER_SERVER, elements: int = ELEMENTS
) -> list[Step]:
    assert (
        run_app(
            app,
            [
                "collective",
                name,
                "--ranks",
                str(ranks),
                "--gpus-per-server",
                str(gpus_per_server),
                "--elements",
                str(elements),
                "--algorithm",
                algorithm,
                "--explain",
            ],
        )
        == 0
    )
    return read_explain(capsys.readouterr().out)


# ---------------------------------------------------------------- what each operation leaves behind


def _final_holdings_are_the_operations(op: str, final: dict[int, dict[str, str]], n: int) -> None:
    everyone = list(range(n))
    held = {r: {c: contributions(c, v) for c, v in chunks.items()} for r, chunks in final.items()}
    if op == "all-reduce":  # every rank: every chunk summed over every rank, each once
        assert sorted(held) == everyone
        assert all(terms == everyone for chunks in held.values() for terms in chunks.values())
    elif op == "reduce-scatter":  # every rank ends with a chunk of its own summed over every rank
        letters = list(final[0])
        assert len(letters) == n
        full = {r: {c for c, terms in held.get(r, {}).items() if terms == everyone} for r in everyone}
        assert any(all(letters[p[r]] in full[r] for r in everyone) for p in itertools.permutations(range(n))), full
    elif op == "all-gather":  # every rank holds every rank's block, as that rank sent it
        assert sorted(held) == everyone
        first = held[0]
        assert sorted(terms[0] for terms in first.values()) == everyone
        assert all(chunks == first for chunks in held.values())
    elif op == "broadcast":  # the root's copy (rank 0) everywhere
        assert sorted(held) == everyone
        assert all(terms == [0] for chunks in held.values() for terms in chunks.values())
    elif op == "reduce":  # the root holds every chunk summed over every rank
        assert all(terms == everyone for terms in held[0].values())
    elif op in ("all-to-all", "all-to-allv"):  # block i*n+j: rank i's block for rank j, now at rank j
        letters = list(final[0])
        assert len(letters) == n * n
        for j in everyone:
            assert [held[j][letters[i * n + j]] for i in everyone] == [[i] for i in everyone], j
    elif op == "send-recv":  # the group is ranks 0 and n-1: the receiver holds the sender's buffer
        assert held[n - 1] == {"A": [0]}
    else:
        raise AssertionError(op)


@pytest.mark.parametrize("name,algorithm", CASES)
def test_explain_every_operation_and_algorithm(name, algorithm, capsys, wide):
    """Every step's sends and holdings: the holdings at the end are what the operation means, every send crosses
    the network its ranks' places say, and a send carries what its sender held."""
    op = OP_NAMES[name]
    steps = explain(capsys, name, algorithm)
    assert steps and all(s.sends for s in steps)
    for k, step in enumerate(steps):
        for src, dst, chunk, value, _elements, net in step.sends:
            assert net == network(src, dst), (src, dst, net)
            if op == "barrier":
                continue
            before = f"{chunk}{src}" if k == 0 else steps[k - 1].holdings[src][chunk]  # each starts with its own
            assert contributions(chunk, value) == contributions(chunk, before), (k, src, chunk)
    if op == "barrier":  # dissemination: round k, rank r signals rank r + 2^k (mod n); ceil(log2 n) rounds
        assert len(steps) == math.ceil(math.log2(N))
        for k, step in enumerate(steps):
            assert sorted((s, d) for s, d, *_ in step.sends) == [(r, (r + 2**k) % N) for r in range(N)]
        return
    _final_holdings_are_the_operations(op, steps[-1].holdings, N)


def _sent(steps: list[Step]) -> dict[int, list[tuple[int, int]]]:
    """rank -> [(receiver, elements)] of every send, in order."""
    out: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for step in steps:
        for src, dst, _chunk, _value, elements, _net in step.sends:
            out[src].append((dst, elements))
    return out


def _one_ring(successor: dict[int, int]) -> bool:
    seen, r = [], 0
    while r not in seen:
        seen.append(r)
        r = successor[r]
    return sorted(seen) == list(range(N)) and r == 0


@pytest.mark.parametrize(
    "name,sends_per_rank", [("allreduce", 2 * (N - 1)), ("reducescatter", N - 1), ("allgather", N - 1)]
)
def test_ring_sends_are_the_rings(name, sends_per_rank, capsys, wide):
    """Ring AllReduce on n ranks: each rank sends 2(n-1) chunks of size/n, always to its ring successor, and the
    successors close one ring over every rank; ReduceScatter and AllGather are its halves, n-1 each."""
    steps = explain(capsys, name, "ring")
    assert len(steps) == sends_per_rank
    sent = _sent(steps)
    assert sorted(sent) == list(range(N))
    successor = {}
    for r, sends in sent.items():
        assert [e for _, e in sends] == [ELEMENTS // N] * sends_per_rank, r
        assert len({d for d, _ in sends}) == 1, r
        successor[r] = sends[0][0]
    assert _one_ring(successor)


@pytest.mark.parametrize("name,phases", [("allreduce", 2), ("reducescatter", 1), ("allgather", 1), ("alltoall", 1)])
def test_direct_sends_reach_every_other_rank_once_per_phase(name, phases, capsys, wide):
    """Direct: every rank sends its block for each other rank straight to it (AllReduce: ReduceScatter, then
    AllGather, both direct): n-1 sends of size/n per phase, every other rank once."""
    sent = _sent(explain(capsys, name, "direct"))
    for r in range(N):
        assert Counter(d for d, _ in sent[r]) == {d: phases for d in range(N) if d != r}, r
        assert all(e == ELEMENTS // N for _, e in sent[r]), r


def test_alltoallv_sends_the_skewed_counts(capsys, wide):
    """The command's AllToAllv pattern: position i sends (i + j) mod 3 + 1 parts to j, a part being
    max(1, elements // (2 n^2)) elements."""
    elements = 720
    part = max(1, elements // (2 * N * N))
    sent = _sent(explain(capsys, "alltoallv", "direct", elements=elements))
    for i in range(N):
        assert sorted(sent[i]) == [(j, ((i + j) % 3 + 1) * part) for j in range(N) if j != i], i


@pytest.mark.parametrize("name,algorithm", [(n, a) for n, a in CASES if n in ("broadcast", "reduce")])
def test_rooted_operations_move_the_buffer_once_per_rank(name, algorithm, capsys, wide):
    """Broadcast: every rank but the root receives the whole buffer exactly once, the root nothing; Reduce: every
    rank but the root sends the whole buffer exactly once (its partial sum), the root nothing."""
    steps = explain(capsys, name, algorithm)
    moved: Counter[int] = Counter()
    for step in steps:
        for src, dst, _chunk, _value, elements, _net in step.sends:
            moved[dst if name == "broadcast" else src] += elements
    assert moved == {r: ELEMENTS for r in range(1, N)}


def test_send_recv_is_one_send_of_the_whole_buffer(capsys, wide):
    steps = explain(capsys, "sendrecv", "direct")
    assert [s.sends for s in steps] == [[(0, N - 1, "A", "A0", ELEMENTS, network(0, N - 1))]]


@pytest.mark.parametrize("ranks", [4, 6, 8])
def test_ring_allreduce_summary_counts_2_n_minus_1_over_n(ranks, capsys):
    elements = 24 * ranks
    assert (
        run_app(
            app,
            [
                "collective",
                "allreduce",
                "--ranks",
                str(ranks),
                "--gpus-per-server",
                "2",
                "--elements",
                str(elements),
                "--algorithm",
                "ring",
            ],
        )
        == 0
    )
    out = " ".join(capsys.readouterr().out.split())
    assert f"rank 0 sends {2 * (ranks - 1) * elements // ranks} elements" in out


def test_the_books_ring_allreduce_story(capsys):
    """Deep Learning for Network Engineers, Ch. 14: four ranks, chunks A-D, 3 + 3 steps."""
    assert run_app(app, ["collective", "allreduce", "--ranks", "4", "--elements", "1024", "--explain"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert "3 ReduceScatter + 3 AllGather = 6 steps" in out
    assert "ReduceScatter done: rank 0 holds B, rank 1 holds C, rank 2 holds D, rank 3 holds A" in out
    assert "divide by 4" in out


def test_broadcast_explain_shows_nvlink_inside_and_qps_across(capsys):
    assert run_app(app, ["collective", "broadcast", "--ranks", "8", "--gpus-per-server", "4", "--explain"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tree Broadcast")
    assert "rail 0 (RDMA QP)" in out and "NVLink (no QP)" in out
    assert "spine" not in out


# ---------------------------------------------------------------- the nccl-tests sweep

BUSBW_FACTOR = {  # nccl-tests' doc/PERFORMANCE.md
    "allreduce": lambda n: 2 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


def read_bench(out: str) -> list[dict[str, str]]:
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("┃"))
    columns = _cells(lines[header], "┃")
    return [dict(zip(columns, _cells(line, "│"))) for line in lines[header + 2 :] if line.startswith("│")]


def check_bench_rows(rows: list[dict[str, str]], op: str, n: int, sizes: list[int], type_bytes: int = 4) -> None:
    """Each row by nccl-tests' arithmetic: count = size / type size, algbw = size / time, busbw = algbw x factor."""
    assert [int(r["size (B)"]) for r in rows] == sizes
    reduces = op in ("allreduce", "reducescatter", "reduce")
    for r in rows:
        size, t_s = int(r["size (B)"]), float(r["time (us)"]) * 1e-6
        assert int(r["count (elements)"]) == size // type_bytes
        assert r["type"] == "float" and r["redop"] == ("sum" if reduces else "none")
        assert r["root"] == ("0" if op in ("broadcast", "reduce") else "-1")
        assert t_s > 0
        algbw, busbw = float(r["algbw (GB/s)"]), float(r["busbw (GB/s)"])
        assert algbw == pytest.approx(size / t_s / 1e9, rel=1e-3, abs=0.006), r
        assert busbw == pytest.approx(algbw * BUSBW_FACTOR[op](n), rel=1e-3, abs=0.006 * 2 + 0.005), r
        assert busbw < 450  # below an H100's NVLink per direction: no unit slipped
    times = [float(r["time (us)"]) for r in rows]
    assert times == sorted(times)  # more bytes never take less time


def test_bench_prints_the_nccl_tests_columns(capsys, wide):
    assert (
        run_app(app, ["collective", "bench", "--op", "allreduce", "--ranks", "16", "-b", "8", "-e", "1M", "-f", "32"])
        == 0
    )
    out = capsys.readouterr().out
    assert "busbw = algbw × 2(n−1)/n" in out
    rows = read_bench(out)
    check_bench_rows(rows, "allreduce", 16, [8, 256, 8192, 262144])
    assert float(rows[-1]["busbw (GB/s)"]) > 1  # the largest row is not all rounding


@pytest.mark.parametrize(
    "op", ["allreduce", "reducescatter", "allgather", "alltoall", "broadcast", "reduce", "sendrecv"]
)
def test_bench_rows_follow_nccl_tests_arithmetic(op, capsys, wide):
    assert run_app(app, ["collective", "bench", "--op", op, "--ranks", "16", "-b", "64K", "-e", "16M", "-f", "16"]) == 0
    rows = read_bench(capsys.readouterr().out)
    check_bench_rows(rows, op, 2 if op == "sendrecv" else 16, [65536, 1 << 20, 16 << 20])


@pytest.mark.parametrize("engine", ["analytic", "flow"])
@pytest.mark.parametrize("op", ["allgather", "sendrecv", "alltoall", "broadcast"])
def test_bench_on_the_engines(engine, op, capsys, wide):
    assert (
        run_app(
            app,
            [
                "collective",
                "bench",
                "--op",
                op,
                "--ranks",
                "8",
                "--gpus-per-server",
                "4",
                "-b",
                "1M",
                "-e",
                "1M",
                "--engine",
                engine,
            ],
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"engine {engine}" in out
    rows = read_bench(out)
    check_bench_rows(rows, op, 2 if op == "sendrecv" else 8, [1 << 20])
    assert float(rows[0]["busbw (GB/s)"]) > 1


@pytest.mark.parametrize(
    "argv,field",
    [
        (["collective", "bench", "--op", "allsum"], "--op"),
        (["collective", "bench", "--max-bytes", "lots"], "--max-bytes"),
        (["collective", "bench", "--algorithm", "tree", "--op", "allgather"], "--algorithm"),
        (["collective", "bench", "--engine", "packet"], "--engine"),
        (["collective", "allreduce", "--ranks", "0"], "--ranks"),
        (["collective", "allreduce", "--ranks", "64", "--explain"], "--ranks"),
        (
            ["collective", "allreduce", "--ranks", "6", "--gpus-per-server", "4", "--algorithm", "hierarchical"],
            "--algorithm",
        ),
        (["collective", "broadcast", "--root", "9"], "--root"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(argv, field, capsys):
    assert run_app(app, argv) == 2
    assert field in capsys.readouterr().err


def test_sizes_are_nccl_tests_sizes():
    assert [parse_size(s, "x") for s in ("8", "64K", "1M", "8G")] == [8, 65536, 1 << 20, 8 << 30]


def test_bootstrap_command_prints_figure_14_2(capsys):
    assert run_app(app, ["collective", "bootstrap"]) == 0
    out = capsys.readouterr().out
    assert "expects 7 connections" in out and "127.0.0.1:12345" in out and "192.168.10.101:12345" in out
    assert run_app(app, ["collective", "bootstrap", "--master-addr", "node-a"]) == 2


def test_bench_on_a_scenarios_fabric(capsys, tmp_path, wide):
    from aifabric.scenario import ch14_scenario_text

    path = tmp_path / "s.yaml"
    path.write_text(ch14_scenario_text())
    assert (
        run_app(
            app,
            [
                "collective",
                "bench",
                "--ranks",
                "8",
                "-b",
                "64K",
                "-e",
                "64K",
                "--scenario",
                str(path),
                "--engine",
                "analytic",
            ],
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "fabric of" in out
    check_bench_rows(read_bench(out), "allreduce", 8, [65536])
    assert run_app(app, ["collective", "bench", "--ranks", "64", "--scenario", str(path)]) == 2
    assert "--ranks" in capsys.readouterr().err


def test_summary_counts_traffic_by_network(capsys):
    assert (
        run_app(app, ["collective", "allreduce", "--ranks", "16", "--gpus-per-server", "4", "--elements", "4096"]) == 0
    )
    out = capsys.readouterr().out
    # snake ring over 4 servers: 12 of 16 hops on NVLink, 4 on rails, none through a spine
    assert re.search(r"NVLink \(no QP\)\s*│\s*360 │\s*92,160", out)
    assert re.search(r"one rail \(RDMA QP\)\s*│\s*120 │\s*30,720", out)
    assert re.search(r"spine → rail \(RDMA QP\)\s*│\s*0 │\s*0 ", out)
