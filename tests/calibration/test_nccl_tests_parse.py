"""The nccl-tests parser on real outputs (tests/calibration/data, see SOURCES.md), on outputs written
the way nccl-tests writes them, and on broken ones (an error naming the file and the line)."""

from __future__ import annotations

from pathlib import Path

import pytest
from calib_synth import float_str, output
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aifabric.calibration import catalog_gpu
from aifabric.calibration.nccl_tests import op_from_name, parse_file, parse_text
from aifabric.catalog import GPUS
from aifabric.errors import InputError

DATA = Path(__file__).parent / "data"
G8 = DATA / "a100_sxm4_80gb_8gpu_all_reduce_perf_g8.txt"
MPIRUN = DATA / "a100_sxm4_80gb_8gpu_all_reduce_perf_mpirun_np8.txt"
GB10 = DATA / "gb10_2node_all_gather_perf_roce200g.txt"
SENDRECV = DATA / "a100_8gpu_sendrecv_perf_partial.txt"


def only(path: Path, **kw):
    runs = parse_file(path, **kw)
    assert len(runs) == 1
    return runs[0]


def test_a100_single_process_eight_gpus():
    run = only(G8)
    # -g 8 in one process: 8 rank lines, 8 GPUs (not 8 lines x nGpus 8)
    assert (run.op, run.gpus, run.nodes, run.gpus_per_node) == ("all-reduce", 8, 1, 8)
    assert run.gpu_name == "NVIDIA A100-SXM4-80GB" and {r.host for r in run.ranks} == {"thanos"}
    assert len({r.pid for r in run.ranks}) == 1
    assert [r.size_bytes for r in run.rows] == [8 * 2**k for k in range(30)]
    first, last = run.rows[0], run.rows[-1]
    assert (first.count, first.type, first.redop, first.root) == (2, "float", "sum", -1)
    assert (first.out_of_place.time_us, first.in_place.time_us) == (40.12, 38.85)
    assert (last.size_bytes, last.count) == (4294967296, 1073741824)
    assert (last.out_of_place.time_us, last.out_of_place.algbw_gBps, last.out_of_place.busbw_gBps) == (
        32336.0,
        132.82,
        232.44,
    )
    assert (last.in_place.time_us, last.in_place.busbw_gBps) == (32455.0, 231.59)
    assert last.best is last.out_of_place


def test_a100_mpirun_skips_the_interleaved_mpi_messages():
    run = only(MPIRUN)
    assert (run.op, run.gpus, run.nodes, run.gpus_per_node) == ("all-reduce", 8, 1, 8)
    assert len({r.pid for r in run.ranks}) == 8
    # "8 more processes have sent help message ..." before the first row, "1 more process ..." before the last
    assert [r.size_bytes for r in run.rows] == [8 * 2**k for k in range(30)]
    last = run.rows[-1]
    assert (last.out_of_place.time_us, last.in_place.time_us, last.in_place.busbw_gBps) == (32285.0, 32268.0, 232.93)
    assert last.best is last.in_place


def test_gb10_newest_format_two_nodes():
    run = only(GB10)
    assert (run.op, run.test, run.version) == ("all-gather", "all_gather_perf", "2.18.5")
    assert "Collective test starting" in run.op_from
    assert (run.gpus, run.nodes, run.gpus_per_node, run.gpu_name) == (2, 2, 1, "NVIDIA GB10")
    assert {r.bus_id for r in run.ranks} == {"000f:01:00"}
    (row,) = run.rows
    assert (row.size_bytes, row.count, row.redop, row.root) == (17179869184, 2147483648, "none", -1)
    assert (row.out_of_place.time_us, row.out_of_place.busbw_gBps, row.in_place.time_us, row.in_place.busbw_gBps) == (
        374425.0,
        22.94,
        373792.0,
        22.98,
    )


def test_partial_sendrecv_takes_the_gpus_from_the_command():
    run = only(SENDRECV)
    assert (run.op, run.gpus, run.nodes, run.gpus_per_node, run.gpu_name) == ("send-recv", 8, 1, 8, "")
    assert run.ranks == () and any("command" in n for n in run.notes)
    assert [r.size_bytes for r in run.rows] == [134217728 * 2**k for k in range(4)]
    assert {r.in_place.wrong for r in run.rows} == {"N/A"} and {r.out_of_place.wrong for r in run.rows} == {"0"}
    assert run.rows[-1].out_of_place.time_us == 5503.4
    # with 4 GPUs a node assumed, the same 8 GPUs are 2 nodes
    assert only(SENDRECV, gpus_per_server=4).nodes == 2


