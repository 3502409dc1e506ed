"""The packet engine's hot-path shortcuts agree with the parts they stand in for (issue 18 item 2): the per-class
queues' `nonempty` bits, and a port's single-busy-queue choice against the egress scheduler's `pick`."""

from __future__ import annotations

import random

from aifabric.packet.class_queues import CLASSES, ClassQueues
from aifabric.packet.config import PacketConfig
from aifabric.packet.egress_scheduler import EgressScheduler
from aifabric.packet.network import Network
from aifabric.packet.sim import DATA, Pkt
from aifabric.packet.topo import fat_tree, link_between


def _pkt(size: int, prio: int) -> Pkt:
    return Pkt(DATA, None, 0, size, size, 24, prio, 1, 0, None)


def _bits(qs: ClassQueues) -> int:
    return sum(1 << q for q in range(CLASSES) if qs.fifos[q])


def test_nonempty_bits_follow_push_and_pop():
    rng = random.Random(7)
    qs = ClassQueues()
    for _ in range(2000):
        q = rng.randrange(CLASSES)
        if qs.fifos[q] and rng.random() < 0.5:
            qs.pop(q)
        else:
            qs.push(_pkt(rng.randrange(64, 9000), q), q)
        assert qs.nonempty == _bits(qs)
        assert qs.backlog == sum(qs.depth_bytes) == sum(p.size for f in qs.fifos for p in f)


def test_a_port_serves_its_only_busy_queue_as_the_scheduler_would():
    """Packets queued on a switch port (while it is paused) go out in the order the scheduler's `pick` gives, and the
    queue's bits stay right through the port's own push and pop."""
    f = fat_tree(2, 2, 1, 200)
    net = Network(f, PacketConfig())
    port = net.ports[link_between(f, "leaf0", "h1")]
    port.is_switch_port = False  # hand-made packets: no shared-buffer bookkeeping
    sent: list[Pkt] = []
    port.peer_receive = sent.append
    rng = random.Random(3)
    ref = EgressScheduler((7,), (50, 0, 0, 50, 0, 0, 0, 0), 4096)
    model = ClassQueues()
    for q in range(CLASSES):
        port.paused_until[q] = 1.0  # everything waits until t = 1 s
    for _ in range(300):
        q = rng.choice((0, 3, 3, 3, 7))
        size = rng.randrange(64, 4200)
        port.enqueue(_pkt(size, q), q)
        model.push(_pkt(size, q), q)
        assert port.queue.nonempty == _bits(port.queue)
    for q in range(CLASSES):
        port.paused_until[q] = 0.0
    net.sim.at(1.0, port.kick)
    net.sim.run()
    want = []
    while model.backlog:
        q = ref.pick(model.fifos, [0.0] * CLASSES, 0.0)
        want.append((q, model.pop(q).size))
    assert [(p.prio, p.size) for p in sent] == want
    assert port.queue.nonempty == 0 and port.queue.backlog == 0
