"""What a job pays once, before its first collective: setting up its RDMA connections (Deep Learning for Network
Engineers, Chapter 9: queue pairs and the REQ -> REP -> RTU exchange; Chapter 14: NCCL's communicator).

NCCL opens one connection per channel per peer it talks to over the network (a ring's next rank, a tree's parent
and children, every peer of an all-to-all), separately for each communicator; a connection is a queue pair at
each end (NCCL_IB_QPS_PER_CONNECTION, default 1, makes it more). Connections inside a server (NVLink) need no QP.

One connection costs, in order (the passive side answers only after its own work):

    active side   ibv_create_qp, RESET -> INIT             then its CM sends the REQ    (0.5 RTT)
    passive side  ibv_create_qp, RESET -> INIT -> RTR      then its CM sends the REP    (0.5 RTT)
    active side   INIT -> RTR -> RTS                       then its CM sends the RTU    (0.5 RTT)
    passive side  RTR -> RTS

that is 2 QP creations, 6 QP modifications, 3 CM messages and 1.5 round-trip times of the path. NCCL's IB
transport exchanges the same fields (QPN, GID, PSN, MTU) over its bootstrap sockets rather than as CM MADs
(nccl src/transport/net_ib.cc): the same three legs.

A NIC sets up `concurrency` connections at a time (its driver's command interface and the host's CM work
serialize them), so a NIC with q connections needs ceil(q / concurrency) rounds; the job waits for its busiest NIC.

Figures (`SetupCosts`): the cost of one ibv_create_qp or ibv_modify_qp is a firmware command through the driver;
no vendor publishes it per call, so the defaults (100 us each) are set so that one connection costs what
rdma-core's cmtime measured for 1000 RC connections between two hosts, 889 us per connection (889,795 us for all
1000; linux-rdma/rdma-core pull request 1448, 2024), with the connections of a NIC serialized (concurrency 1),
as that measurement shows them. KRCORE (Wei et al., USENIX ATC 2022) reports a verbs connection taking hundreds to
thousands of times its own 10 us, the same order. The CM software per message is the packet engine's
`nic.cm_processing_s` (10 us). NCCL itself reports its connection time at init ("Init timings: ... connections"
under NCCL_DEBUG=INFO): 0.02 s for 16 ranks on two servers in NVIDIA/nccl issue 1412.

This is a one-time job-start cost: not in a steady-state iteration's time (every iteration after the first reuses
the connections); a scenario's `iteration: first` puts it in, before each connection's first use
(engines/setup_tasks.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

CM_MESSAGES_PER_CONNECTION = 3  # REQ, REP, RTU
QP_CREATES_PER_CONNECTION = 2  # one QP at each end
QP_MODIFIES_PER_CONNECTION = 6  # RESET -> INIT -> RTR -> RTS at each end
CM_FRAME_BYTES = 14 + 20 + 8 + 12 + 8 + 256 + 4 + 4  # Eth, IPv4, UDP, BTH, DETH, MAD, ICRC, FCS (packet/cm.py)


@dataclass(frozen=True)
class SetupCosts:
    qp_create_s: float = 100e-6  # one ibv_create_qp (see the module's note on the figures)
    qp_modify_s: float = 100e-6  # one ibv_modify_qp (one state transition)
    cm_processing_s: float = 10e-6  # host CM software per message sent (packet engine's nic.cm_processing_s)
    concurrency: int = 1  # connections a NIC sets up at a time
    qps_per_connection: int = 1  # NCCL_IB_QPS_PER_CONNECTION: QPs at each end, set up in one exchange

    def __post_init__(self):
        if self.concurrency < 1 or self.qps_per_connection < 1:
            raise ValueError("concurrency and qps_per_connection are at least 1")
        if min(self.qp_create_s, self.qp_modify_s, self.cm_processing_s) < 0:
            raise ValueError("setup costs are >= 0 s")

    def legs_s(self, rtt_s: float) -> tuple[float, float, float, float]:
        """When, from the start of one connection's setup, its REQ, REP and RTU leave, and when the passive side's
        QP reaches RTS (the connection is up)."""
        q = self.qps_per_connection
        c, m, cm = q * self.qp_create_s, q * self.qp_modify_s, self.cm_processing_s
        req = c + m + cm  # active: create, RESET -> INIT, REQ
        rep = req + rtt_s / 2 + c + 2 * m + cm  # passive: create, RESET -> INIT -> RTR, REP
        rtu = rep + rtt_s / 2 + 2 * m + cm  # active: INIT -> RTR -> RTS, RTU
        return req, rep, rtu, rtu + rtt_s / 2 + m  # passive: RTR -> RTS

    def qp_work_s(self) -> float:
        """One connection's QP creations and state changes alone: what is left when the CM exchange itself (its
        messages and round trips) runs on a simulated wire (the packet engine's `--cm`)."""
        q = self.qps_per_connection
        return q * (QP_CREATES_PER_CONNECTION * self.qp_create_s + QP_MODIFIES_PER_CONNECTION * self.qp_modify_s)

    def connection_s(self, rtt_s: float) -> float:
        """One connection, from the first QP creation to the passive side's RTS."""
        q = self.qps_per_connection
        return (
            q * (QP_CREATES_PER_CONNECTION * self.qp_create_s + QP_MODIFIES_PER_CONNECTION * self.qp_modify_s)
            + CM_MESSAGES_PER_CONNECTION * self.cm_processing_s
            + 1.5 * rtt_s
        )


@dataclass(frozen=True)
class NicPair:
    """One connection the job opens: its two NICs and the round trip between them."""

    src_nic: str
    dst_nic: str
    rtt_s: float


@dataclass(frozen=True)
class ConnectionSetup:
    connections: int  # requester-responder pairs (NCCL connections)
    queue_pairs: int  # QPs created, both ends
    time_s: float  # before the first collective: the busiest NIC's rounds
    per_connection_s: float  # one connection on the slowest path
    rtt_min_s: float
    rtt_max_s: float
    nics: int  # NICs with at least one connection
    busiest_nic: str
    busiest_nic_connections: int
    rounds: int  # ceil(busiest NIC's connections / concurrency)
    cm_messages: int
    cm_bytes: int
    costs: SetupCosts = field(default_factory=SetupCosts)

    def to_dict(self) -> dict:
        c = self.costs
        return {
            "connections": self.connections,
            "queue_pairs": self.queue_pairs,
            "time_s": self.time_s,
            "per_connection_s": self.per_connection_s,
            "rtt_min_s": self.rtt_min_s,
            "rtt_max_s": self.rtt_max_s,
            "nics": self.nics,
            "busiest_nic": self.busiest_nic,
            "busiest_nic_connections": self.busiest_nic_connections,
            "rounds": self.rounds,
            "cm_messages": self.cm_messages,
            "cm_bytes": self.cm_bytes,
            "qp_create_s": c.qp_create_s,
            "qp_modify_s": c.qp_modify_s,
            "cm_processing_s": c.cm_processing_s,
            "concurrency": c.concurrency,
            "qps_per_connection": c.qps_per_connection,
            "one_time": True,  # paid once at job start, before the first collective; not in iteration_time_s
        }


def connection_setup(links: Iterable[NicPair], costs: SetupCosts | None = None) -> ConnectionSetup:
    """The job's connection setup from the connections it opens."""
    per_nic: dict[str, list[float]] = {}
    n = 0
    rtt_min, rtt_max = math.inf, 0.0
    for link in links:
        n += 1
        rtt_min, rtt_max = min(rtt_min, link.rtt_s), max(rtt_max, link.rtt_s)
        per_nic.setdefault(link.src_nic, []).append(link.rtt_s)
        per_nic.setdefault(link.dst_nic, []).append(link.rtt_s)
    return setup_of_nics({nic: (len(r), max(r)) for nic, r in per_nic.items()}, n, rtt_min, rtt_max, costs)


def setup_of_nics(
    per_nic: dict[str, tuple[int, float]],
    connections: int,
    rtt_min_s: float,
    rtt_max_s: float,
    costs: SetupCosts | None = None,
) -> ConnectionSetup:
    """The same from each NIC's (connections, slowest round trip) and the job's totals."""
    costs = costs or SetupCosts()
    if not connections:
        return ConnectionSetup(0, 0, 0.0, 0.0, 0.0, 0.0, 0, "", 0, 0, 0, 0, costs)
    time_s, busiest, rounds_max = 0.0, "", 0
    for nic in sorted(per_nic):
        count, rtt = per_nic[nic]
        rounds = math.ceil(count / costs.concurrency)
        t = rounds * costs.connection_s(rtt)
        if t > time_s:
            time_s, busiest, rounds_max = t, nic, rounds
    n, q = connections, costs.qps_per_connection
    return ConnectionSetup(
        n,
        2 * n * q,
        time_s,
        costs.connection_s(rtt_max_s),
        rtt_min_s,
        rtt_max_s,
        len(per_nic),
        busiest,
        per_nic[busiest][0],
        rounds_max,
        CM_MESSAGES_PER_CONNECTION * n,
        CM_MESSAGES_PER_CONNECTION * n * CM_FRAME_BYTES,
        costs,
    )
