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

5. NCCL connects the communicator's rings (`ring_connections`): for each channel, rank r to rank r + 1; a pair on
   two nodes needs an RDMA connection over the backend network, a queue pair at each end moved RESET -> INIT ->
   RTR -> RTS around the connection manager's REQ -> REP -> RTU (Deep Learning for Network Engineers, Chapter 9;
   costs in connection_setup.py). Only then can the first collective start: the job's first iteration pays the
   setup (a scenario's `iteration: first`, engines/setup_tasks.py), later ones reuse the connections.

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
from .connection_setup import ConnectionSetup, NicPair, SetupCosts, connection_setup

LOOPBACK = "127.0.0.1"
UNIQUE_ID_BYTES = 128
TCP_HEADER_BYTES = 20 + 20 + 14  # TCP + IPv4 + Ethernet, no options
FRONTEND, MANAGEMENT, LOOPBACK_NET, BACKEND = "frontend", "management", "loopback", "backend"
ROCEV2_UDP_PORT = 4791
CM_MAD_FRAME_BYTES = 14 + 20 + 8 + 12 + 8 + 256 + 4 + 4  # Eth, IPv4, UDP, BTH, DETH, MAD, ICRC, FCS


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
    return [
        Process(global_rank(n, launch.nproc_per_node, l), n, l, launch.node_addr(n))
        for n in range(launch.nnodes)
        for l in range(launch.nproc_per_node)
    ]


@dataclass(frozen=True)
class BootstrapEvent:
    t_s: float
    kind: str  # "listen", "syn", "syn-ack", "ack", "unique-id"; "cm-req", "cm-rep", "cm-rtu" (ring_connections)
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


def rendezvous(
    launch: Launch,
    rng: np.random.Generator,
    network: str = FRONTEND,
    rtt_s: float = 50e-6,
    loopback_rtt_s: float = 5e-6,
    rate_gbps: float = 100.0,
) -> Rendezvous:
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
        events += [
            BootstrapEvent(0.0, "syn", p.rank, 0, src, dst, launch.master_port, net, TCP_HEADER_BYTES),
            BootstrapEvent(rtt / 2, "syn-ack", 0, p.rank, dst, src, ephemeral_port(p.rank), net, TCP_HEADER_BYTES),
            BootstrapEvent(rtt, "ack", p.rank, 0, src, dst, launch.master_port, net, TCP_HEADER_BYTES),
        ]
        established = max(established, rtt)
    unique_id = rng.integers(0, 256, size=UNIQUE_ID_BYTES, dtype=np.uint8).tobytes()
    wire_s = (UNIQUE_ID_BYTES + TCP_HEADER_BYTES) * 8 / (rate_gbps * 1e9)
    t = established
    for p in procs[1:]:
        local = p.node_rank == master.node_rank
        t += wire_s
        arrive = t + (loopback_rtt_s if local else rtt_s) / 2
        events.append(
            BootstrapEvent(
                arrive,
                "unique-id",
                0,
                p.rank,
                LOOPBACK if local else launch.master_addr,
                LOOPBACK if local else p.host_addr,
                ephemeral_port(p.rank),
                LOOPBACK_NET if local else network,
                UNIQUE_ID_BYTES + TCP_HEADER_BYTES,
            )
        )
    return Rendezvous(
        (launch.master_addr, launch.master_port),
        launch.world_size - 1,
        tuple(connections),
        unique_id,
        tuple(sorted(events, key=lambda e: (e.t_s, e.src_rank, e.dst_rank))),
    )


@dataclass(frozen=True)
class RingConnections:
    """The communicator's ring connections over the backend network, after the rendezvous."""

    start_s: float  # when NCCL starts connecting (the unique ID has reached every rank)
    channels: int
    events: tuple[BootstrapEvent, ...]  # each connection's CM REQ, REP, RTU
    setup: ConnectionSetup

    @property
    def done_s(self) -> float:
        """When the last connection is up: the earliest the first collective can start."""
        return self.start_s + self.setup.time_s


def nic_name(p: Process) -> str:
    """The backend NIC of a process: one NIC per GPU (rail-optimized), named after its node."""
    return f"{p.host_addr}/nic{p.local_rank}"


def ring_connections(
    launch: Launch, start_s: float = 0.0, channels: int = 2, rtt_s: float = 5e-6, costs: SetupCosts | None = None
) -> RingConnections:
    """NCCL's ring connections per channel (rank r -> r + 1, the last to 0): pairs on one node use NVLink (no QP),
    pairs on two nodes an RDMA connection each, set up `costs.concurrency` at a time per NIC; `rtt_s` is the
    backend round trip between two NICs."""
    if channels < 1:
        raise InputError(Problem("channels", f"must be >= 1 (got {channels})"))
    costs = costs or SetupCosts()
    procs = processes(launch)
    n = len(procs)
    pairs = [
        (procs[r], procs[(r + 1) % n]) for r in range(n) if n > 1 and procs[r].node_rank != procs[(r + 1) % n].node_rank
    ]
    links = [NicPair(nic_name(a), nic_name(b), rtt_s) for _ in range(channels) for a, b in pairs]
    setup = connection_setup(links, costs)
    req, rep, rtu, _ = costs.legs_s(rtt_s)
    per = costs.connection_s(rtt_s)
    busy: dict[str, int] = {}  # connections a NIC has started so far: which round the next one is in
    events = []
    for _ in range(channels):
        for a, b in pairs:
            rounds = max(busy.get(nic_name(a), 0), busy.get(nic_name(b), 0)) // costs.concurrency
            t0 = start_s + rounds * per
            busy[nic_name(a)] = busy.get(nic_name(a), 0) + 1
            busy[nic_name(b)] = busy.get(nic_name(b), 0) + 1
            for kind, t, s_, d_ in (("cm-req", req, a, b), ("cm-rep", rep, b, a), ("cm-rtu", rtu, a, b)):
                events.append(
                    BootstrapEvent(
                        t0 + t,
                        kind,
                        s_.rank,
                        d_.rank,
                        nic_name(s_),
                        nic_name(d_),
                        ROCEV2_UDP_PORT,
                        BACKEND,
                        CM_MAD_FRAME_BYTES,
                    )
                )
    return RingConnections(
        start_s, channels, tuple(sorted(events, key=lambda e: (e.t_s, e.src_rank, e.dst_rank))), setup
    )


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
