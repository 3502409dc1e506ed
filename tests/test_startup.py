"""Start-up (issue 14): `import aifabric.cli`, `aifabric --version` and `aifabric --help` import no command module and
no heavy library, a command imports its own modules only, and the root's table of contents (`command_index`) is
what the command modules define. (Wall times are measured by bench/bench_startup.py, never asserted here.)"""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("numpy", "scipy", "pydantic", "plotly", "yaml", "torch")


def _modules_after(code: str) -> set[str]:
    """The modules imported by `code` in a fresh interpreter."""
    probe = f"import sys\n{code}\nprint('MODULES', ' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("MODULES ")]
    assert lines, done.stdout[-400:] + done.stderr[-2000:]
    return set(lines[-1].split()[1:])


def _command_modules(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith("aifabric.cli.") and m.endswith(("_cmd", "_cmds"))}


def test_importing_the_cli_imports_no_heavy_library_and_no_command():
    modules = _modules_after("import aifabric.cli")
    assert not {m for m in modules if m.split(".")[0] in (*HEAVY, "typer", "rich")}
    assert not _command_modules(modules)


@pytest.mark.parametrize("args", [["--version"], ["--help"], []])
def test_the_roots_own_answers_import_no_command_framework(args):
    modules = _modules_after(f"from aifabric.cli import main\ntry:\n    main({args!r})\nexcept SystemExit:\n    pass")
    assert not {m for m in modules if m.split(".")[0] in (*HEAVY, "typer")}
    assert not _command_modules(modules)


def test_a_command_imports_its_own_modules_only():
    code = (
        "from aifabric.cli import main\ntry:\n    main(['pipeline', '--stages', '4', '--micro-batches', '4'])\n"
        "except SystemExit as exc:\n    assert exc.code == 0, exc.code"
    )
    modules = _modules_after(code)
    assert _command_modules(modules) == {"aifabric.cli.pipeline_cmd"}
    assert not {m for m in modules if m.split(".")[0] in ("scipy", "plotly", "torch")}


def test_the_root_help_lists_every_command_with_its_help(capsys):
    from aifabric.cli import app, run_app
    from aifabric.cli.command_index import COMMANDS
    from aifabric.cli.root import first_paragraph

    assert run_app(app, ["--help"]) == 0
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    for name, (_, help_text) in COMMANDS.items():
        assert f"{name} {' '.join(first_paragraph(help_text).split()[:4])}" in text, name


def test_the_table_of_contents_is_what_the_command_modules_define():
    from aifabric.cli.command_index import COMMANDS, scan

    assert COMMANDS == scan(), "a command was added or its help changed: run `python -m aifabric.cli.command_index`"


def test_a_command_is_found_even_when_its_module_was_imported_first():
    """Tests and scripts import a command module and then invoke `app`: the lazy group finds what it registered."""
    import aifabric.cli.fabric_cmd  # noqa: F401 - fabric_config_cmd (`fabric config`) not yet imported
    from aifabric.cli import app, run_app

    assert run_app(app, ["fabric", "config", "--help"]) == 0
