from .build import build, build_rail_optimized, build_structured
from .design import Design, resolve
from .graph import Fabric, Link, Node
from .routing import Route, Router

__all__ = ["Design", "Fabric", "Link", "Node", "Route", "Router", "build", "build_rail_optimized",
           "build_structured", "resolve"]