def test_processes_driving_several_gpus_count_one_gpu_per_rank_line():
    text = output(
        "all-reduce", nodes=2, gpus_per_node=4, sizes=[1024, 2048], times_us=[30.0, 31.0], gpus_per_process=4
    )  # mpirun -np 2 ... -g 4: 2 processes, 4 rank lines each
    run = parse_text(text)[0]
    assert len({r.pid for r in run.ranks}) == 2
    assert (run.gpus, run.nodes, run.gpus_per_node) == (8, 2, 4)


def test_old_header_without_root_and_with_error_columns():
    text = """# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid  12 on  host-a device  0 [0x1a] Tesla V100-SXM2-16GB
#   Rank  1 Pid  13 on  host-a device  1 [0x1b] Tesla V100-SXM2-16GB
#
#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2   float     sum    36.42    0.00    0.00  0e+00    35.95    0.00    0.00  0e+00
          16             4   float     sum    36.10    0.00    0.00  0e+00    35.99    0.00    0.00  0e+00
"""
    run = parse_text(text, "old.txt", op="allreduce")[0]
    assert (run.gpus, run.op, run.op_from) == (2, "all-reduce", "--op")
    assert [(r.size_bytes, r.root, r.out_of_place.time_us, r.in_place.time_us) for r in run.rows] == [
        (8, -1, 36.42, 35.95),
        (16, -1, 36.10, 35.99),
    ]


def test_several_tests_in_one_log_are_several_runs():
    one = output("all-reduce", 1, 4, [1024, 2048], [20.0, 21.0])
    two = output("all-gather", 1, 4, [4096], [25.0])
    runs = parse_text("some launcher chatter\n" + one + "more chatter\n" + two, "log.txt")
    assert [(r.op, len(r.rows)) for r in runs] == [("all-reduce", 2), ("all-gather", 1)]


def test_operation_sources_and_their_order():
    body = output("all-reduce", 1, 2, [1024], [20.0], new_format=False)
    with pytest.raises(InputError) as exc:
        parse_text(body, "run1.txt")
    assert exc.value.problems[0].path == "--op" and "run1.txt" in exc.value.problems[0].message
    assert parse_text(body, "run1.txt", op="reduce_scatter")[0].op == "reduce-scatter"
    assert parse_text(body, "h100_alltoall_run.txt")[0].op == "all-to-all"
    # the file's own "Collective test starting" line wins over its name, and contradicts a wrong --op
    new = output("all-gather", 1, 2, [1024], [20.0])
    assert parse_text(new, "allreduce.txt")[0].op == "all-gather"
    with pytest.raises(InputError) as exc:
        parse_text(new, "x.txt", op="allreduce")
    assert exc.value.problems[0].path == "--op"
    with pytest.raises(InputError, match="no"):
        parse_text(new.replace("all_gather_perf", "hypercube_perf"), "x.txt")


@pytest.mark.parametrize(
    "name,op",
    [
        ("all_reduce_perf", "all-reduce"),
        ("reduce_scatter_perf", "reduce-scatter"),
        ("reduce_perf", "reduce"),
        ("AllGather", "all-gather"),
        ("sendrecv", "send-recv"),
        ("bcast", None),
        ("broadcast", "broadcast"),
    ],
)
def test_op_from_name(name, op):
    assert op_from_name(name) == op


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _problem(text: str, name: str = "bad.txt") -> tuple[str, str]:
    with pytest.raises(InputError) as exc:
        parse_text(text, name)
    p = exc.value.problems[0]
    return p.path, p.message


def test_truncated_row_names_the_file_and_line():
    lines = _lines(G8)
    i = next(k for k, line in enumerate(lines) if line.strip().startswith("1048576 "))
    lines[i] = lines[i][:60]  # cut mid-row
    path, message = _problem("\n".join(lines))
    assert path == f"bad.txt:{i + 1}" and "columns" in message


def test_file_cut_mid_row_at_the_end():
    lines = _lines(MPIRUN)
    last = max(k for k, line in enumerate(lines) if line.strip().startswith("4294967296"))
    text = "\n".join(lines[:last] + [lines[last][:25]])
    assert _problem(text)[0] == f"bad.txt:{last + 1}"


