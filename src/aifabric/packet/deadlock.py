"""PFC deadlock: a cycle of egress ports, each paused by the switch its packets wait to enter, none moving (Deep
Learning for Network Engineers, Chapter 11: PFC's pauses propagate hop by hop, so a cyclic buffer dependency
pauses itself forever).

The wait-for graph, per lossless priority: an egress port P (switch X toward Y) waits on an egress port Q of Y when
P is paused by Y (Y's ingress counter for P's link is past xOFF: `Switch.paused_up`), Q is paused too, and Q's queue
holds packets counted on that ingress counter (they entered Y over P's link). Y cannot resume P until those packets
leave through Q; if following the edges returns to P, no port of the cycle can send again: a PFC deadlock (Hu et al.,
"Deadlocks in Datacenter Networks: Why Do They Form, and How to Avoid Them", HotNets 2016; Guo et al., "RDMA over
Commodity Ethernet at Scale", SIGCOMM 2016, section 4.2). The cycle forms where routes make a cyclic buffer
dependency: a routing loop while routing converges, or down-up paths after link failures.

`check(net, port, prio)` runs when a switch refreshes a pause (its ingress has stayed past xON for half a pause
time; `Switch._refresh`): it adds no event to the run. A cycle is declared a deadlock when it is found again at
least `DEADLOCK_HOLD_S` later with every port's queue unchanged (the same packet at its head, the same bytes: no
progress). The PFC watchdog (`pfc_watchdog_s`) then breaks it by discarding a stuck queue; without one the run
stops there (`Network.deadlocked`), since nothing would ever move again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .network import Network
    from .port import Port

DEADLOCK_HOLD_S = 1e-3  # a cycle unchanged this long (many pause refreshes) is a deadlock, not a slow drain
CHECK_EVERY_S = 20e-6  # at most one search per port per this much simulated time


def _waits_on(net: Network, p: Port, prio: int, now: float) -> list[Port]:
    """The paused ports of p's peer switch holding packets that entered over p's link."""
    peer = p.peer
    if getattr(peer, "kind", "") != "switch" or not peer.paused_up.get(p.link * 8 + prio):
        return []
    key = p.link * 8 + prio
    out = []
    for q in peer.ports.values():
        if q.queues[prio] and q.paused_until[prio] > now and any(pkt.ikey == key for pkt in q.queues[prio]):
            out.append(q)
    return out


def find_cycle(net: Network, start: Port, prio: int, now: float) -> list[Port] | None:
    """A cycle of paused ports reachable from `start` in the wait-for graph (each port waits on the next, the last
    on the first), or None."""
    if not (start.queues[prio] and start.paused_until[prio] > now):
        return None
    stack: list[tuple[Port, list[Port]]] = [(start, _waits_on(net, start, prio, now))]
    on_path = {start.link: 0}
    done: set[int] = set()
    while stack:
        p, nxt = stack[-1]
        if not nxt:
            stack.pop()
            on_path.pop(p.link, None)
            done.add(p.link)
            continue
        q = nxt.pop()
        if q.link in on_path:
            return [s for s, _ in stack[on_path[q.link] :]]
        if q.link in done:
            continue
        on_path[q.link] = len(stack)
        stack.append((q, _waits_on(net, q, prio, now)))
    return None


def _snapshot(cycle: list[Port], prio: int) -> tuple:
    return tuple((p.link, id(p.queues[prio][0]) if p.queues[prio] else 0, p.qbytes[prio]) for p in cycle)


def check(net: Network, port: Port, prio: int) -> None:
    """Called when a pause on `port` (the upstream egress) is refreshed: look for a cycle through it (not while a
    declared deadlock waits for the watchdog)."""
    now = net.sim.now
    if (
        net.deadlocked
        or net.deadlock_open is not None
        or now - net.deadlock_last_check.get(port.link, -1.0) < CHECK_EVERY_S
    ):
        return
    net.deadlock_last_check[port.link] = now
    cycle = find_cycle(net, port, prio, now)
    if cycle is None:
        return
    key = frozenset(p.link for p in cycle)
    snap = _snapshot(sorted(cycle, key=lambda p: p.link), prio)
    seen = net.deadlock_watch.get(key)
    if seen is None or seen[1] != snap:
        net.deadlock_watch[key] = (now, snap)
        return
    if now - seen[0] < DEADLOCK_HOLD_S:
        return
    declare(net, cycle, prio, seen[0])


def describe(cycle: list[Port]) -> str:
    """'A->B paused by B (waits on B->C) ... back to A->B'."""
    parts = [f"{p.name} paused by {p.peer.id}" for p in cycle]
    return " -> ".join(parts) + f" -> back to {cycle[0].name}"


def declare(net: Network, cycle: list[Port], prio: int, since_s: float) -> None:
    now = net.sim.now
    # start the cycle at its lowest link, for a stable report
    k = min(range(len(cycle)), key=lambda i: cycle[i].link)
    cycle = cycle[k:] + cycle[:k]
    held = sum(p.qbytes[prio] for p in cycle)
    wd = net.cfg.switch.pfc_watchdog_s
    rec = {
        "t_s": now,
        "since_s": since_s,
        "priority": prio,
        "ports": [p.name for p in cycle],
        "switches": [p.owner.id for p in cycle],
        "bytes_held": held,
        "watchdog_s": wd,
        "broken_at_s": None,
    }
    net.stats.deadlocks.append(rec)
    net.log(
        now,
        f"PFC deadlock on priority {prio}: {describe(cycle)}; {len(cycle)} ports, {held / 1e3:.0f} KB held, "
        f"no packet has left any of them since {since_s * 1e6:.1f} us (a cyclic buffer dependency: Deep "
        "Learning for Network Engineers, Chapter 11)",
        "deadlock",
    )
    if wd is None:
        net.log(now, "no PFC watchdog: nothing will ever move again; the run stops here", "deadlock")
        net.deadlocked = True
        net.sim.heap.clear()
    else:
        net.deadlock_open = rec
        net.log(
            now,
            f"the PFC watchdog ({wd * 1e3:g} ms) will break it: the first port of the cycle paused longer "
            "than that discards its queue",
            "deadlock",
        )


def watchdog_fired(net: Network, port: Port) -> None:
    """The watchdog acted on `port`: if it is in the open deadlock's cycle, the deadlock is broken."""
    rec = net.deadlock_open
    if rec is not None and port.name in rec["ports"]:
        rec["broken_at_s"] = net.sim.now
        rec["broken_by"] = port.name
        net.deadlock_open = None
        net.log(
            net.sim.now,
            f"PFC deadlock broken: the watchdog on {port.name} discarded its queue; the cycle "
            "unwinds (the discarded packets are resent by go-back-N)",
            "deadlock",
        )
