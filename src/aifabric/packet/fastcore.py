"""The packet engine's event loop and per-hop work compiled with numba, for its common configuration (issue 18, item 2).

The pure-Python engine (sim.py, port.py, switch.py, nic.py, qp_scheduler.py, dcqcn.py) is the definition; read it
first. This module runs the same events in the same order with the same arithmetic, on arrays: a binary heap keyed by
the same (time, sequence number), per-port queues as linked lists of packet rows (with a free list), per-port PFC and
scheduler state, per-switch buffer and ingress counters, per-QP requester, responder and DCQCN state. A frame's
arrival, a port's wake-up, a QP's retransmission and rate-increase timers, a PFC refresh and a PFC frame's arrival are
the events; the WRED draws come from the network's own generator, 4,096 at a time, as `Network.uniform` takes them.
So the statistics (every FCT, queue maximum and depth series, ECN mark, PFC frame, DCQCN rate, event count) are the
reference's bit for bit (tests/packet/test_fastcore.py runs both on many scenarios; the golden counters hold both).

What it covers (`unsupported` says why not, and `Network.run` then keeps the Python engine, which runs everything):
RoCEv2 RC queue pairs (go-back-N, Write First/Middle/Last) between NICs attached to switches, ECMP on the Router's
paths, DCQCN (or none), WRED/ECN with the instantaneous depth, PFC, lossy queues and their drops (buffer full, queue
limit, WRED's drop threshold, PFC headroom overrun: counted, resent by go-back-N), the DWRR/strict egress scheduler,
every transfer
added before the run with no completion callback, run to the end. Not: UC, UD, UET, Write Only, CM setup, flowlet,
spray, adaptive routing and DLB, WRED's average, dynamic thresholds, scale-up (NVLink) and PXN-relayed flows, faults,
`--explain`, pcaps and traced flows, link-load bins, and the task-graph engine (engines/packet.py, whose completions
start new transfers). A NIC port's QPs are tested in turn, all of them: the Python scheduler finds the same one by
index past its first 16 (qp_scheduler.py). Some things are found only while running (the PFC watchdog, a QP out of retries, a depth or rate series past its thinning limit, a queue
left holding packets): the compiled run then stops, its arrays are thrown away, the generator is put back, and the
Python engine runs the network from the same starting state. The compiled run does not look for PFC deadlocks
(packet/deadlock.py): a deadlock holds its ports paused until the PFC watchdog fires, which stops the compiled run, so
the reference runs it and finds the deadlock; without a watchdog the Python engine runs.
"""

from __future__ import annotations

from itertools import count
from math import inf
from typing import Any

import numpy as np

from ..compiled import pure_python
from .headers import (
    ACK_BYTES,
    CNP_BYTES,
    ECN_CE,
    ECN_ECT0,
    ECN_NOT_ECT,
    OP_ACK,
    OP_CNP,
    OP_WRITE_FIRST,
    OP_WRITE_LAST,
    OP_WRITE_MIDDLE,
    OP_WRITE_ONLY,
    PFC_FRAME_BYTES,
    RETH_BYTES,
    ROCE_HEADER_BYTES,
    pfc_pause_s,
)
from .sim import ACK, CNP, DATA, NAK

try:  # optional: the Python engine is the fallback
    from numba import njit

    AVAILABLE = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    AVAILABLE = False

    def njit(*args, **kwargs):  # type: ignore[no-redef]
        return (lambda f: f) if not args or not callable(args[0]) else args[0]


# no reference counting: every array is made in Python and outlives the run (it saves the counts' atomic operations)
JIT: dict[str, Any] = {"cache": True, "_nrt": False}
MAX_SERIES = 20_000  # port_monitors.MAX_DEPTH_SAMPLES and nic.MAX_RATE_SAMPLES: thinning past them is not replayed
MAX_PFC_FRAMES = 100_000  # Network.pfc_sent keeps this many frames

# events
EV_RECV, EV_KICK, EV_RTO, EV_INC, EV_REFRESH, EV_PFC = 0, 1, 2, 3, 4, 5
# what a switch drops for (Network.drop's reasons; the core's index into DROP_REASONS)
DROP_REASONS = ("buffer-full", "wred-drop-threshold", "wred", "pfc-headroom-overrun", "queue-limit")
D_BUFFER, D_WRED_THRESHOLD, D_WRED, D_HEADROOM, D_QLIMIT = range(5)
# run status
ST_DONE, ST_BAIL, ST_GROW, ST_UNI, ST_CHUNK = 0, 1, 2, 3, 4
CHUNK_EVENTS = 1 << 19  # events per call, then back to Python (numba code does not see Ctrl-C)
# why a run stopped (G_I[BAIL])
BAIL_REASONS = (
    "",
    "a packet was dropped",
    "the PFC watchdog fired",
    "a QP ran out of retries",
    "a depth or rate series reached its thinning limit",
    "a queue still held packets at the end",
    "two QPs of a port reached their DCQCN byte counters at once (a kick nested twice)",
)
B_DROP, B_WATCHDOG, B_RETRY, B_SERIES, B_LEFT, B_NESTED = 1, 2, 3, 4, 5, 6

# G_F (floats), G_I (ints): the run
NOW = 0
SEQ, HN, EVENTS, FREE, NLS, NLR, NLP, NAO, UI, BAIL, NPFCF, ORDER, INCR = range(13)
# P_F, P_I: per port (= directed link)
SPB, DELAY, LAT, BUSY, WAKE, PAUSE_S, SAMPLE_S = range(7)
(DST, OWNER, ISSW, TXB, TXP, HASSRC, SRCTURN, BACKLOG, NONEMPTY, SRR, REV, SAMPLED, SRC_N, SRC_RR) = range(14)
# Q_F, Q_I: per port and queue (port * 8 + q)
PU, PSTART, PTOT, IGN, SAMPLE_T = range(5)
(DEPTH, HEAD, TAIL, CNT, FRX, DEF, MAXD, NSER, ECNM, ECNORD, PSENT, RSENT, PORD, RORD, PSTART_SET) = range(15)
# K_I: per ingress key (in_link * 8 + priority) of a switch
ING, PUP, HR, HASING, HASPUP = range(5)
# FL_F, FL_I: per QP flow
(LINE, NEXT_T, RC, RT, ALPHA, LAST_DEC, ALPHA_REF, LAST_ACK_T, LAST_CNP, DONE_T, ACKED_T, RTO_S, ACK_AFTER) = range(13)
(
    N,
    SIZE,
    MTU,
    SND_NXT,
    SND_UNA,
    MAX_SENT,
    RTO_ARMED,
    INC_GEN,
    BYTES_CTR,
    IT,
    IB,
    EPSN,
    NGOT,
    NAK_SENT,
    LAST_ACK_PSN,
    RETX,
    TIMEOUTS,
    NAKS,
    OOO,
    DUP,
    RETRIES,
    CNP_TX,
    CNP_RX,
    CE_RX,
    SPORT,
    PRIO,
    DSCP,
    RETRY_CNT,
    ACK_EVERY,
    DONE,
    ACKED,
    SENT_OFF,
    NRATE,
    FLEN,
    RLEN,
    DECLOG,
    NETDROPS,
) = range(37)
# PK: per packet row
KIND, FLOW, DIR, HOP, PSN, PSIZE, ECN, PPRIO, PDSCP, OP, INLINK, IKEY, NEXT = range(13)
# C_F, C_I: configuration
RDI, AUI, INC_TIMER, G, MIN_RATE, R_AI, R_HAI, CNP_INT, WATCHDOG_S = range(9)
(
    DC_ON,
    BYTE_COUNTER,
    FAST_REC,
    CLAMP,
    BUFFER,
    QLIMIT,
    WRED_ECN,
    QUANTA,
    NSTRICT,
    NWEIGHTED,
    CNP_DSCP,
    CNP_Q,
    HAS_WD,
) = range(13)
ACK_EVERY_CFG = 13
# CQ_F, CQ_I: per queue
WMIN, WMAX, PMAX, WDROP = range(4)
HASW, LOSSLESS, XON, XOFF, QUANTUM, HASWDROP = range(6)

UNIFORM_BATCH = 4096  # Network.uniform draws this many at a time
# the tables' first sizes (they double when near full): packet rows and heap entries (at least), per port, and the
# depth samples, rate samples and PFC frames logged
INITIAL_ROWS, ROWS_PER_PORT = 4096, 8
LOG_ROWS = (1 << 16, 1 << 14, 1 << 12)
MARGIN = 256  # room kept free in the heap, the packet rows and the logs before each event


# -- the state: two flat arrays (floats, ints); every table a view of one of them, found through the ints' header ----
# (a call passes the two arrays, not thirty-two: numba passes each array as a struct of seven words)
@njit(**JIT, inline="always")
def _f1(S, n):
    I = S[1]
    o = I[3 * n]
    return S[0][o : o + I[3 * n + 1]]


@njit(**JIT, inline="always")
def _i1(S, n):
    I = S[1]
    o = I[3 * n]
    return I[o : o + I[3 * n + 1]]


@njit(**JIT, inline="always")
def _f2(S, n):
    I = S[1]
    o = I[3 * n]
    r = I[3 * n + 1]
    c = I[3 * n + 2]
    return S[0][o : o + r * c]


@njit(**JIT, inline="always")
def _i2(S, n):
    I = S[1]
    o = I[3 * n]
    r = I[3 * n + 1]
    c = I[3 * n + 2]
    return I[o : o + r * c]


# -- the heap ------------------------------------------------------------------------------------------------------
@njit(**JIT, inline="always")
def _less(H_F, H_I, i, j):
    return H_F[i] < H_F[j] or (H_F[i] == H_F[j] and H_I[i * 5 + 0] < H_I[j * 5 + 0])


@njit(**JIT)
def _swap(H_F, H_I, i, j):
    t = H_F[i]
    H_F[i] = H_F[j]
    H_F[j] = t
    for k in range(5):
        x = H_I[i * 5 + k]
        H_I[i * 5 + k] = H_I[j * 5 + k]
        H_I[j * 5 + k] = x


@njit(**JIT)
def _push(S, t, ev, a1, a2, a3):
    G_I = _i1(S, 1)
    H_F = _f1(S, 10)
    H_I = _i2(S, 11)
    i = G_I[HN]
    G_I[HN] = i + 1
    H_F[i] = t
    H_I[i * 5 + 0] = G_I[SEQ]
    G_I[SEQ] += 1
    H_I[i * 5 + 1] = ev
    H_I[i * 5 + 2] = a1
    H_I[i * 5 + 3] = a2
    H_I[i * 5 + 4] = a3
    while i > 0:
        p = (i - 1) >> 1
        if _less(H_F, H_I, i, p):
            _swap(H_F, H_I, i, p)
            i = p
        else:
            break


