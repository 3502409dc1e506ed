"""Imports are one-way, as docs/architecture.md draws the layers: a package or top-level module imports only
from its own layer or the layers below it, and no two of them import each other (directly or round a loop).
Every import counts, those inside functions and under TYPE_CHECKING included: a lazy import is still a
dependency. The known exceptions are listed by file, each with why, and an exception that no longer occurs
fails too (the list only shrinks)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "aifabric"

# lowest first; docs/architecture.md "Layers" lists the same
LAYERS: list[set[str]] = [
    {"_lazy", "attention_rates", "collector", "compiled", "errors", "units", "scenarios"},  # scenarios: embedded YAML
    {"catalog", "models", "collectives"},
    {"kernels"},
    {"scenario"},
    {"fabric", "workload"},
    {"packet", "costs", "reliability", "faults"},
    {"engines"},
    {"analysis", "results"},
    {"simulate", "estimate"},
    {"report", "calibration", "train", "learn"},
    {"compare"},
    {"sweep"},
    {"cli"},
]
FACADE = {"__init__", "__main__"}  # the package's lazy public API and `python -m aifabric`: above everything

# (importing file, imported package): why it is still there (issue 14 asks for each to go)
ALLOWED = {
    ("scenario/checks_fabric.py", "fabric"): "the fabric checks resolve the design (fabric.design) to count ports",
    ("scenario/checks_workload.py", "workload"): "the workload checks resolve the plan and memory (workload.*)",
    ("scenario/load.py", "costs"): "costs.prices FILE / costs.power FILE read into the scenario (costs.prices)",
}


def _unit(module: str) -> str | None:
    """'aifabric.fabric.routing' -> 'fabric'; the root package itself (`from .. import __version__`) -> None."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _is_module(dotted: str) -> bool:
    path = SRC.parent.joinpath(*dotted.split("."))
    return path.is_dir() or path.with_suffix(".py").exists()


def imports() -> list[tuple[str, str, str]]:
    """(file relative to src/aifabric, its unit, imported unit) for every import of another aifabric unit."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        parts = list(rel.parts)
        package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        source = _unit(".".join(parts)) or "__init__"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1])
                    if node.module:
                        targets = [f"{base}.{node.module}"]
                    else:  # from .. import x: a submodule, or a name of the package
                        targets = [f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base for a in node.names]
                elif node.module and node.module.split(".")[0] == "aifabric":
                    targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.split(".")[0] == "aifabric"]
            for target in targets:
                unit = _unit(target)
                if unit is not None and unit != source:
                    out.append((str(path.relative_to(SRC)), source, unit))
    return out


def _layer_of() -> dict[str, int]:
    return {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def test_the_scan_sees_the_imports_it_should():
    """The scanner itself: a lazy relative import inside a function and a module-level one are both found."""
    found = set(imports())
    assert ("simulate.py", "simulate", "engines") in found  # module level, relative
    assert ("cli/run_cmds.py", "cli", "report") in found
    assert ("engines/packet.py", "engines", "errors") in found  # inside a function (_deadlock_error)


def test_every_package_has_a_layer():
    units = {
        p.stem if p.is_file() else p.name
        for p in SRC.iterdir()
        if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))
    }
    placed = set().union(*LAYERS) | FACADE
    assert units - placed == set(), f"place these in LAYERS (and docs/architecture.md): {sorted(units - placed)}"
    assert placed - units == set(), f"gone from src/aifabric: {sorted(placed - units)}"


def test_no_import_reaches_up_a_layer():
    layer = _layer_of()
    backward = sorted(
        {
            f"{file}: {src} (layer {layer[src]}) imports {dst} (layer {layer[dst]})"
            for file, src, dst in imports()
            if src not in FACADE and layer[dst] > layer[src] and (file, dst) not in ALLOWED
        }
    )
    assert not backward, "\n".join(backward)


def test_no_package_cycle():
    layer = _layer_of()
    graph: dict[str, set[str]] = defaultdict(set)
    for file, src, dst in imports():
        if src not in FACADE and (file, dst) not in ALLOWED:
            graph[src].add(dst)
    cycles = []
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(path[path.index(nxt) :] + [node, nxt]) if nxt in path else f"{node} -> {nxt}")
            elif nxt not in state:
                visit(nxt, [*path, node])
        state[node] = 2

    for unit in sorted(layer):
        if unit not in state:
            visit(unit, [])
    assert not cycles, cycles


def test_every_allowed_exception_still_occurs():
    """A fixed exception leaves the list (it would hide the next import of the same kind)."""
    found = {(file, dst) for file, _, dst in imports()}
    stale = sorted(set(ALLOWED) - found)
    assert not stale, f"no longer imported, remove from ALLOWED: {stale}"
