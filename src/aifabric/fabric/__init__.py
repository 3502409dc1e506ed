from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from .build import build  # eager: `build` is also the submodule's name (an import of it would shadow a lazy one)

if TYPE_CHECKING:  # what the lazy exports below are, for type checkers
    from .build import build_rail_optimized, build_structured
    from .design import Design, resolve
    from .graph import Fabric, Link, Node
    from .routing import Route, Router

_EXPORTS = {
    "build_rail_optimized": ".build",
    "build_structured": ".build",
    "Design": ".design",
    "resolve": ".design",
    "Fabric": ".graph",
    "Link": ".graph",
    "Node": ".graph",
    "Route": ".routing",
    "Router": ".routing",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [
    "Design",
    "Fabric",
    "Link",
    "Node",
    "Route",
    "Router",
    "build",
    "build_rail_optimized",
    "build_structured",
    "resolve",
]