def test_non_number_names_the_file_line_and_column():
    lines = _lines(G8)
    i = next(k for k, line in enumerate(lines) if "232.44" in line)
    lines[i] = lines[i].replace("232.44", "23x.44")
    path, message = _problem("\n".join(lines))
    assert path == f"bad.txt:{i + 1}" and "busbw" in message and "23x.44" in message


def test_header_without_rank_lines():
    lines = [line for line in _lines(GB10) if "Rank" not in line]
    using = next(k for k, line in enumerate(lines) if line.startswith("# nThread"))
    path, message = _problem("\n".join(lines))
    assert path == f"bad.txt:{using + 1}" and "Rank" in message


def test_no_rows():
    lines = _lines(G8)
    header = next(k for k, line in enumerate(lines) if "size" in line and "count" in line)
    path, message = _problem("\n".join(lines[: header + 2]))
    assert path == f"bad.txt:{header + 1}" and "no result rows" in message


def test_one_process_per_gpu_without_mpi_is_an_error():
    lines = _lines(MPIRUN)
    lines = [line.replace("Rank  3 ", "Rank  0 ") for line in lines]  # two processes both rank 0
    path, message = _problem("\n".join(lines))
    assert "rank 0 appears twice" in message and path.startswith("bad.txt:")


def test_unreadable_file(tmp_path):
    with pytest.raises(InputError) as exc:
        parse_file(tmp_path / "missing.txt")
    assert "missing.txt" in str(exc.value)


NOISE = st.sampled_from(
    [
        "8 more processes have sent help message help-mtl-ofi.txt / OFI call fail",
        "[host-1:1234] 3 more processes have sent help message help-mca-var.txt",
        "host-1:1234:1240 [0] NCCL INFO Channel 00/32 : 0 1 2 3",
        "```",
        "",
        "# Using NCCL_ALGO=Ring",
        "/build/all_reduce_perf: libnl-3.so.200: no version information",
    ]
)


@settings(max_examples=60, deadline=None)
@example(rows=[(1, 1.625)], noise={}, layout=(1, 8))
@given(
    st.lists(st.tuples(st.integers(1, 40), st.floats(1.0, 5e6)), min_size=1, max_size=12, unique_by=lambda x: x[0]),
    st.dictionaries(st.integers(0, 11), NOISE, max_size=4),
    st.sampled_from([(1, 8), (2, 4), (4, 1)]),
)
def test_rows_round_trip_through_nccl_tests_formatting(rows, noise, layout):
    """Whatever the sizes and times and the noise between rows, the parser reads back what nccl-tests
    printed (its own %7.2f / %.1f / %.0f rounding)."""
    nodes, per_node = layout
    rows = sorted(rows)
    sizes = [4 * 2**e for e, _ in rows]
    times = [t for _, t in rows]
    run = parse_text(output("all-reduce", nodes, per_node, sizes, times, noise=noise), "prop.txt")[0]
    assert (run.gpus, run.nodes, run.gpus_per_node) == (nodes * per_node, nodes, per_node)
    assert [r.size_bytes for r in run.rows] == sizes
    assert [r.out_of_place.time_us for r in run.rows] == [float(float_str(t, 7)) for t in times]
    # Each time is read back within half a unit of the last digit nccl-tests printed: 0.005 us in the
    # %.2f range (so 0.3 % at 1.625 us, which prints as 1.62), 0.5 us in the %.0f range.
    for r, t in zip(run.rows, times):
        text = float_str(t, 7).strip()
        half_unit = 0.5 * 10.0 ** -(len(text.split(".")[1]) if "." in text else 0)
        assert abs(r.out_of_place.time_us - t) <= half_unit * (1 + 1e-9)


def test_catalog_gpu_names():
    assert catalog_gpu("NVIDIA H100 80GB HBM3") == "H100"
    assert catalog_gpu("NVIDIA A100-SXM4-80GB") == "A100"
    assert catalog_gpu("NVIDIA GB200") == "GB200" and catalog_gpu("NVIDIA B200") == "B200"
    assert catalog_gpu("NVIDIA GB10") == "" and catalog_gpu("cpu: AMD EPYC 7B13") == ""
    for key in GPUS:  # every entry is found from a name that carries its parts
        assert catalog_gpu(f"NVIDIA {key.replace('-', ' ')} something") == key
