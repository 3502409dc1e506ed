"""Where a sweep's cases run: Ray (a local instance, or a cluster by address), or a local pool of processes.

Both run each case in a worker process, never in the driver, and report one `Outcome` per case:

- ok: the case ran; its result;
- failed: it raised (a combination the simulator refuses, a bug): the error, the sweep goes on;
- crashed: its worker process died (killed, out of memory, a segfault): retried once on a fresh worker, then
  recorded;
- timeout: it ran longer than the limit: its worker is killed (and replaced), the case recorded.

The local pool keeps `workers` processes (forkserver: each imports the simulator once) and hands them
cases one at a time over a pipe; Ray keeps as many tasks in flight as the cluster has CPUs (so a case's
time limit counts from when it starts), `max_retries=1` for a dead worker, `ray.cancel(force=True)` for
a case past its limit.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import wait as mp_wait
from typing import Any

from ..errors import InputError, Problem
from .worker import call

CRASH_RETRIES = 1


@dataclass
class Outcome:
    case_id: str
    status: str  # ok | failed | crashed | timeout
    result: Any = None
    error: str = ""
    detail: str = ""  # a traceback, when there is one
    attempts: int = 1
    wall_s: float = 0.0


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


# ---------------------------------------------------------------------------------------------- local pool


def _worker_main(conn, fn) -> None:
    """A pool worker: cases in, outcomes out, until told to stop (None). Ctrl-C is the driver's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            payload = conn.recv()
        except (EOFError, OSError):
            return
        if payload is None:
            return
        conn.send(call(fn, payload))


@dataclass
class _Worker:
    proc: Any
    conn: Any
    case_id: str | None = None
    payload: Any = None
    started: float = 0.0
    attempt: int = 1


class LocalPool:
    """`workers` processes of this machine (the fallback without Ray, and `--backend local`)."""

    name = "local"

    def __init__(self, fn: Callable, workers: int | None = None, timeout_s: float | None = None):
        methods = multiprocessing.get_all_start_methods()
        self.ctx: Any = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        if self.ctx.get_start_method() == "forkserver":
            self.ctx.set_forkserver_preload(["aifabric.sweep.worker", "aifabric.simulate", "aifabric.report.html"])
        self.fn = fn
        self.workers = workers or default_workers()
        self.timeout_s = timeout_s
        self.queue: deque[tuple[str, Any, int]] = deque()  # (case id, payload, attempt)
        self.pool: list[_Worker] = []
        self.where = f"a local pool of {self.workers} worker process{'es' if self.workers > 1 else ''}"

    def _spawn(self) -> _Worker:
        parent, child = self.ctx.Pipe(duplex=True)
        proc = self.ctx.Process(target=_worker_main, args=(child, self.fn), daemon=True)
        proc.start()
        child.close()
        return _Worker(proc, parent)

    def start(self) -> None:
        self.pool = [self._spawn() for _ in range(self.workers)]

    def submit(self, case_id: str, payload: Any) -> None:
        self.queue.append((case_id, payload, 1))

    @property
    def pending(self) -> int:
        return len(self.queue) + sum(1 for w in self.pool if w.case_id is not None)

    def _dispatch(self) -> None:
        for i in range(len(self.pool)):
            w = self.pool[i]
            if w.case_id is None and self.queue:
                case_id, payload, attempt = self.queue.popleft()
                try:
                    w.conn.send(payload)
                except OSError:  # the worker died while idle: a fresh one takes the case
                    self._replace(w)
                    w = self.pool[i]
                    w.conn.send(payload)
                w.case_id, w.payload, w.started, w.attempt = case_id, payload, time.monotonic(), attempt

    def _replace(self, w: _Worker) -> None:
        self._kill(w)
        self.pool[self.pool.index(w)] = self._spawn()

    @staticmethod
    def _kill(w: _Worker) -> None:
        if w.proc.is_alive():
            w.proc.kill()
        w.proc.join(timeout=5)
        w.conn.close()

    def wait(self, timeout_s: float = 0.5) -> list[Outcome]:
        """Outcomes of the cases that finished (or died, or ran out of time) within `timeout_s`."""
        self._dispatch()
        busy = [w for w in self.pool if w.case_id is not None]
        if not busy:
            return []
        ready = set(mp_wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=timeout_s))
        out: list[Outcome] = []
        now = time.monotonic()
        for w in busy:
            attempt, case_id = w.attempt, w.case_id
            assert case_id is not None  # busy: it holds a case
            if w.conn in ready:
                try:
                    msg = w.conn.recv()
                except (EOFError, OSError):
                    msg = None
                if msg is not None:
                    out.append(_outcome(case_id, msg, attempt, now - w.started))
                    w.case_id = None
                    continue
            if w.conn in ready or w.proc.sentinel in ready or not w.proc.is_alive():
                w.proc.join(timeout=2)  # the pipe closes as the process dies: reap it for its exit code
                code = w.proc.exitcode
                why = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                payload = w.payload
                self._replace(w)
                if attempt <= CRASH_RETRIES:
                    self.queue.appendleft((case_id, payload, attempt + 1))
                else:
                    out.append(
                        Outcome(
                            case_id,
                            "crashed",
                            error=f"worker process died ({why}) on each of {attempt} attempts",
                            attempts=attempt,
                            wall_s=now - w.started,
                        )
                    )
            elif self.timeout_s and now - w.started > self.timeout_s:
                self._replace(w)
                out.append(
                    Outcome(
                        case_id,
                        "timeout",
                        error=f"ran longer than {self.timeout_s:g} s: stopped",
                        attempts=attempt,
                        wall_s=now - w.started,
                    )
                )
        self._dispatch()
        return out

    def close(self) -> None:
        for w in self.pool:
            if w.case_id is None and w.proc.is_alive():
                try:
                    w.conn.send(None)
                except OSError:
                    pass
        deadline = time.monotonic() + 2
        for w in self.pool:
            if w.case_id is None:
                w.proc.join(timeout=max(0.0, deadline - time.monotonic()))
            self._kill(w)
        self.pool = []
        self.queue.clear()