@njit(**JIT)
def _pop(S):
    """Remove the heap's top into row `cap - 1` (free while the margin holds) and return that row."""
    G_I = _i1(S, 1)
    H_F = _f1(S, 10)
    H_I = _i2(S, 11)
    n = G_I[HN] - 1
    G_I[HN] = n
    top = H_F.shape[0] - 1
    H_F[top] = H_F[0]
    for k in range(5):
        H_I[top * 5 + k] = H_I[(0) * 5 + k]
    if n > 0:
        H_F[0] = H_F[n]
        for k in range(5):
            H_I[(0) * 5 + k] = H_I[n * 5 + k]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and _less(H_F, H_I, c + 1, c):
                c += 1
            if _less(H_F, H_I, c, i):
                _swap(H_F, H_I, c, i)
                i = c
            else:
                break
    return top


# -- packets -------------------------------------------------------------------------------------------------------
@njit(**JIT)
def _alloc(S, kind, flow, dr, psn, size, ecn, prio, dscp, op):
    G_I = _i1(S, 1)
    PK = _i2(S, 9)
    FREEL = _i1(S, 22)
    G_I[FREE] -= 1
    k = FREEL[G_I[FREE]]
    PK[k * 13 + KIND] = kind
    PK[k * 13 + FLOW] = flow
    PK[k * 13 + DIR] = dr
    PK[k * 13 + HOP] = 0
    PK[k * 13 + PSN] = psn
    PK[k * 13 + PSIZE] = size
    PK[k * 13 + ECN] = ecn
    PK[k * 13 + PPRIO] = prio
    PK[k * 13 + PDSCP] = dscp
    PK[k * 13 + OP] = op
    PK[k * 13 + INLINK] = -1
    PK[k * 13 + IKEY] = -1
    PK[k * 13 + NEXT] = -1
    return k


@njit(**JIT)
def _free(S, k):
    G_I = _i1(S, 1)
    FREEL = _i1(S, 22)
    FREEL[G_I[FREE]] = k
    G_I[FREE] += 1


# -- a port (port.py) ----------------------------------------------------------------------------------------------
@njit(**JIT)
def _sample(S, port, q, depth, now):
    G_I = _i1(S, 1)
    Q_F = _f2(S, 4)
    Q_I = _i2(S, 5)
    LS_F = _f2(S, 12)
    LS_I = _i1(S, 13)
    pq = port * 8 + q
    Q_F[pq * 5 + SAMPLE_T] = now
    if Q_I[pq * 15 + NSER] + 1 > MAX_SERIES:
        G_I[BAIL] = B_SERIES
    Q_I[pq * 15 + NSER] += 1
    i = G_I[NLS]
    G_I[NLS] = i + 1
    LS_F[i * 2 + 0] = now
    LS_F[i * 2 + 1] = depth
    LS_I[i] = pq


@njit(**JIT)
def _enqueue(S, port, k, q):
    G_F = _f1(S, 0)
    P_F = _f2(S, 2)
    P_I = _i2(S, 3)
    Q_F = _f2(S, 4)
    Q_I = _i2(S, 5)
    PK = _i2(S, 9)
    pq = port * 8 + q
    PK[k * 13 + NEXT] = -1
    if Q_I[pq * 15 + CNT] == 0:
        Q_I[pq * 15 + HEAD] = k
    else:
        PK[(Q_I[pq * 15 + TAIL]) * 13 + NEXT] = k
    Q_I[pq * 15 + TAIL] = k
    Q_I[pq * 15 + CNT] += 1
    P_I[port * 14 + NONEMPTY] |= 1 << q
    size = PK[k * 13 + PSIZE]
    d = Q_I[pq * 15 + DEPTH] + size
    Q_I[pq * 15 + DEPTH] = d
    P_I[port * 14 + BACKLOG] += size
    now = G_F[NOW]
    if P_I[port * 14 + SAMPLED]:
        if d > Q_I[pq * 15 + MAXD]:
            Q_I[pq * 15 + MAXD] = d
        if now - Q_F[pq * 5 + SAMPLE_T] >= P_F[port * 7 + SAMPLE_S]:
            _sample(S, port, q, d, now)
    busy = P_F[port * 7 + BUSY]
    if busy <= now:
        _kick(S, port)
    elif P_F[port * 7 + WAKE] > busy or P_F[port * 7 + WAKE] <= now:
        P_F[port * 7 + WAKE] = busy
        _push(S, busy, EV_KICK, port, 0, 0)


@njit(**JIT)
def _dequeue(S, port, q):
    G_F = _f1(S, 0)
    P_F = _f2(S, 2)
    P_I = _i2(S, 3)
    Q_F = _f2(S, 4)
    Q_I = _i2(S, 5)
    PK = _i2(S, 9)
    pq = port * 8 + q
    k = Q_I[pq * 15 + HEAD]
    Q_I[pq * 15 + HEAD] = PK[k * 13 + NEXT]
    Q_I[pq * 15 + CNT] -= 1
    if Q_I[pq * 15 + CNT] == 0:
        P_I[port * 14 + NONEMPTY] &= ~(1 << q)
    size = PK[k * 13 + PSIZE]
    Q_I[pq * 15 + DEPTH] -= size
    P_I[port * 14 + BACKLOG] -= size
    if P_I[port * 14 + ISSW]:
        if P_I[port * 14 + SAMPLED]:
            now = G_F[NOW]
            d = Q_I[pq * 15 + DEPTH]
            if d == 0 or now - Q_F[pq * 5 + SAMPLE_T] >= P_F[port * 7 + SAMPLE_S]:
                _sample(S, port, q, d, now)
        _released(S, P_I[port * 14 + OWNER], k)
    return k


@njit(**JIT)
def _pick(S, port, now):
    """EgressScheduler.pick."""
    P_I = _i2(S, 3)
    Q_F = _f2(S, 4)
    Q_I = _i2(S, 5)
    PK = _i2(S, 9)
    C_I = _i1(S, 20)
    CQ_I = _i2(S, 24)
    SCHED = _i1(S, 25)
    nstrict = C_I[NSTRICT]
    nw = C_I[NWEIGHTED]
    base = port * 8
    for i in range(nstrict):
        q = SCHED[i]
        if Q_I[(base + q) * 15 + CNT] > 0 and Q_F[(base + q) * 5 + PU] <= now:
            return q
    first = -1
    several = False
    for i in range(nw):
        q = SCHED[nstrict + i]
        if Q_I[(base + q) * 15 + CNT] > 0 and Q_F[(base + q) * 5 + PU] <= now:
            if first < 0:
                first = q
            else:
                several = True
                break
    if first < 0 or not several:
        return first
    first_served = -1
    for i in range(nw):
        q = SCHED[nstrict + i]
        if Q_I[(base + q) * 15 + CNT] > 0 and Q_F[(base + q) * 5 + PU] <= now and CQ_I[q * 6 + QUANTUM] != 0:
            first_served = q
            break
    if first_served < 0:
        for i in range(nw):
            q = SCHED[nstrict + i]
            if Q_I[(base + q) * 15 + CNT] > 0 and Q_F[(base + q) * 5 + PU] <= now:
                return q
    for _ in range(64 * nw):
        q = SCHED[nstrict + P_I[port * 14 + SRR]]
        active = Q_I[(base + q) * 15 + CNT] > 0 and Q_F[(base + q) * 5 + PU] <= now
        if active and CQ_I[q * 6 + QUANTUM] != 0:
            size = PK[(Q_I[(base + q) * 15 + HEAD]) * 13 + PSIZE]
            if Q_I[(base + q) * 15 + DEF] >= size:
                Q_I[(base + q) * 15 + DEF] -= size
                return q
            Q_I[(base + q) * 15 + DEF] += CQ_I[q * 6 + QUANTUM]
        else:
            Q_I[(base + q) * 15 + DEF] = 0
        P_I[port * 14 + SRR] = (P_I[port * 14 + SRR] + 1) % nw
    return first_served


@njit(**JIT)
def _wake_at(S, port, t):
    G_F = _f1(S, 0)
    P_F = _f2(S, 2)
    if t < P_F[port * 7 + WAKE] or P_F[port * 7 + WAKE] <= G_F[NOW]:
        P_F[port * 7 + WAKE] = t
        _push(S, t, EV_KICK, port, 0, 0)


@njit(**JIT)
def _kick_start(S, port, now):
    """The start of Port.kick: 1 when the port is free to send now (else its wake-up is set)."""
    P_F = _f2(S, 2)
    wake = P_F[port * 7 + WAKE]
    if wake <= now:
        wake = inf
        P_F[port * 7 + WAKE] = inf
    busy = P_F[port * 7 + BUSY]
    if busy > now:
        if busy < wake:
            P_F[port * 7 + WAKE] = busy
            _push(S, busy, EV_KICK, port, 0, 0)
        return 0
    return 1


@njit(**JIT)
def _kick_queues(S, port, k, now):
    """Port.kick's middle: a packet from the queues (strict priority, DWRR) unless the QPs gave one (`k`)."""
    P_I = _i2(S, 3)
    Q_F = _f2(S, 4)
    PK = _i2(S, 9)
    if P_I[port * 14 + BACKLOG] and k < 0:
        bits = P_I[port * 14 + NONEMPTY]
        if bits & (bits - 1) == 0:
            q = 0
            while (bits >> (q + 1)) != 0:
                q += 1
            if Q_F[(port * 8 + q) * 5 + PU] > now:
                q = -1
        else:
            q = _pick(S, port, now)
        if q >= 0:
            k = _dequeue(S, port, q)
            if not P_I[port * 14 + ISSW] and PK[k * 13 + KIND] == DATA and P_I[port * 14 + HASSRC]:
                P_I[port * 14 + SRCTURN] = 1
    return k


# Port.kick -> Source.pull -> QpFlow.next_packet -> DCQCN's byte-counter increase -> Port.kick of the same port, nested
# (the reference does it; it can send another QP's packet first). numba cannot cache recursive functions, so the
# chain is written out for the two levels that occur (_kick / _kick1); a third (two QPs of a port reaching their byte
# counters at the same instant) stops the compiled run (B_NESTED) and the Python engine runs the network.
@njit(**JIT)
def _kick(S, port):
    G_F = _f1(S, 0)
    P_I = _i2(S, 3)
    now = G_F[NOW]
    if not _kick_start(S, port, now):
        return
    k = -1
    if P_I[port * 14 + HASSRC] and P_I[port * 14 + SRCTURN]:
        P_I[port * 14 + SRCTURN] = 0
        f = _pull_pick(S, port, now)
        if f >= 0:
            k = _next_packet(S, f, now)
    k = _kick_queues(S, port, k, now)
    if k < 0:
        if P_I[port * 14 + HASSRC]:
            f = _pull_pick(S, port, now)
            if f >= 0:
                k = _next_packet(S, f, now)
        if k < 0:
            _wake_for_blocked(S, port, now)
            return
    _transmit(S, port, k, now)


