"""The linter, the formatter and the type checker, run by the test command (so CI runs them): ruff (check and
format) over src, tests and bench, mypy over the modules `[tool.mypy] files` in pyproject.toml lists. Both are configured there; any finding fails.

`pip install -e ".[test]"` installs both; a missing one is a failure, not a skip (CI must not pass without them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_ruff_finds_nothing():
    done = _run("ruff", "check", "--no-cache", "src", "tests", "bench", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr + "\n(many are fixed by `ruff check --fix src tests bench`)"


def test_the_code_is_as_ruff_formats_it():
    done = _run("ruff", "format", "--check", "--no-cache", "src", "tests", "bench", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr + "\n(`ruff format src tests bench` formats them)"


def test_mypy_finds_nothing_in_the_checked_modules():
    done = _run("mypy", timeout=300)
    assert done.returncode == 0, (
        done.stdout + done.stderr + "\n(a module not yet clean can be listed under "
        "ignore_errors in pyproject.toml's [tool.mypy] overrides, for now)"
    )


# ---------------------------------------------------------------- lazy exports, as type checkers see them

NOT_YET_TYPED: set[str] = set()  # packages whose __init__ has no TYPE_CHECKING block yet


def _lazy_packages() -> list[Path]:
    src = ROOT / "src" / "aifabric"
    return [p for p in sorted(src.rglob("__init__.py")) if "lazy_exports(" in p.read_text()]


def test_every_lazy_export_is_imported_for_type_checkers():
    """A package's `__getattr__` hands out `_EXPORTS` at run time; mypy sees only what `if TYPE_CHECKING:` imports.
    The two name the same things from the same submodules, or mypy checks callers against `object`."""
    import ast

    packages = _lazy_packages()
    assert len(packages) >= 8
    for init in packages:
        if init.parent.name in NOT_YET_TYPED:
            continue
        tree = ast.parse(init.read_text())
        exports, typed = None, {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "_EXPORTS":
                exports = ast.literal_eval(node.value)
            if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
                for imp in node.body:
                    assert isinstance(imp, ast.ImportFrom), init
                    typed.update({a.name: "." * imp.level + (imp.module or "") for a in imp.names})
        assert exports is not None, init
        assert typed == exports, f"{init.relative_to(ROOT)}: TYPE_CHECKING imports differ from _EXPORTS"
