"""Hierarchical AllReduce: intra-server ReduceScatter over NVLink -> inter-server AllReduce on rail
rings -> intra-server AllGather over NVLink (the 2D algorithm; NCCL's CollNet / NVLS-tree follow it).

With S servers each holding L ranks of the group (servers x local matrix M), the buffer is in L
shards of S chunks (chunk l·S + j):

1. NVLink ring ReduceScatter in every server on whole shards (L - 1 steps): position q ends with
   shard (q + 1) mod L summed over its server. (Same as "reduce to GPU q" for every shard at once.)
2. Every shard is then AllReduced across servers by the GPUs that hold it, which all have the same
   local index: a ring over the servers on that one rail (2(S - 1) steps), or recursive
   halving-doubling (`inter="rhd"`, 2 log2 S steps).
3. NVLink ring AllGather in every server (L - 1 steps): everyone gets every shard ("broadcast").

Each NIC carries 2(S-1)/S of one shard, i.e. 1/L of what a flat ring over all ranks puts on the
busiest NIC, and the network sees 2(S-1) (or 2 log2 S) steps instead of 2(n-1).

ReduceScatter is stages 1 and 2's first half, AllGather stage 2's second half and 3. In-switch
AllReduce (`nvls_all_reduce`) has the same shape with the switches doing the adding: NVSwitch
(NVLS) inside servers, the rail switch (SHARP) across them.
"""

from __future__ import annotations

import numpy as np

from .rhd import rhd
from .schedule import (
    ALL,
    MODE_COPY,
    MODE_REDUCE,
    MoveBuilder,
    Schedule,
    chunk_bounds_array,
)


def _intra(mb: MoveBuilder, m: np.ndarray, phase: str, first_step: int, mode: int) -> None:
    s_count, local = m.shape
    if local < 2:
        return
    t = np.arange(local - 1).reshape(-1, 1, 1)
    q = np.arange(local).reshape(1, 1, -1)
    shard = (q - t) % local if mode == MODE_REDUCE else (q + 1 - t) % local
    src = np.broadcast_to(m[None, :, :], (local - 1, s_count, local))
    dst = np.broadcast_to(np.roll(m, -1, axis=1)[None, :, :], (local - 1, s_count, local))
    mb.add(first_step + t, src, dst, shard * s_count, mode, phase, count=s_count)


def _inter_ring(mb: MoveBuilder, m: np.ndarray, first_step: int, parts: tuple[str, ...] = ("rs", "ag")) -> int:
    s_count, local = m.shape
    if s_count < 2:
        return first_step
    q = np.arange(local, dtype=np.int32).reshape(1, -1, 1)  # the GPU position in its server (rail)
    shard_base = ((q + 1) % local) * np.int32(s_count)  # position q holds shard q + 1 after step 1
    t = np.arange(s_count - 1).reshape(-1, 1, 1)
    members = m.T.astype(np.int32)[None, :, :]  # [q, s]
    nxt = np.roll(m.T, -1, axis=1).astype(np.int32)[None, :, :]
    # (s - t) mod S and (s + 1 - t) mod S from a sliding window, int32, no division
    window = np.lib.stride_tricks.sliding_window_view(np.tile(np.arange(s_count, dtype=np.int32), 2), s_count)
    off = 0
    for part, phase, mode, shift in (
        ("rs", "inter-server reduce-scatter (rail ring)", MODE_REDUCE, 0),
        ("ag", "inter-server all-gather (rail ring)", MODE_COPY, 1),
    ):
        if part not in parts:
            continue
        sub = window[(shift - np.arange(s_count - 1)) % s_count][:, None, :]
        mb.add(first_step + off + t, members, nxt, shard_base + sub, mode, phase, channel=q)
        off += s_count - 1
    return first_step + off


def _inter_rhd(mb: MoveBuilder, m: np.ndarray, first_step: int) -> int:
    s_count, local = m.shape
    if s_count < 2:
        return first_step
    last = first_step
    for q in range(local):
        shard = (q + 1) % local
        sub = rhd("all-reduce", m[:, q].tolist(), s_count)  # chunk indices 0 .. S-1 of this shard
        for ph in range(len(sub.phases)):
            sel = sub.phase == ph
            mode = int(sub.mode[sel][0]) if sel.any() else MODE_COPY
            mb.add(
                first_step + sub.step[sel],
                sub.src[sel],
                sub.dst[sel],
                shard * s_count + sub.chunk[sel],
                mode,
                f"inter-server {sub.phases[ph]} (rail)",
                count=sub.count[sel],
                channel=q,
            )
        last = max(last, first_step + sub.n_steps)
    return last


def hierarchical_all_reduce(m: np.ndarray, elements: int, inter: str = "ring") -> Schedule:
    """`m`: (servers, ranks per server) matrix of the group's ranks (topology.server_matrix)."""
    s_count, local = m.shape
    mb = MoveBuilder()
    _intra(mb, m, "intra-server reduce-scatter (NVLink)", 0, MODE_REDUCE)
    step = local - 1
    step = (_inter_ring if inter == "ring" else _inter_rhd)(mb, m, step)
    _intra(mb, m, "intra-server all-gather (NVLink)", step, MODE_COPY)
    return mb.build(
        "all-reduce",
        "hierarchical" if inter == "ring" else "hierarchical-rhd",
        m.reshape(-1),
        elements,
        chunk_bounds_array(elements, s_count * local),
        ALL,
        ALL,
        notes=f"{s_count} servers × {local} GPUs: NVLink RS, rail {inter} AllReduce per shard, NVLink AG",
    )