@njit(**JIT)
def _kick1(S, port):
    G_F = _f1(S, 0)
    P_I = _i2(S, 3)
    now = G_F[NOW]
    if not _kick_start(S, port, now):
        return
    k = -1
    if P_I[port * 14 + HASSRC] and P_I[port * 14 + SRCTURN]:
        P_I[port * 14 + SRCTURN] = 0
        f = _pull_pick(S, port, now)
        if f >= 0:
            k = _next_packet1(S, f, now)
    k = _kick_queues(S, port, k, now)
    if k < 0:
        if P_I[port * 14 + HASSRC]:
            f = _pull_pick(S, port, now)
            if f >= 0:
                k = _next_packet1(S, f, now)
        if k < 0:
            _wake_for_blocked(S, port, now)
            return
    _transmit(S, port, k, now)


@njit(**JIT)
def _transmit(S, port, k, now):
    P_F = _f2(S, 2)
    P_I = _i2(S, 3)
    PK = _i2(S, 9)
    size = PK[k * 13 + PSIZE]
    end = now + size * P_F[port * 7 + SPB]
    P_F[port * 7 + BUSY] = end
    P_I[port * 14 + TXB] += size
    P_I[port * 14 + TXP] += 1
    PK[k * 13 + INLINK] = port
    if P_I[port * 14 + BACKLOG] or P_I[port * 14 + HASSRC]:
        P_F[port * 7 + WAKE] = end
        _push(S, end + P_F[port * 7 + DELAY], EV_RECV, k, 0, 0)
        _push(S, end, EV_KICK, port, 0, 0)
    else:
        _push(S, end + P_F[port * 7 + DELAY], EV_RECV, k, 0, 0)


@njit(**JIT)
def _wake_for_blocked(S, port, now):
    P_I = _i2(S, 3)
    Q_F = _f2(S, 4)
    Q_I = _i2(S, 5)
    t = inf
    for q in range(8):
        pq = port * 8 + q
        if Q_I[pq * 15 + CNT] > 0 and Q_F[pq * 5 + PU] > now:
            t = min(t, Q_F[pq * 5 + PU])
    if P_I[port * 14 + HASSRC]:
        t = min(t, _next_ready(S, port))
    if t < inf:
        _wake_at(S, port, max(t, now))


@njit(**JIT)
def _on_pfc(S, port, prio, quanta):
    """Port.on_pfc and PfcState.receive."""
    G_F = _f1(S, 0)
    G_I = _i1(S, 1)
    P_F = _f2(S, 2)
    Q_F = _f2(S, 4)
    Q_I = _i2(S, 5)
    C_F = _f1(S, 19)
    C_I = _i1(S, 20)
    now = G_F[NOW]
    pq = port * 8 + prio
    Q_I[pq * 15 + FRX] += 1
    if quanta and Q_F[pq * 5 + IGN] > now:
        return
    if quanta == 0:
        _settle(S, pq, now)
        Q_F[pq * 5 + PU] = now
        _kick(S, port)
        return
    started = Q_I[pq * 15 + PSTART_SET]
    if started and Q_F[pq * 5 + PU] < now:
        _settle(S, pq, now)
        started = 0
    if not started:
        Q_F[pq * 5 + PSTART] = now
        Q_I[pq * 15 + PSTART_SET] = 1
    elif C_I[HAS_WD] and now - Q_F[pq * 5 + PSTART] > C_F[WATCHDOG_S]:
        G_I[BAIL] = B_WATCHDOG
        return
    Q_F[pq * 5 + PU] = now + P_F[port * 7 + PAUSE_S]


@njit(**JIT)
def _settle(S, pq, now):
    Q_F = _f2(S, 4)
    Q_I = _i2(S, 5)
    if Q_I[pq * 15 + PSTART_SET]:
        Q_F[pq * 5 + PTOT] += min(now, Q_F[pq * 5 + PU]) - Q_F[pq * 5 + PSTART]
        Q_I[pq * 15 + PSTART_SET] = 0


# -- a NIC port's QPs (qp_scheduler.py): each tested in turn, as Source finds them (by index past its first 16) -------
@njit(**JIT)
def _pull_pick(S, port, now):
    """Source.pull's choice: the next QP in turn that may send now (its turn taken), or -1."""
    P_I = _i2(S, 3)
    Q_F = _f2(S, 4)
    FL_F = _f2(S, 6)
    FL_I = _i2(S, 7)
    SRC = _i2(S, 16)
    SRCC = S[1][3 * 16 + 2]
    n = P_I[port * 14 + SRC_N]
    if n == 1:
        f = SRC[port * SRCC + 0]
        if (
            FL_F[f * 13 + NEXT_T] <= now
            and Q_F[(port * 8 + FL_I[f * 37 + PRIO]) * 5 + PU] <= now
            and FL_I[f * 37 + SND_NXT] < FL_I[f * 37 + N]
        ):
            P_I[port * 14 + SRC_RR] = 1
            return f
        return -1
    rr = P_I[port * 14 + SRC_RR]
    for i in range(n):
        j = (rr + i) % n
        f = SRC[port * SRCC + j]
        if (
            FL_F[f * 13 + NEXT_T] <= now
            and Q_F[(port * 8 + FL_I[f * 37 + PRIO]) * 5 + PU] <= now
            and FL_I[f * 37 + SND_NXT] < FL_I[f * 37 + N]
        ):
            P_I[port * 14 + SRC_RR] = j + 1
            return f
    return -1


@njit(**JIT)
def _next_ready(S, port):
    P_I = _i2(S, 3)
    Q_F = _f2(S, 4)
    FL_F = _f2(S, 6)
    FL_I = _i2(S, 7)
    SRC = _i2(S, 16)
    SRCC = S[1][3 * 16 + 2]
    t = inf
    for j in range(P_I[port * 14 + SRC_N]):
        f = SRC[port * SRCC + j]
        if FL_I[f * 37 + SND_NXT] < FL_I[f * 37 + N]:
            ready = max(FL_F[f * 13 + NEXT_T], Q_F[(port * 8 + FL_I[f * 37 + PRIO]) * 5 + PU])
            t = min(t, ready)
    return t


@njit(**JIT)
def _src_remove(S, f):
    P_I = _i2(S, 3)
    FL_I = _i2(S, 7)
    SRC = _i2(S, 16)
    SRCC = S[1][3 * 16 + 2]
    port = FL_I[f * 37 + SPORT]
    n = P_I[port * 14 + SRC_N]
    for j in range(n):
        if SRC[port * SRCC + j] == f:
            for i in range(j, n - 1):
                SRC[port * SRCC + i] = SRC[port * SRCC + i + 1]
            P_I[port * 14 + SRC_N] = n - 1
            return


# -- a QP (nic.py QpFlow) ------------------------------------------------------------------------------------------
@njit(**JIT)
def _log_rate(S, f, now):
    G_I = _i1(S, 1)
    FL_F = _f2(S, 6)
    FL_I = _i2(S, 7)
    LR_F = _f2(S, 14)
    LR_I = _i1(S, 15)
    if FL_I[f * 37 + NRATE] + 1 > MAX_SERIES:
        G_I[BAIL] = B_SERIES
    FL_I[f * 37 + NRATE] += 1
    i = G_I[NLR]
    G_I[NLR] = i + 1
    LR_F[i * 2 + 0] = now
    LR_F[i * 2 + 1] = FL_F[f * 13 + RC]
    LR_I[i] = f


@njit(**JIT)
def _packet_out(S, f, now):
    """QpFlow.next_packet up to its byte counter: the packet row; G_I[INCR] set when an increase is due."""
    G_I = _i1(S, 1)
    FL_F = _f2(S, 6)
    FL_I = _i2(S, 7)
    SENT = _f1(S, 17)
    C_I = _i1(S, 20)
    psn = FL_I[f * 37 + SND_NXT]
    FL_I[f * 37 + SND_NXT] = psn + 1
    n = FL_I[f * 37 + N]
    mtu = FL_I[f * 37 + MTU]
    total = FL_I[f * 37 + SIZE]
    payload = min(mtu, total - psn * mtu) if total else 0
    if n == 1:
        op = OP_WRITE_ONLY
        reth = True
    elif psn == 0:
        op = OP_WRITE_FIRST
        reth = True
    else:
        op = OP_WRITE_LAST if psn == n - 1 else OP_WRITE_MIDDLE
        reth = False
    size = payload + ROCE_HEADER_BYTES + (RETH_BYTES if reth else 0)
    k = _alloc(S, DATA, f, 0, psn, size, ECN_ECT0, FL_I[f * 37 + PRIO], FL_I[f * 37 + DSCP], op)
    if psn < FL_I[f * 37 + MAX_SENT]:
        FL_I[f * 37 + RETX] += 1
    else:
        FL_I[f * 37 + MAX_SENT] = psn + 1
    SENT[FL_I[f * 37 + SENT_OFF] + psn] = now
    if FL_F[f * 13 + RC] < FL_F[f * 13 + LINE]:
        FL_F[f * 13 + NEXT_T] = now + size / FL_F[f * 13 + RC]
        if C_I[DC_ON]:
            FL_I[f * 37 + BYTES_CTR] += size
            if FL_I[f * 37 + BYTES_CTR] >= C_I[BYTE_COUNTER]:
                FL_I[f * 37 + BYTES_CTR] -= C_I[BYTE_COUNTER]
                FL_I[f * 37 + IB] += 1
                G_I[INCR] = 1
    else:
        FL_F[f * 13 + NEXT_T] = now
    return k


@njit(**JIT)
def _arm_rto(S, f, now):
    FL_F = _f2(S, 6)
    FL_I = _i2(S, 7)
    if not FL_I[f * 37 + RTO_ARMED]:
        FL_I[f * 37 + RTO_ARMED] = 1
        _push(S, now + FL_F[f * 13 + RTO_S], EV_RTO, f, 0, 0)


