"""Lazy package exports (PEP 562): `from aifabric.fabric import Router` imports `fabric.routing` only then.

The command line imports only what a command uses, so `aifabric --version` and `--help` stay fast; a
package's `__init__` names what it exports and the submodule that defines it."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`: `exports` maps a name to its submodule (".routing")."""

    def __getattr__(name: str) -> object:
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where, package), name)
        globals_of_package = importlib.import_module(package).__dict__
        globals_of_package[name] = value  # the next access is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(importlib.import_module(package).__dict__) | set(exports))

    return __getattr__, __dir__
