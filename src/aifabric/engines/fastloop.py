"""The event loop of engines/executor.py, compiled with numba: the same loop, the same arithmetic, on arrays.

executor.run_reference is the definition; read it first. This module runs the identical loop (compute tasks
for their duration, transfers as fluid flows re-rated at every event time where flows started or finished, a
transfer done one route latency after its last byte, a task started when its dependencies are done) with its
state in flat arrays: a binary heap of (time, task) completions, the active flows, per link the list of the
flows crossing it, and the water-filling of engines/maxmin.py written as loops. Every sum is taken in the
reference's order, so times, link bytes, peaks and link load come out bit for bit the same (the tests hold it
to that on random graphs).

Three things make it fast besides compilation:

- Incremental max-min. The max-min allocation decomposes over the connected components of the flow-link
  graph, and the components are small (8,192 GPUs: ~2,300 of them, the flows that start or finish at an event
  touch ~18 (flow, link) pairs of ~9,700). A recomputation water-fills only the components of the links that
  flows joined or left; the others keep their rates, which the full computation would reproduce exactly, with
  one exception: the reference freezes every link whose share is within 1e-12 of the round's level, so two
  components whose levels differ by less than that are coupled. Whenever a new level comes that close to a
  rate elsewhere, the recomputation falls back to the whole water-filling (and stays there until no two rates
  are that close), so the result is always the reference's.
- The analytic engine's bottleneck rates depend on the flow's own route only: new flows get theirs, and the
  loads of the links they touch are re-summed.
- Link load. `LinkLoad` (engines/linkload.py) is rebuilt here as the reference would leave it after its
  `set_sparse` calls and final `close`: the exact segments, or, past `max_entries`, its time grid with each
  bin's arrays, consolidations (every 16 arrays, and when time leaves a bin) and doublings of the bin width
  replayed in the same order, so the values are bitwise the same and later calls (`add_spread`) behave the
  same. Fed through `set_sparse` from Python instead, it cost 79 of the 124 s of an 8,192-GPU run.

numba code does not see Ctrl-C: the loop runs in chunks of about `CHUNK_S` seconds of work and returns to
Python, which reports progress and, if Ctrl-C came during the chunk, raises `Interrupted` with the timeline so far.

numba is optional: without it (or with AIFABRIC_PURE_PYTHON=1, or for small graphs) executor.run keeps its
own loop.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from contextlib import contextmanager

import numpy as np

from .csr import csr, turned_round
from .flowlet import Flowlets, choose_path, flowlet_stats, write_routes
from .progress import reporter

try:  # optional: the loop in executor.py is the fallback
    from numba import njit

    AVAILABLE = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    AVAILABLE = False

    def njit(*args, **kwargs):  # type: ignore[no-redef]
        return (lambda f: f) if not args or not callable(args[0]) else args[0]


MAX_MIN, BOTTLENECK = 0, 1
SHARING_MODE = {"flow": MAX_MIN, "analytic": BOTTLENECK}
CHUNK_S = 0.2  # wall seconds of compiled work between returns to Python (progress, Ctrl-C)
FIRST_CHUNK = 1_000  # turns of the loop in the first chunk; later chunks are sized to take CHUNK_S
INCREMENTAL = True  # water-fill only the components that changed (False: every flow, as the reference)
FINISH_RTOL = 1e-9  # executor.FINISH_RTOL (tests check they agree)
SATURATION_RTOL = 1e-12  # maxmin.max_min_pairs: links within this of the lowest share saturate together
COUPLING_RTOL = 1e-10  # rates this close (and not equal) may couple components: recompute everything
BIN_ARRAYS = 16  # linkload: a bin's arrays are merged when they reach this many

# integer state of the loop
(
    _HEAP_N,
    _N_ACT,
    _N_STARTED,
    _DIRTY,
    _COMPLETED,
    _RECOMPUTATIONS,
    _N_USED,
    _N_ADDED,
    _N_REMOVED,
    _N_TOUCHED,
    _TAINTED,
    _ROUNDS,
    _FULL,
    _PARTIAL,
    _COMPONENT_FLOWS,
    _FALLBACKS,
    _FLOWLETS,
    _SWITCHES,
) = range(18)
_N_ISTATE = 18
# the link-load recorder's state
_RF_T_LAST, _RF_BIN_S, _RF_OPEN_T = range(3)
(
    _RI_OPEN_N,
    _RI_ENTRIES,
    _RI_N_SEG,
    _RI_SEG_USED,
    _RI_POOL_USED,
    _RI_MAX_ENTRIES,
    _RI_MAX_BINS,
    _RI_POOL_LIVE,
    _RI_DLO,
    _RI_DHI,
    _RI_SP_USED,
) = range(11)


# -- the heap of (time, task) completions: popped in the order of heapq on tuples -----------------------
@njit(cache=True, inline="always")
def _less(ta, ka, tb, kb):
    return ta < tb or (ta == tb and ka < kb)


@njit(cache=True)
def _push(heap_t, heap_k, n, t, k):
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        if _less(t, k, heap_t[parent], heap_k[parent]):
            heap_t[i] = heap_t[parent]
            heap_k[i] = heap_k[parent]
            i = parent
        else:
            break
    heap_t[i] = t
    heap_k[i] = k
    return n + 1


@njit(cache=True)
def _pop(heap_t, heap_k, n):
    """Remove the smallest entry (the caller has read it at index 0); returns the new size."""
    n -= 1
    if n == 0:
        return 0
    t = heap_t[n]
    k = heap_k[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _less(heap_t[c + 1], heap_k[c + 1], heap_t[c], heap_k[c]):
            c += 1
        if _less(heap_t[c], heap_k[c], t, k):
            heap_t[i] = heap_t[c]
            heap_k[i] = heap_k[c]
            i = c
        else:
            break
    heap_t[i] = t
    heap_k[i] = k
    return n


@njit(cache=True)
def _begin(task, now, kind, duration, size, latency, start, heap_t, heap_k, istate, started):
    start[task] = now
    if kind[task] == 0:  # COMPUTE
        istate[_HEAP_N] = _push(heap_t, heap_k, istate[_HEAP_N], now + duration[task], task)
    elif size[task] <= 0:
        istate[_HEAP_N] = _push(heap_t, heap_k, istate[_HEAP_N], now + latency[task], task)
    else:
        started[istate[_N_STARTED]] = task
        istate[_N_STARTED] += 1


_choose_path = njit(cache=True)(choose_path)  # engines/flowlet.py's, the reference loop's own


# -- max-min water-filling -------------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _water_fill(pf, pl, pw, m, n_links, n_flows, residual, rates, levels, comp):
    """maxmin.max_min_pairs on compacted pairs: pair k puts pw[k] of flow pf[k]'s rate on link pl[k] (0..n_links).
    `residual` holds the links' capacities, `rates` (inf) receives the rates, `levels` each round's level;
    pf, pl, pw and residual are consumed. `comp` labels each link's connected component (0..n_links).
    Returns (rounds, coupled): coupled when a link was frozen at a level that no link of its own component
    reached exactly (it was within SATURATION_RTOL of another component's): then components cannot be
    water-filled separately."""
    counts = np.empty(n_links)
    share = np.empty(n_links)
    gone = np.empty(n_links)
    at_level = np.zeros(n_links, np.int64)  # component -> last round in which one of its links set the level
    frozen = np.zeros(n_flows, np.bool_)
    rounds = 0
    coupled = False
    while m > 0:
        for li in range(n_links):
            counts[li] = 0.0
            gone[li] = 0.0
        for k in range(m):  # np.bincount(pl, weights=pw): summed in pair order
            counts[pl[k]] += pw[k]
        level = np.inf
        for li in range(n_links):
            c = counts[li]
            s = residual[li] / c if c > 0 else np.inf
            share[li] = s
            if s < level:
                level = s
        levels[rounds] = level
        rounds += 1
        threshold = level * (1 + SATURATION_RTOL)
        for li in range(n_links):
            if share[li] == level:
                at_level[comp[li]] = rounds
        for li in range(n_links):
            if level < share[li] <= threshold and at_level[comp[li]] != rounds:
                coupled = True
        for k in range(m):  # every flow crossing a saturated link freezes at the level
            if share[pl[k]] <= threshold:
                f = pf[k]
                if not frozen[f]:
                    frozen[f] = True
                    rates[f] = level
        j = 0
        for k in range(m):  # the frozen flows' pairs leave; what they take leaves the links
            if frozen[pf[k]]:
                gone[pl[k]] += pw[k]
            else:
                pf[j] = pf[k]
                pl[j] = pl[k]
                pw[j] = pw[k]
                j += 1
        for li in range(n_links):
            r = residual[li] - gone[li] * level
            residual[li] = 0.0 if r < 0.0 else r
        m = j
    return rounds, coupled


@njit(cache=True)
def _components(pf, pl, m, n_links):
    """Connected components of the links (through the flows crossing them): a label per link."""
    parent = np.arange(n_links)
    first = np.full(pf[m - 1] + 1 if m else 1, -1, np.int64)  # a link of each flow
    for k in range(m):
        x = pl[k]
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        f = first[pf[k]]
        if f < 0:
            first[pf[k]] = x
            continue
        while parent[f] != f:
            f = parent[f]
        if f != x:
            parent[x] = f
    for li in range(n_links):
        x = li
        while parent[x] != x:
            x = parent[x]
        parent[li] = x
    return parent


# the links active flows cross, as a bitmap read in link order (the reference's np.unique, without sorting)
_DEBRUIJN_MUL = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN = np.zeros(64, dtype=np.int64)
for _i in range(64):
    _DEBRUIJN[((1 << _i) * 0x03F79D71B4CB0A89 % (1 << 64)) >> 58] = _i
_ONE = np.uint64(1)
_SHIFT = np.uint64(58)


@njit(cache=True, inline="always")
def _lowest_bit(w):
    """(index of the lowest set bit of w, w without it)"""
    low = w & (~w + _ONE)
    return _DEBRUIJN[(low * _DEBRUIJN_MUL) >> _SHIFT], w ^ low


@njit(cache=True)
def _update_used(bits, istate, added, removed, linkcnt, gload):
    """The used-links bitmap as of now: links that flows left (and no flow took again) leave it, with their load;
    links flows took join it."""
    n_used = istate[_N_USED]
    for i in range(istate[_N_REMOVED]):
        li = removed[i]
        if linkcnt[li] == 0:
            m = _ONE << np.uint64(li & 63)
            if bits[li >> 6] & m:
                bits[li >> 6] ^= m
                gload[li] = 0.0
                n_used -= 1
    for i in range(istate[_N_ADDED]):
        li = added[i]
        if linkcnt[li] > 0:
            m = _ONE << np.uint64(li & 63)
            if not bits[li >> 6] & m:
                bits[li >> 6] |= m
                n_used += 1
    istate[_N_ADDED] = 0
    istate[_N_REMOVED] = 0
    istate[_N_USED] = n_used
    return n_used


@njit(cache=True)
def _used_list(bits, used, cidx):
    """The used links in order (and each one's position), for the full water-filling."""
    n = 0
    for wi in range(len(bits)):
        w = bits[wi]
        while w:
            b, w = _lowest_bit(w)
            li = wi * 64 + b
            used[n] = li
            cidx[li] = n
            n += 1
    return n


@njit(cache=True, error_model="numpy")
def _full_max_min(
    n_act,
    act_task,
    act_rate,
    route_ptr,
    route_flat,
    weight_flat,
    capacity,
    bits,
    used,
    cidx,
    gload,
    link_peak,
    istate,
    check,
):
    """Every active flow's max-min rate (the reference's computation) and every used link's load."""
    n_used = _used_list(bits, used, cidx)
    m = 0
    for i in range(n_act):
        t = act_task[i]
        m += route_ptr[t + 1] - route_ptr[t]
    pf = np.empty(m, np.int64)
    pl = np.empty(m, np.int64)
    pw = np.empty(m)
    k = 0
    for i in range(n_act):
        t = act_task[i]
        for j in range(route_ptr[t], route_ptr[t + 1]):
            pf[k] = i
            pl[k] = cidx[route_flat[j]]
            pw[k] = weight_flat[j]
            k += 1
    for i in range(n_act):
        act_rate[i] = np.inf
    residual = np.empty(n_used)
    for li in range(n_used):
        residual[li] = capacity[used[li]]
    levels = np.empty(n_act + 1)
    comp = _components(pf, pl, m, n_used)
    rounds, coupled = _water_fill(pf.copy(), pl.copy(), pw.copy(), m, n_used, n_act, residual, act_rate, levels, comp)
    istate[_ROUNDS] += rounds
    load = np.zeros(n_used)
    for k in range(m):
        load[pl[k]] += act_rate[pf[k]] * pw[k]
    for li in range(n_used):
        g = used[li]
        gload[g] = load[li]
        if load[li] > link_peak[g]:
            link_peak[g] = load[li]
    istate[_TAINTED] = 1 if check and coupled else 0  # rates taken from another component: no partial next
    istate[_FULL] += 1


@njit(cache=True, error_model="numpy")
def _partial_max_min(
    n_act,
    act_task,
    act_rate,
    pos_of,
    route_ptr,
    route_flat,
    weight_flat,
    route_owner,
    capacity,
    touched,
    n_touched,
    linkcnt,
    head,
    nxt,
    visited,
    lidx,
    in_comp,
    comp_links,
    comp_label,
    comp_pos,
    gload,
    link_peak,
    istate,
):
    """Water-fill the components of the touched links only. Returns False (having changed nothing) when they
    may be coupled to others, or to each other, by the saturation tolerance (a new level within COUPLING_RTOL of
    a rate elsewhere, or a link frozen at another component's level): then only the full computation is exact."""
    ncl = 0
    ncf = 0
    q = 0
    n_comp = 0
    for x in range(n_touched):  # each touched link's component, breadth-first: links -> flows -> their links
        li = touched[x]
        if linkcnt[li] == 0 or visited[li]:
            continue
        visited[li] = True
        lidx[li] = ncl
        comp_links[ncl] = li
        comp_label[ncl] = n_comp
        ncl += 1
        while q < ncl:
            p = head[comp_links[q]]
            q += 1
            while p >= 0:
                t = route_owner[p]
                if not in_comp[t]:
                    in_comp[t] = True
                    comp_pos[ncf] = pos_of[t]
                    ncf += 1
                    for j in range(route_ptr[t], route_ptr[t + 1]):
                        l2 = route_flat[j]
                        if not visited[l2]:
                            visited[l2] = True
                            lidx[l2] = ncl
                            comp_links[ncl] = l2
                            comp_label[ncl] = n_comp
                            ncl += 1
                p = nxt[p]
        n_comp += 1
    pos = np.sort(comp_pos[:ncf])  # the reference's pair order: flows as they stand in the active list
    m = 0
    for x in range(ncf):
        t = act_task[pos[x]]
        m += route_ptr[t + 1] - route_ptr[t]
    pf = np.empty(m, np.int64)
    pl = np.empty(m, np.int64)
    pw = np.empty(m)
    k = 0
    for x in range(ncf):
        t = act_task[pos[x]]
        for j in range(route_ptr[t], route_ptr[t + 1]):
            pf[k] = x
            pl[k] = lidx[route_flat[j]]
            pw[k] = weight_flat[j]
            k += 1
    residual = np.empty(ncl)
    for y in range(ncl):
        residual[y] = capacity[comp_links[y]]
    rates = np.full(ncf, np.inf)
    levels = np.empty(ncf + 1)
    rounds, coupled = _water_fill(pf.copy(), pl.copy(), pw.copy(), m, ncl, ncf, residual, rates, levels, comp_label)
    istate[_ROUNDS] += rounds
    if rounds > 0 and not coupled:
        for i in range(n_act):
            if in_comp[act_task[i]]:
                continue
            r = act_rate[i]
            for z in range(rounds):
                lv = levels[z]
                if r != lv and (r <= lv * (1 + COUPLING_RTOL) if r > lv else lv <= r * (1 + COUPLING_RTOL)):
                    coupled = True
                    break
            if coupled:
                break
    if not coupled:
        for x in range(ncf):
            act_rate[pos[x]] = rates[x]
        for y in range(ncl):
            gload[comp_links[y]] = 0.0
        for k in range(m):
            gload[comp_links[pl[k]]] += rates[pf[k]] * pw[k]
        for y in range(ncl):
            g = comp_links[y]
            if gload[g] > link_peak[g]:
                link_peak[g] = gload[g]
        istate[_PARTIAL] += 1
        istate[_COMPONENT_FLOWS] += ncf
    for y in range(ncl):
        visited[comp_links[y]] = False
    for x in range(ncf):
        in_comp[act_task[pos[x]]] = False
    return not coupled


@njit(cache=True, error_model="numpy")
def _bottleneck_loads(
    act_rate, pos_of, route_owner, weight_flat, touched, n_touched, linkcnt, head, nxt, gload, link_peak
):
    """Analytic engine: the loads of the touched links, summed over their flows in the active list's order."""
    for x in range(n_touched):
        li = touched[x]
        if linkcnt[li] == 0:
            continue
        s = 0.0
        p = head[li]
        while p >= 0:
            s += act_rate[pos_of[route_owner[p]]] * weight_flat[p]
            p = nxt[p]
        gload[li] = s
        if s > link_peak[li]:
            link_peak[li] = s


# -- link load: LinkLoad's recording, replayed ------------------------------------------------------------
# The recorder's state R is a tuple of arrays (numba has no mutable records that cache): the R_* indices.
# Exact phase: the segments, as LinkLoad keeps them. Binned phase: per bin its arrays ("elements") as
# LinkLoad keeps them, each either merged (values in the element pool) or raw: one segment's rates times
# its overlap with the bin, kept as a reference to the segment (segment pool) and the overlap, so a segment
# spread over many bins is stored once. A bin that gathers several arrays is "hot": a dense accumulator
# keeps the running sum of its arrays, which is exactly what merging them gives (LinkLoad merges by summing
# per link in array order, starting from zero), so a merge costs the union of its links, not its arrays.
(
    R_F,
    R_I,
    R_OPEN_L,
    R_OPEN_R,
    R_SEG_A,
    R_SEG_B,
    R_SEG_PTR,
    R_SEG_L,
    R_SEG_R,
    R_N_EL,
    R_EL_OFF,
    R_EL_LEN,
    R_EL_OVL,
    R_DIRTY,
    R_POOL_L,
    R_POOL_V,
    R_SP_L,
    R_SP_R,
    R_SLOT_OF,
    R_SLOT_BIN,
    R_SLOT_ACC,
    R_SLOT_MARK,
    R_SLOT_UNION,
    R_SLOT_META,
) = range(24)
HOT_SLOTS = 4  # bins accumulated densely at once (the one time is in, and the ends of long segments)


@njit(cache=True)
def _with_seg(R, seg_a, seg_b, seg_ptr, seg_l, seg_r):
    return (
        R[0],
        R[1],
        R[2],
        R[3],
        seg_a,
        seg_b,
        seg_ptr,
        seg_l,
        seg_r,
        R[9],
        R[10],
        R[11],
        R[12],
        R[13],
        R[14],
        R[15],
        R[16],
        R[17],
        R[18],
        R[19],
        R[20],
        R[21],
        R[22],
        R[23],
    )


@njit(cache=True)
def _with_pool(R, pool_l, pool_v):
    return (
        R[0],
        R[1],
        R[2],
        R[3],
        R[4],
        R[5],
        R[6],
        R[7],
        R[8],
        R[9],
        R[10],
        R[11],
        R[12],
        R[13],
        pool_l,
        pool_v,
        R[16],
        R[17],
        R[18],
        R[19],
        R[20],
        R[21],
        R[22],
        R[23],
    )


@njit(cache=True)
def _with_sp(R, sp_l, sp_r):
    return (
        R[0],
        R[1],
        R[2],
        R[3],
        R[4],
        R[5],
        R[6],
        R[7],
        R[8],
        R[9],
        R[10],
        R[11],
        R[12],
        R[13],
        R[14],
        R[15],
        sp_l,
        sp_r,
        R[18],
        R[19],
        R[20],
        R[21],
        R[22],
        R[23],
    )


@njit(cache=True)
def _pool_reserve(need, R):
    """Room for `need` more merged entries: live merged arrays move down over the dead ones (in place, in offset
    order); a larger pool only when that is not enough (new memory is slow to touch)."""
    ri = R[R_I]
    pool_l, pool_v = R[R_POOL_L], R[R_POOL_V]
    if ri[_RI_POOL_USED] + need <= len(pool_l):
        return R
    n_el, el_off, el_len, el_ovl = R[R_N_EL], R[R_EL_OFF], R[R_EL_LEN], R[R_EL_OVL]
    live = ri[_RI_POOL_LIVE]
    if live + need > (3 * len(pool_l)) // 4:
        cap = 2 * (live + need) + (1 << 16)
        new_l = np.empty(cap, np.int32)
        new_v = np.empty(cap)
        R = _with_pool(R, new_l, new_v)
        moved = True
    else:
        new_l, new_v = pool_l, pool_v
        moved = False
    count = 0
    for k in range(len(n_el)):
        for e in range(n_el[k]):
            if el_ovl[k, e] < 0:
                count += 1
    offs = np.empty(count, np.int64)
    who = np.empty(count, np.int64)
    c = 0
    for k in range(len(n_el)):
        for e in range(n_el[k]):
            if el_ovl[k, e] < 0:
                offs[c] = el_off[k, e]
                who[c] = k * el_off.shape[1] + e
                c += 1
    q = 0
    for i in np.argsort(offs):  # moving down in offset order never overwrites what is still to move
        k, e = who[i] // el_off.shape[1], who[i] % el_off.shape[1]
        o, n = el_off[k, e], el_len[k, e]
        if o != q or moved:
            new_l[q : q + n] = pool_l[o : o + n].copy()
            new_v[q : q + n] = pool_v[o : o + n].copy()
        el_off[k, e] = q
        q += n
    ri[_RI_POOL_USED] = q
    ri[_RI_POOL_LIVE] = q
    return R


@njit(cache=True)
def _sp_reserve(need, R):
    """Room for a segment of `need` entries: segments no raw array refers to any more are dropped."""
    ri = R[R_I]
    sp_l, sp_r = R[R_SP_L], R[R_SP_R]
    used = ri[_RI_SP_USED]
    if used + need <= len(sp_l):
        return R
    n_el, el_off, el_ovl = R[R_N_EL], R[R_EL_OFF], R[R_EL_OVL]
    low = used
    for k in range(ri[_RI_DLO], ri[_RI_DHI] + 1):  # raw arrays live in bins not yet merged: the dirty ones
        for e in range(n_el[k]):
            if el_ovl[k, e] >= 0 and el_off[k, e] < low:
                low = el_off[k, e]
    live = used - low
    if live + need > len(sp_l) // 2:
        cap = 2 * (live + need) + 1024
        new_l = np.empty(cap, np.int32)
        new_r = np.empty(cap)
        new_l[:live] = sp_l[low:used]
        new_r[:live] = sp_r[low:used]
        R = _with_sp(R, new_l, new_r)
    else:
        sp_l[:live] = sp_l[low:used].copy()  # (an element-wise loop here compiled ~50x slower)
        sp_r[:live] = sp_r[low:used].copy()
    for k in range(ri[_RI_DLO], ri[_RI_DHI] + 1):
        for e in range(n_el[k]):
            if el_ovl[k, e] >= 0:
                el_off[k, e] -= low
    ri[_RI_SP_USED] = live
    return R


@njit(cache=True)
def _slot_add(R, s, links, values, o, n, ovl):
    """Slot s += one array (values times ovl when ovl >= 0, a raw array), per link, tracking the union."""
    acc, mark, union, meta = R[R_SLOT_ACC][s], R[R_SLOT_MARK][s], R[R_SLOT_UNION][s], R[R_SLOT_META][s]
    nu, lo, hi = meta[0], meta[1], meta[2]
    for i in range(o, o + n):
        li = links[i]
        acc[li] += values[i] * ovl if ovl >= 0 else values[i]
        if not mark[li]:
            mark[li] = True
            union[nu] = li
            nu += 1
            if li < lo:
                lo = li
            if li > hi:
                hi = li
    meta[0], meta[1], meta[2] = nu, lo, hi


@njit(cache=True)
def _slot_add_bin(R, s, k):
    n_el, el_off, el_len, el_ovl = R[R_N_EL], R[R_EL_OFF], R[R_EL_LEN], R[R_EL_OVL]
    for e in range(n_el[k]):
        ovl = el_ovl[k, e]
        if ovl >= 0:
            _slot_add(R, s, R[R_SP_L], R[R_SP_R], el_off[k, e], el_len[k, e], ovl)
        else:
            _slot_add(R, s, R[R_POOL_L], R[R_POOL_V], el_off[k, e], el_len[k, e], -1.0)


@njit(cache=True)
def _slot_emit(R, s, out_l, out_v, q, clear):
    """Slot s's links (sorted) and sums written at out[q:]; `clear` empties the slot. Returns how many."""
    acc, mark, union, meta = R[R_SLOT_ACC][s], R[R_SLOT_MARK][s], R[R_SLOT_UNION][s], R[R_SLOT_META][s]
    nu, lo, hi = meta[0], meta[1], meta[2]
    if nu > 0 and 16 * nu < hi - lo + 1:
        union[:nu] = np.sort(union[:nu])
        for i in range(nu):
            li = union[i]
            out_l[q + i] = li
            out_v[q + i] = acc[li]
    elif nu > 0:
        i = q
        for li in range(lo, hi + 1):
            if mark[li]:
                out_l[i] = li
                out_v[i] = acc[li]
                i += 1
    if clear:
        for i in range(nu):
            li = union[i]
            acc[li] = 0.0
            mark[li] = False
        meta[0], meta[1], meta[2] = 0, len(acc), -1
    return nu


@njit(cache=True)
def _consolidate(k, R, leaving):
    """LinkLoad._consolidate: the bin's arrays merged into one (a single raw array becomes a merged one, with the
    same values). `leaving`: time has left the bin, its slot is freed."""
    ri, n_el, el_off, el_len, el_ovl = R[R_I], R[R_N_EL], R[R_EL_OFF], R[R_EL_LEN], R[R_EL_OVL]
    slot_of, slot_bin = R[R_SLOT_OF], R[R_SLOT_BIN]
    if n_el[k] > 1 or (n_el[k] == 1 and el_ovl[k, 0] >= 0):
        s = slot_of[k]
        if s < 0:
            s = HOT_SLOTS  # the scratch slot
            _slot_add_bin(R, s, k)
        nu = R[R_SLOT_META][s, 0]
        R = _pool_reserve(nu, R)
        p = ri[_RI_POOL_USED]
        free = s == HOT_SLOTS or leaving
        u = _slot_emit(R, s, R[R_POOL_L], R[R_POOL_V], p, free)
        if free and s != HOT_SLOTS:
            slot_bin[s] = -1
            slot_of[k] = -1
        for e in range(n_el[k]):
            if el_ovl[k, e] < 0:
                ri[_RI_POOL_LIVE] -= el_len[k, e]
        ri[_RI_POOL_USED] = p + u
        ri[_RI_POOL_LIVE] += u
        n_el[k] = 1
        el_off[k, 0] = p
        el_len[k, 0] = u
        el_ovl[k, 0] = -1.0
    elif leaving and slot_of[k] >= 0:  # a hot bin merged at BIN_ARRAYS that got nothing since
        _slot_clear(R, slot_of[k])
        slot_bin[slot_of[k]] = -1
        slot_of[k] = -1
    R[R_DIRTY][k] = False
    return R


@njit(cache=True)
def _widen(R):
    """LinkLoad._widen: the bin width doubles, bins 2K and 2K+1 merge into K (in that order)."""
    rf, ri, n_el, el_len = R[R_F], R[R_I], R[R_N_EL], R[R_EL_LEN]
    nb = len(n_el)
    total = 0
    for k in range(nb):
        for e in range(n_el[k]):
            total += el_len[k, e]
    R = _pool_reserve(total, R)  # the merged arrays go after the live ones, which then die
    pool_l, pool_v = R[R_POOL_L], R[R_POOL_V]
    el_off, el_ovl = R[R_EL_OFF], R[R_EL_OVL]
    q0 = ri[_RI_POOL_USED]
    q = q0
    for kk in range((nb + 1) // 2):
        hi = min(2 * kk + 1, nb - 1)
        if n_el[2 * kk] == 0 and (hi == 2 * kk or n_el[hi] == 0):
            n_el[kk] = 0
            continue
        _slot_add_bin(R, HOT_SLOTS, 2 * kk)
        if hi != 2 * kk:
            _slot_add_bin(R, HOT_SLOTS, hi)
        u = _slot_emit(R, HOT_SLOTS, pool_l, pool_v, q, True)
        n_el[kk] = 1
        el_off[kk, 0] = q
        el_len[kk, 0] = u
        el_ovl[kk, 0] = -1.0
        q += u
    for k in range((nb + 1) // 2, nb):
        n_el[k] = 0
    slot_of, slot_bin = R[R_SLOT_OF], R[R_SLOT_BIN]
    for s in range(HOT_SLOTS):  # every bin is one merged array now: no hot bins
        if slot_bin[s] >= 0:
            _slot_clear(R, s)
            slot_bin[s] = -1
    slot_of[:] = -1
    R[R_DIRTY][:] = False
    ri[_RI_DLO], ri[_RI_DHI] = 0, -1
    ri[_RI_POOL_USED] = q
    ri[_RI_POOL_LIVE] = q - q0
    rf[_RF_BIN_S] *= 2
    return R


@njit(cache=True)
def _slot_clear(R, s):
    acc, mark, union, meta = R[R_SLOT_ACC][s], R[R_SLOT_MARK][s], R[R_SLOT_UNION][s], R[R_SLOT_META][s]
    for i in range(meta[0]):
        acc[union[i]] = 0.0
        mark[union[i]] = False
    meta[0], meta[1], meta[2] = 0, len(acc), -1


@njit(cache=True)
def _add_to_bins(a, b, o, n, R):
    """LinkLoad._add_to_bins: the segment [a, b), stored at [o, o + n) of the segment pool, spread over the bins
    it overlaps."""
    rf, ri = R[R_F], R[R_I]
    while b / rf[_RF_BIN_S] > ri[_RI_MAX_BINS]:
        R = _widen(R)
    w = rf[_RF_BIN_S]
    first = int(a // w)
    if ri[_RI_DHI] >= ri[_RI_DLO]:  # bins time has left behind: one array each
        dirty = R[R_DIRTY]
        for k in range(ri[_RI_DLO], min(ri[_RI_DHI] + 1, first)):
            if dirty[k]:
                R = _consolidate(k, R, True)
        if ri[_RI_DLO] < first:
            ri[_RI_DLO] = first
    slot_of, slot_bin = R[R_SLOT_OF], R[R_SLOT_BIN]
    for s in range(HOT_SLOTS):  # hot bins left behind clean (merged at BIN_ARRAYS, nothing since)
        if 0 <= slot_bin[s] < first:
            _slot_clear(R, s)
            slot_of[slot_bin[s]] = -1
            slot_bin[s] = -1
    sp_l, sp_r = R[R_SP_L], R[R_SP_R]
    n_el, el_off, el_len, el_ovl, dirty = R[R_N_EL], R[R_EL_OFF], R[R_EL_LEN], R[R_EL_OVL], R[R_DIRTY]
    for k in range(first, int(b // w) + 1):
        overlap = min(b, (k + 1) * w) - max(a, k * w)
        if overlap <= 0:
            continue
        if k >= len(n_el):  # pragma: no cover - b / w <= max_bins keeps k within the table
            raise RuntimeError("link-load bin out of range")
        e = n_el[k]
        el_off[k, e] = o
        el_len[k, e] = n
        el_ovl[k, e] = overlap
        n_el[k] = e + 1
        dirty[k] = True
        if ri[_RI_DHI] < ri[_RI_DLO]:
            ri[_RI_DLO], ri[_RI_DHI] = k, k
        else:
            ri[_RI_DLO] = min(ri[_RI_DLO], k)
            ri[_RI_DHI] = max(ri[_RI_DHI], k)
        s = slot_of[k]
        if s >= 0:
            _slot_add(R, s, sp_l, sp_r, o, n, overlap)
        elif e + 1 == 2:  # a second array: accumulate this bin densely if a slot is free
            for s in range(HOT_SLOTS):
                if slot_bin[s] < 0:
                    slot_bin[s] = k
                    slot_of[k] = s
                    _slot_add_bin(R, s, k)
                    break
        if n_el[k] >= BIN_ARRAYS:
            R = _consolidate(k, R, False)
    return R


@njit(cache=True)
def _to_bins(now, R):
    """LinkLoad._to_bins: past max_entries, every exact segment so far goes onto a time grid."""
    rf, ri = R[R_F], R[R_I]
    width = 1e-9
    while now / width > ri[_RI_MAX_BINS]:
        width *= 2
    rf[_RF_BIN_S] = width
    seg_a, seg_b, seg_ptr, seg_l, seg_r = R[R_SEG_A], R[R_SEG_B], R[R_SEG_PTR], R[R_SEG_L], R[R_SEG_R]
    for i in range(ri[_RI_N_SEG]):
        p, n = seg_ptr[i], seg_ptr[i + 1] - seg_ptr[i]
        R = _sp_reserve(n, R)
        o = ri[_RI_SP_USED]
        R[R_SP_L][o : o + n] = seg_l[p : p + n]
        R[R_SP_R][o : o + n] = seg_r[p : p + n]
        ri[_RI_SP_USED] = o + n
        R = _add_to_bins(seg_a[i], seg_b[i], o, n, R)
    ri[_RI_N_SEG] = 0
    ri[_RI_SEG_USED] = 0
    ri[_RI_ENTRIES] = 0
    return _with_seg(R, np.empty(1), np.empty(1), np.zeros(2, np.int64), np.empty(1, np.int32), np.empty(1))


@njit(cache=True)
def _loaded_links(bits, load, out_l, out_r, o):
    """The links in use (bits) whose load is positive, in link order, written at out_l/out_r[o:]; their count."""
    n = 0
    for wi in range(len(bits)):
        w = bits[wi]
        while w:
            bit, w = _lowest_bit(w)
            li = wi * 64 + bit
            x = load[li]
            if x > 0:
                out_l[o + n] = li
                out_r[o + n] = x
                n += 1
    return n


@njit(cache=True)
def rec_close(now, bits, n_links, load, R):
    """LinkLoad.close(now) of the segment opened by rec_open: the links of the bitmap (n_links of them) carried
    `load[link]` since (those > 0; the loop leaves both as they were at the last recomputation until the next)."""
    rf, ri = R[R_F], R[R_I]
    if ri[_RI_OPEN_N] < 0:
        return R
    ri[_RI_OPEN_N] = -1
    a = rf[_RF_OPEN_T]
    if now <= a:
        return R
    if rf[_RF_BIN_S] == 0.0:  # exact segments
        seg_a, seg_b, seg_ptr, seg_l, seg_r = R[R_SEG_A], R[R_SEG_B], R[R_SEG_PTR], R[R_SEG_L], R[R_SEG_R]
        s, e = ri[_RI_N_SEG], ri[_RI_SEG_USED]
        if s + 1 >= len(seg_a) or e + n_links > len(seg_l):
            cs = max(2 * len(seg_a), 1024) if s + 1 >= len(seg_a) else len(seg_a)
            ce = max(2 * (e + n_links), 1 << 16) if e + n_links > len(seg_l) else len(seg_l)
            na, nb_, npt = np.empty(cs), np.empty(cs), np.zeros(cs + 1, np.int64)
            nl, nr = np.empty(ce, np.int32), np.empty(ce)
            na[:s] = seg_a[:s]
            nb_[:s] = seg_b[:s]
            npt[: s + 1] = seg_ptr[: s + 1]
            nl[:e] = seg_l[:e]
            nr[:e] = seg_r[:e]
            R = _with_seg(R, na, nb_, npt, nl, nr)
            seg_a, seg_b, seg_ptr, seg_l, seg_r = na, nb_, npt, nl, nr
        n = _loaded_links(bits, load, seg_l, seg_r, e)
        if n == 0:  # LinkLoad opened nothing
            return R
        if now > rf[_RF_T_LAST]:
            rf[_RF_T_LAST] = now
        seg_a[s] = a
        seg_b[s] = now
        seg_ptr[s + 1] = e + n
        ri[_RI_N_SEG] = s + 1
        ri[_RI_SEG_USED] = e + n
        ri[_RI_ENTRIES] += n
        if ri[_RI_ENTRIES] > ri[_RI_MAX_ENTRIES]:
            R = _to_bins(now, R)
    else:
        R = _sp_reserve(n_links, R)  # the segment, stored once however many bins it spans
        sp_l, sp_r = R[R_SP_L], R[R_SP_R]
        o = ri[_RI_SP_USED]
        n = _loaded_links(bits, load, sp_l, sp_r, o)
        if n == 0:
            return R
        ri[_RI_SP_USED] = o + n
        if now > rf[_RF_T_LAST]:
            rf[_RF_T_LAST] = now
        R = _add_to_bins(a, now, o, n, R)
    return R


@njit(cache=True)
def rec_open(now, R):
    """LinkLoad.set_sparse(now, ...) after its close: a segment opens (empty if no load is positive)."""
    R[R_I][_RI_OPEN_N] = 1
    R[R_F][_RF_OPEN_T] = now


def new_recorder(n_links: int, max_entries: int, max_bins: int) -> tuple:
    """The state of an empty LinkLoad(max_entries, max_bins) over n_links links."""
    n_bins = max_bins + 2
    ri = np.zeros(11, dtype=np.int64)
    ri[_RI_OPEN_N] = -1
    ri[_RI_MAX_ENTRIES] = max_entries
    ri[_RI_MAX_BINS] = max_bins
    ri[_RI_DHI] = -1
    n = max(n_links, 1)
    slots = HOT_SLOTS + 1
    meta = np.zeros((slots, 3), dtype=np.int64)
    meta[:, 1] = n
    meta[:, 2] = -1
    width = BIN_ARRAYS + 1
    return (
        np.zeros(3),
        ri,
        np.empty(1, np.int32),
        np.empty(1),
        np.empty(16),
        np.empty(16),
        np.zeros(17, np.int64),
        np.empty(1024, np.int32),
        np.empty(1024),
        np.zeros(n_bins, np.int64),
        np.zeros((n_bins, width), np.int64),
        np.zeros((n_bins, width), np.int64),
        np.zeros((n_bins, width)),
        np.zeros(n_bins, np.bool_),
        np.empty(1024, np.int32),
        np.empty(1024),
        np.empty(1024, np.int32),
        np.empty(1024),
        np.full(n_bins, -1, np.int64),
        np.full(HOT_SLOTS, -1, np.int64),
        np.zeros((slots, n)),
        np.zeros((slots, n), np.bool_),
        np.zeros((slots, n), np.int64),
        meta,
    )


_LINKLOAD_FIELDS = (
    "max_entries",
    "max_bins",
    "_start",
    "_end",
    "_links",
    "_rates",
    "_flat",
    "_entries",
    "_open",
    "bin_s",
    "_bins",
    "_dirty",
    "_t_last",
)


def recorder_matches(link_load) -> bool:
    """Does this LinkLoad keep the state the recorder rebuilds? (If linkload.py changes shape, executor falls
    back to the reference loop rather than build a wrong record.)"""
    return all(hasattr(link_load, f) for f in _LINKLOAD_FIELDS)


def install(link_load, R) -> None:
    """Put the recorder's state into `link_load`: what its own calls would have left there (after close)."""
    rf, ri = R[R_F], R[R_I]
    link_load._open = None
    link_load._t_last = float(rf[_RF_T_LAST])
    if rf[_RF_BIN_S] == 0.0:
        s, e = int(ri[_RI_N_SEG]), int(ri[_RI_SEG_USED])
        ptr = R[R_SEG_PTR][: s + 1]
        # views of the recorder's buffers when they are mostly used (no copy of ~8 M entries at 1,024 GPUs; the
        # buffers grow by doubling, so a view keeps at most twice what it shows alive), copies otherwise
        seg_l, seg_r = R[R_SEG_L], R[R_SEG_R]
        if 4 * e >= 3 * len(seg_l):
            links, rates = seg_l[:e], seg_r[:e]
        else:
            links, rates = seg_l[:e].copy(), seg_r[:e].copy()
        # split per segment only when read (LinkLoad.set_flat): binning takes the arrays as they are
        link_load.set_flat(R[R_SEG_A][:s].tolist(), R[R_SEG_B][:s].tolist(), ptr.copy(), links, rates)
        link_load._entries = int(ri[_RI_ENTRIES])
        link_load.bin_s = None
        link_load._bins = {}
        link_load._dirty = set()
        return
    n_el, el_off, el_len, el_ovl = R[R_N_EL], R[R_EL_OFF], R[R_EL_LEN], R[R_EL_OVL]
    bins = {}
    for k in np.flatnonzero(n_el).tolist():
        ls, vs = [], []
        for e in range(int(n_el[k])):
            o, n, ovl = int(el_off[k, e]), int(el_len[k, e]), float(el_ovl[k, e])
            if ovl >= 0:  # raw: the segment's rates times the overlap, as LinkLoad computes them
                ls.append(R[R_SP_L][o : o + n].copy())
                vs.append(R[R_SP_R][o : o + n] * ovl)
            else:
                ls.append(R[R_POOL_L][o : o + n].copy())
                vs.append(R[R_POOL_V][o : o + n].copy())
        bins[k] = [ls, vs]
    link_load._start, link_load._end, link_load._links, link_load._rates = [], [], [], []
    link_load._entries = 0
    link_load.bin_s = float(rf[_RF_BIN_S])
    link_load._bins = bins
    link_load._dirty = set(np.flatnonzero(R[R_DIRTY]).tolist())


# -- the loop --------------------------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def run_chunk(mode, incremental, budget, G, S, R):
    """Run at most `budget` turns of the event loop. Returns (done, the recorder's state)."""
    (kind, duration, size, latency, route_ptr, route_flat, weight_flat, route_owner, dep_ptr, dep_flat, capacity) = G[
        :11
    ]
    drain_ptr, drain_flat = G[11], G[12]  # transfer -> the tasks released when its bytes have left
    # flowlet switching (engines/flowlet.py): per task its connection (none: an empty array), per connection its
    # candidate paths, the gap; its state: each connection's transfers draining, last byte, path; scratch
    fl_conn, fl_cand_ptr, fl_n_paths, fl_cand_flat, fl_gap = G[13:]
    fl_active, fl_last, fl_path, fl_alive = S[34:]
    has_fl = len(fl_conn) > 0
    gap_s = fl_gap[0]
    (
        istate,
        fstate,
        waiting,
        start,
        end,
        link_bytes,
        link_peak,
        heap_t,
        heap_k,
        act_task,
        act_rem,
        act_rate,
        drain,
        pos_of,
        started,
        linkcnt,
        head,
        tail,
        nxt,
        prv,
        gload,
        used_bits,
        used,
        cidx,
        added,
        removed,
        touched,
        is_touched,
        visited,
        lidx,
        in_comp,
        comp_links,
        comp_label,
        comp_pos,
    ) = S[:34]
    now = fstate[0]
    turns = 0
    while istate[_HEAP_N] > 0 or istate[_N_ACT] > 0 or istate[_N_STARTED] > 0:
        if turns >= budget:
            fstate[0] = now
            return False, R
        turns += 1
        n_started = istate[_N_STARTED]
        if n_started > 0:  # the transfers that started join the active flows
            n_act = istate[_N_ACT]
            for s in range(n_started):
                t = started[s]
                if has_fl and fl_conn[t] >= 0:  # its flowlet's path (flowlet.FlowletState.join)
                    c = fl_conn[t]
                    a = route_ptr[t]
                    length = route_ptr[t + 1] - a
                    p = fl_path[c]
                    if p < 0 or (fl_active[c] == 0 and now - fl_last[c] > gap_s):
                        q = _choose_path(
                            fl_cand_flat, fl_cand_ptr[c], fl_n_paths[c], length, linkcnt, capacity, fl_alive
                        )
                        istate[_FLOWLETS] += 1
                        if p >= 0 and q != p:
                            istate[_SWITCHES] += 1
                        fl_path[c] = q
                        p = q
                    b = fl_cand_ptr[c] + p * length
                    for i in range(length):
                        route_flat[a + i] = fl_cand_flat[b + i]
                    fl_active[c] += 1
                rate = np.inf
                for j in range(route_ptr[t], route_ptr[t + 1]):
                    li = route_flat[j]
                    link_bytes[li] += size[t] * weight_flat[j]
                    if linkcnt[li] == 0:
                        added[istate[_N_ADDED]] = li
                        istate[_N_ADDED] += 1
                    linkcnt[li] += 1
                    prv[j] = tail[li]  # the link's flows, in the order of the active list
                    nxt[j] = -1
                    if tail[li] >= 0:
                        nxt[tail[li]] = j
                    else:
                        head[li] = j
                    tail[li] = j
                    if not is_touched[li]:
                        is_touched[li] = True
                        touched[istate[_N_TOUCHED]] = li
                        istate[_N_TOUCHED] += 1
                    r = capacity[li] / weight_flat[j]  # bottleneck_pairs: np.minimum.at
                    if r < rate:
                        rate = r
                act_task[n_act] = t
                act_rem[n_act] = size[t]
                act_rate[n_act] = rate if mode == BOTTLENECK else np.inf
                pos_of[t] = n_act
                n_act += 1
            istate[_N_ACT] = n_act
            istate[_N_STARTED] = 0
            istate[_DIRTY] = 1
        if istate[_DIRTY]:  # new rates, the links' loads, a link-load record
            R = rec_close(now, used_bits, istate[_N_USED], gload, R)  # the segment since the last recomputation
            _update_used(used_bits, istate, added, removed, linkcnt, gload)
            n_act = istate[_N_ACT]
            n_touched = istate[_N_TOUCHED]
            if mode == MAX_MIN:
                done = False
                if incremental and not istate[_TAINTED]:
                    done = _partial_max_min(
                        n_act,
                        act_task,
                        act_rate,
                        pos_of,
                        route_ptr,
                        route_flat,
                        weight_flat,
                        route_owner,
                        capacity,
                        touched,
                        n_touched,
                        linkcnt,
                        head,
                        nxt,
                        visited,
                        lidx,
                        in_comp,
                        comp_links,
                        comp_label,
                        comp_pos,
                        gload,
                        link_peak,
                        istate,
                    )
                    if not done:
                        istate[_FALLBACKS] += 1
                if not done:
                    _full_max_min(
                        n_act,
                        act_task,
                        act_rate,
                        route_ptr,
                        route_flat,
                        weight_flat,
                        capacity,
                        used_bits,
                        used,
                        cidx,
                        gload,
                        link_peak,
                        istate,
                        incremental,
                    )
            else:
                _bottleneck_loads(
                    act_rate, pos_of, route_owner, weight_flat, touched, n_touched, linkcnt, head, nxt, gload, link_peak
                )
            for x in range(n_touched):
                is_touched[touched[x]] = False
            istate[_N_TOUCHED] = 0
            rec_open(now, R)
            istate[_RECOMPUTATIONS] += 1
            istate[_DIRTY] = 0
        n_act = istate[_N_ACT]
        t_event = heap_t[0] if istate[_HEAP_N] > 0 else np.inf
        first = np.inf
        if n_act > 0:
            for i in range(n_act):
                d = act_rem[i] / act_rate[i]
                drain[i] = d
                if d < first or d != d:  # ndarray.min: a nan wins (and stays: nothing is < nan)
                    first = d
            t_drain = now + first
        else:
            t_drain = np.inf
        t_next = t_drain if t_drain <= t_event else t_event
        if n_act > 0:
            dt = t_next - now
            if t_drain <= t_event:
                limit = first * (1 + FINISH_RTOL)
                j = 0
                for i in range(n_act):
                    t = act_task[i]
                    if drain[i] <= limit:  # drained: done one latency later; it leaves its links
                        if has_fl and fl_conn[t] >= 0:  # flowlet.FlowletState.leave
                            c = fl_conn[t]
                            fl_active[c] -= 1
                            if fl_active[c] == 0:
                                fl_last[c] = t_next
                        for q in range(drain_ptr[t], drain_ptr[t + 1]):  # what waited for its bytes to leave
                            d = drain_flat[q]
                            waiting[d] -= 1
                            if waiting[d] == 0:
                                _begin(d, t_next, kind, duration, size, latency, start, heap_t, heap_k, istate, started)
                        istate[_HEAP_N] = _push(heap_t, heap_k, istate[_HEAP_N], t_next + latency[t], t)
                        for q in range(route_ptr[t], route_ptr[t + 1]):
                            li = route_flat[q]
                            linkcnt[li] -= 1
                            if linkcnt[li] == 0:
                                removed[istate[_N_REMOVED]] = li
                                istate[_N_REMOVED] += 1
                            if prv[q] >= 0:
                                nxt[prv[q]] = nxt[q]
                            else:
                                head[li] = nxt[q]
                            if nxt[q] >= 0:
                                prv[nxt[q]] = prv[q]
                            else:
                                tail[li] = prv[q]
                            if not is_touched[li]:
                                is_touched[li] = True
                                touched[istate[_N_TOUCHED]] = li
                                istate[_N_TOUCHED] += 1
                    else:
                        r = act_rem[i] - act_rate[i] * dt
                        act_task[j] = t
                        act_rem[j] = 0.0 if r < 0.0 else r
                        act_rate[j] = act_rate[i]
                        pos_of[t] = j
                        j += 1
                istate[_N_ACT] = j
                istate[_DIRTY] = 1
            else:
                for i in range(n_act):
                    r = act_rem[i] - act_rate[i] * dt
                    act_rem[i] = 0.0 if r < 0.0 else r
        now = t_next
        while istate[_HEAP_N] > 0 and heap_t[0] <= now:
            t = heap_k[0]
            istate[_HEAP_N] = _pop(heap_t, heap_k, istate[_HEAP_N])
            end[t] = now
            istate[_COMPLETED] += 1
            for q in range(dep_ptr[t], dep_ptr[t + 1]):
                d = dep_flat[q]
                waiting[d] -= 1
                if waiting[d] == 0:
                    _begin(d, now, kind, duration, size, latency, start, heap_t, heap_k, istate, started)
    fstate[0] = now
    return True, R


@njit(cache=True)
def init_state(kind, duration, size, latency, waiting, start, heap_t, heap_k, istate, started):
    for task in range(len(kind)):
        if waiting[task] == 0:
            _begin(task, 0.0, kind, duration, size, latency, start, heap_t, heap_k, istate, started)


# -- the Python side -------------------------------------------------------------------------------------
stats: dict[str, int] = {}  # the last run's counters (chunks, recomputations by kind), for the benchmark


def cached_on_disk() -> bool:
    """Whether numba's cache holds the compiled loop; False: the first call compiles it (about a minute on a
    2-core machine; later processes load it in about a second)."""
    try:
        return os.path.exists(run_chunk._cache._cache_file._index_path)  # type: ignore[attr-defined]
    except AttributeError:  # numba's internals moved: say nothing rather than guess
        return True


def _dependents(waits_on: list, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Task -> what it waits for, turned round: (each task's count of what it waits for, pointer array of n + 1, each
    task's dependents flat), the dependents in the reference's order (by dependent, then by position in its list)."""
    ptr_in, flat_in = csr(waits_on, n)
    ptr, flat, _ = turned_round(ptr_in, flat_in, n)
    return np.diff(ptr_in), ptr, flat


@contextmanager
def _sigint_noted():
    """Ctrl-C noted while the loop runs, raised as KeyboardInterrupt between chunks by the caller (compiled code
    cannot be interrupted, and a chunk's state, the recorder included, must be kept whole). A handler rather
    than a signal mask: with other threads running (a progress bar's), a masked main thread does not hold
    the signal back."""
    caught: list[int] = []
    try:
        old = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    except ValueError:  # not the main thread: the main thread's handler raises there as usual
        yield caught
        return
    try:
        yield caught
    finally:
        signal.signal(signal.SIGINT, old)


def _after_chunk(completed: int, n: int) -> None:
    """Called between chunks; tests replace it to raise KeyboardInterrupt mid-run."""


def run(
    graph,
    fabric,
    engine: str = "flow",
    progress: Callable[[int, int], None] | None = None,
    flowlets: Flowlets | None = None,
):
    """executor.run on the compiled loop: the same Timeline, or Interrupted with the timeline so far. `flowlets`:
    flowlet switching (engines/flowlet.py), as executor.run_reference."""
    from .executor import Interrupted, _timeline
    from .linkload import LinkLoad

    mode = SHARING_MODE[engine]
    n = len(graph)
    report = reporter(progress)  # progress(done, total), with the simulated time when it takes t_s
    if report is not None:  # before loading (or, the first time, compiling) the loop
        report(0, n, 0.0)
    n_links = len(fabric.links)
    link_load = LinkLoad()
    capacity = np.array([link.rate_bytes_per_s for link in fabric.links], dtype=np.float64)
    kind = np.asarray(graph.kind, dtype=np.int64).reshape(n)
    duration = np.asarray(graph.duration_s, dtype=np.float64).reshape(n)
    size = np.asarray(graph.size_bytes, dtype=np.float64).reshape(n)
    latency = np.asarray(graph.latency_s, dtype=np.float64).reshape(n)
    route_ptr, route_flat = csr(graph.route, n)
    n_pairs = len(route_flat)
    weight_flat = np.ones(n_pairs)
    for t, w in graph.route_weight.items():
        weight_flat[route_ptr[t] : route_ptr[t + 1]] = w
    route_owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(route_ptr))
    deps = graph.deps
    pairs = graph.drain_pairs()
    early_of: list = [()] * n
    if pairs:  # those released at drain leave the arrival lists (taskgraph.Readiness does the same)
        deps = list(deps)
        for d, t in pairs:
            early_of[d] = early_of[d] + (t,)
        for d in {d for d, _ in pairs}:
            deps[d] = [t for t in deps[d] if t not in early_of[d]]
    waits_arrival, dep_ptr, dep_flat = _dependents(deps, n)  # released when a task ends (a transfer arrives)
    waits_drain, drain_ptr, drain_flat = _dependents(early_of, n)  # released when a transfer's bytes have left
    waiting = waits_arrival + waits_drain
    G: tuple = (
        kind,
        duration,
        size,
        latency,
        route_ptr,
        route_flat,
        weight_flat,
        route_owner,
        dep_ptr,
        dep_flat,
        capacity,
        drain_ptr,
        drain_flat,
    )
    fl = flowlets
    if fl is not None:
        G += (fl.conn, fl.cand_ptr, fl.n_paths, fl.cand_flat, np.array([fl.gap_s], dtype=np.float64))
    else:
        none = np.empty(0, dtype=np.int64)
        G += (none, none, none, none, np.zeros(1))

    nn, nl, npr = max(n, 1), max(n_links, 1), max(n_pairs, 1)
    istate = np.zeros(_N_ISTATE, dtype=np.int64)
    fstate = np.zeros(1)
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    link_bytes = np.zeros(n_links)
    link_peak = np.zeros(n_links)
    heap_t, heap_k = np.empty(nn), np.empty(nn, dtype=np.int64)
    started = np.empty(nn, dtype=np.int64)
    S: tuple = (
        istate,
        fstate,
        waiting,
        start,
        end,
        link_bytes,
        link_peak,
        heap_t,
        heap_k,
        np.empty(nn, dtype=np.int64),
        np.empty(nn),
        np.empty(nn),
        np.empty(nn),  # act_task, rem, rate, drain
        np.zeros(nn, dtype=np.int64),
        started,  # pos_of, started
        np.zeros(nl, dtype=np.int64),
        np.full(nl, -1, dtype=np.int64),
        np.full(nl, -1, dtype=np.int64),  # linkcnt, head, tail
        np.full(npr, -1, dtype=np.int64),
        np.full(npr, -1, dtype=np.int64),  # nxt, prv
        np.zeros(nl),
        np.zeros((nl + 63) // 64, dtype=np.uint64),
        np.empty(nl, dtype=np.int64),  # gload, used_bits, used
        np.zeros(nl, dtype=np.int64),
        np.empty(nl, dtype=np.int64),
        np.empty(nl, dtype=np.int64),  # cidx, added, removed
        np.empty(nl, dtype=np.int64),
        np.zeros(nl, dtype=np.bool_),  # touched, is_touched
        np.zeros(nl, dtype=np.bool_),
        np.zeros(nl, dtype=np.int64),
        np.zeros(nn, dtype=np.bool_),  # visited, lidx, in_comp
        np.empty(nl, dtype=np.int64),
        np.empty(nl, dtype=np.int64),
        np.empty(nn, dtype=np.int64),
    )  # comp_links, comp_label, comp_pos
    n_conn = fl.n_conn if fl is not None else 0
    S += (  # flowlets: each connection's transfers draining, last byte, path; the choice's scratch
        np.zeros(max(n_conn, 1), dtype=np.int64),
        np.full(max(n_conn, 1), -np.inf),
        np.full(max(n_conn, 1), -1, dtype=np.int64),
        np.zeros(max(int(fl.n_paths.max()) if fl is not None and n_conn else 0, 1), dtype=np.bool_),
    )
    R = new_recorder(n_links, link_load.max_entries, link_load.max_bins)

    init_state(kind, duration, size, latency, waiting, start, heap_t, heap_k, istate, started)
    budget = FIRST_CHUNK
    chunks = 0
    try:
        with _sigint_noted() as caught:
            while True:
                t0 = time.perf_counter()
                done, R = run_chunk(mode, INCREMENTAL, budget, G, S, R)
                elapsed = time.perf_counter() - t0
                chunks += 1
                if caught:
                    raise KeyboardInterrupt
                if report is not None:
                    report(int(istate[_COMPLETED]), n, float(fstate[0]))
                _after_chunk(int(istate[_COMPLETED]), n)
                if done:
                    break
                budget = int(min(max(budget * CHUNK_S / max(elapsed, 1e-4), 100), 10_000_000))
    except KeyboardInterrupt:
        install(link_load, rec_close(fstate[0], S[21], istate[_N_USED], S[20], R))
        out = _timeline(start, end, link_bytes, link_peak, int(istate[_RECOMPUTATIONS]), link_load)
        _flowlets_done(graph, fl, route_ptr, route_flat, start, istate, out)
        raise Interrupted(out) from None
    finally:
        stats.clear()
        stats.update(
            chunks=chunks,
            full=int(istate[_FULL]),
            partial=int(istate[_PARTIAL]),
            fallbacks=int(istate[_FALLBACKS]),
            component_flows=int(istate[_COMPONENT_FLOWS]),
            rounds=int(istate[_ROUNDS]),
        )
    install(link_load, rec_close(fstate[0], S[21], istate[_N_USED], S[20], R))
    unfinished = int(np.isnan(end).sum())
    if unfinished:
        raise RuntimeError(f"{unfinished} tasks never ran: the task graph has a cycle")
    out = _timeline(start, end, link_bytes, link_peak, int(istate[_RECOMPUTATIONS]), link_load)
    _flowlets_done(graph, fl, route_ptr, route_flat, start, istate, out)
    return out


def _flowlets_done(graph, fl: Flowlets | None, route_ptr, route_flat, start, istate, out) -> None:
    if fl is not None:
        write_routes(graph, fl, route_ptr, route_flat, start)
        out.flowlets = flowlet_stats(fl, int(istate[_FLOWLETS]), int(istate[_SWITCHES]))
