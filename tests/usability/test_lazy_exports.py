"""The packages export lazily (aifabric/_lazy.py) so the command line starts fast: every exported name still
resolves, to what it names, never to a submodule of the same name (an import of `fabric.build`, the module,
must not replace `fabric.build`, the function)."""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

LAZY = ["collectives", "engines", "fabric", "models", "packet", "report", "scenario", "workload"]


@pytest.mark.parametrize("name", LAZY)
def test_every_export_resolves_and_is_no_submodule(name):
    pkg = importlib.import_module(f"aifabric.{name}")
    submodules = {m.name for m in pkgutil.iter_modules(pkg.__path__)}
    lazy = set(getattr(pkg, "_EXPORTS", {}))
    assert set(pkg.__all__) >= lazy
    for export in pkg.__all__:
        value = getattr(pkg, export)
        assert not isinstance(value, types.ModuleType), f"aifabric.{name}.{export} is a module"
        assert export not in submodules or export not in lazy, (
            f"aifabric.{name}.{export}: also a submodule's name; import it eagerly in __init__"
        )


def test_the_build_function_survives_its_module_being_imported():
    import aifabric.fabric.build  # noqa: F401  (the submodule)
    from aifabric.fabric import build

    assert callable(build) and not isinstance(build, types.ModuleType)
