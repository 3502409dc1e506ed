"""Child processes and Ctrl-C: the terminal sends SIGINT to the whole process group, so every process the command
started gets it. The command's own process handles it (stops its children, writes what it has); the children
must not die of it noisily."""

from __future__ import annotations

import signal
import threading


def start_forkserver_deaf_to_ctrl_c(preload: list[str] | None = None) -> None:
    """Start multiprocessing's forkserver (with `preload`, when given) with SIGINT ignored, which it keeps, and
    passes to the processes it forks unless they set their own handler. Otherwise a Ctrl-C while it imports its
    preload (torch, the simulator: a second or more) killed it with a traceback on the terminal."""
    import multiprocessing as mp
    from multiprocessing import forkserver

    if "forkserver" not in mp.get_all_start_methods() or threading.current_thread() is not threading.main_thread():
        return
    if preload is not None:
        mp.get_context("forkserver").set_forkserver_preload(preload)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)
