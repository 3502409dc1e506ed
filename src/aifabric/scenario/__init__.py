from .load import demo_scenario, demo_scenario_text, load_scenario, parse_scenario
from .schema import SCHEMA_VERSION, Scenario

__all__ = ["Scenario", "SCHEMA_VERSION", "load_scenario", "parse_scenario", "demo_scenario", "demo_scenario_text"]