def _outcome(case_id: str, msg: tuple, attempt: int, wall_s: float) -> Outcome:
    if msg[0] == "ok":
        return Outcome(case_id, "ok", result=msg[1], attempts=attempt, wall_s=wall_s)
    return Outcome(
        case_id, "failed", error=msg[1], detail=msg[2] if len(msg) > 2 else "", attempts=attempt, wall_s=wall_s
    )


# ---------------------------------------------------------------------------------------------- Ray


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """HOST:PORT or ray://HOST[:PORT] answers a TCP connection (Ray itself retries for minutes)."""
    import socket

    if address == "local":
        return
    if address == "auto":  # the cluster `ray start --head` started on this machine, as Ray finds it
        found = current_cluster()
        if found is None:
            raise InputError(
                Problem(
                    "--address",
                    "auto: no Ray cluster started on this machine (`ray start --head "
                    "--port=6379` starts one; or give HOST:PORT)",
                )
            )
        given, address = f"auto ({found}, the last cluster `ray start --head` started here)", found
    else:
        given = address
    rest = address.removeprefix("ray://")
    host, _, port = rest.rpartition(":") if ":" in rest else (rest, "", "10001")
    host = host.strip("[]")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except (OSError, ValueError) as exc:
        raise InputError(
            Problem(
                "--address",
                f"nothing answers at {given} ({getattr(exc, 'strerror', None) or exc}"
                "): is the cluster started (`ray start --head --port=PORT` on its head node)?",
            )
        ) from None


def current_cluster() -> str | None:
    """The address `ray start --head` on this machine left for `address="auto"` (Ray's temp folder, RAY_TMPDIR or
    /tmp/ray, file ray_current_cluster), or None."""
    import tempfile
    from pathlib import Path

    base = Path(os.environ.get("RAY_TMPDIR") or Path(tempfile.gettempdir()) / "ray")
    try:
        text = (base / "ray_current_cluster").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None


AUTH_HINT = (
    "if the cluster authenticates with a token (recent Ray versions do by default), run with "
    "RAY_AUTH_MODE=token and the cluster's token in ~/.ray/auth_token or RAY_AUTH_TOKEN (`ray get-auth-token` "
    "on the head node prints it)"
)


