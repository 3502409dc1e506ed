"""simulate() on the flow and analytic engines pauses the garbage collector and, when it resumes it, leaves the run's
objects in the oldest generation (not walked as young ones by the next collection), without undoing anyone's
gc.freeze() or turning on a collector the caller had turned off."""

from __future__ import annotations

import gc

import pytest

from aifabric.scenario import ch14_scenario
from aifabric.simulate import simulate


def _in_generation(obj: object, generation: int) -> bool:
    return any(o is obj for o in gc.get_objects(generation=generation))


@pytest.mark.parametrize("engine", ["flow", "analytic"])
def test_the_runs_objects_are_old_once_it_returns(engine):
    assert gc.isenabled()
    run = simulate(ch14_scenario(), engine=engine)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    deps = run.graph.deps  # a list made during the run: tracked by the collector
    assert gc.is_tracked(deps)
    assert _in_generation(deps, 2) and not _in_generation(deps, 0)


def test_a_callers_freeze_is_kept():
    gc.freeze()
    try:
        assert gc.get_freeze_count() > 0
        simulate(ch14_scenario())
        assert gc.get_freeze_count() > 0 and gc.isenabled()  # an unfreeze would have emptied it
    finally:
        gc.unfreeze()


def test_a_collector_turned_off_stays_off():
    gc.disable()
    try:
        run = simulate(ch14_scenario())
        assert not gc.isenabled()
        assert gc.get_freeze_count() == 0
        assert not _in_generation(run.graph.deps, 2)  # nothing was moved: it is still young
    finally:
        gc.enable()
