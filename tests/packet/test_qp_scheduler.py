"""The QP scheduler finds the next queue pair by index (bit sets over slots) and must serve exactly the flow a scan
of every flow in turn would: driven side by side with that scan through random adds, removals, pauses, rate
limits and go-back-N resends, both give the same packets and the same next wake-up."""

from __future__ import annotations

import random
from math import inf

import pytest

from aifabric.packet.qp_scheduler import SCAN_FLOWS, Source


class _Scan:
    """The reference: every flow tested in turn (the scheduler as it was before the index)."""

    def __init__(self):
        self.active: list = []
        self.rr = 0

    def add(self, flow) -> None:
        self.active.append(flow)

    def remove(self, flow) -> None:
        if flow in self.active:
            self.active.remove(flow)

    def pull(self, now, paused):
        act = self.active
        n = len(act)
        for i in range(n):
            j = (self.rr + i) % n
            f = act[j]
            if f.next_t <= now and paused[f.prio] <= now and f.has_data():
                self.rr = j + 1
                return f.next_packet(now)
        return None

    def next_ready(self, paused) -> float:
        t = inf
        for f in self.active:
            if f.has_data():
                t = min(t, max(f.next_t, paused[f.prio]))
        return t


class _Flow:
    """A QP as the scheduler sees it: a priority, a rate limiter (`next_t`), packets to send; `got` when it places
    out of order (has_data skips what the responder already has)."""

    def __init__(self, fid: int, prio: int, n: int, lazy: bool):
        self.id, self.prio, self.n = fid, prio, n
        self.snd_nxt = 0
        self.next_t = 0.0
        self.got = bytearray(n) if lazy else None
        self.rng = random.Random(fid)

    def has_data(self) -> bool:
        if self.got is not None:
            while self.snd_nxt < self.n and self.got[self.snd_nxt]:
                self.snd_nxt += 1
        return self.snd_nxt < self.n

    def next_packet(self, now: float):
        psn = self.snd_nxt
        self.snd_nxt = psn + 1
        self.next_t = now + self.rng.choice((0.0, 0.0, 0.5, 1.0, 3.0))
        return self.id, psn


class _Sim:
    now = 0.0


class _Port:
    def __init__(self):
        self.sim = _Sim()

    def kick(self) -> None:
        pass


def _drive(seed: int, max_flows: int, lazy_share: float, steps: int = 3000) -> int:
    rng = random.Random(seed)
    port = _Port()
    ref, new = _Scan(), Source(port)
    flows: dict[str, dict[int, _Flow]] = {"ref": {}, "new": {}}
    next_id = 0
    served = 0
    now = 0.0
    for _ in range(steps):
        now += rng.choice((0.0, 0.0, 0.25, 1.0))
        port.sim.now = now
        op = rng.random()
        if op < 0.08 and len(ref.active) < max_flows:
            prio, n, lazy = rng.choice((3, 3, 3, 0)), rng.randint(1, 12), rng.random() < lazy_share
            for side, src in (("ref", ref), ("new", new)):
                f = flows[side][next_id] = _Flow(next_id, prio, n, lazy)
                src.add(f)
            next_id += 1
        elif op < 0.13 and ref.active:
            fid = rng.choice(ref.active).id
            ref.remove(flows["ref"][fid])
            new.remove(flows["new"][fid])
        elif op < 0.18 and ref.active:  # a NAK or a timeout: go back
            fid = rng.choice(ref.active).id
            back = rng.randint(0, flows["ref"][fid].snd_nxt)
            for side in ("ref", "new"):
                flows[side][fid].snd_nxt = min(back, flows[side][fid].snd_nxt)
            new.resend(flows["new"][fid])
        elif op < 0.22 and ref.active:  # the responder places a packet ahead (direct placement)
            f = rng.choice(ref.active)
            if f.got is not None:
                psn = rng.randrange(f.n)
                flows["ref"][f.id].got[psn] = flows["new"][f.id].got[psn] = 1
        else:
            paused = [now + rng.choice((1.0, 2.0)) if rng.random() < 0.3 else 0.0 for _ in range(8)]
            a, b = ref.pull(now, paused), new.pull(now, paused)
            assert a == b
            if a is None:
                assert ref.next_ready(paused) == new.next_ready(paused)
            else:
                served += 1
        assert [f.id for f in ref.active] == [f.id for f in new.active]
    return served


@pytest.mark.parametrize("seed", range(6))
def test_indexed_lookup_serves_what_the_scan_serves(seed):
    assert _drive(seed, max_flows=3 * SCAN_FLOWS, lazy_share=0.0) > 500


@pytest.mark.parametrize("seed", range(3))
def test_indexed_lookup_with_out_of_order_placement(seed):
    assert _drive(100 + seed, max_flows=2 * SCAN_FLOWS, lazy_share=0.5) > 300


def test_around_the_scan_threshold_and_after_slots_are_compacted():
    assert _drive(7, max_flows=SCAN_FLOWS + 2, lazy_share=0.2, steps=20_000) > 1000
