"""Pipeline schedules: the seeds' 4-stage, 4-micro-batch example and the textbook bubble."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.workload.pipeline import B, F, bubble_fraction, stage_order, step_table


def percents(table):
    return [round(100 * table.utilization(t)) for t in range(len(table.steps))]


def test_book_example_ten_steps():
    t = step_table("book", 4, 4)
    assert percents(t) == [25, 50, 75, 100, 75, 75, 100, 75, 50, 25]
    assert t.overall_utilization == pytest.approx(26 / 40)  # 65 %, not stated in the book
    # the headers' idle GPUs (0a, 1a, 0b, 1b = stages 0..3)
    idle = [[s for s in range(4) if s not in t.active(i)] for i in range(10)]
    assert idle[:4] == [[1, 2, 3], [2, 3], [3], []]
    assert idle[4] == [0] and idle[5] == [0]
    # t4: 1b computes the output for micro-batch 1 and starts its backward in the same step
    assert {(r.kind, r.micro_batch) for r in t.steps[3][3]} == {(F, 0), (B, 0)}
    # t6: the book writes "GPU 1a ... X_2"; it is 0b (stage 2) that works on the second micro-batch's backward
    assert (B, 1) in {(r.kind, r.micro_batch) for r in t.steps[5][2]}


def test_blog_example_eleven_steps():
    t = step_table("blog", 4, 4)
    assert percents(t) == [25, 50, 75, 100, 75, 50, 75, 100, 75, 50, 25]
    assert t.overall_utilization == pytest.approx(28 / 44)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", [(4, 4), (4, 8), (2, 6), (8, 3), (1, 5)])
def test_bubble_matches_textbook(schedule, p, m):
    t = step_table(schedule, p, m)
    assert t.bubble_fraction == pytest.approx(bubble_fraction(p, m))
    assert len(t.steps) == 2 * (m + p - 1)


@pytest.mark.parametrize("p,m,v", [(4, 8, 2), (2, 4, 3), (4, 4, 2)])
def test_interleaved_bubble_shrinks_by_chunks(p, m, v):
    t = step_table("interleaved", p, m, v)
    assert t.bubble_fraction == pytest.approx((p - 1) / (v * m + p - 1))
    assert t.bubble_fraction < bubble_fraction(p, m)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 10), st.sampled_from(["gpipe", "1f1b"]))
def test_each_stage_runs_every_pass_once_forward_first(p, m, schedule):
    for s in range(p):
        order = stage_order(schedule, p, m, s)
        assert sorted((r.kind, r.micro_batch) for r in order) == sorted(
            [(F, i) for i in range(m)] + [(B, i) for i in range(m)]
        )
        pos = {(r.kind, r.micro_batch): i for i, r in enumerate(order)}
        assert all(pos[(F, i)] < pos[(B, i)] for i in range(m))
        if schedule == "1f1b":  # at most p - s micro-batches in flight (the point of 1F1B)
            inflight = peak = 0
            for r in order:
                inflight += 1 if r.kind == F else -1
                peak = max(peak, inflight)
            assert peak <= max(1, p - s)


def test_interleaved_needs_divisible_micro_batches():
    with pytest.raises(ValueError):
        stage_order("interleaved", 4, 6, 0, 2)
