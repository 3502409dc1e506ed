"""How the engines report progress: `progress(done, total)`, and the simulated time reached when the callback
takes it (`progress(done, total, t_s=...)`, a parameter named `t_s`, or `**kwargs`). The hybrid engine's packet
windows report the same way, with the window they are in (`window=PacketWindowProgress(...)`) when the callback
takes a parameter named `window` (or `**kwargs`): `done`, `total` and `t_s` are then the window's own. The stages
before the event loop that take long on large plans (lowering the workload to a task graph) report with
`stage=<the stage's name>` to callbacks that take `stage`: `done` and `total` count that stage's work (ops); so does
writing the report (stage "report", `done` and `total` in parts of the work). The flow and analytic engines tell
callbacks that take `iteration_bound_s` the iteration's lower bound first (engines/bound.py).

One mechanism for every engine (executor.run_reference, fastloop.run, packet.run_packet): a callback written for
`(done, total)` keeps working; one that also wants the simulated time says so by its signature.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

Reporter = Callable[[int, int, float], None]


@dataclass(frozen=True)
class PacketWindowProgress:
    """Which packet window of a hybrid run a report comes from: the `index`-th of `count` (from 1), named `label`
    (the user's `--packet-window`), starting at `start_s` on the iteration's clock; `horizon_s` is how much
    simulated time the window is expected to run packet by packet (the cap, or the window's span on the flow
    engine), what its `t_s` counts towards."""

    index: int
    count: int
    label: str
    start_s: float
    horizon_s: float


def _takes(progress: Callable, name: str) -> bool:
    """Whether `progress` accepts the keyword `name` (or any keyword)."""
    try:
        params = inspect.signature(progress).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: called with (done, total) alone
        return False
    return any(
        p.name == name and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) or p.kind == p.VAR_KEYWORD
        for p in params
    )


def takes_sim_time(progress: Callable) -> bool:
    """Whether `progress` accepts the simulated time as the keyword `t_s`."""
    return _takes(progress, "t_s")


def takes_bound(progress: Callable) -> bool:
    """Whether `progress` accepts `iteration_bound_s`: the flow and analytic engines' first report on a large graph,
    the iteration's lower bound (engines/bound.py), which the simulated time then goes towards."""
    return _takes(progress, "iteration_bound_s")


def window_reporter(progress: Callable | None) -> Callable[[PacketWindowProgress], Callable[..., None]] | None:
    """For a callback that takes `window` (and `t_s`): per packet window, the progress callback to give the packet
    engine (`(done, total, t_s=...)`), which passes the window along; None otherwise (the windows then report
    nothing)."""
    if progress is None or not (_takes(progress, "window") and takes_sim_time(progress)):
        return None
    callback = progress

    def for_window(window: PacketWindowProgress) -> Callable[..., None]:
        def report(done: int, total: int, t_s: float | None = None) -> None:
            callback(done, total, t_s=t_s, window=window)

        return report

    return for_window


def stage_reporter(progress: Callable | None, stage: str) -> Callable[[int, int], None] | None:
    """For a callback that takes `stage`: the `(done, total)` callback a stage before the event loop reports to,
    which names the stage; None otherwise."""
    if progress is None or not _takes(progress, "stage"):
        return None
    callback = progress

    def report(done: int, total: int) -> None:
        callback(done, total, stage=stage)

    return report


def reporter(progress: Callable | None) -> Reporter | None:
    """`progress` as the engines call it, `(done, total, t_s)`; None when there is no callback."""
    if progress is None:
        return None
    if takes_sim_time(progress):
        return lambda done, total, t_s: progress(done, total, t_s=t_s)
    return lambda done, total, t_s: progress(done, total)
