"""The stage skeleton (workload/llm.py `_skeleton`): a stage's ops cut into tensor-parallel blocks and single
ops. A run of compute ops with no collective among them was once rescanned from every op (quadratic: a 4-GPU
Llama 2 7B plan with 256 micro-batches a replica spent 470 s there); the cut must not have changed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.workload.llm import _skeleton
from aifabric.workload.ops import Collective, Compute


def _reference(ops: list, template: int) -> list[tuple]:
    """The cut as first written: a run without a collective gives one item and is scanned again from the next op."""
    items, shapes, i, n = [], {}, 0, len(ops)

    def lockstep(op) -> bool:
        return isinstance(op, Compute) or (isinstance(op, Collective) and op.dim == "tp" and op.blocking)

    while i < n:
        j = i
        while j < n and lockstep(ops[j]):
            j += 1
        first = next((k for k in range(i, j) if isinstance(ops[k], Collective)), -1)
        if first >= 0:
            sig = tuple(
                (op.name, op.duration_s) if isinstance(op, Compute) else (op.op, op.elements) for op in ops[i:j]
            )
            shape = shapes.setdefault(sig, len(shapes)) + template * 1_000_000
            items.append((i, j, shape, sum(op.duration_s for op in ops[i:j] if isinstance(op, Compute)), first))
            i = j
        else:
            items.append((i, i, -1, 0.0, -1))
            i += 1
    return items


def _op(kind: int, size: int):
    if kind == 0:
        return Compute("forward" if size % 2 else "backward", 1e9, 1e-3 * (1 + size % 3))
    dim, blocking = {1: ("tp", True), 2: ("tp", False), 3: ("dp", False), 4: ("dp", True)}[kind]
    return Collective(f"k{kind}-{size}", "all-reduce", (0, 1), 1024 * (1 + size % 2), 2, dim=dim, blocking=blocking)


OPS = st.lists(st.tuples(st.sampled_from([0, 0, 0, 1, 2, 3, 4]), st.integers(0, 5)), max_size=60)


@settings(max_examples=300, deadline=None)
@given(OPS, st.integers(0, 3))
def test_the_cut_is_the_reference_cut(spec, template):
    ops = [_op(kind, size) for kind, size in spec]
    assert _skeleton(ops, template) == _reference(ops, template)


class _CountingList(list):
    """A list that counts how often an op is read."""

    reads = 0

    def __getitem__(self, i):
        type(self).reads += 1
        return super().__getitem__(i)


def test_a_long_run_of_compute_is_read_a_bounded_number_of_times_per_op():
    # 2,000 compute ops and no collective: the reference reads about n^2 / 2 = 2,000,000 of them, one pass
    # reads each a few times
    n = 2_000
    ops = _CountingList([Compute("forward", 1.0, 1e-3)] * n)
    _CountingList.reads = 0
    items = _skeleton(ops, 0)
    assert len(items) == n and items[-1] == (n - 1, n - 1, -1, 0.0, -1)
    assert _CountingList.reads <= 4 * n, _CountingList.reads