@njit(**JIT)
def _next_packet(S, f, now):
    G_I = _i1(S, 1)
    FL_F = _f2(S, 6)
    FL_I = _i2(S, 7)
    k = _packet_out(S, f, now)
    if G_I[INCR]:
        G_I[INCR] = 0
        _rate_increase(S, f, now)
        if FL_F[f * 13 + NEXT_T] > now:
            _kick1(S, FL_I[f * 37 + SPORT])
    _arm_rto(S, f, now)
    return k


@njit(**JIT)
def _next_packet1(S, f, now):
    G_I = _i1(S, 1)
    FL_F = _f2(S, 6)
    k = _packet_out(S, f, now)
    if G_I[INCR]:
        G_I[INCR] = 0
        _rate_increase(S, f, now)
        if FL_F[f * 13 + NEXT_T] > now:
            G_I[BAIL] = B_NESTED
    _arm_rto(S, f, now)
    return k


@njit(**JIT)
def _rate_increase(S, f, now):
    """dcqcn.increase, then the rate logged."""
    FL_F = _f2(S, 6)
    FL_I = _i2(S, 7)
    C_F = _f1(S, 19)
    C_I = _i1(S, 20)
    fr = C_I[FAST_REC]
    it = FL_I[f * 37 + IT]
    ib = FL_I[f * 37 + IB]
    line = FL_F[f * 13 + LINE]
    if max(it, ib) <= fr:
        pass
    elif min(it, ib) > fr:
        FL_F[f * 13 + RT] += (min(it, ib) - fr) * C_F[R_HAI]
    else:
        FL_F[f * 13 + RT] += C_F[R_AI]
    FL_F[f * 13 + RT] = min(FL_F[f * 13 + RT], line)
    FL_F[f * 13 + RC] = min(line, (FL_F[f * 13 + RT] + FL_F[f * 13 + RC]) / 2.0)
    _log_rate(S, f, now)


@njit(**JIT)
def _inc_timer(S, f, gen):
    G_F = _f1(S, 0)
    FL_F = _f2(S, 6)
    FL_I = _i2(S, 7)
    C_F = _f1(S, 19)
    if gen != FL_I[f * 37 + INC_GEN]:
        return
    FL_I[f * 37 + IT] += 1
    now = G_F[NOW]
    _rate_increase(S, f, now)
    if FL_F[f * 13 + NEXT_T] > now:
        _kick(S, FL_I[f * 37 + SPORT])
    if FL_F[f * 13 + RC] < FL_F[f * 13 + LINE]:
        _push(S, G_F[NOW] + C_F[INC_TIMER], EV_INC, f, gen, 0)


@njit(**JIT)
def _go_back(S, f, psn):
    FL_I = _i2(S, 7)
    FL_I[f * 37 + SND_NXT] = psn
    _kick(S, FL_I[f * 37 + SPORT])


@njit(**JIT)
def _rto(S, f):
    G_F = _f1(S, 0)
    G_I = _i1(S, 1)
    FL_F = _f2(S, 6)
    FL_I = _i2(S, 7)
    SENT = _f1(S, 17)
    now = G_F[NOW]
    if FL_I[f * 37 + ACKED] or FL_I[f * 37 + SND_UNA] >= FL_I[f * 37 + N]:
        FL_I[f * 37 + RTO_ARMED] = 0
        return
    if FL_I[f * 37 + SND_UNA] >= FL_I[f * 37 + SND_NXT]:
        FL_I[f * 37 + RTO_ARMED] = 0
        return
    due = SENT[FL_I[f * 37 + SENT_OFF] + FL_I[f * 37 + SND_UNA]] + FL_F[f * 13 + RTO_S]
    if now >= due - 1e-12:
        FL_I[f * 37 + TIMEOUTS] += 1
        FL_I[f * 37 + RTO_ARMED] = 0
        if FL_I[f * 37 + RETRIES] >= FL_I[f * 37 + RETRY_CNT]:
            G_I[BAIL] = B_RETRY
            return
        FL_I[f * 37 + RETRIES] += 1
        _go_back(S, f, FL_I[f * 37 + SND_UNA])
        return
    _push(S, due, EV_RTO, f, 0, 0)


@njit(**JIT)
def _host_send(S, k):
    """Host.send: an ACK, NAK or CNP onto the first link of the flow's reverse path."""
    PK = _i2(S, 9)
    PATH = _i2(S, 18)
    PATHC = S[1][3 * 18 + 2]
    f = PK[k * 13 + FLOW]
    PK[k * 13 + HOP] = 0
    _enqueue(S, PATH[(2 * f + PK[k * 13 + DIR]) * PATHC + 0], k, PK[k * 13 + PPRIO])


@njit(**JIT)
def _ack(S, f, now, kind):
    FL_F = _f2(S, 6)
    FL_I = _i2(S, 7)
    FL_I[f * 37 + LAST_ACK_PSN] = FL_I[f * 37 + EPSN]
    FL_F[f * 13 + LAST_ACK_T] = now
    k = _alloc(S, kind, f, 1, FL_I[f * 37 + EPSN], ACK_BYTES, 0, FL_I[f * 37 + PRIO], FL_I[f * 37 + DSCP], OP_ACK)
    _host_send(S, k)


@njit(**JIT)
def _rx_data(S, f, k):
    G_F = _f1(S, 0)
    FL_F = _f2(S, 6)
    FL_I = _i2(S, 7)
    PK = _i2(S, 9)
    C_F = _f1(S, 19)
    C_I = _i1(S, 20)
    now = G_F[NOW]
    if PK[k * 13 + ECN] == ECN_CE:
        FL_I[f * 37 + CE_RX] += 1
        if C_I[DC_ON] and now - FL_F[f * 13 + LAST_CNP] >= C_F[CNP_INT]:
            FL_F[f * 13 + LAST_CNP] = now
            FL_I[f * 37 + CNP_TX] += 1
            c = _alloc(S, CNP, f, 1, 0, CNP_BYTES, 0, C_I[CNP_Q], C_I[CNP_DSCP], OP_CNP)
            _host_send(S, c)
    psn = PK[k * 13 + PSN]
    if psn == FL_I[f * 37 + EPSN]:
        FL_I[f * 37 + EPSN] = psn + 1
        FL_I[f * 37 + NGOT] += 1
        FL_I[f * 37 + NAK_SENT] = 0
    elif psn > FL_I[f * 37 + EPSN]:
        FL_I[f * 37 + OOO] += 1
        if not FL_I[f * 37 + NAK_SENT]:
            FL_I[f * 37 + NAK_SENT] = 1
            _ack(S, f, now, NAK)
        return
    else:
        FL_I[f * 37 + DUP] += 1
        if psn % C_I[ACK_EVERY_CFG] == 0:
            _ack(S, f, now, ACK)
        return
    if (
        FL_I[f * 37 + EPSN] - FL_I[f * 37 + LAST_ACK_PSN] >= FL_I[f * 37 + ACK_EVERY]
        or FL_I[f * 37 + NGOT] == FL_I[f * 37 + N]
        or now - FL_F[f * 13 + LAST_ACK_T] >= FL_F[f * 13 + ACK_AFTER]
    ):
        _ack(S, f, now, ACK)
    if FL_I[f * 37 + NGOT] == FL_I[f * 37 + N] and not FL_I[f * 37 + DONE]:
        FL_I[f * 37 + DONE] = 1
        FL_F[f * 13 + DONE_T] = now


@njit(**JIT)
def _rx_ack(S, f, k):
    G_F = _f1(S, 0)
    G_I = _i1(S, 1)
    FL_F = _f2(S, 6)
    FL_I = _i2(S, 7)
    PK = _i2(S, 9)
    AO = _i1(S, 21)
    now = G_F[NOW]
    psn = PK[k * 13 + PSN]
    if psn > FL_I[f * 37 + SND_UNA]:
        FL_I[f * 37 + SND_UNA] = psn
        FL_I[f * 37 + RETRIES] = 0
    if PK[k * 13 + KIND] == NAK:
        FL_I[f * 37 + NAKS] += 1
        if psn < FL_I[f * 37 + SND_NXT]:
            _go_back(S, f, psn)
    if FL_I[f * 37 + SND_UNA] >= FL_I[f * 37 + N] and not FL_I[f * 37 + ACKED]:
        FL_I[f * 37 + ACKED] = 1
        FL_F[f * 13 + ACKED_T] = now
        FL_I[f * 37 + INC_GEN] += 1
        _src_remove(S, f)
        AO[G_I[NAO]] = f
        G_I[NAO] += 1


@njit(**JIT)
def _rx_cnp(S, f):
    G_F = _f1(S, 0)
    FL_F = _f2(S, 6)
    FL_I = _i2(S, 7)
    C_F = _f1(S, 19)
    C_I = _i1(S, 20)
    now = G_F[NOW]
    FL_I[f * 37 + CNP_RX] += 1
    if not C_I[DC_ON] or FL_I[f * 37 + ACKED] or now - FL_F[f * 13 + LAST_DEC] < C_F[RDI]:
        return
    FL_F[f * 13 + LAST_DEC] = now
    periods = int((now - FL_F[f * 13 + ALPHA_REF]) / C_F[AUI])
    if periods > 0:
        FL_F[f * 13 + ALPHA] = (1.0 - C_F[G]) ** float(periods) * FL_F[f * 13 + ALPHA]
    FL_F[f * 13 + ALPHA_REF] = now
    if C_I[CLAMP] or FL_I[f * 37 + IT] or FL_I[f * 37 + IB]:
        FL_F[f * 13 + RT] = FL_F[f * 13 + RC]
    FL_F[f * 13 + RC] = max(C_F[MIN_RATE], FL_F[f * 13 + RC] * (1.0 - FL_F[f * 13 + ALPHA] / 2.0))
    FL_F[f * 13 + ALPHA] = (1.0 - C_F[G]) * FL_F[f * 13 + ALPHA] + C_F[G]
    FL_I[f * 37 + IT] = 0
    FL_I[f * 37 + IB] = 0
    FL_I[f * 37 + BYTES_CTR] = 0
    _log_rate(S, f, now)
    if FL_I[f * 37 + DECLOG] < 3:
        FL_I[f * 37 + DECLOG] += 1
    FL_I[f * 37 + INC_GEN] += 1
    _push(S, now + C_F[INC_TIMER], EV_INC, f, FL_I[f * 37 + INC_GEN], 0)