class RayPool:
    """Ray tasks: a local Ray instance (`address` None: this machine's cores, or `workers` of them) or an existing
    cluster (`address`: "auto", "HOST:6379", "ray://HOST:10001"). Started here, stopped here; a Ray already
    initialized in this process is used as it is and left running."""

    name = "ray"

    def __init__(
        self, fn: Callable, workers: int | None = None, timeout_s: float | None = None, address: str | None = None
    ):
        self.fn, self.requested, self.timeout_s, self.address = fn, workers, timeout_s, address
        self.queue: deque[tuple[str, Any]] = deque()
        self.inflight: dict[Any, tuple[str, float]] = {}  # ref -> (case id, submitted)
        self.cancelled: set = set()
        self.started_ray = False
        self.workers = workers or 0
        self.where = ""

    def start(self) -> None:
        import logging

        import ray

        if not ray.is_initialized():
            kwargs: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "logging_level": logging.ERROR,
            }
            if self.address:
                check_reachable(self.address)
                try:
                    ray.init(address=self.address, **kwargs)
                except ConnectionError as exc:
                    hint = (
                        "" if os.environ.get("RAY_AUTH_MODE") == "token" or self.address == "auto" else f"; {AUTH_HINT}"
                    )
                    raise InputError(
                        Problem(
                            "--address",
                            f"cannot connect to the Ray cluster at {self.address}: {str(exc).splitlines()[0]}{hint}",
                        )
                    ) from None
            else:
                # a new instance on this machine, never a cluster `ray start` left running (that is --address auto)
                ray.init(address="local", num_cpus=self.requested, **kwargs)
            self.started_ray = True
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.workers = min(self.requested, cpus) if self.requested else cpus
        nodes = len([n for n in ray.nodes() if n.get("Alive")])
        local = self.address in (None, "local")
        kind = "a local Ray instance" if local else f"the Ray cluster at {self.address}"
        self.where = f"{kind} ({nodes} node{'s' if nodes != 1 else ''}, {cpus} CPUs; {self.workers} cases at a time)"

        @ray.remote(max_retries=CRASH_RETRIES, retry_exceptions=False)
        def _task(fn, payload):
            return call(fn, payload)

        self._task = _task

    def submit(self, case_id: str, payload: Any) -> None:
        self.queue.append((case_id, payload))

    @property
    def pending(self) -> int:
        return len(self.queue) + len(self.inflight)

    def _dispatch(self) -> None:
        while self.queue and len(self.inflight) < self.workers:
            case_id, payload = self.queue.popleft()
            ref = self._task.remote(self.fn, payload)
            self.inflight[ref] = (case_id, time.monotonic())

    def wait(self, timeout_s: float = 0.5) -> list[Outcome]:
        import ray

        self._dispatch()
        if not self.inflight:
            return []
        refs = list(self.inflight)
        ready, rest = ray.wait(refs, num_returns=1, timeout=timeout_s)  # back as soon as one is done
        if ready and rest:
            ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        out: list[Outcome] = []
        now = time.monotonic()
        for ref in ready:
            case_id, t0 = self.inflight.pop(ref)
            if ref in self.cancelled:
                self.cancelled.discard(ref)
                continue
            try:
                msg = ray.get(ref)
            except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError) as exc:
                out.append(
                    Outcome(
                        case_id,
                        "crashed",
                        error=f"worker process died on each of {CRASH_RETRIES + 1} attempts ({type(exc).__name__})",
                        attempts=CRASH_RETRIES + 1,
                        wall_s=now - t0,
                    )
                )
                continue
            except ray.exceptions.RayError as exc:
                out.append(
                    Outcome(
                        case_id, "failed", error=f"{type(exc).__name__}: {str(exc).splitlines()[0]}", wall_s=now - t0
                    )
                )
                continue
            out.append(_outcome(case_id, msg, 1, now - t0))
        if self.timeout_s:
            for ref, (case_id, t0) in list(self.inflight.items()):
                if now - t0 > self.timeout_s and ref not in self.cancelled:
                    ray.cancel(ref, force=True)
                    self.cancelled.add(ref)
                    out.append(
                        Outcome(
                            case_id, "timeout", error=f"ran longer than {self.timeout_s:g} s: stopped", wall_s=now - t0
                        )
                    )
        self._dispatch()
        return out

    def close(self) -> None:
        import ray

        for ref in list(self.inflight):
            if ref not in self.cancelled:
                ray.cancel(ref, force=True)
        self.inflight.clear()
        self.queue.clear()
        if self.started_ray:
            ray.shutdown()
            self.started_ray = False
