"""Cables that fail, slow down or lose packets during a packet-level run (the scenario's `faults:`; Deep Learning for
Network Engineers, Chapter 10), and routing that converges around them.

- A cable down: its ports deliver nothing. Every frame serialized onto it is lost, and so are the frames on the wire
  when it fails (their arrival events are turned into losses). Until routing converges, the switches keep sending into
  it (their forwarding state still points there); the QPs whose packets are lost time out and go back N.
- A cable degraded: its ports serialize at `factor` of the line rate; with `loss_rate` each frame that crosses it is
  lost with that probability, drawn from the run's seeded generator (its own stream of the scenario's seed).
- Routing converged (`Network.converge`): the next-hop groups of flowlet / adaptive / spray switches leave out the
  links routing knows are down; each moved QP's packets, ACKs and CNPs take the route the engine adapter gives it
  (engines/packet.py: the Router's converged route, resilient ECMP, as on the flow engine).

Nothing here runs unless a fault is given: a run without faults is unchanged.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from .sim import Pkt

if TYPE_CHECKING:
    import numpy as np

    from .network import Network
    from .port import Port


class LinkFaults:
    """The state of the faulted cables' ports: rate, loss, down, and what they were before."""

    def __init__(self, net: Network, rng: np.random.Generator | None):
        self.net, self.rng = net, rng
        self.receive: dict[int, object] = {}  # link -> the far end's receive (the port's own)
        self.rate: dict[int, tuple[float, float]] = {}  # link -> (bytes per second, seconds per byte) of its own
        self.down: set[int] = set()
        self.lost_packets = 0

    def set(self, link: int, factor: float, loss_rate: float = 0.0) -> None:
        """The directed link from now: `factor` of its rate (0: down), each frame lost with `loss_rate`."""
        net = self.net
        port = net.ports[link]
        if link not in self.receive:
            self.receive[link] = port.peer_receive
            self.rate[link] = (port.rate_bytes_per_s, port.s_per_byte)
        real = self.receive[link]
        rate, spb = self.rate[link]
        if factor <= 0:
            if link not in self.down:
                self.down.add(link)
                port.peer_receive = partial(self._lost, port)
                self._lose_in_flight(port, real)
                net.log(net.sim.now, f"{port.name}: the cable is down; what it carries is lost", "fault")
            return
        self.down.discard(link)
        port.rate_bytes_per_s, port.s_per_byte = rate * factor, spb / factor
        if loss_rate > 0:
            if self.rng is None:
                raise ValueError("a loss rate needs the run's seeded generator")
            port.peer_receive = partial(self._lossy, port, real, float(loss_rate))
        else:
            port.peer_receive = real
        what = (
            "whole again"
            if factor == 1 and not loss_rate
            else f"at {factor:g} of its rate" + (f", losing {loss_rate:g} of its frames" if loss_rate else "")
        )
        net.log(net.sim.now, f"{port.name}: the cable is {what}", "fault")
        if port.backlog or port.source is not None:
            port.kick()

    def _lose_in_flight(self, port: Port, real) -> None:
        """Frames already on the failed cable (their arrival scheduled) are lost instead."""
        heap, lost = self.net.sim.heap, partial(self._lost, port)
        for i, (t, seq, fn, arg) in enumerate(heap):
            if isinstance(arg, Pkt) and arg.in_link == port.link and fn == real:
                heap[i] = (t, seq, lost, arg)  # same time and sequence: the heap's order holds

    def _lost(self, port: Port, pkt: Pkt) -> None:
        port.tx_bytes -= pkt.size  # nothing crossed the cable
        port.tx_packets -= 1
        self.lost_packets += 1
        self.net.drop(port, pkt, "link-down")

    def _lossy(self, port: Port, real, p: float, pkt: Pkt) -> None:
        assert self.rng is not None
        if self.rng.random() < p:
            self.lost_packets += 1
            self.net.drop(port, pkt, "link-loss")
        else:
            real(pkt)
