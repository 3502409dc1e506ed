from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # what the lazy exports below are, for type checkers
    from .load import (
        EMBEDDED,
        ch14_scenario,
        ch14_scenario_text,
        demo_scenario,
        demo_scenario_text,
        embedded_scenario,
        embedded_scenario_text,
        load_scenario,
        parse_scenario,
    )
    from .schema import SCHEMA_VERSION, Scenario

_EXPORTS = {
    "EMBEDDED": ".load",
    "ch14_scenario": ".load",
    "ch14_scenario_text": ".load",
    "demo_scenario": ".load",
    "demo_scenario_text": ".load",
    "embedded_scenario": ".load",
    "embedded_scenario_text": ".load",
    "load_scenario": ".load",
    "parse_scenario": ".load",
    "SCHEMA_VERSION": ".schema",
    "Scenario": ".schema",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [
    "EMBEDDED",
    "SCHEMA_VERSION",
    "Scenario",
    "ch14_scenario",
    "ch14_scenario_text",
    "demo_scenario",
    "demo_scenario_text",
    "embedded_scenario",
    "embedded_scenario_text",
    "load_scenario",
    "parse_scenario",
]