# -- a switch (switch.py) ------------------------------------------------------------------------------------------
@njit(**JIT)
def _pfc_sent(S, port, prio, quanta, now):
    G_I = _i1(S, 1)
    Q_I = _i2(S, 5)
    LP_F = _f1(S, 26)
    LP_I = _i2(S, 27)
    pq = port * 8 + prio
    if quanta:
        if Q_I[pq * 15 + PSENT] == 0:
            Q_I[pq * 15 + PORD] = G_I[ORDER]
            G_I[ORDER] += 1
        Q_I[pq * 15 + PSENT] += 1
    else:
        if Q_I[pq * 15 + RSENT] == 0:
            Q_I[pq * 15 + RORD] = G_I[ORDER]
            G_I[ORDER] += 1
        Q_I[pq * 15 + RSENT] += 1
    if G_I[NPFCF] < MAX_PFC_FRAMES:
        G_I[NPFCF] += 1
        i = G_I[NLP]
        G_I[NLP] = i + 1
        LP_F[i] = now
        LP_I[i * 3 + 0] = port
        LP_I[i * 3 + 1] = prio
        LP_I[i * 3 + 2] = quanta


@njit(**JIT)
def _send_pfc(S, in_link, prio, quanta):
    G_F = _f1(S, 0)
    P_F = _f2(S, 2)
    P_I = _i2(S, 3)
    K_I = _i2(S, 8)
    key = in_link * 8 + prio
    back = P_I[in_link * 14 + REV]
    now = G_F[NOW]
    t = max(now, P_F[back * 7 + BUSY]) + PFC_FRAME_BYTES * P_F[back * 7 + SPB] + P_F[back * 7 + LAT]
    _push(S, t, EV_PFC, in_link, prio, quanta)
    _pfc_sent(S, back, prio, quanta, now)
    K_I[key * 5 + HASPUP] = 1
    if quanta:
        gen = abs(K_I[key * 5 + PUP]) + 1
        K_I[key * 5 + PUP] = gen
        half = P_F[in_link * 7 + PAUSE_S] / 2
        _push(S, now + half, EV_REFRESH, key, gen, 0)
    else:
        K_I[key * 5 + PUP] = 0


@njit(**JIT)
def _refresh(S, key, gen):
    K_I = _i2(S, 8)
    C_I = _i1(S, 20)
    if K_I[key * 5 + HASPUP] and K_I[key * 5 + PUP] == gen:
        _send_pfc(S, key >> 3, key & 7, C_I[QUANTA])


@njit(**JIT)
def _released(S, node, k):
    N_I = _i1(S, 23)
    K_I = _i2(S, 8)
    PK = _i2(S, 9)
    CQ_I = _i2(S, 24)
    size = PK[k * 13 + PSIZE]
    N_I[node] -= size
    key = PK[k * 13 + IKEY]
    if key >= 0:
        level = K_I[key * 5 + ING] - size
        K_I[key * 5 + ING] = level
        PK[k * 13 + IKEY] = -1
        if level < CQ_I[(key & 7) * 6 + XON] and K_I[key * 5 + HASPUP] and K_I[key * 5 + PUP]:
            _send_pfc(S, key >> 3, key & 7, 0)


@njit(**JIT)
def _uniform(S):
    G_I = _i1(S, 1)
    UNI = _f1(S, 28)
    u = UNI[G_I[UI]]
    G_I[UI] += 1
    return u


@njit(**JIT)
def _drop(S, port, k, reason):
    """Network.drop: counted by port, queue and reason (first-occurrence order kept); a data packet's QP counts it
    (RC resends it: a NAK or a timeout)."""
    G_I = _i1(S, 1)
    FL_I = _i2(S, 7)
    PK = _i2(S, 9)
    DROPS = _i2(S, 32)
    j = (port * 8 + PK[k * 13 + PPRIO]) * 5 + reason
    if DROPS[j * 2 + 0] == 0:
        DROPS[j * 2 + 1] = G_I[ORDER]
        G_I[ORDER] += 1
    DROPS[j * 2 + 0] += 1
    if PK[k * 13 + KIND] == DATA:
        FL_I[PK[k * 13 + FLOW] * 37 + NETDROPS] += 1
    _free(S, k)


@njit(**JIT)
def _switch_receive(S, node, k):
    G_F = _f1(S, 0)
    G_I = _i1(S, 1)
    P_F = _f2(S, 2)
    P_I = _i2(S, 3)
    Q_F = _f2(S, 4)
    Q_I = _i2(S, 5)
    K_I = _i2(S, 8)
    PK = _i2(S, 9)
    PATH = _i2(S, 18)
    PATHC = S[1][3 * 18 + 2]
    C_I = _i1(S, 20)
    N_I = _i1(S, 23)
    CQ_F = _f2(S, 29)
    CQ_I = _i2(S, 24)
    DSCPQ = _i1(S, 30)
    now = G_F[NOW]
    q = DSCPQ[PK[k * 13 + PDSCP]]
    PK[k * 13 + PPRIO] = q
    f = PK[k * 13 + FLOW]
    h = PK[k * 13 + HOP] + 1
    PK[k * 13 + HOP] = h
    port = PATH[(2 * f + PK[k * 13 + DIR]) * PATHC + h]
    size = PK[k * 13 + PSIZE]
    if N_I[node] + size > C_I[BUFFER]:
        _drop(S, port, k, D_BUFFER)
        return
    pq = port * 8 + q
    depth = Q_I[pq * 15 + DEPTH]
    if CQ_I[q * 6 + HASW]:
        if depth > CQ_F[q * 4 + WMIN] and PK[k * 13 + KIND] == DATA:
            u = _uniform(S) if depth <= CQ_F[q * 4 + WMAX] else 1.0
            # wred_decision
            if CQ_I[q * 6 + HASWDROP] and depth > CQ_F[q * 4 + WDROP]:
                _drop(S, port, k, D_WRED_THRESHOLD)
                return
            if depth > CQ_F[q * 4 + WMAX]:
                mark = True
            else:
                mark = u < CQ_F[q * 4 + PMAX] * (depth - CQ_F[q * 4 + WMIN]) / (CQ_F[q * 4 + WMAX] - CQ_F[q * 4 + WMIN])
            if mark:
                if not C_I[WRED_ECN]:
                    _drop(S, port, k, D_WRED)
                    return
                if PK[k * 13 + ECN] != ECN_NOT_ECT:
                    if PK[k * 13 + ECN] != ECN_CE:
                        PK[k * 13 + ECN] = ECN_CE
                        if Q_I[pq * 15 + ECNM] == 0:
                            Q_I[pq * 15 + ECNORD] = G_I[ORDER]
                            G_I[ORDER] += 1
                        Q_I[pq * 15 + ECNM] += 1
                elif not CQ_I[q * 6 + LOSSLESS]:
                    _drop(S, port, k, D_WRED)
                    return
        elif CQ_I[q * 6 + HASWDROP] and depth > CQ_F[q * 4 + WDROP]:
            _drop(S, port, k, D_WRED_THRESHOLD)
            return
    if CQ_I[q * 6 + LOSSLESS]:
        key = PK[k * 13 + INLINK] * 8 + q
        level = K_I[key * 5 + ING] + size
        xoff = CQ_I[q * 6 + XOFF]
        if level > xoff:
            if level > xoff + K_I[key * 5 + HR]:
                _drop(S, port, k, D_HEADROOM)
                return
            if not (K_I[key * 5 + HASPUP] and K_I[key * 5 + PUP]):
                K_I[key * 5 + ING] = level
                K_I[key * 5 + HASING] = 1
                PK[k * 13 + IKEY] = key
                N_I[node] += size
                _send_pfc(S, PK[k * 13 + INLINK], q, C_I[QUANTA])
                _enqueue(S, port, k, q)
                return
        if not P_I[port * 14 + BACKLOG] and P_F[port * 7 + BUSY] <= now and Q_F[pq * 5 + PU] <= now:
            _transmit(S, port, k, now)
            return
        K_I[key * 5 + ING] = level
        K_I[key * 5 + HASING] = 1
        PK[k * 13 + IKEY] = key
    elif depth + size > C_I[QLIMIT]:
        _drop(S, port, k, D_QLIMIT)
        return
    elif not P_I[port * 14 + BACKLOG] and P_F[port * 7 + BUSY] <= now and Q_F[pq * 5 + PU] <= now:
        _transmit(S, port, k, now)
        return
    N_I[node] += size
    _enqueue(S, port, k, q)


@njit(**JIT)
def _receive(S, k):
    P_I = _i2(S, 3)
    PK = _i2(S, 9)
    node = P_I[(PK[k * 13 + INLINK]) * 14 + DST]
    N_SW = _i1(S, 31)
    if N_SW[node]:
        _switch_receive(S, node, k)
        return
    f = PK[k * 13 + FLOW]
    kind = PK[k * 13 + KIND]
    if kind == DATA:
        _rx_data(S, f, k)
    elif kind == CNP:
        _rx_cnp(S, f)
    else:
        _rx_ack(S, f, k)
    _free(S, k)


@njit(**JIT)
def run_core(S):
    """Run events until the heap is empty (ST_DONE), a run the compiled core does not replay (ST_BAIL), it needs
    larger arrays (ST_GROW) or more uniforms (ST_UNI), or CHUNK_EVENTS have run (ST_CHUNK); then it can be called again
    where it stopped."""
    G_F = _f1(S, 0)
    G_I = _i1(S, 1)
    H_F = _f1(S, 10)
    H_I = _i2(S, 11)
    LS_F = _f2(S, 12)
    LR_F = _f2(S, 14)
    LP_F = _f1(S, 26)
    AO = _i1(S, 21)
    UNI = _f1(S, 28)
    cap = H_F.shape[0]
    budget = CHUNK_EVENTS
    while G_I[HN] > 0:
        if budget == 0:
            return ST_CHUNK
        budget -= 1
        if (
            G_I[HN] + MARGIN > cap
            or G_I[FREE] < MARGIN
            or G_I[NLS] + MARGIN > LS_F.shape[0] // 2
            or G_I[NLR] + MARGIN > LR_F.shape[0] // 2
            or G_I[NLP] + MARGIN > LP_F.shape[0]
            or G_I[NAO] + MARGIN > AO.shape[0]
        ):
            return ST_GROW
        if G_I[UI] >= UNI.shape[0]:
            return ST_UNI
        top = _pop(S)
        G_F[NOW] = H_F[top]
        ev = H_I[top * 5 + 1]
        a1 = H_I[top * 5 + 2]
        a2 = H_I[top * 5 + 3]
        a3 = H_I[top * 5 + 4]
        if ev == EV_RECV:
            _receive(S, a1)
        elif ev == EV_KICK:
            _kick(S, a1)
        elif ev == EV_RTO:
            _rto(S, a1)
        elif ev == EV_INC:
            _inc_timer(S, a1, a2)
        elif ev == EV_REFRESH:
            _refresh(S, a1, a2)
        else:
            _on_pfc(S, a1, a2, a3)
        G_I[EVENTS] += 1
        if G_I[BAIL]:
            return ST_BAIL
    return ST_DONE


