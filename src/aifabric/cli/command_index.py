"""The root command's table of contents: each command's name, the modules that define it and its help text.

`aifabric --help` prints it without importing a single command module, and a command's modules are imported when
it runs (`app.LazyGroup`): the start-up stays fast however many commands there are. `tests/cli/test_startup.py`
keeps this table equal to what the modules define; after adding a command or changing a command's help, run
`python -m aifabric.cli.command_index`, which rewrites the table from the modules."""

from __future__ import annotations

# name -> (the modules of aifabric.cli that define it, its help text), in the order --help lists them
COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {
    "demo": (
        ("run_cmds",),
        "Run an embedded scenario end to end and write its report (no arguments, no network).",
    ),
    "validate": (
        ("run_cmds",),
        "Check a scenario: exit 0, or exit 2 with every problem listed by field path.",
    ),
    "simulate": (
        ("run_cmds",),
        "Simulate a scenario and write its report.",
    ),
    "compare": (
        ("compare_cmd",),
        "Compare runs: iteration time, exposed communication, MFU, bandwidths, link utilization per tier; each\n"
        "run's own report beside compare.html.",
    ),
    "learn": (
        ("learn_cmd",),
        "The models behind the traffic, as the book Deep Learning for Network Engineers shows them (Chapters 1-8):\n"
        "every intermediate computed with PyTorch tensors and autograd, with the book's inputs or yours. Where the\n"
        "book prints a wrong number, the correct one is shown with what the book printed.",
    ),
    "packet": (
        ("packet_cmd",),
        "Run a packet-level story of Deep Learning for Network Engineers (Ch. 10-12), or a scenario file's\n"
        "iteration, on the packet engine; print what happened, optionally narrated and captured.",
    ),
    "pipeline": (
        ("pipeline_cmd",),
        "Per-time-step table: which stage runs which micro-batch forward (F) or backward (B), active and idle\n"
        "GPUs, utilization per step and overall (book / blog: the 4-GPU example of Deep Learning for Network Engineers,\n"
        "Ch. 8, 10 time steps, and of its companion blog post, 11 steps).",
    ),
    "sweep": (
        ("sweep_cmd",),
        "Run every combination of the varied fields, on Ray (a local instance, or a cluster with --address) or a\n"
        "local process pool: one table (Parquet and CSV) of every case's metrics, power and cost, and sweep.html with\n"
        "the Pareto fronts of cost against iteration time and against tokens per second per dollar.",
    ),
    "optimize": (
        ("sweep_cmd",),
        "Search the varied fields' combinations for the best objective under constraints (Optuna's TPE sampler;\n"
        "at random without Optuna), e.g. the cheapest fabric whose iteration time is within 2 % of the fastest; the\n"
        "runs it made are the evidence (table, optimize.html).",
    ),
    "train": (
        ("train_cmd",),
        "Train a small model for real: dp x tp x pp processes on torch.distributed (gloo on CPU, NCCL on GPU),\n"
        "every collective and send/recv traced into trace.jsonl.",
    ),
    "replay": (
        ("train_cmd",),
        "Replay a training trace's communication on a scenario's fabric and write the usual report.",
    ),
    "workload": (
        ("workload_cmd",),
        "Per-GPU memory, FLOPs, and the bytes per iteration of each parallel dimension on scale-up (NVLink)\n"
        "and scale-out (backend fabric), computed from the scenario's model and parallelism plan.",
    ),
    "models": (
        ("workload_cmd",),
        "The model zoo: parameters computed from the architecture, the published count, and how many GPUs the\n"
        "weights alone need (Deep Learning for Network Engineers, Ch. 13, Figure 13-3: 8B -> 1, 70B -> 2, 405B -> 11\n"
        "at 80 GB).",
    ),
    "calibrate": (
        ("calibrate_cmd",),
        "Fit the model to your own measurements: nccl-tests outputs, GEMM and attention timings.",
    ),
    "collective": (
        ("collective_cmd",),
        "One collective on a fabric: step tables (--explain), nccl-tests-style sweeps (bench).",
    ),
    "fabric": (
        ("fabric_cmd", "fabric_config_cmd"),
        "Build, plan and draw a fabric: bill of materials, capacity, failure domains, cabling, addressing, ECMP polarization.",
    ),
}
# end of COMMANDS


def scan() -> dict[str, tuple[tuple[str, ...], str]]:
    """The table as the command modules define it (imports every one of them: slow, for the test and the rewrite)."""
    import importlib
    import pkgutil
    from pathlib import Path

    import typer.main

    from .app import app

    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name.endswith(("_cmd", "_cmds")):
            importlib.import_module(f"{__package__}.{info.name}")
    group = typer.main.get_command(app)

    def modules(command: object) -> set[str]:
        found = set()
        callback = getattr(command, "callback", None)
        if callback is not None:
            found.add(callback.__module__.rpartition(".")[2])
        for sub in getattr(command, "commands", {}).values():
            found |= modules(sub)
        return found

    commands = getattr(group, "commands", {})
    return {name: (tuple(sorted(modules(command))), command.help or "") for name, command in commands.items()}


def _rewrite() -> None:
    import json
    from pathlib import Path

    def literal(text: str) -> str:
        return json.dumps(text, ensure_ascii=False)

    entries = []
    for name, (modules, help_text) in scan().items():
        lines = "\n".join(f"        {literal(line)}" for line in help_text.splitlines(keepends=True) or [""])
        # a tuple as ruff formats it: ("a",) for one, ("a", "b") for more (no trailing comma to explode it)
        names = f"{literal(modules[0])}," if len(modules) == 1 else ", ".join(literal(m) for m in modules)
        entries.append(f"    {literal(name)}: (\n        ({names}),\n{lines},\n    ),\n")
    path = Path(__file__)
    head, _, rest = path.read_text().partition("COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {\n")
    _, _, tail = rest.partition("}\n# end of COMMANDS\n")
    path.write_text(
        f"{head}COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {{\n{''.join(entries)}}}\n# end of COMMANDS\n{tail}"
    )


if __name__ == "__main__":
    _rewrite()
