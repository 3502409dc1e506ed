"""Issue 16, "fuzzing in CI, kept": generated scenario documents and traces (valid, broken, hostile) are each
answered with a checked result or an InputError naming a field (a trace: a line) within a time bound; never
another exception."""

from __future__ import annotations

import copy
import json
import time

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aifabric.errors import InputError
from aifabric.scenario import ch14_scenario_text
from aifabric.scenario.load import parse_scenario, read_yaml
from aifabric.train.tracer import _read_lines

BASE = yaml.safe_load(ch14_scenario_text())
FIELDS = [
    ("cluster", k)
    for k in (
        "servers",
        "gpus_per_server",
        "gpu",
        "nic_speed_gbps",
        "nvlink_latency_ns",
        "nics_per_server",
        "nic_ports",
        "unknown",
    )
]
FIELDS += [
    ("fabric", k)
    for k in (
        "spines",
        "link_speed_gbps",
        "switch_radix",
        "link_latency_ns",
        "spine_cabling",
        "spines_per_leaf",
        "leaf_oversubscription",
        "pods",
        "superspines",
        "topology",
    )
]
FIELDS += [
    ("workload", k)
    for k in ("global_batch_size", "precision", "compute_efficiency", "iterations", "kind", "data_parallel")
]
FIELDS += [("workload", "model", "layer_widths"), ("name",), ("seed",), ("engine",), ("fabric",), ("cluster",)]

VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([5e-324, 1e-320, 1e308, float("inf"), "1e999", "nan", True, False, None, "", "[/]", 2**63]),
    st.text(max_size=30),
    st.lists(st.integers(min_value=-5, max_value=2**64), max_size=5),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(FIELDS), VALUES), min_size=1, max_size=4))
def test_mutated_scenarios_are_checked_or_refused_by_field(mutations):
    data = copy.deepcopy(BASE)
    for path, value in mutations:
        node = data
        for key in path[:-1]:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        node[path[-1]] = value
    t0 = time.perf_counter()
    try:
        s = parse_scenario(data)
    except InputError as exc:
        assert exc.problems and all(p.path for p in exc.problems), str(exc)
        assert len(str(exc)) < 20_000
    else:
        assert s.cluster.total_gpus >= 1
    assert time.perf_counter() - t0 < 5


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("[]{}:,&*!- \n\"'ab019.#|>")), max_size=200))
def test_arbitrary_yaml_text_is_data_or_an_input_error(text):
    try:
        read_yaml(text, "<fuzz>")
    except InputError as exc:
        assert len(str(exc)) < 2_000


RECORD = {
    "kind": "comm",
    "rank": 1,
    "seq": 1,
    "op": "all-reduce",
    "group": [0, 1],
    "dtype": "float32",
    "elements": 10,
    "bytes": 40,
    "tag": "grad",
    "step": 0,
    "start_s": 0.0,
    "end_s": 0.1,
    "async_op": False,
}


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(RECORD) + ["extra"]), st.one_of(VALUES, st.just("__drop__")), st.sampled_from([0, 1]))
def test_mutated_traces_are_read_or_refused_by_line(key, value, which):
    recs = []
    for r in (0, 1):
        recs.append({"kind": "meta", "rank": r, "world_size": 2})
        recs.append({**RECORD, "rank": r})
    target = recs[2 * which + 1]
    if value == "__drop__":
        target.pop(key, None)
    else:
        target[key] = value
    lines = []
    for n, rec in enumerate(recs, 1):
        try:
            lines.append(("trace.jsonl", n, json.dumps(rec)))
        except ValueError:
            return
    try:
        _read_lines("trace.jsonl", lines)
    except InputError as exc:
        assert exc.problems and all("trace.jsonl" in p.path for p in exc.problems), str(exc)