# -- Python side: what the core covers, the arrays in, the results back ------------------------------------------------
def unsupported(net) -> str | None:
    """Why the compiled core cannot run `net` as it stands (None: it can). Checked before the run; the run itself may
    still stop on something it does not replay (`BAIL_REASONS`), and the Python engine then runs instead."""
    from .nic import Host, QpFlow
    from .switch import Switch

    if not AVAILABLE:
        return "numba is not installed"
    if pure_python():
        return "AIFABRIC_PURE_PYTHON is set"
    cfg = net.cfg
    c = cfg.switch
    if cfg.explain:
        return "--explain narrates the run"
    if cfg.trace_flows or cfg.trace_all or cfg.trace_pfc:
        return "packets are captured (pcap)"
    if cfg.lb.mode != "ecmp":
        return f"load balancing {cfg.lb.mode}"
    if cfg.nic.transport != "rc" or cfg.nic.write_only or cfg.nic.cm_setup:
        return "a transport other than RoCEv2 RC with Write First/Middle/Last (or CM setup)"
    if c.wred_weight or c.dynamic_threshold_alpha is not None:
        return "WRED's average or a dynamic threshold"
    if c.pfc_enabled and c.pfc_watchdog_s is None:
        return "PFC without a watchdog (a PFC deadlock would stop the run)"
    if net.routing_down or net.deadlock_open is not None or net.deadlocked or net.stalls:
        return "faults"
    if any(reason not in DROP_REASONS for _, _, reason in net.stats.drops):
        return "packets dropped before the run for a reason the core does not count"
    for d in net.devices:
        if isinstance(d, Switch):
            if d.fib is not None or not d.static_lb:
                return "forwarding overrides"
        elif not isinstance(d, Host):
            return "a device of another kind"
    for p in net.ports:
        if p.load_record is not None or p.dre is not None or p.narrator is not None:
            return "link-load bins or load estimates are recorded"
        if p.depth_watchers != ((p.sampler,) if p.sampler is not None else ()):
            return "a port has other depth watchers"
        if p.peer_receive != p.peer.receive:
            return "a link's delivery is replaced (faults)"
        if p.queue.backlog:
            return "packets are queued before the run"
        src = p.source
        if src is not None and src.lazy:
            return "a QP placing out of order"
    from .network import no_completion_callback

    for f in net.flows:
        if not isinstance(f, QpFlow):
            return "scale-up (NVLink) transfers"
        if f.on_done is not no_completion_callback or f.on_sent is not None:
            return "a transfer's completion starts other work"
        if f.paced or f.traced or f.conn is None or f.wr is None or not f.pkey_ok or f.cm_wait or f.error is not None:
            return "a PXN-relayed, traced, unposted or failing QP"
        if f.stalled_at is not None or f.access_failed or f.got is not None or not f.reliable:
            return "a QP outside RC go-back-N"
        for dr, path in ((0, f.path), (1, f.rpath)):
            lk = list(path.links)
            nodes = [net.node_index[net.fabric.links[li].src] for li in lk] + [path.dst]
            if len(set(nodes)) != len(nodes) or path.spray:
                return "a route visits a node twice"
            if not all(isinstance(net.devices[n], Switch) for n in nodes[1:-1]):
                return "a route crosses a host in the middle (PXN)"
            if any(path.next_at.get(n) != li for n, li in zip(nodes, lk)):
                return "a route's next hops differ from its links"
            if net.fabric.links[lk[0]].src != (f.src.id if dr == 0 else f.dst.id):
                return "a route does not start at its NIC"
        # the responder's R_Key check of the message's first packet (the same for every resend of it)
        from .sim import Pkt

        first = Pkt(DATA, f, 0, 0, 0, 0, 0, 0, OP_WRITE_ONLY if f.n == 1 else OP_WRITE_FIRST, f.path)
        if f._check_reth(first) is not None:
            return "a work request fails its R_Key check"
    for _t, _seq, fn, _arg in net.sim.heap:
        if _event_kind(net, fn) is None:
            return "events scheduled from Python (the task-graph engine's tasks, a story's timed starts or storm)"
    return None


def _event_kind(net, fn) -> int | None:
    from .nic import Host, QpFlow
    from .port import Port
    from .switch import Switch

    owner = getattr(fn, "__self__", None)
    func = getattr(fn, "__func__", None)
    if func is Switch.receive or func is Host.receive:
        return EV_RECV
    if isinstance(owner, Port) and func is Port.kick:
        return EV_KICK
    if isinstance(owner, QpFlow) and func is QpFlow._rto:
        return EV_RTO
    if isinstance(owner, QpFlow) and func is QpFlow._inc_timer:
        return EV_INC
    if isinstance(owner, Switch) and func is Switch._refresh:
        return EV_REFRESH
    if isinstance(owner, Port) and func is Port.on_pfc:
        return EV_PFC
    return None


def run(net) -> str | None:
    """Run `net` to the end on the compiled core; None when it did (the network's objects then hold what the Python
    engine would have left), or why it did not (the network untouched: run the Python engine)."""
    why = unsupported(net)
    if why is not None:
        return why
    rng_state = net.rng.bit_generator.state
    uniforms, ui0 = net._uniforms, net._ui
    st = _State(net)
    drawn = False  # a batch of uniforms drawn during the run (the generator's state before it: last_state)
    last_state = None
    while True:
        status = run_core(st.S)
        if status == ST_DONE:
            break
        if status == ST_BAIL:
            net.rng.bit_generator.state = rng_state
            net._uniforms, net._ui = uniforms, ui0
            return "the run " + BAIL_REASONS[int(st.G_I[BAIL])]
        if status == ST_CHUNK:  # a Ctrl-C raises here (the network untouched)
            continue
        if status == ST_UNI:  # Network.uniform's next batch, drawn as it draws it
            last_state = net.rng.bit_generator.state
            st.arrs[28][:] = net.rng.random(UNIFORM_BATCH)
            st.G_I[UI] = 0
            drawn = True
        else:
            st.grow()
    used = int(st.G_I[UI])
    if drawn and used == 0:  # the last batch was drawn before an event that needed none of it: as if never drawn
        net.rng.bit_generator.state = last_state
        net._uniforms, net._ui = [], 0
    elif drawn:
        net._uniforms, net._ui = st.arrs[28].tolist(), used
    else:
        net._uniforms, net._ui = uniforms, ui0 + used - st.uni_start
    if st.P_I[:, BACKLOG].any():
        net.rng.bit_generator.state = rng_state
        net._uniforms, net._ui = uniforms, ui0
        return "the run " + BAIL_REASONS[B_LEFT]
    st.write_back()
    return None


def _grouped(keys: np.ndarray, rows: np.ndarray):
    """(key, first column, second column) per key of a log, each in the log's order (Python floats)."""
    order = np.argsort(keys, kind="stable")
    keys, rows = keys[order], rows[order]
    firsts = rows[:, 0].tolist()
    seconds = rows[:, 1].tolist()
    starts = np.flatnonzero(np.diff(keys)) + 1
    bounds = [0, *starts.tolist(), keys.size]
    for a, b in zip(bounds[:-1], bounds[1:]):
        if b > a:
            yield int(keys[a]), firsts[a:b], seconds[a:b]


