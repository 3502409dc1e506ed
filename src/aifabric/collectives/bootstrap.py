"""Communicator bootstrap (seeds Ch. 14, Figures 14-2 and 14-3): torchrun's ranks, the TCP rendezvous
at the master, the NCCL unique ID, and sub-communicators.

1. torchrun starts `nproc_per_node` processes on each of `nnodes` nodes; a process's global rank is
   `node_rank × nproc_per_node + local_rank`, the world size `nnodes × nproc_per_node`. Rank 0 (node 0,
   local rank 0) is the master.
2. The master listens on master_addr:master_port and expects world − 1 TCP connections. Every other
   rank does a three-way handshake to it: ranks on the master's host connect to 127.0.0.1 (loopback,
   never on the wire), the others to master_addr over the frontend (or management) network.
3. Once all are connected, the master draws the NCCL unique ID (128 bytes, NCCL_UNIQUE_ID_BYTES) and
   sends it to every rank over its socket: the shared reference every rank joins the communicator with.
4. Sub-communicators (ncclCommSplit / torch.distributed.new_group): any group of world ranks, numbered
   0 .. k-1 inside the group in the order of `key` (default: world rank).

Every message is a `BootstrapEvent` with its time, endpoints, addresses and network, so that the
bootstrap appears on the frontend network like any other traffic. Randomness (the unique ID) only
from the generator passed in.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import InputError, Problem

LOOPBACK = "127.0.0.1"
UNIQUE_ID_BYTES = 128
TCP_HEADER_BYTES = 20 + 20 + 14  # TCP + IPv4 + Ethernet, no options
FRONTEND, MANAGEMENT, LOOPBACK_NET = "frontend", "management", "loopback"


def ephemeral_port(rank: int) -> int:
    """The client side of rank's socket to the master (a stand-in for the OS's ephemeral port)."""
    return 49152 + rank % 16384


def global_rank(node_rank: int, nproc_per_node: int, local_rank: int) -> int:
    return node_rank * nproc_per_node + local_rank


@dataclass(frozen=True)
class Launch:
    """torchrun's arguments. `node_addrs[i]` is node i's frontend address (default: master_addr, + 1, ...)."""

    nnodes: int
    nproc_per_node: int
    master_addr: str = "192.168.10.101"
    master_port: int = 12345
    node_addrs: tuple[str, ...] = ()

    def __post_init__(self):
        problems = []
        if self.nnodes < 1:
            problems.append(Problem("nnodes", f"must be >= 1 (got {self.nnodes})"))
        if self.nproc_per_node < 1:
            problems.append(Problem("nproc_per_node", f"must be >= 1 (got {self.nproc_per_node})"))
        if not 1 <= self.master_port <= 65535:
            problems.append(Problem("master_port", f"must be 1 .. 65535 (got {self.master_port})"))
        try:
            ipaddress.IPv4Address(self.master_addr)
        except ValueError:
            problems.append(Problem("master_addr", f"not an IPv4 address: {self.master_addr!r}"))
        if self.node_addrs and len(self.node_addrs) != self.nnodes:
            problems.append(Problem("node_addrs", f"needs one address per node ({self.nnodes})"))
        if problems:
            raise InputError(problems)

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc_per_node

    def node_addr(self, node_rank: int) -> str:
        if self.node_addrs:
            return self.node_addrs[node_rank]
        return str(ipaddress.IPv4Address(self.master_addr) + node_rank)


@dataclass(frozen=True)
class Process:
    rank: int
    node_rank: int
    local_rank: int
    host_addr: str


def processes(launch: Launch) -> list[Process]:
    return [Process(global_rank(n, launch.nproc_per_node, l), n, l, launch.node_addr(n))
            for n in range(launch.nnodes) for l in range(launch.nproc_per_node)]


@dataclass(frozen=True)
class BootstrapEvent:
    t_s: float
    kind: str  # "listen", "syn", "syn-ack", "ack", "unique-id"
    src_rank: int
    dst_rank: int
    src_addr: str
    dst_addr: str
    dst_port: int
    network: str  # loopback / frontend / management
    size_bytes: int


@dataclass(frozen=True)
class Rendezvous:
    listener: tuple[str, int]
    expected_connections: int
    connections: tuple[tuple[int, str, int], ...]  # (rank, destination address, destination port)
    unique_id: bytes
    events: tuple[BootstrapEvent, ...]

    @property
    def done_s(self) -> float:
        return max((e.t_s for e in self.events), default=0.0)


def rendezvous(launch: Launch, rng: np.random.Generator, network: str = FRONTEND, rtt_s: float = 50e-6,
               loopback_rtt_s: float = 5e-6, rate_gbps: float = 100.0) -> Rendezvous:
    """The TCP rendezvous and the unique-ID distribution, as timed events (handshakes in parallel;
    the master sends the ID to the ranks one after another on its one socket per rank)."""
    procs = processes(launch)
    master = procs[0]
    events = [BootstrapEvent(0.0, "listen", 0, 0, master.host_addr, master.host_addr, launch.master_port, network, 0)]
    connections = []
    established = 0.0
    for p in procs[1:]:
        local = p.node_rank == master.node_rank
        dst = LOOPBACK if local else launch.master_addr
        src = LOOPBACK if local else p.host_addr
        net, rtt = (LOOPBACK_NET, loopback_rtt_s) if local else (network, rtt_s)
        connections.append((p.rank, dst, launch.master_port))
        events += [BootstrapEvent(0.0, "syn", p.rank, 0, src, dst, launch.master_port, net, TCP_HEADER_BYTES),
                   BootstrapEvent(rtt / 2, "syn-ack", 0, p.rank, dst, src, ephemeral_port(p.rank), net,
                                  TCP_HEADER_BYTES),
                   BootstrapEvent(rtt, "ack", p.rank, 0, src, dst, launch.master_port, net, TCP_HEADER_BYTES)]
        established = max(established, rtt)
    unique_id = rng.integers(0, 256, size=UNIQUE_ID_BYTES, dtype=np.uint8).tobytes()
    wire_s = (UNIQUE_ID_BYTES + TCP_HEADER_BYTES) * 8 / (rate_gbps * 1e9)
    t = established
    for p in procs[1:]:
        local = p.node_rank == master.node_rank
        t += wire_s
        arrive = t + (loopback_rtt_s if local else rtt_s) / 2
        events.append(BootstrapEvent(arrive, "unique-id", 0, p.rank, LOOPBACK if local else launch.master_addr,
                                     LOOPBACK if local else p.host_addr, ephemeral_port(p.rank),
                                     LOOPBACK_NET if local else network, UNIQUE_ID_BYTES + TCP_HEADER_BYTES))
    return Rendezvous((launch.master_addr, launch.master_port), launch.world_size - 1, tuple(connections), unique_id,
                      tuple(sorted(events, key=lambda e: (e.t_s, e.src_rank, e.dst_rank))))


@dataclass(frozen=True)
class Communicator:
    """A group of world ranks; `ranks[i]` is the world rank of communicator rank i."""

    ranks: tuple[int, ...]
    color: int = 0

    @property
    def size(self) -> int:
        return len(self.ranks)

    def rank_of(self, world_rank: int) -> int:
        return self.ranks.index(world_rank)


def new_group(world_size: int, ranks: Sequence[int]) -> Communicator:
    problems = []
    if len(set(ranks)) != len(ranks):
        problems.append(Problem("ranks", "a rank appears twice"))
    bad = [r for r in ranks if not 0 <= r < world_size]
    if bad:
        problems.append(Problem("ranks", f"not in the world (0 .. {world_size - 1}): {bad}"))
    if not ranks:
        problems.append(Problem("ranks", "a group needs at least one rank"))
    if problems:
        raise InputError(problems)
    return Communicator(tuple(int(r) for r in ranks))


def comm_split(colors: Sequence[int], keys: Sequence[int] | None = None) -> dict[int, Communicator]:
    """ncclCommSplit: every world rank r gives a color (negative: no communicator) and a key; ranks of one
    color form a communicator, ordered by (key, world rank)."""
    keys = list(keys) if keys is not None else list(range(len(colors)))
    out: dict[int, list[int]] = {}
    for r, c in enumerate(colors):
        if c >= 0:
            out.setdefault(int(c), []).append(r)
    return {c: Communicator(tuple(sorted(rs, key=lambda r: (keys[r], r))), c) for c, rs in sorted(out.items())}
