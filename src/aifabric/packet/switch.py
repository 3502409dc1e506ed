"""A switch: classification, forwarding with load balancing, WRED/ECN at egress, PFC accounting at ingress.

WRED's regimes (`wred_decision`) and the queues it watches: class_queues.py. Buffer model (shared memory, documented in docs/packet.md): a packet occupies the switch's shared
buffer from arrival until its last bit leaves the egress port. It is counted twice while there: on its
egress queue (WRED/ECN decisions use that depth: instantaneous with `weight 0`, the book's; with `weight n`
RED's exponentially weighted average, avg <- (1 - 2^-n) avg + 2^-n depth at each arrival to the queue, as
Cisco's WRED computes it with its exponential weighting constant n (Floyd and Jacobson 1993; no idle-time
decay: an idle queue's average falls at the next arrivals) and on its ingress port's
priority group (PFC: crossing xOFF sends a pause upstream on the ingress link, falling below xON sends
quanta 0). Headroom above xOFF absorbs what is in flight while the pause travels; overrunning it drops.

Load balancing among the equal-cost next hops toward the destination's last switch:
- ecmp: the flow's 5-tuple hash (the route the Router chose; every packet of a QP on one path);
- flowlet: a new choice, the least-loaded port, after an idle gap longer than `flowlet_gap_s`;
- spray: per packet, round robin over the group for each flow (packet spraying, Figure 12-6);
- adaptive: per packet, the least-loaded port, ties to the hash choice.
The profile's DLB (`fabric.qos.dlb`, Cisco's Dynamic Load Balancing) runs as flowlet (mode flowlet) or adaptive
(mode per-packet): packet/profile.py.
Load = queued bytes + a discounting rate estimator of recently sent bytes (CONGA's DRE, time constant
`lb.dre_tau_s`), so an idle-queue port that is busy sending still counts as loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .class_queues import CLASSES, DROP, FORWARD, MARK, wred_decision
from .deadlock import check as check_deadlock
from .headers import ECN_CE, ECN_NOT_ECT, PFC_FRAME_BYTES, pfc_pause_s
from .lb import spray_index
from .sim import DATA, Pkt

if TYPE_CHECKING:
    from .port import Port

__all__ = ["DROP", "FORWARD", "MARK", "Switch", "wred_decision"]  # WRED's names where they were


class Switch:
    """A switch node: classifies by DSCP, forwards (ECMP, flowlet, spray, adaptive), WRED/ECN, PFC on ingress."""

    kind = "switch"

    def __init__(self, net, idx: int, node_id: str, forwarding_latency_s: float):
        self.net = net
        self.sim = net.sim
        self.idx = idx
        self.id = node_id
        self.forwarding_latency_s = forwarding_latency_s
        c = net.cfg.switch
        self.ports: dict[int, Port] = {}  # out link -> Port
        self.buffer_used = 0
        self.ingress: dict[int, int] = {}  # in_link * 8 + prio -> bytes
        self.paused_up: dict[int, int] = {}  # in_link * 8 + prio -> pause generation (0: not paused)
        self.headroom: dict[int, int] = {}
        self.flowlets: dict = {}
        self.spray_rr: dict = {}
        self.groups: dict[int, list[int]] = {}
        self.lossless = set(c.pfc_priorities) if c.pfc_enabled else set()
        self.ecn_queues = set(c.ecn_queues) if c.ecn_enabled else set()
        self.dscp_map = dict(c.dscp_to_queue)
        self.default_queue = c.default_queue
        self.wred_ecn = c.wred_ecn
        self.lb = net.cfg.lb.mode
        self.seed = net.switch_seed(node_id)
        self.buffer_bytes = c.buffer_bytes
        # per ECN queue: (WRED min, max, pmax, drop threshold)
        self.wred = {q: net.cfg.wred_of(q) for q in self.ecn_queues}
        self.wred_q = [self.wred.get(q) for q in range(CLASSES)]  # the same by queue (None: no WRED), and:
        self.lossless_q = [q in self.lossless for q in range(CLASSES)]  # PFC on the queue's priority
        self.wred_gain = 2.0**-c.wred_weight if c.wred_weight else 0.0  # 0: the instantaneous depth
        pfc = [net.cfg.pfc_of(q) for q in range(CLASSES)]  # per priority: its own thresholds or the switch's
        self.xon_q, self.xoff_q, self.headroom_q = ([x[i] for x in pfc] for i in range(3))
        self.queue_limit = c.queue_limit_bytes
        self.dt_alpha = c.dynamic_threshold_alpha
        self.static_lb = self.lb == "ecmp"
        # forwarding overrides: destination's last switch (node index) -> out link, whatever the flow's route says
        # (a switch whose routing has not converged yet, or has: a transient routing loop); None: none
        self.fib: dict[int, int] | None = None

    # -- forwarding -------------------------------------------------------------------------------
    def next_link(self, pkt: Pkt) -> int:
        path = pkt.path
        static = path.next_at.get(self.idx)
        if self.idx == path.last_sw or (self.static_lb and static is not None and not path.spray):
            return static
        mode = "spray" if path.spray else self.lb
        if mode == "ecmp" and static is not None:
            return static
        group = self.groups.get(path.last_sw)
        if group is None:
            group = self.groups[path.last_sw] = self.net.next_hops(self.idx, path.last_sw)
        if not group:  # routing knows no way from here (faults): the flow's own route, whatever it meets
            return static if static is not None else path.links[-1]
        if len(group) == 1:
            return group[0]
        if mode == "ecmp":
            return group[path.hash % len(group)]
        if path.spray:  # UET: the NIC's per-packet entropy picks the path
            return group[spray_index(pkt.entropy, self.seed, len(group))]
        ports = self.ports
        if mode == "spray":  # per flow round robin, so two interleaved flows do not pin each other
            i = self.spray_rr.get(path.key, path.hash)
            self.spray_rr[path.key] = i + 1
            return group[i % len(group)]
        now = self.net.sim.now
        if mode == "adaptive":
            best = static if static is not None else group[path.hash % len(group)]
            load = ports[best].load(now)
            for li in group:
                x = ports[li].load(now)
                if x < load:
                    best, load = li, x
            return best
        # flowlet
        key = path.key
        state = self.flowlets.get(key)
        if state is not None and now - state[1] <= self.net.cfg.lb.flowlet_gap_s:
            state[1] = now
            return state[0]
        best = min(group, key=lambda li: (ports[li].load(now), li))
        if state is not None and best != state[0]:
            self.net.stats.flowlet_switches += 1
        self.flowlets[key] = [best, now]
        return best

    # -- receive / admit ------------------------------------------------------------------------
    def receive(self, pkt: Pkt) -> None:
        now = self.sim.now
        q = self.dscp_map.get(pkt.dscp, self.default_queue)
        pkt.prio = q
        path = pkt.path
        fib = self.fib
        if fib is not None and path.last_sw in fib:  # forwarding state of its own (packet/deadlock.py)
            pkt.ttl -= 1
            li = fib[path.last_sw]
            if pkt.ttl <= 0:
                self.net.drop(self.ports[li], pkt, "ttl-expired")
                return
            port = self.ports[li]
        elif self.static_lb and not path.spray:
            port = path.port_at.get(self.idx)  # the route's next link's port (Path.next_at), or None
            if port is None:
                port = self.ports[self.next_link(pkt)]
        else:
            port = self.ports[self.next_link(pkt)]
        size = pkt.size
        if self.buffer_used + size > self.buffer_bytes:
            self.net.drop(port, pkt, "buffer-full")
            return
        queue = port.queue
        depth = queue.depth_bytes[q]
        w = self.wred_q[q]
        if w is not None:
            level, drop_at = depth, w[3]  # what WRED compares; its drop threshold there
            if self.wred_gain:  # the average, updated on every arrival; the drop threshold stays on
                level = queue.average(q, self.wred_gain)  # the instantaneous depth (it guards the buffer)
                drop_at = None
                if w[3] is not None and depth > w[3]:
                    self.net.drop(port, pkt, "wred-drop-threshold")
                    return
            if level > w[0] and pkt.kind == DATA:
                net = self.net
                u = net.uniform() if level <= w[1] else 1.0
                act = wred_decision(level, w[0], w[1], w[2], drop_at, u)
                if act == DROP:
                    net.drop(port, pkt, "wred-drop-threshold")
                    return
                if act == MARK:
                    if not self.wred_ecn:  # WRED without `ecn`: the switch drops where it would mark
                        net.drop(port, pkt, "wred")
                        return
                    if pkt.ecn != ECN_NOT_ECT:
                        if pkt.ecn != ECN_CE:
                            pkt.ecn = ECN_CE
                            net.ecn_mark(port, q, level)
                    elif not self.lossless_q[q]:
                        net.drop(port, pkt, "wred")  # not ECN-capable: WRED drops instead of marking
                        return
            elif w[3] is not None and depth > w[3]:
                self.net.drop(port, pkt, "wred-drop-threshold")
                return
        if self.lossless_q[q]:
            key = pkt.in_link * 8 + q
            level = self.ingress.get(key, 0) + size
            xoff = self.xoff_q[q]
            if level > xoff:
                if level > xoff + self._headroom(pkt.in_link, q):
                    self.net.drop(port, pkt, "pfc-headroom-overrun")
                    return
                if not self.paused_up.get(key):
                    self.ingress[key] = level
                    pkt.ikey = key
                    self.buffer_used += size
                    self._send_pfc(pkt.in_link, q, self.net.cfg.switch.pfc_quanta, level)
                    port.enqueue(pkt, q)
                    return
            if not queue.backlog and port.busy_until <= now and port.paused_until[q] <= now:
                port.transmit(pkt, now)  # straight through: the ingress count rises and falls at once
                return
            self.ingress[key] = level
            pkt.ikey = key
        elif depth + size > self.queue_limit:
            self.net.drop(port, pkt, "queue-limit")
            return
        elif self.dt_alpha is not None and depth + size > self.dt_alpha * (self.buffer_bytes - self.buffer_used):
            self.net.drop(port, pkt, "dynamic-threshold")
            return
        elif not queue.backlog and port.busy_until <= now and port.paused_until[q] <= now:
            port.transmit(pkt, now)
            return
        self.buffer_used += size
        port.enqueue(pkt, q)

    def released(self, pkt: Pkt) -> None:
        """The packet left (or was discarded from) an egress queue: free its buffer and ingress count."""
        size = pkt.size
        self.buffer_used -= size
        key = pkt.ikey
        if key >= 0:
            level = self.ingress[key] - size
            self.ingress[key] = level
            pkt.ikey = -1
            if level < self.xon_q[key & 7] and self.paused_up.get(key):
                self._send_pfc(key >> 3, key & 7, 0, level)

    def _headroom(self, in_link: int, prio: int) -> int:
        own = self.headroom_q[prio]  # the priority's (or the switch's) configured headroom
        if own is not None:
            return own
        h = self.headroom.get(in_link)
        if h is None:
            link = self.net.fabric.links[in_link]
            frame = self.net.cfg.nic.mtu_bytes + 100
            # in flight while the pause travels back and takes effect: the cable both ways, this
            # switch's pipeline (packets already committed to arrive), the frame being sent upstream
            # and the one on the wire when the pause lands
            flight_s = 2 * (link.latency_s + self.forwarding_latency_s)
            h = int(flight_s * link.capacity_bytes_per_s) + 3 * frame + PFC_FRAME_BYTES
            self.headroom[in_link] = h
        return h

    # -- PFC, sending side --------------------------------------------------------------------------
    def _send_pfc(self, in_link: int, prio: int, quanta: int, level: int, refresh: bool = False) -> None:
        """A pause (quanta > 0) or resume (quanta 0) frame for `prio`, back over the ingress link."""
        net = self.net
        key = in_link * 8 + prio
        back = net.reverse_port(in_link)
        now = net.sim.now
        t = max(now, back.busy_until) + PFC_FRAME_BYTES * back.s_per_byte + back.latency_s
        upstream = net.ports[in_link]  # the sender's egress port on that link
        net.sim.at(t, upstream.on_pfc, (prio, quanta, self.id))
        net.pfc_sent(back, prio, quanta, now)
        if quanta:
            gen = self.paused_up.get(key, 0) or 0
            gen = abs(gen) + 1
            self.paused_up[key] = gen
            if not refresh:
                net.log(
                    now,
                    f"{self.id}: ingress from {upstream.name} priority {prio} at {level / 1e3:.1f} KB "
                    f"> xOFF {self.xoff_q[prio] / 1e3:.0f} KB: PFC pause "
                    f"(0x8808/0x0101, CEV {1 << prio:08b}, {quanta} quanta) sent upstream",
                    "pfc",
                )
            half = pfc_pause_s(quanta, upstream.rate_bytes_per_s) / 2
            net.sim.at(now + half, self._refresh, (key, gen))
        else:
            self.paused_up[key] = 0
            net.log(
                now,
                f"{self.id}: ingress from {upstream.name} priority {prio} at {level / 1e3:.1f} KB "
                f"< xON {self.xon_q[prio] / 1e3:.0f} KB: PFC resume (quanta 0) sent",
                "pfc",
            )

    def _refresh(self, arg) -> None:
        key, gen = arg
        if self.paused_up.get(key) == gen:
            self._send_pfc(key >> 3, key & 7, self.net.cfg.switch.pfc_quanta, self.ingress.get(key, 0), True)
            check_deadlock(self.net, self.net.ports[key >> 3], key & 7)  # still past xON: part of a cycle?