class _State:
    """The network's state as the core's arrays, and back."""

    def __init__(self, net):
        from .switch import Switch

        self.net = net
        cfg = net.cfg
        c = cfg.switch
        d = cfg.dcqcn
        nports = len(net.ports)
        flows = list(net.flows)
        self.flows = flows
        fidx = {id(f): i for i, f in enumerate(flows)}
        self.fidx = fidx
        nf = len(flows)
        G_F = np.zeros(1)
        G_I = np.zeros(13, dtype=np.int64)
        G_F[NOW] = net.sim.now
        P_F = np.zeros((nports, 7))
        P_I = np.zeros((nports, 14), dtype=np.int64)
        Q_F = np.zeros((nports * 8, 5))
        Q_I = np.zeros((nports * 8, 15), dtype=np.int64)
        Q_I[:, ECNORD] = -1
        K_I = np.zeros((nports * 8, 5), dtype=np.int64)
        width = max([len(p.source.active) for p in net.ports if p.source is not None] + [1])
        SRC = np.full((nports, width), -1, dtype=np.int64)
        quanta = c.pfc_quanta
        for p in net.ports:
            i = p.link
            P_F[i, SPB] = p.s_per_byte
            P_F[i, DELAY] = p.delay
            P_F[i, LAT] = p.latency_s
            P_F[i, BUSY] = p.busy_until
            P_F[i, WAKE] = p.wake_t
            P_F[i, PAUSE_S] = pfc_pause_s(quanta, p.rate_bytes_per_s) if quanta else 0.0
            P_I[i, DST] = p.peer.idx
            P_I[i, OWNER] = p.owner.idx
            P_I[i, ISSW] = p.is_switch_port
            P_I[i, TXB] = p.tx_bytes
            P_I[i, TXP] = p.tx_packets
            P_I[i, SRCTURN] = p.src_turn
            P_I[i, SRR] = p.scheduler.rr
            P_I[i, REV] = net.reverse[i]
            if p.source is not None:
                P_I[i, HASSRC] = 1
                P_I[i, SRC_N] = len(p.source.active)
                P_I[i, SRC_RR] = p.source.rr
                for j, f in enumerate(p.source.active):
                    SRC[i, j] = fidx[id(f)]
            if p.sampler is not None:
                P_I[i, SAMPLED] = 1
                P_F[i, SAMPLE_S] = p.sampler.sample_s
            for q in range(8):
                pq = i * 8 + q
                Q_F[pq, PU] = p.pfc.paused_until[q]
                start = p.pfc.pause_start[q]
                if start is not None:
                    Q_F[pq, PSTART] = start
                    Q_I[pq, PSTART_SET] = 1
                Q_F[pq, PTOT] = p.pfc.paused_total_s[q]
                Q_F[pq, IGN] = p.pfc.ignore_until[q]
                Q_I[pq, FRX] = p.pfc.frames_rx[q]
                Q_I[pq, DEF] = p.scheduler.deficit_bytes[q]
                if p.sampler is not None:
                    Q_I[pq, MAXD] = p.sampler.max_depth[q]
                    Q_F[pq, SAMPLE_T] = p.sampler.sample_t[q]
                    Q_I[pq, NSER] = len(p.sampler.series[q])
        s = net.stats
        order = 0
        for (name, q), v in s.ecn_marks.items():
            pq = self._port_by_name(name) * 8 + q
            Q_I[pq, ECNM] = v
            Q_I[pq, ECNORD] = order
            order += 1
        for d_, col, ocol in ((s.pfc_pause_sent, PSENT, PORD), (s.pfc_resume_sent, RSENT, RORD)):
            for (name, q), v in d_.items():
                pq = self._port_by_name(name) * 8 + q
                Q_I[pq, col] = v
                Q_I[pq, ocol] = order
                order += 1
        G_I[ORDER] = order
        G_I[NPFCF] = len(s.pfc_frames)
        DROPS = np.zeros((nports * 8 * len(DROP_REASONS), 2), dtype=np.int64)  # (count, first-occurrence order)
        for (name, q, reason), v in s.drops.items():
            j = (self._port_by_name(name) * 8 + q) * len(DROP_REASONS) + DROP_REASONS.index(reason)
            DROPS[j] = (v, order)
            order += 1
        G_I[ORDER] = order
        N_I = np.zeros(len(net.devices), dtype=np.int64)
        N_SW = np.zeros(len(net.devices), dtype=np.int64)
        for dev in net.devices:
            if isinstance(dev, Switch):
                N_SW[dev.idx] = 1
                N_I[dev.idx] = dev.buffer_used
                for key, v in dev.ingress.items():
                    K_I[key, ING] = v
                    K_I[key, HASING] = 1
                for key, v in dev.paused_up.items():
                    K_I[key, PUP] = v
                    K_I[key, HASPUP] = 1
        # headroom per ingress key of every switch port's far end
        for p in net.ports:
            if N_SW[p.peer.idx]:
                sw = p.peer
                for q in range(8):
                    if sw.lossless_q[q]:
                        K_I[p.link * 8 + q, HR] = sw._headroom(p.link, q)
        # flows
        FL_F = np.zeros((nf, 13))
        FL_I = np.zeros((nf, 37), dtype=np.int64)
        maxlen = max([len(f.path.links) for f in flows] + [len(f.rpath.links) for f in flows] + [1])
        PATH = np.zeros((2 * nf, maxlen), dtype=np.int64)
        SENT = np.zeros(max(sum(f.n for f in flows), 1))
        offs = 0
        for i, f in enumerate(flows):
            rp = f.rp
            FL_F[i] = (
                f.line_bytes_per_s,
                f.next_t,
                rp.rc_bytes_per_s,
                rp.rt_bytes_per_s,
                rp.alpha,
                f.last_dec,
                f.alpha_ref_t,
                f.last_ack_t,
                f.last_cnp_tx,
                f.done_t if f.done_t is not None else 0.0,
                f.acked_t if f.acked_t is not None else 0.0,
                f.rto_s,
                f.ack_after_s,
            )
            row = FL_I[i]
            row[N], row[SIZE], row[MTU] = f.n, f.size, f.mtu
            row[SND_NXT], row[SND_UNA], row[MAX_SENT] = f.snd_nxt, f.snd_una, f.max_sent
            row[RTO_ARMED], row[INC_GEN], row[BYTES_CTR] = f.rto_armed, f.inc_gen, f.bytes_ctr
            row[IT], row[IB] = rp.i_t, rp.i_b
            row[EPSN], row[NGOT], row[NAK_SENT], row[LAST_ACK_PSN] = f.epsn, f.n_got, f.nak_sent, f.last_ack_psn
            row[RETX], row[TIMEOUTS], row[NAKS], row[OOO], row[DUP] = f.retx, f.timeouts, f.naks, f.ooo, f.dup
            row[RETRIES], row[CNP_TX], row[CNP_RX], row[CE_RX] = f.retries, f.cnp_tx, f.cnp_rx, f.ce_rx
            row[SPORT] = f.path.links[0]
            row[PRIO], row[DSCP] = f.prio, f.dscp
            row[RETRY_CNT] = f.conn.retry_cnt
            row[ACK_EVERY] = f.ack_every
            row[DONE] = f.done_t is not None
            row[ACKED] = f.acked_t is not None
            row[SENT_OFF] = offs
            row[NRATE] = len(f.rate_log)
            row[FLEN], row[RLEN] = len(f.path.links), len(f.rpath.links)
            row[DECLOG] = f.decreases_logged
            row[NETDROPS] = f.network_drops
            SENT[offs : offs + f.n] = f.sent_t
            offs += f.n
            PATH[2 * i, : len(f.path.links)] = f.path.links
            PATH[2 * i + 1, : len(f.rpath.links)] = f.rpath.links
        self.FL_I0 = FL_I.copy()
        # packets: those in flight, then room
        heap = list(net.sim.heap)
        in_flight = [arg for _t, _s, fn, arg in heap if _event_kind(net, fn) == EV_RECV]
        npk = max(INITIAL_ROWS, 4 * len(in_flight) + 4 * MARGIN, ROWS_PER_PORT * nports)
        PK = np.zeros((npk, 13), dtype=np.int64)
        FREEL = np.arange(npk - 1, -1, -1, dtype=np.int64)
        G_I[FREE] = npk
        cap = max(INITIAL_ROWS, 2 * len(heap) + 4 * MARGIN, ROWS_PER_PORT * nports + 4 * nf)
        H_F = np.zeros(cap)
        H_I = np.zeros((cap, 5), dtype=np.int64)
        # configuration
        C_F = np.zeros(9)
        C_I = np.zeros(14, dtype=np.int64)
        from ..units import gbps_to_bytes_per_s

        C_F[RDI], C_F[AUI], C_F[INC_TIMER], C_F[G] = (
            d.rate_decrease_interval_s,
            d.alpha_update_interval_s,
            d.rate_increase_timer_s,
            d.g,
        )
        C_F[MIN_RATE] = gbps_to_bytes_per_s(d.min_rate_gbps)
        C_F[R_AI] = gbps_to_bytes_per_s(d.r_ai_gbps)
        C_F[R_HAI] = gbps_to_bytes_per_s(d.r_hai_gbps)
        C_F[CNP_INT] = d.cnp_interval_s
        C_F[WATCHDOG_S] = c.pfc_watchdog_s if c.pfc_watchdog_s is not None else 0.0
        C_I[DC_ON], C_I[BYTE_COUNTER], C_I[FAST_REC], C_I[CLAMP] = (
            d.enabled,
            d.byte_counter_bytes,
            d.fast_recovery_steps,
            d.clamp_target_rate,
        )
        C_I[BUFFER], C_I[QLIMIT], C_I[WRED_ECN], C_I[QUANTA] = (
            c.buffer_bytes,
            c.queue_limit_bytes,
            c.wred_ecn,
            c.pfc_quanta,
        )
        C_I[CNP_DSCP], C_I[CNP_Q] = net.cnp_dscp, net.cnp_queue
        C_I[HAS_WD] = c.pfc_watchdog_s is not None
        C_I[ACK_EVERY_CFG] = cfg.nic.ack_every_packets
        sw0 = next((dv for dv in net.devices if isinstance(dv, Switch)), None)
        CQ_F = np.zeros((8, 4))
        CQ_I = np.zeros((8, 6), dtype=np.int64)
        strict = sorted(c.strict_priority_queues, reverse=True)
        weighted = [q for q in range(8) if q not in c.strict_priority_queues]
        SCHED = np.array(strict + weighted + [0], dtype=np.int64)
        C_I[NSTRICT], C_I[NWEIGHTED] = len(strict), len(weighted)
        quantum = [w * cfg.nic.mtu_bytes // 10 for w in c.bandwidth_remaining_percent]
        for q in range(8):
            CQ_I[q, QUANTUM] = quantum[q]
            if sw0 is not None:
                w = sw0.wred_q[q]
                if w is not None:
                    CQ_I[q, HASW] = 1
                    CQ_F[q, WMIN], CQ_F[q, WMAX], CQ_F[q, PMAX] = w[0], w[1], w[2]
                    if w[3] is not None:
                        CQ_I[q, HASWDROP] = 1
                        CQ_F[q, WDROP] = w[3]
                CQ_I[q, LOSSLESS] = sw0.lossless_q[q]
                CQ_I[q, XON], CQ_I[q, XOFF] = sw0.xon_q[q], sw0.xoff_q[q]
        DSCPQ = np.array([cfg.queue_of(x) for x in range(64)], dtype=np.int64)
        ls, lr, lp = LOG_ROWS
        LS_F = np.zeros((ls, 2))
        LS_I = np.zeros(ls, dtype=np.int64)
        LR_F = np.zeros((lr, 2))
        LR_I = np.zeros(lr, dtype=np.int64)
        LP_F = np.zeros(lp)
        LP_I = np.zeros((lp, 3), dtype=np.int64)
        AO = np.zeros(max(nf, 1) + 2 * MARGIN, dtype=np.int64)
        # the uniforms left of the network's batch, at the end of a batch-sized table refilled in place
        rest = net._uniforms[net._ui :]
        UNI = np.zeros(max(UNIFORM_BATCH, len(rest)))
        self.uni_start = UNI.size - len(rest)
        UNI[self.uni_start :] = rest
        G_I[UI] = self.uni_start
        self._pack(
            [
                G_F,
                G_I,
                P_F,
                P_I,
                Q_F,
                Q_I,
                FL_F,
                FL_I,
                K_I,
                PK,
                H_F,
                H_I,
                LS_F,
                LS_I,
                LR_F,
                LR_I,
                SRC,
                SENT,
                PATH,
                C_F,
                C_I,
                AO,
                FREEL,
                N_I,
                CQ_I,
                SCHED,
                LP_F,
                LP_I,
                UNI,
                CQ_F,
                DSCPQ,
                N_SW,
                DROPS,
            ]
        )
        # the events already scheduled (the transfers' first packets, their timers), in (time, sequence) order
        from .nic import QpFlow

        G_I = self.arrs[1]
        seq_next = int(repr(net.sim._seq.__self__)[6:-1])
        for t, seq, fn, arg in sorted(heap, key=lambda e: (e[0], e[1])):
            kind = _event_kind(net, fn)
            owner = getattr(fn, "__self__", None)
            a1 = a2 = a3 = 0
            if kind == EV_RECV:
                a1 = self._import_pkt(arg)
            elif kind == EV_KICK:
                a1 = owner.link
            elif kind == EV_RTO:
                a1 = fidx[id(owner)]
            elif kind == EV_INC:
                a1, a2 = fidx[id(owner)], int(arg)
            elif kind == EV_REFRESH:
                a1, a2 = int(arg[0]), int(arg[1])
            else:
                a1, a2, a3 = owner.link, int(arg[0]), int(arg[1])
            G_I[SEQ] = seq
            _push(self.S, float(t), kind, a1, a2, a3)
        G_I[SEQ] = seq_next
        assert all(isinstance(f, QpFlow) for f in flows)

    def _pack(self, arrs: list) -> None:
        """The tables into two flat arrays (self.S, what the core takes) and `self.arrs`, views of them by table."""
        nf = sum(a.size for a in arrs if a.dtype == np.float64)
        head = 3 * len(arrs)
        ni = head + sum(a.size for a in arrs if a.dtype == np.int64)
        F = np.zeros(max(nf, 1))
        I = np.zeros(ni, dtype=np.int64)
        fo, io = 0, head
        views = []
        for n, a in enumerate(arrs):
            rows = a.shape[0]
            cols = a.shape[1] if a.ndim == 2 else 1
            if a.dtype == np.float64:
                buf, o = F, fo
                fo += a.size
            else:
                assert a.dtype == np.int64
                buf, o = I, io
                io += a.size
            I[3 * n], I[3 * n + 1], I[3 * n + 2] = o, rows, cols
            v = buf[o : o + a.size].reshape(a.shape)
            v[...] = a
            views.append(v)
        self.S = (F, I)
        self.arrs = views

    def _port_by_name(self, name: str) -> int:
        for p in self.net.ports:
            if p.name == name:
                return p.link
        raise KeyError(name)

    def _import_pkt(self, pkt) -> int:
        G_I, PK, FREEL = self.arrs[1], self.arrs[9], self.arrs[22]
        f = self.fidx[id(pkt.flow)]
        dr = 0 if pkt.path is pkt.flow.path else 1
        G_I[FREE] -= 1
        k = int(FREEL[G_I[FREE]])
        links = list(pkt.path.links)
        PK[k] = (
            pkt.kind,
            f,
            dr,
            links.index(pkt.in_link),
            pkt.psn,
            pkt.size,
            pkt.ecn,
            pkt.prio,
            pkt.dscp,
            pkt.opcode,
            pkt.in_link,
            pkt.ikey,
            -1,
        )
        assert pkt.kind in (DATA, ACK, NAK, CNP)
        return k

    @property
    def G_I(self):
        return self.arrs[1]

    @property
    def P_I(self):
        return self.arrs[3]

    def set_uniforms(self, uni: np.ndarray) -> None:
        s = list(self.arrs)
        s[28] = uni
        self._pack(s)

    def grow(self) -> None:
        """Double whatever is near full (the heap, the packet rows, the logs)."""
        s = list(self.arrs)
        G_I = s[1]

        def bigger(a):
            out = np.zeros((2 * a.shape[0], *a.shape[1:]), dtype=a.dtype)
            out[: a.shape[0]] = a
            return out

        if G_I[HN] + MARGIN > s[10].shape[0]:
            s[10], s[11] = bigger(s[10]), bigger(s[11])
        if G_I[FREE] < MARGIN:
            n = s[9].shape[0]
            s[9] = bigger(s[9])
            freel = np.zeros(2 * n, dtype=np.int64)
            free = int(G_I[FREE])
            freel[:free] = s[22][:free]
            freel[free : free + n] = np.arange(2 * n - 1, n - 1, -1)
            G_I[FREE] = free + n
            s[22] = freel
        for i, j, used in ((12, 13, NLS), (14, 15, NLR), (26, 27, NLP)):
            if G_I[used] + MARGIN > s[j].shape[0]:
                s[i], s[j] = bigger(s[i]), bigger(s[j])
        self._pack(s)

    def write_back(self) -> None:
        """The arrays' end state into the network's objects, as the Python engine would have left them."""
        from ..units import bytes_per_s_to_gbps
        from .verbs import WcStatus

        net = self.net
        S = self.arrs
        G_F, G_I, P_F, P_I, Q_F, Q_I, FL_F, FL_I, K_I = S[:9]
        SENT, LS_F, LS_I, LR_F, LR_I, LP_F, LP_I, AO, N_I = (
            S[17],
            S[12],
            S[13],
            S[14],
            S[15],
            S[26],
            S[27],
            S[21],
            S[23],
        )
        sim = net.sim
        sim.now = float(G_F[NOW])
        sim.events += int(G_I[EVENTS])
        sim.heap.clear()
        sim._seq = count(int(G_I[SEQ])).__next__
        ports = net.ports
        for p in ports:
            i = p.link
            p.busy_until = float(P_F[i, BUSY])
            p.wake_t = float(P_F[i, WAKE])
            p.tx_bytes = int(P_I[i, TXB])
            p.tx_packets = int(P_I[i, TXP])
            p.src_turn = bool(P_I[i, SRCTURN])
            p.scheduler.rr = int(P_I[i, SRR])
            if p.source is not None:
                p.source.rr = int(P_I[i, SRC_RR])
            pfc = p.pfc
            for q in range(8):
                pq = i * 8 + q
                pfc.paused_until[q] = float(Q_F[pq, PU])
                pfc.pause_start[q] = float(Q_F[pq, PSTART]) if Q_I[pq, PSTART_SET] else None
                pfc.paused_total_s[q] = float(Q_F[pq, PTOT])
                pfc.ignore_until[q] = float(Q_F[pq, IGN])
                pfc.frames_rx[q] = int(Q_I[pq, FRX])
                p.scheduler.deficit_bytes[q] = int(Q_I[pq, DEF])
                if p.sampler is not None:
                    p.sampler.max_depth[q] = int(Q_I[pq, MAXD])
                    p.sampler.sample_t[q] = float(Q_F[pq, SAMPLE_T])
        for pq, ts, depths in _grouped(LS_I[: int(G_I[NLS])], LS_F[: int(G_I[NLS])]):
            ports[pq >> 3].sampler.series[pq & 7].extend(zip(ts, (int(x) for x in depths)))
        for dev in net.devices:
            if dev.kind == "switch":
                dev.buffer_used = int(N_I[dev.idx])
        for key in np.nonzero(K_I[:, HASING])[0]:
            net.devices[P_I[key >> 3, DST]].ingress[int(key)] = int(K_I[key, ING])
        for key in np.nonzero(K_I[:, HASPUP])[0]:
            net.devices[P_I[key >> 3, DST]].paused_up[int(key)] = int(K_I[key, PUP])
        # statistics dicts, in first-occurrence order
        s = net.stats
        entries: list[tuple[int, dict, tuple, int]] = []
        for pq in np.nonzero(Q_I[:, ECNM])[0]:
            entries.append((int(Q_I[pq, ECNORD]), s.ecn_marks, (ports[pq >> 3].name, int(pq & 7)), int(Q_I[pq, ECNM])))
        for pq in np.nonzero(Q_I[:, PSENT])[0]:
            entries.append(
                (int(Q_I[pq, PORD]), s.pfc_pause_sent, (ports[pq >> 3].name, int(pq & 7)), int(Q_I[pq, PSENT]))
            )
        for pq in np.nonzero(Q_I[:, RSENT])[0]:
            entries.append(
                (int(Q_I[pq, RORD]), s.pfc_resume_sent, (ports[pq >> 3].name, int(pq & 7)), int(Q_I[pq, RSENT]))
            )
        DROPS = S[32]
        nr = len(DROP_REASONS)
        for row in np.nonzero(DROPS[:, 0])[0].tolist():
            at, r = divmod(row, nr)
            entries.append(
                (int(DROPS[row, 1]), s.drops, (ports[at >> 3].name, at & 7, DROP_REASONS[r]), int(DROPS[row, 0]))
            )
        for _o, d, name_q, v in sorted(entries, key=lambda e: e[0]):
            d[name_q] = v
        for frame in range(int(G_I[NLP])):
            s.pfc_frames.append(
                (float(LP_F[frame]), ports[LP_I[frame, 0]].name, int(LP_I[frame, 1]), int(LP_I[frame, 2]))
            )
        # flows
        rate_logs = {
            f: list(zip(ts, (bytes_per_s_to_gbps(x) for x in rates)))
            for f, ts, rates in _grouped(LR_I[: int(G_I[NLR])], LR_F[: int(G_I[NLR])])
        }
        for i, f in enumerate(self.flows):
            ff, fi = FL_F[i], FL_I[i]
            rp = f.rp
            f.next_t = float(ff[NEXT_T])
            rp.rc_bytes_per_s, rp.rt_bytes_per_s, rp.alpha = float(ff[RC]), float(ff[RT]), float(ff[ALPHA])
            rp.i_t, rp.i_b = int(fi[IT]), int(fi[IB])
            f.last_dec, f.alpha_ref_t = float(ff[LAST_DEC]), float(ff[ALPHA_REF])
            f.last_ack_t, f.last_cnp_tx = float(ff[LAST_ACK_T]), float(ff[LAST_CNP])
            if fi[DONE] and f.done_t is None:
                f.done_t = float(ff[DONE_T])
            f.snd_nxt, f.snd_una, f.max_sent = int(fi[SND_NXT]), int(fi[SND_UNA]), int(fi[MAX_SENT])
            f.rto_armed, f.inc_gen, f.bytes_ctr = bool(fi[RTO_ARMED]), int(fi[INC_GEN]), int(fi[BYTES_CTR])
            f.epsn, f.n_got, f.nak_sent, f.last_ack_psn = (
                int(fi[EPSN]),
                int(fi[NGOT]),
                bool(fi[NAK_SENT]),
                int(fi[LAST_ACK_PSN]),
            )
            f.retx, f.timeouts, f.naks, f.ooo, f.dup = (int(fi[x]) for x in (RETX, TIMEOUTS, NAKS, OOO, DUP))
            f.retries, f.cnp_tx, f.cnp_rx, f.ce_rx = (int(fi[x]) for x in (RETRIES, CNP_TX, CNP_RX, CE_RX))
            f.decreases_logged = int(fi[DECLOG])
            f.network_drops = int(fi[NETDROPS])
            off = int(fi[SENT_OFF])
            f.sent_t = [float(x) for x in SENT[off : off + f.n]]
            f.rate_log.extend(rate_logs.get(i, ()))
        for fi_acked in AO[: int(G_I[NAO])].tolist():
            f = self.flows[fi_acked]
            f.acked_t = float(FL_F[fi_acked, ACKED_T])
            f.src.sources[f.path.next_at[f.src.idx]].remove(f)
            if f.conn is not None and f.wr is not None:
                f.conn.req.complete(f.wr, WcStatus.SUCCESS, f.acked_t)
