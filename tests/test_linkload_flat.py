"""The compiled event loop leaves its exact segments as flat arrays (LinkLoad.set_flat): binned as they are, and split
per segment only when read, the same record as the list of arrays per segment."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from test_fastloop import _fabric, assert_same_linkload, task_graphs

from aifabric.engines import fastloop, linkload
from aifabric.engines.linkload import LinkLoad


def _flat_and_lists(segments):
    lens = [len(x[2]) for x in segments]
    ptr = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    links = np.concatenate([x[2] for x in segments]) if segments else np.zeros(0, dtype=np.int32)
    rates = np.concatenate([x[3] for x in segments]) if segments else np.zeros(0)
    flat = LinkLoad()
    flat.set_flat([x[0] for x in segments], [x[1] for x in segments], ptr, links, rates)
    lists = LinkLoad()
    lists._start, lists._end = [x[0] for x in segments], [x[1] for x in segments]
    lists._links, lists._rates = [x[2] for x in segments], [x[3] for x in segments]
    for load in (flat, lists):
        load._t_last = max([x[1] for x in segments], default=0.0)
    return flat, lists


def _segments(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.uniform(0.0, 1e-3, n + 1))
    out = []
    for i in range(n):
        links = np.unique(rng.integers(0, 40, rng.integers(1, 6))).astype(np.int32)
        out.append((float(t[i]), float(t[i + 1]), links, rng.uniform(1e6, 1e9, len(links))))
    return out


def test_reading_splits_the_flat_arrays_into_the_segments():
    flat, lists = _flat_and_lists(_segments(50))
    assert_same_linkload(flat, lists)


def test_binning_the_flat_arrays_gives_the_lists_binning(monkeypatch):
    monkeypatch.setattr(linkload, "COMPILED_MIN", 1)
    segs = _segments(300, seed=3)
    flat, lists = _flat_and_lists(segs)
    items = [(0.0, segs[-1][1] + 1e-3, np.array([2, 7], dtype=np.int32), np.array([5.0, 1e6]))]
    flat.add_spread(items)
    assert flat._flat is None  # binned without being split
    lists.add_spread(items)
    assert_same_linkload(flat, lists)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(task_graphs())
def test_a_compiled_run_binned_from_its_flat_record_equals_one_binned_from_lists(case):
    graph, caps = case
    saved, linkload.COMPILED_MIN = linkload.COMPILED_MIN, 1
    try:
        a = fastloop.run(graph, _fabric(caps), "flow").link_load
        b = fastloop.run(graph, _fabric(caps), "flow").link_load
        b._links  # noqa: B018 - read: split into lists, as before the flat record
        items = [(0.0, a._t_last + 1.0, np.array([0], dtype=np.int32), np.array([5.0]))]
        a.add_spread(items)
        b.add_spread(items)
    finally:
        linkload.COMPILED_MIN = saved
    assert_same_linkload(a, b)
