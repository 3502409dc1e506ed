"""How the engines report progress: `progress(done, total)`, and the simulated time reached when the callback
takes it (`progress(done, total, t_s=...)`, a parameter named `t_s`, or `**kwargs`).

One mechanism for every engine (executor.run_reference, fastloop.run, packet.run_packet): a callback written for
`(done, total)` keeps working; one that also wants the simulated time says so by its signature.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

Reporter = Callable[[int, int, float], None]


def takes_sim_time(progress: Callable) -> bool:
    """Whether `progress` accepts the simulated time as the keyword `t_s`."""
    try:
        params = inspect.signature(progress).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: called with (done, total) alone
        return False
    return any(
        p.name == "t_s" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) or p.kind == p.VAR_KEYWORD
        for p in params
    )


def reporter(progress: Callable | None) -> Reporter | None:
    """`progress` as the engines call it, `(done, total, t_s)`; None when there is no callback."""
    if progress is None:
        return None
    if takes_sim_time(progress):
        return lambda done, total, t_s: progress(done, total, t_s=t_s)
    return lambda done, total, t_s: progress(done, total)
