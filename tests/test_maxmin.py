"""Max-min fair sharing: textbook cases and the defining properties on random instances."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.engines.maxmin import bottleneck_rates, max_min_rates


def test_two_flows_on_one_link_get_half_each():
    rates = max_min_rates([(0,), (0,)], np.array([100.0]))
    np.testing.assert_allclose(rates, [50, 50])


def test_classic_three_flow_example():
    # link 0 (cap 10) carries flows a and b; link 1 (cap 4) carries b and c.
    # Link 1 is the tighter: b and c get 2 each; a then takes the rest of link 0: 8.
    rates = max_min_rates([(0,), (0, 1), (1,)], np.array([10.0, 4.0]))
    np.testing.assert_allclose(rates, [8, 2, 2])


def test_bottleneck_rates_ignore_other_flows():
    np.testing.assert_allclose(bottleneck_rates([(0,), (0, 1)], np.array([10.0, 4.0])), [10, 4])


@settings(max_examples=200, deadline=None)
@given(
    caps=st.lists(st.floats(1, 1000), min_size=1, max_size=6),
    data=st.data(),
)
def test_max_min_properties(caps, data):
    capacity = np.array(caps)
    n_links = len(caps)
    routes = data.draw(
        st.lists(
            st.lists(st.integers(0, n_links - 1), min_size=1, max_size=n_links, unique=True).map(tuple),
            min_size=1,
            max_size=8,
        )
    )
    rates = max_min_rates(routes, capacity)
    load = np.zeros(n_links)
    for route, rate in zip(routes, rates):
        load[list(route)] += rate
    # feasible: no link carries more than its capacity
    assert np.all(load <= capacity * (1 + 1e-9))
    # max-min: every flow has a saturated link on which no other flow gets more than it
    for route, rate in zip(routes, rates):
        ok = False
        for li in route:
            saturated = load[li] >= capacity[li] * (1 - 1e-9)
            others = [r for rt, r in zip(routes, rates) if li in rt]
            if saturated and rate >= max(others) * (1 - 1e-9):
                ok = True
        assert ok, (route, rate)
