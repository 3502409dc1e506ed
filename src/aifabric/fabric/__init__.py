from .build import build_rail_optimized
from .graph import Fabric, Link, Node
from .routing import Route, Router

__all__ = ["Fabric", "Link", "Node", "Route", "Router", "build_rail_optimized"]
