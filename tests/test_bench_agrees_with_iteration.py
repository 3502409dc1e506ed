"""A collective timed inside a simulated iteration, with nothing else running, and the same collective
in `aifabric collective bench` on the same fabric agree: within 5 % for the bench's default engine
(`--engine model`, the α-β cost model and the tuner) and within 1 % for `--engine flow` (the same
lowering as the iteration).

The number compared is the one a user reads: the `time (us)` cell of the bench's nccl-tests table
(`--scenario FILE -b SIZE -e SIZE`), against `run.results.collectives` of `simulate(scenario,
workload=...)` whose only op on each member is that one `Collective` (a plain one: NCCL's tuner
chooses algorithm, protocol and channels, as for every workload collective).

Two fabrics that differ in every knob the tuner reads:
- ch14: the seeds' Ch. 14 cluster, 2 servers x 4 H100 (NVLink SHARP), rail-optimized 400G RoCE;
- a100-ib: 4 servers x 8 A100 (no NVLS), 200 Gb/s InfiniBand NICs, rail-optimized with 2 spines
  (rail switches 2:1 oversubscribed).
The bench groups ranks 0..n-1 (whole servers first), so every group here is contiguous: all GPUs
(data-parallel), one server (tensor-parallel), two servers.

`MODEL_GAPS` are shapes where the bench's default (model) engine does not agree with the iteration
today; they are strict xfails so that a fix shows up (see each reason).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json

import pytest
import yaml

from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.scenario import ch14_scenario, load_scenario
from aifabric.simulate import simulate
from aifabric.workload.ops import Collective, Workload

CLI_OP = {
    "all-reduce": "allreduce",
    "all-gather": "allgather",
    "reduce-scatter": "reducescatter",
    "all-to-all": "alltoall",
}
BF16 = 2  # bytes per element: the workload's gradients, and the bench's `-d bfloat16`
TOLERANCE = {"model": 0.05, "flow": 0.01}
MB = 1 << 20


def _ch14() -> dict:
    return ch14_scenario().model_dump(mode="json")


def _a100_ib() -> dict:
    d = _ch14()
    d["name"] = "a100-ib-4x8"
    d["cluster"].update(gpu="A100", servers=4, gpus_per_server=8, nic_speed_gbps=200)
    d["fabric"].update(link_speed_gbps=200, spines=2, transport="infiniband")
    return d


FABRICS = {"ch14": _ch14, "a100-ib": _a100_ib}


@pytest.fixture(scope="module")
def scenario_files(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("fabrics")
    out = {}
    for name, make in FABRICS.items():
        path = folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump(make(), sort_keys=False), encoding="utf-8")
        out[name] = str(path)
    return out


# (fabric, op, ranks 0..n-1, size in bytes): what each shape stands for
SHAPES = [
    ("ch14", "all-reduce", 8, 268_476_416),  # the demo's gradient AllReduce, all 8 GPUs (ring over 4 NICs)
    ("ch14", "all-reduce", 8, 1 * MB),  # a small data-parallel bucket
    ("ch14", "all-gather", 4, 64 * MB),  # tensor parallel inside one server
    ("ch14", "all-reduce", 4, 16 * MB),  # tensor parallel inside one server: NVLS, its pieces streamed
    ("ch14", "reduce-scatter", 8, 64 * MB),  # ZeRO gradients over both servers
    ("ch14", "all-to-all", 8, 32 * MB),  # expert parallel over both servers (PXN)
    ("a100-ib", "all-reduce", 32, 256 * MB),  # data parallel over all 32 GPUs
    ("a100-ib", "all-reduce", 8, 16 * MB),  # tensor parallel inside one server (A100: ring, no NVLS)
    ("a100-ib", "reduce-scatter", 8, 64 * MB),  # tensor parallel inside one server
    ("a100-ib", "all-gather", 16, 64 * MB),  # two servers
    ("a100-ib", "all-to-all", 32, 64 * MB),  # expert parallel over all servers
    ("a100-ib", "all-to-all", 32, 64 * 1024),  # small expert-parallel exchange (PXN relay then rail)
    ("a100-ib", "all-reduce", 32, 512 * 1024),  # a small bucket: LL under NCCL's ceiling across servers (AMD)
]

MODEL_GAPS = {  # shape -> why the bench's model engine disagrees with the iteration (flow agrees)
    (
        "a100-ib",
        "all-reduce",
        32,
        16 * MB,
    ): "a mid-size data-parallel bucket over 4 servers, ring LL128 on 8 channels: the NVLink and the network "
    "steps nearly as long as each other (2.5 and 2.9 µs), so the ring has little slack and its hops' latencies "
    "show; the model takes the longer of the NIC's stream and one chunk's journey (200.7 µs), the lowered run's "
    "channels drift apart and meet both (219.7 µs, the model 8.6 % fast). Measured on the lowered run: its NVLink "
    "hops share their GPU's port with the other channels' chunks (1.04 µs on average, not the chunk's own 0.31 µs), "
    "so the journey sets the pace (3.3 µs a step), not the NIC (2.97 µs). Taking that sharing as processor sharing "
    "at the ring's own pace brings the model to -5.2 % but makes the tuner leave the flat ring at 16k ranks even at "
    "8 GiB: not taken",
}


def _id(shape) -> str:
    fabric, op, n, size = shape
    return f"{fabric}-{CLI_OP[op]}-{n}r-{size}B"


@functools.cache
def _iteration(path: str, op: str, ranks: int, size_bytes: int) -> tuple[float, str]:
    """The collective's time (and algorithm) inside a simulated iteration where it is the only op."""
    s = load_scenario(path)
    coll = Collective("it0/only", op, tuple(range(ranks)), size_bytes // BF16, BF16, label="bench shape")
    world = s.cluster.servers * s.cluster.gpus_per_server
    workload = Workload(
        "one collective",
        [[coll] if r < ranks else [] for r in range(world)],
        params=0,
        iterations=1,
        flops_per_iteration=0.0,
    )
    run = simulate(s, engine="flow", workload=workload)
    [result] = [c for c in run.results.collectives if c.key == "it0/only"]
    assert result.group_size == ranks and result.size_bytes == size_bytes
    return result.time_s, result.algorithm


@functools.cache
def _bench(path: str, op: str, ranks: int, size_bytes: int, engine: str) -> tuple[float, str]:
    """`aifabric collective bench` as a user runs it: the time (s) and algorithm of the single row."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = run_app(
            app,
            [
                "collective",
                "bench",
                "--op",
                CLI_OP[op],
                "--ranks",
                str(ranks),
                "--scenario",
                path,
                "-b",
                str(size_bytes),
                "-e",
                str(size_bytes),
                "-d",
                "bfloat16",
                "--engine",
                engine,
            ],
        )
    out = buf.getvalue()
    assert code == 0, out
    lines = out.splitlines()
    header = next(line for line in lines if "size (B)" in line)
    names = [c.strip() for c in header.split("┃")[1:-1]]
    rows = [line for line in lines if line.startswith("│") and line.split("│")[1].strip() == str(size_bytes)]
    assert len(rows) == 1, out
    cells = dict(zip(names, (c.strip() for c in rows[0].split("│")[1:-1])))
    return float(cells["time (us)"]) * 1e-6, cells["algorithm"]


def _check(scenario_files, shape, engine: str) -> None:
    fabric, op, ranks, size = shape
    path = scenario_files[fabric]
    t_iter, algorithm = _iteration(path, op, ranks, size)
    t_bench, bench_algorithm = _bench(path, op, ranks, size, engine)
    assert bench_algorithm.split("/")[0] == algorithm, (bench_algorithm, algorithm)  # the tuner chose alike
    assert t_iter > 0
    gap = t_bench / t_iter - 1
    assert abs(gap) <= TOLERANCE[engine], (
        f"{_id(shape)}: iteration {t_iter * 1e6:.2f} µs ({algorithm}), bench --engine {engine} "
        f"{t_bench * 1e6:.2f} µs ({bench_algorithm}): {gap:+.1%}"
    )


@pytest.mark.parametrize("engine", ["model", "flow"])
@pytest.mark.parametrize("shape", SHAPES, ids=_id)
def test_bench_agrees_with_the_collective_inside_an_iteration(scenario_files, shape, engine):
    _check(scenario_files, shape, engine)


@pytest.mark.parametrize("shape", list(MODEL_GAPS), ids=_id)
def test_flow_bench_agrees_where_the_model_does_not(scenario_files, shape):
    _check(scenario_files, shape, "flow")


@pytest.mark.parametrize(
    "shape",
    [pytest.param(s, marks=pytest.mark.xfail(strict=True, reason=why)) for s, why in MODEL_GAPS.items()],
    ids=_id,
)
def test_model_bench_gaps(scenario_files, shape):
    _check(scenario_files, shape, "model")


def test_shapes_cover_both_fabrics_with_three_operations_each():
    for fabric in FABRICS:
        ops = {op for f, op, _, _ in SHAPES if f == fabric}
        assert len(ops) >= 3, (fabric, ops)


def test_ch14_demo_gradient_allreduce_equals_the_bench(tmp_path):
    """`aifabric demo --scenario ch14`: its gradient AllReduce inside the full iteration (after the
    backward pass) against the bench on the demo's own scenario.yaml (once 9.56 ms vs 2.28 ms)."""
    out = tmp_path / "demo"
    with contextlib.redirect_stdout(io.StringIO()):
        assert run_app(app, ["demo", "--scenario", "ch14", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    [grad] = [c for c in summary["collectives"] if c["key"] == "it0/grad-allreduce"]
    assert grad["op"] == "all-reduce" and grad["group_size"] == 8
    size = grad["bytes_per_rank"]
    for engine in ("flow", "model"):
        t_bench, algorithm = _bench(str(out / "scenario.yaml"), "all-reduce", 8, size, engine)
        assert algorithm.split("/")[0] == grad["algorithm"]
        assert grad["time_s"] == pytest.approx(t_bench, rel=0.05), (engine, grad["time_s"], t_bench)
