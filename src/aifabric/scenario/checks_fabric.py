"""Checks of the cluster and fabric sections (ports, speeds, counts)."""

from __future__ import annotations

from ..errors import Problem
from .schema import Scenario


def check_fabric(s: Scenario) -> list[Problem]:
    out: list[Problem] = []
    c, f = s.cluster, s.fabric
    if c.servers > 1 and c.gpus_per_server > 1 and f.spines == 0:
        out.append(Problem("fabric.spines", "must be >= 1: cross-rail traffic between servers needs a spine"))
    rail_ports = c.servers + f.spines * f.links_per_spine
    if rail_ports > f.switch_radix:
        out.append(
            Problem(
                "fabric.switch_radix",
                f"each rail switch needs {rail_ports} ports ({c.servers} servers + {f.spines} spines x "
                f"{f.links_per_spine} links) but has {f.switch_radix}",
            )
        )
    spine_ports = c.gpus_per_server * f.links_per_spine
    if f.spines and spine_ports > f.switch_radix:
        out.append(
            Problem(
                "fabric.switch_radix",
                f"each spine needs {spine_ports} ports ({c.gpus_per_server} rail switches x "
                f"{f.links_per_spine} links) but has {f.switch_radix}",
            )
        )
    return out
