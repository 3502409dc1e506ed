"""The packet-level network built from a `Fabric`: a device per node, a port per directed link, flows.

Switch nodes (rail, spine) become `Switch`es; every other node (NIC, GPU, NVSwitch) a `Host`. A
transfer whose route leaves a NIC onto the switched fabric becomes a RoCEv2 `QpFlow` from the source
NIC to the destination NIC (the PCIe hops at both ends are a fixed latency, and the QP's rate is capped
by the PCIe bandwidth); a route that stays inside a server (NVLink) becomes a `ChunkFlow` through the
NVSwitch. ACKs, NAKs and CNPs travel back over the reverse links of the forward route.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ..fabric.ecmp import roce_udp_source_port, switch_seed
from ..fabric.graph import TIER_PCIE, Fabric
from ..fabric.routing import Router
from .config import PacketConfig, validate
from .connection import Connection, Rnic, psn_generator
from .headers import PFC_FRAME_BYTES, pfc_pause_s
from .load_estimator import LoadEstimator
from .nic import ChunkFlow, Host, Path, QpFlow
from .port import Port, serialization_rate_bytes_per_s
from .port_monitors import DepthSampler, PortNarrator
from .sim import DATA, Sim
from .stats import PacketStats
from .switch import Switch

LOG_LIMIT = 4000
# a run of fewer data packet hops takes the Python engine under `Network.loop = "auto"`: it is over (5-10 us a hop)
# before numba is imported and the compiled core loaded from its cache (about 1 s in a fresh process)
COMPILED_MIN_HOPS = 150_000


def no_completion_callback(flow) -> None:
    """A transfer's default completion callback: nothing (the compiled core runs only networks whose transfers all
    have it, packet/fastcore.py)."""


class _NoSource:
    active: tuple = ()


_NO_SOURCE = _NoSource()


class Network:
    default_loop = "auto"  # `loop` of a new network (tests set "python" to run the reference everywhere)

    def __init__(
        self,
        fabric: Fabric,
        cfg: PacketConfig | None = None,
        rng: np.random.Generator | None = None,
        hash_seed: int = 0,
        per_switch_seed: bool = False,
    ):
        self.cfg = cfg = validate(cfg or PacketConfig())
        self.fabric = fabric
        self.sim = Sim()
        self.rng = rng if rng is not None else np.random.default_rng(cfg.seed)
        self._uniforms: list[float] = []
        self._ui = 0
        self.hash_seed, self.per_switch_seed = hash_seed, per_switch_seed
        self.depth_sample_s = cfg.depth_sample_s
        self.data_dscp, self.cnp_dscp = cfg.nic.data_dscp, cfg.nic.cnp_dscp
        self.cnp_queue = cfg.queue_of(cfg.nic.cnp_dscp)
        self.stats = PacketStats()
        self.events_log: list[tuple[float, str, str]] = []
        self.log_dropped = 0
        self.captured: list = []
        self.capture_missed = 0  # packets and PFC frames of traced flows past cfg.trace_max_packets
        self.flows: list = []
        self.rdma_flows = 0  # RDMA transfers (QP flows) started so far
        self.psn_rng = psn_generator(cfg.seed)  # initial PSNs: a stream of their own
        self.connections: dict[tuple[int, int, int], Connection] = {}
        self.rnics: dict[int, Rnic] = {}
        self.link_bin_s = 1e-6
        self.node_index = {nid: i for i, nid in enumerate(fabric.nodes)}
        fwd_s = cfg.switch.forwarding_latency_s
        fwd_s = fabric.switch_latency_s if fwd_s is None else fwd_s
        self.devices: list = []
        for i, (nid, node) in enumerate(fabric.nodes.items()):
            if fabric.is_switch(nid):
                self.devices.append(Switch(self, i, nid, fwd_s))
            else:
                self.devices.append(Host(self, i, nid, node.ip))
        c = cfg.switch
        self.ports: list[Port] = []
        for link in fabric.links:
            owner = self.devices[self.node_index[link.src]]
            peer = self.devices[self.node_index[link.dst]]
            port = Port(
                self, link, owner, peer, c.strict_priority_queues, c.bandwidth_remaining_percent, cfg.nic.mtu_bytes
            )
            port.is_switch_port = isinstance(owner, Switch)
            if port.is_switch_port:  # a switch's queues are sampled; flowlet and adaptive routing compare its ports
                port.sample_depth(DepthSampler(self.depth_sample_s))
                if cfg.lb.mode in ("flowlet", "adaptive"):
                    port.dre = LoadEstimator(cfg.lb.dre_tau_s)
            if cfg.explain:  # --explain: the port's story (a switch's queues crossing WRED min, PFC frames received)
                kmin = (
                    [cfg.wred_of(q)[0] if q in c.ecn_queues else None for q in range(8)]
                    if port.is_switch_port and c.ecn_enabled
                    else None
                )
                port.narrator = PortNarrator(self, port.name, kmin)
                if kmin is not None:
                    port.watch_depth(port.narrator)
            owner.ports[link.index] = port
            self.ports.append(port)
        # reverse link of each directed link (the j-th parallel a->b pairs with the j-th b->a)
        parallel: dict[tuple[str, str], list[int]] = {}
        for link in fabric.links:
            parallel.setdefault((link.src, link.dst), []).append(link.index)
        self.reverse = [0] * len(fabric.links)
        for (a, b), lis in parallel.items():
            back = parallel.get((b, a), [])
            for j, li in enumerate(lis):
                self.reverse[li] = back[j] if j < len(back) else -1
        self.router = Router(fabric, hash_seed, per_switch_seed)  # the switches' ECMP groups (next_hops)
        # PFC deadlock detection (packet/deadlock.py)
        self.deadlocked = False  # a deadlock with no watchdog to break it: the run stopped
        self.deadlock_last_check: dict[int, float] = {}  # per paused port: the last search from it
        self.deadlock_watch: dict = {}
        self.deadlock_open: dict | None = None  # a deadlock the watchdog has yet to break
        # faults (packet/faults.py): links routing knows are down, a hook told when a QP runs out of retries
        self.routing_down: frozenset[int] = frozenset()
        self.on_qp_failed: Callable[[Any, Any], None] | None = None
        self.stalls: list = []  # (stopped at, progress again at, flow): QPs a failed cable stopped
        # the event loop `run` uses: "compiled" the compiled core (packet/fastcore.py) where it covers the network,
        # else this module's Python engine (the reference); "auto" the same for runs of at least COMPILED_MIN_HOPS
        # packet hops (a smaller one is over before numba is imported and the core loaded); "python" the reference
        # always. `loop_used` says which ran and, for the reference, why the compiled core did not
        self.loop = self.default_loop
        self.loop_used = ""

    # -- helpers used by devices --------------------------------------------------------------------
    def uniform(self) -> float:
        if self._ui >= len(self._uniforms):
            self._uniforms = self.rng.random(4096).tolist()
            self._ui = 0
        u = self._uniforms[self._ui]
        self._ui += 1
        return u

    def switch_seed(self, node_id: str) -> int:
        return switch_seed(self.hash_seed, node_id, self.per_switch_seed)

    def reverse_port(self, link: int) -> Port:
        return self.ports[self.reverse[link]]

    def next_hops(self, sw: int, target: int) -> list[int]:
        """Out-links of switch `sw` on shortest switch paths to switch `target` (the ECMP group)."""
        return self.router.next_hops(self.devices[sw].id, self.devices[target].id)

    def converge(self, down: frozenset[int]) -> None:
        """Routing has converged around `down` (links it knows are down): the switches' next-hop groups leave them
        out (flowlet, adaptive, spray); each QP's own route is the caller's (`reroute`)."""
        self.routing_down = frozenset(down)
        self.router = Router(self.fabric, self.hash_seed, self.per_switch_seed, down=self.routing_down)
        for d in self.devices:
            if isinstance(d, Switch):
                d.groups = {}
                d.flowlets = {}

    def core(self, route) -> list[int]:
        """A GPU-to-GPU route without its PCIe hops at both ends (a fixed latency, not simulated)."""
        f = self.fabric
        lo, hi = 0, len(route)
        while lo < hi and f.links[route[lo]].tier == TIER_PCIE:
            lo += 1
        while hi > lo and f.links[route[hi - 1]].tier == TIER_PCIE:
            hi -= 1
        return list(route[lo:hi])

    def reroute(self, flow, route) -> bool:
        """Move QP flow `flow` (its packets to come, its ACKs and CNPs) onto `route`; False when the route does not
        join the same two NICs (it stays where it is)."""
        core = self.core(route)
        f = self.fabric
        if (
            not core
            or self.node_index[f.links[core[0]].src] != flow.src.idx
            or self.node_index[f.links[core[-1]].dst] != flow.dst.idx
        ):
            return False
        if list(flow.path.links) == core:
            return True
        old_first = flow.path.next_at[flow.src.idx]
        path = self._path(core, flow.path.key, flow.path.spray)
        rpath = self._path([self.reverse[li] for li in reversed(core)], flow.rpath.key)
        sending = flow in flow.src.sources.get(old_first, _NO_SOURCE).active
        if sending and core[0] != old_first:
            flow.src.sources[old_first].remove(flow)
        flow.path, flow.rpath = path, rpath
        if flow.conn is not None:
            flow.conn.path, flow.conn.rpath = path, rpath
        if sending and core[0] != old_first:
            flow.src.source(core[0]).add(flow)
        return True

    def log(self, t: float, text: str, category: str = "") -> None:
        if self.cfg.explain:
            if len(self.events_log) < LOG_LIMIT:
                self.events_log.append((t, category, text))
            else:
                self.log_dropped += 1

    def drop(self, port: Port, pkt, reason: str) -> None:
        s = self.stats
        key = (port.name, pkt.prio, reason)
        s.drops[key] = s.drops.get(key, 0) + 1
        if s.drops[key] == 1:
            self.log(self.sim.now, f"{port.name}: packet dropped on queue {pkt.prio} ({reason})", "drop")
        if pkt.kind == DATA and pkt.flow is not None:  # UC, UD: over when every packet arrived or was lost
            pkt.flow.dropped(pkt)

    def ecn_mark(self, port: Port, q: int, depth: int) -> None:
        s = self.stats
        key = (port.name, q)
        s.ecn_marks[key] = s.ecn_marks.get(key, 0) + 1
        if s.ecn_marks[key] == 1:
            regime = (
                "above WRED max: every packet"
                if depth > self.cfg.wred_of(q)[1]
                else "between WRED min and max: randomly"
            )
            what = "average depth" if self.cfg.switch.wred_weight else "at"
            self.log(
                self.sim.now,
                f"{port.name}: egress queue {q} {what} {depth / 1e3:.1f} KB, {regime} marked "
                "ECN 11 (CE) and still forwarded",
                "ecn",
            )

    def pfc_sent(self, port: Port, prio: int, quanta: int, now: float) -> None:
        s = self.stats
        key = (port.name, prio)
        d = s.pfc_pause_sent if quanta else s.pfc_resume_sent
        d[key] = d.get(key, 0) + 1
        if len(s.pfc_frames) < 100_000:
            s.pfc_frames.append((now, port.name, prio, quanta))
        if self.cfg.trace_pfc:
            if len(self.captured) < self.cfg.trace_max_packets:
                self.captured.append((now, "pfc", port, prio, quanta))
            else:
                self.capture_missed += 1

    def stats_watchdog(self, port: Port, prio: int) -> None:
        key = (port.name, prio)
        self.stats.watchdog[key] = self.stats.watchdog.get(key, 0) + 1

    def rnic(self, host: Host) -> Rnic:
        """The NIC's verbs state (device, PD, registered memory, CQ), made on first use."""
        r = self.rnics.get(host.idx)
        if r is None:
            p = self.cfg.nic.pkey
            r = self.rnics[host.idx] = Rnic(host, (0xFFFF,) if p == 0xFFFF else (0xFFFF, p))
        return r

    def pkey_violation(self, flow) -> None:
        s = self.stats
        key = (flow.dst.id,)
        s.pkey_violations[key] = s.pkey_violations.get(key, 0) + 1
        if flow.pkey_drops == 1:
            conn = flow.conn
            self.log(
                self.sim.now,
                f"{flow.name}: {flow.dst.id} drops a packet with P_Key {conn.req.pkey:#06x}: QP "
                f"{conn.resp.qpn:#x} is in partition {conn.resp.pkey:#06x} (P_Key violation, "
                "counted)",
                "transport",
            )

    def capture(self, pkt, at) -> None:
        if len(self.captured) < self.cfg.trace_max_packets:
            self.captured.append(
                (self.sim.now, "pkt", pkt.kind, pkt.flow, pkt.psn, pkt.opcode, pkt.payload, pkt.ecn, pkt.dscp)
            )
        else:
            self.capture_missed += 1

    # -- flows --------------------------------------------------------------------------------------
    def _path(self, links: list[int], key, spray: bool = False) -> Path:
        f = self.fabric
        next_at = {self.node_index[f.links[li].src]: li for li in links}
        last_sw = -1
        for li in links:
            if f.is_switch(f.links[li].src):
                last_sw = self.node_index[f.links[li].src]
        dst = self.node_index[f.links[links[-1]].dst]
        h = zlib.crc32(repr(key).encode())
        return Path(links, next_at, last_sw, dst, h, key, spray, {n: self.ports[li] for n, li in next_at.items()})

    def add_transfer(
        self,
        route: tuple[int, ...],
        size_bytes: float,
        on_done=None,
        name: str = "",
        qpn: int | None = None,
        sport: int | None = None,
        dscp: int | None = None,
        local_qpn: int | None = None,
        pkey: int | None = None,
        rkey: int | None = None,
        remote_addr: int | None = None,
        ipsn: int | None = None,
        local_mr=None,
        on_sent=None,
    ):
        """Start a transfer now over `route` (GPU-to-GPU links as the Router gives them). `on_done(flow)` when it
        is over (the last byte in the destination's memory); `on_sent(flow)`, if given, when its last packet has left
        the sender, the first time (its serialization on the sender's port over: nic.sent_all).

        An RDMA transfer is a work request on the queue pair (`qpn`: the responder's, the BTH DestQP;
        `local_qpn`: the requester's, by default the same number on its own NIC) between the two NICs,
        set up on first use. `pkey` sets the requester QP's P_Key (default the configuration's), `rkey` and
        `remote_addr` the work request's R_Key and target address (default: the responder's registered
        memory): other values show the responder's checks; `local_mr` the region it reads from; `ipsn` the
        QP's initial PSN when this transfer creates it (default: drawn from the seeded generator)."""
        f = self.fabric
        fid = len(self.flows)
        on_done = on_done or no_completion_callback
        # the PCIe hops at both ends are a fixed latency (the caller's); PCIe in the middle of a route
        # (a PXN relay: NVLink to a peer GPU, then its NIC) is simulated like any link
        lo, hi = 0, len(route)
        while lo < hi and f.links[route[lo]].tier == TIER_PCIE:
            lo += 1
        while hi > lo and f.links[route[hi - 1]].tier == TIER_PCIE:
            hi -= 1
        core = list(route[lo:hi])
        touches_switch = any(f.is_switch(f.links[li].dst) for li in core)
        if not touches_switch:
            path = self._path(core, ("chunk", fid))
            src = self.devices[self.node_index[f.links[core[0]].src]]
            chunks = ChunkFlow(self, fid, name or f"flow{fid}", src, size_bytes, path, on_done)
            chunks.on_sent = on_sent
            self.flows.append(chunks)
            src.source(core[0]).add(chunks)
            return chunks
        src = self.devices[self.node_index[f.links[core[0]].src]]
        dst = self.devices[self.node_index[f.links[core[-1]].dst]]
        if qpn is None:  # one QP per NIC pair, as the Router allocates per (source, destination, channel)
            qpn = 0x100 + zlib.crc32(f"{src.id}>{dst.id}".encode()) % 0xFFF000
        sport = roce_udp_source_port(qpn, qpn ^ 0x5A5A) if sport is None else sport
        spray = self.cfg.nic.transport == "uet"
        # load-balancing state (flowlets, spraying) is kept per 5-tuple: messages of one QP share it
        path = self._path(core, (src.idx, dst.idx, sport), spray)
        rpath = self._path([self.reverse[li] for li in reversed(core)], (dst.idx, src.idx, sport))
        line = min(serialization_rate_bytes_per_s(f.links[li]) for li in route)  # the slowest hop, PCIe too
        flow = QpFlow(self, fid, name or f"qp{fid}", src, dst, size_bytes, path, rpath, line, qpn, sport, on_done, dscp)
        flow.on_sent = on_sent
        if self.cfg.trace_all:
            flow.traced = True
        self.flows.append(flow)
        key = (src.idx, dst.idx, qpn)
        conn = self.connections.get(key)
        if conn is None:
            conn = self.connections[key] = Connection(
                self,
                src,
                dst,
                qpn,
                qpn if local_qpn is None else local_qpn,
                path,
                rpath,
                sport,
                flow.dscp,
                flow.prio,
                pkey,
                ipsn,
            )
        flow.conn = conn
        conn.post(flow, remote_addr, rkey, local_mr)
        return flow

    def pfc_storm(
        self,
        nic: str,
        prio: int,
        start_s: float,
        stop_s: float,
        interval_s: float | None = None,
        quanta: int | None = None,
    ) -> None:
        """A NIC that keeps sending PFC pause frames for `prio` (a stalled receive pipeline, a firmware fault; Deep
        Learning for Network Engineers, Chapter 11's PFC watchdog is the switch's answer): from `start_s` to `stop_s`
        one frame of `quanta` (default the switches') every `interval_s` (default half its pause time, so the
        switch's port toward the NIC never runs out of pause). Each frame is counted and captured as the NIC's."""
        out = next(li for li in self.fabric.out_links[nic] if self.fabric.is_switch(self.fabric.links[li].dst))
        port = self.ports[out]  # the NIC's port: the frames travel on its cable
        target = self.ports[self.reverse[out]]  # the switch's egress port toward the NIC: it stops that priority
        q = self.cfg.switch.pfc_quanta if quanta is None else quanta
        step = interval_s if interval_s is not None else pfc_pause_s(q, target.rate_bytes_per_s) / 2
        flight = PFC_FRAME_BYTES * port.s_per_byte + port.latency_s

        def send(t: float) -> None:
            if t == start_s:
                self.log(
                    t,
                    f"{nic}: PFC storm: the NIC sends pause frames for priority {prio} ({q} quanta) every "
                    f"{step * 1e6:.1f} us without end, whatever its buffers hold",
                    "pfc",
                )
            self.pfc_sent(port, prio, q, t)
            self.sim.at(t + flight, target.on_pfc, (prio, q, nic))
            if t + step < stop_s:
                self.sim.at(t + step, send, t + step)
            else:
                self.log(t + step, f"{nic}: PFC storm ends (the NIC recovers)", "pfc")

        self.sim.at(start_s, send, start_s)

    def at(self, t: float, fn, arg=None) -> None:
        self.sim.at(t, fn, arg)

    def start_at(self, t: float, route: tuple[int, ...], size_bytes: float, **kw) -> None:
        """`add_transfer` at simulated time t."""
        self.sim.at(t, lambda _: self.add_transfer(route, size_bytes, **kw))

    def run(self, until: float | None = None) -> PacketStats:
        until = self.cfg.until_s if until is None else until
        hops = 0 if self.loop != "auto" else sum(f.n * len(f.path.links) for f in self.flows)
        if until is None and self.loop == "auto" and hops < COMPILED_MIN_HOPS:
            self.loop_used = f"python: a small run (about {hops:,} data packet hops, under {COMPILED_MIN_HOPS:,})"
        elif until is None and self.loop in ("auto", "compiled"):
            from .fastcore import run as run_compiled

            why = run_compiled(self)
            if why is None:
                self.loop_used = "compiled"
                return self.finish()
            self.loop_used = f"python: {why}"
        else:
            self.loop_used = "python" if until is None else "python: run until a given time"
        self.sim.run(float("inf") if until is None else until)
        return self.finish()

    def finish(self) -> PacketStats:
        now = self.sim.now
        for p in self.ports:
            p.finish(now)
        self.stats.collect(self)
        return self.stats
