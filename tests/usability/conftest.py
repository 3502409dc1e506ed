"""Fixtures of the new-user checks: tiny inputs every command accepts, and the command line run in-process."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import typer
import yaml

from aifabric.cli import run_app
from aifabric.cli.app import app, import_all_commands

TINY = {
    "name": "tiny",
    "seed": 1,
    "cluster": {"gpu": "H100", "servers": 2, "gpus_per_server": 2, "nic_speed_gbps": 400},
    "fabric": {"topology": "rail-optimized", "spines": 1, "link_speed_gbps": 400},
    "workload": {
        "kind": "data-parallel",
        "model": {"kind": "feed-forward", "layer_widths": [256, 512, 256]},
        "global_batch_size": 64,
        "precision": "bf16",
    },
    "engine": "flow",
}


def synthetic_trace(path: Path, world: int = 4, nbytes: int = 4_000_000) -> Path:
    """A gloo (CPU) trace: one step per rank, 10 ms of compute, then one gradient AllReduce over every rank."""
    recs = []
    for r in range(world):
        recs.append(
            {
                "kind": "meta",
                "rank": r,
                "world_size": world,
                "layout": {"dp": world, "tp": 1, "pp": 1},
                "config": {"model": "fnn"},
                "backend": "gloo",
            }
        )
        recs.append({"kind": "step", "rank": r, "step": 0, "start_s": 0.0, "end_s": 0.012, "loss": 1.0})
        recs.append(
            {
                "kind": "comm",
                "rank": r,
                "seq": 1,
                "op": "all-reduce",
                "group": list(range(world)),
                "dtype": "float32",
                "elements": nbytes // 4,
                "bytes": nbytes,
                "tag": "grad-bucket0",
                "step": 0,
                "start_s": 0.010,
                "end_s": 0.011,
                "async_op": False,
            }
        )
    path.write_text("\n".join(json.dumps(x) for x in recs) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """A tiny scenario, a trace of 4 ranks, an nccl-tests output, an existing file and an existing folder."""
    d = tmp_path_factory.mktemp("inputs")
    scenario = d / "tiny.yaml"
    scenario.write_text(yaml.safe_dump(TINY), encoding="utf-8")
    nccl = Path(__file__).parents[1] / "calibration" / "data" / "a100_sxm4_80gb_8gpu_all_reduce_perf_g8.txt"
    (d / "a-folder").mkdir()
    (d / "a-file.txt").write_text("not a folder\n", encoding="utf-8")
    return {
        "scenario": scenario,
        "trace": synthetic_trace(d / "trace.jsonl"),
        "nccl": nccl,
        "dir": d / "a-folder",
        "file": d / "a-file.txt",
        "missing": d / "no-such-file.yaml",
        "base": d,
    }


def cli(*args: str) -> tuple[int, str, str]:
    """Run `aifabric ARGS` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_app(app, [str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


import_all_commands()  # the command line imports a command's module when it runs: the walk below needs them all


def command_tree(t: typer.Typer = app, prefix: tuple[str, ...] = ()):
    """(command path, callback) of every command of the typer app, the root callback first (path ())."""
    if not prefix and t.registered_callback is not None:
        yield (), t.registered_callback.callback
    for c in t.registered_commands:
        name = c.name or c.callback.__name__.replace("_", "-")
        yield (*prefix, name), c.callback
    for g in t.registered_groups:
        yield from command_tree(g.typer_instance, (*prefix, g.name or g.typer_instance.info.name))


COMMANDS = dict(command_tree())
COMMANDS_HELP = [list(path) for path in COMMANDS]