def hierarchical_owners(m: np.ndarray) -> np.ndarray:
    """Chunk l·S + j belongs to (ReduceScatter result / AllGather input) server j - 1's GPU position l - 1."""
    s_count, local = m.shape
    l, j = np.divmod(np.arange(s_count * local), s_count)
    return m[(j - 1) % s_count, (l - 1) % local]


def hierarchical_reduce_scatter(m: np.ndarray, elements: int) -> Schedule:
    """NVLink ReduceScatter of shards in every server, then rail-ring ReduceScatter of each shard."""
    s_count, local = m.shape
    mb = MoveBuilder()
    _intra(mb, m, "intra-server reduce-scatter (NVLink)", 0, MODE_REDUCE)
    _inter_ring(mb, m, max(0, local - 1), ("rs",))
    return mb.build(
        "reduce-scatter",
        "hierarchical",
        m.reshape(-1),
        elements,
        chunk_bounds_array(elements, s_count * local),
        ALL,
        hierarchical_owners(m),
        notes=f"{s_count} servers × {local} GPUs: NVLink RS, then rail-ring RS per shard",
    )


def hierarchical_all_gather(m: np.ndarray, elements: int) -> Schedule:
    """Rail-ring AllGather of each shard across servers, then NVLink AllGather in every server."""
    s_count, local = m.shape
    mb = MoveBuilder()
    step = _inter_ring(mb, m, 0, ("ag",))
    _intra(mb, m, "intra-server all-gather (NVLink)", step, MODE_COPY)
    return mb.build(
        "all-gather",
        "hierarchical",
        m.reshape(-1),
        elements,
        chunk_bounds_array(elements, s_count * local),
        hierarchical_owners(m),
        ALL,
        notes=f"{s_count} servers × {local} GPUs: rail-ring AG per shard, then NVLink AG",
    )


NVLS_REDUCE, NVLS_MULTICAST = "switch reduce (NVLS)", "switch multicast (NVLS)"
SHARP_REDUCE, SHARP_MULTICAST = "rail-switch reduce (SHARP)", "rail-switch multicast (SHARP)"
IN_SWITCH_PHASES = frozenset({NVLS_REDUCE, NVLS_MULTICAST, SHARP_REDUCE, SHARP_MULTICAST})


def nvls_all_reduce(m: np.ndarray, elements: int, pieces: int = 1) -> Schedule:
    """In-switch AllReduce (NVLS inside servers, SHARP on the rail switches), pipelined in pieces.

    The buffer is P pieces x L shards x S chunks (chunk p·LS + l·S + j). For piece p:
    step p: every GPU's shard l goes into the NVSwitch, which adds them and hands the sum to the
    server's GPU l; step p+1: GPU l of every server sends chunk j of its shard into rail switch l,
    which adds them and hands the sum to server j's GPU l; step p+2: the rail switch multicasts it
    back to GPU l of every server; step p+3: the NVSwitch multicasts shard l to the server's GPUs.
    (With one server the rail-switch steps vanish; with one GPU per server the NVSwitch steps.)
    """
    s_count, local = m.shape
    ls = local * s_count
    p = np.arange(pieces).reshape(-1, 1, 1, 1)
    mb = MoveBuilder()
    inter = 2 if s_count > 1 else 0
    srv = np.arange(s_count).reshape(1, -1, 1, 1)
    l_idx: np.ndarray  # pair indices, reshaped to broadcast
    q_idx: np.ndarray
    j_idx: np.ndarray
    t_idx: np.ndarray
    if local > 1:  # [p, s, owner l, member q]
        l_idx, q_idx = np.nonzero(~np.eye(local, dtype=bool))
        l_idx, q_idx = l_idx.reshape(1, 1, -1), q_idx.reshape(1, 1, -1)
        srv3 = srv[..., 0]
        p3 = p[..., 0]
        mb.add(p3, m[srv3, q_idx], m[srv3, l_idx], p3 * ls + l_idx * s_count, MODE_REDUCE, NVLS_REDUCE, count=s_count)
        mb.add(
            p3 + 1 + inter,
            m[srv3, l_idx],
            m[srv3, q_idx],
            p3 * ls + l_idx * s_count,
            MODE_COPY,
            NVLS_MULTICAST,
            count=s_count,
        )
    if s_count > 1:  # [p, l, owner server j, member server t]
        j_idx, t_idx = np.nonzero(~np.eye(s_count, dtype=bool))
        j_idx, t_idx = j_idx.reshape(1, 1, -1), t_idx.reshape(1, 1, -1)
        lane = np.arange(local).reshape(1, -1, 1)
        p3 = p[..., 0]
        chunk = p3 * ls + lane * s_count + j_idx
        mb.add(p3 + 1, m[t_idx, lane], m[j_idx, lane], chunk, MODE_REDUCE, SHARP_REDUCE, channel=lane)
        mb.add(p3 + 2, m[j_idx, lane], m[t_idx, lane], chunk, MODE_COPY, SHARP_MULTICAST, channel=lane)
    return mb.build(
        "all-reduce",
        "nvls",
        m.reshape(-1),
        elements,
        chunk_bounds_array(elements, pieces * ls),
        ALL,
        ALL,
        notes=f"{s_count} servers × {local} GPUs: NVSwitch reduce, rail-switch reduce + multicast, "
        f"NVSwitch multicast; {pieces} piece(s) pipelined",
    )
