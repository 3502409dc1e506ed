from .load import (EMBEDDED, ch14_scenario, ch14_scenario_text, demo_scenario, demo_scenario_text, embedded_scenario,
                   embedded_scenario_text, load_scenario, parse_scenario)
from .schema import SCHEMA_VERSION, Scenario

__all__ = ["Scenario", "SCHEMA_VERSION", "load_scenario", "parse_scenario", "demo_scenario", "demo_scenario_text",
           "ch14_scenario", "ch14_scenario_text", "embedded_scenario", "embedded_scenario_text", "EMBEDDED"]
