"""α-β cost of every (operation, algorithm) on the fabric's actual paths, and NCCL's protocols.

A transfer of b bytes over a hop costs `α + b / (efficiency × bandwidth)`: α = the route's latency
(links, switches) plus the protocol's per-step overhead; bandwidth = the slowest link of the route.
Three hops matter in a rail-optimized cluster (`Paths.from_fabric` measures them on the fabric
through the Router): GPU-GPU inside a server (NVLink), GPU-GPU across servers on one rail, and
across servers between rails (through a spine).

A step's time is the slowest of its concurrent transfers, where a GPU port carrying k transfers
carries their sum; an algorithm's time is the launch overhead plus the sum of its steps. The
formulas below follow the schedules in this package (steps, bytes per port per step); pipelined
algorithms (tree, chain) cost one piece's trip through the tree or chain plus, for every further
piece, the busiest port's share of one piece. A ring across servers is the exception: its channels
run apart and each sends its next step when its last one's bytes have left (NCCL keeps several steps
in flight), so it costs the longer of its busiest port's stream and one chunk's journey, latencies
added along the path (`ring_steps` inside `collective_time_s`; the lowering does the same).

Protocols: NCCL's three, with NCCL's own constants (nccl src/graph/tuning.cc, 2.28; the tuner's model):

| protocol | bandwidth efficiency | base latency per collective | per-step overhead NVLink / network |
|---|---|---|---|
| Simple | 1.0 | 8.4 µs | 2.8 / 11.3 µs |
| LL128 | 0.92 | 14.0 µs | 1.3 / 1.3 µs |
| LL | 0.5, at most NCCL's ceilings | 6.6 µs | 0 / 0 |

The efficiencies are NCCL's ring factors (LL128 `0.92`, LL `0.5`), and LL inside one server reaches no more
bus bandwidth than NCCL's `llMaxBws` for one node (catalog `nccl_ll_max_gBps`: A100 87.7 GB/s, where half its
NVLink would be 116); across servers no more than its ceiling for the servers' CPU vendor and count (catalog
`NCCL_LL_MAX_ACROSS_GBPS`), spread over the NICs in use (`ll_network_scale`, `Paths.ll_across`); the base
latencies its ring `baseLat`;
the per-step overheads its ring `hwLat` (NVLink .6 / 1.9 / 3.4 µs, network 2.7 / 4.0 / 14.0 µs) less the
LL one, since LL, which writes data and flag together with no fence, is the closest NCCL has to the bare
hop, and the hop itself is simulated (the route's links and switches). Links carry what the fabric says
they can (`fabric.achievable`: NVLink, PCIe, RoCE/InfiniBand header overheads), so a hop's bandwidth
here is already the achievable one.

NVLS (NVLink SHARP, in-switch reduction): its algorithm bandwidth is `NVLS_EFFICIENCY` of what the links
carry: 8 x H100 reach "a peak busBw of ~480GB/s (algbw ~275GB/s)" (S. Jeaugey, NVIDIA, nccl-tests issue
212) where the ring reaches 370 GB/s of bus bandwidth: 275 / 370 = 0.743.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..units import gBps_to_bytes_per_s, gbps_to_bytes_per_s

BUSBW_FACTOR = {  # nccl-tests' definitions (doc/PERFORMANCE.md)
    "all-reduce": lambda n: 2 * (n - 1) / n,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-gather": lambda n: (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
    "all-to-allv": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send-recv": lambda n: 1.0,
    "barrier": lambda n: 0.0,
}


def busbw_factor(op: str, n: int) -> float:
    return BUSBW_FACTOR[op](n) if n > 1 else 0.0


NVLINK, NET = "nvlink", "net"  # the two kinds of hop NCCL's model tells apart


@dataclass(frozen=True)
class Hop:
    latency_s: float
    bandwidth_bytes_per_s: float
    tier: str = NET  # nvlink | net


@dataclass(frozen=True)
class Protocol:
    name: str
    bandwidth_efficiency: float
    base_latency_s: float  # once per collective
    nvlink_step_s: float  # added to every step over NVLink
    net_step_s: float  # added to every step over the network

    def step_overhead_s(self, tier: str) -> float:
        return self.nvlink_step_s if tier == NVLINK else self.net_step_s

    @property
    def step_overhead_max_s(self) -> float:
        return max(self.nvlink_step_s, self.net_step_s)


PROTOCOLS = {
    "simple": Protocol("simple", 1.0, 8.4e-6, 2.8e-6, 11.3e-6),
    "ll128": Protocol("ll128", 0.92, 14.0e-6, 1.3e-6, 1.3e-6),
    "ll": Protocol("ll", 0.5, 6.6e-6, 0.0, 0.0),
}
NVLS_EFFICIENCY = 275 / 370
NVLS_LATENCY_S = 25e-6  # tuning.cc 2.28 hwLat[NVLINK][NVLS][Simple]; no baseLat for NVLS
SHARP_LATENCY_S = 18e-6  # hwLat[NET][NVLS][Simple]


@dataclass(frozen=True)
class Paths:
    """The three hops of a rail-optimized cluster."""

    gpus_per_server: int
    nvlink: Hop
    rail: Hop
    cross_rail: Hop
    nics_per_server: int = 0  # NICs a server's channels spread over; 0: one per GPU
    ll_max_bytes_per_s: float = 0.0  # NCCL's LL bus-bandwidth ceiling inside one server (0: none)
    ll_max_across_bytes_per_s: tuple[float, float] = (0.0, 0.0)  # the same across 2 servers, across more (0: none)

    def ll_across(self, servers: int, nics_used: int) -> Paths:
        """These paths as LL sees them across `servers` servers: a network hop keeps `ll_network_scale` of
        its rate, so the collective's bus bandwidth stays under NCCL's ceiling for that many servers."""
        ceiling = self.ll_max_across_bytes_per_s[0 if servers <= 2 else 1]
        scale = ll_network_scale(self.rail.bandwidth_bytes_per_s, ceiling, nics_used)
        if scale >= 1.0:
            return self
        return replace(self, rail=_scaled(self.rail, scale), cross_rail=_scaled(self.cross_rail, scale))

    @classmethod
    def from_fabric(cls, fabric, router) -> Paths:
        """Measured on the fabric: the routes rank 0 -> 1, 0 -> G, 0 -> G + 1 (where they exist)."""
        g = fabric.gpus_per_server
        n = fabric.world_size

        def hop(a: int, b: int) -> Hop:
            route = router.route(a, b)
            return Hop(route.latency_s, route_bytes_per_s(fabric, route), NVLINK if route.scale_up else NET)

        nvlink = hop(0, 1) if g > 1 else None
        rail = hop(0, g) if n > g else None
        cross = hop(0, g + 1) if n > g + 1 and g > 1 else rail
        rail = rail or nvlink or Hop(0.0, math.inf)
        nvlink = nvlink or rail
        nics = getattr(fabric.design, "nics_per_server", 0) or 0
        ll_max = getattr(fabric, "ll_max_bytes_per_s", 0.0)
        ll_across = getattr(fabric, "ll_max_across_bytes_per_s", (0.0, 0.0))
        return cls(g, nvlink, rail, cross or rail, nics if 0 < nics < g else 0, ll_max, ll_across)

    @classmethod
    def simple(
        cls,
        gpus_per_server: int,
        nvlink_gBps: float,
        nic_gbps: float,
        nvlink_latency_us: float = 0.5,
        rail_latency_us: float = 2.0,
        spine_latency_us: float = 3.0,
    ) -> Paths:
        """Paths of an ideal non-blocking rail-optimized fabric (per-direction bandwidths, as given)."""
        nic = gbps_to_bytes_per_s(nic_gbps)
        return cls(
            gpus_per_server,
            Hop(nvlink_latency_us * 1e-6, gBps_to_bytes_per_s(nvlink_gBps), NVLINK),
            Hop(rail_latency_us * 1e-6, nic, NET),
            Hop(spine_latency_us * 1e-6, nic, NET),
        )


@dataclass(frozen=True)
class Shape:
    """The group as the cost model sees it: n ranks on `servers` servers, up to `per_server` on one."""

    n: int
    servers: int
    per_server: int

    @classmethod
    def of(cls, ranks, gpus_per_server: int) -> Shape:
        servers: dict[int, int] = {}
        for r in ranks:
            servers[r // gpus_per_server] = servers.get(r // gpus_per_server, 0) + 1
        return cls(len(ranks), len(servers), max(servers.values(), default=1))

    @classmethod
    def full(cls, n: int, gpus_per_server: int) -> Shape:
        return cls(n, math.ceil(n / gpus_per_server), min(n, gpus_per_server))


def route_bytes_per_s(fabric, route) -> float:
    """What a route carries: its slowest link's achievable rate (inf for a route of no links)."""
    return min((fabric.links[li].rate_bytes_per_s for li in route.links), default=math.inf)


def ll_efficiency(link_bytes_per_s: float, ll_max_bytes_per_s: float) -> float:
    """LL's share of a link inside one server: half (its flags), and no more than NCCL's ceiling."""
    eff = PROTOCOLS["ll"].bandwidth_efficiency
    if ll_max_bytes_per_s > 0 and 0 < link_bytes_per_s < math.inf:
        eff = min(eff, ll_max_bytes_per_s / link_bytes_per_s)
    return eff


def ll_network_scale(net_bytes_per_s: float, ceiling_bytes_per_s: float, nics_used: int) -> float:
    """The share of LL's rate over a network hop (half the link) that NCCL's ceiling across servers leaves: the
    ceiling is the collective's bus bandwidth, which the channels spread over `nics_used` NICs of a server, so
    each NIC carries at most ceiling / NICs (1: the ceiling does not bind, or there is none)."""
    if ceiling_bytes_per_s <= 0 or not 0 < net_bytes_per_s < math.inf:
        return 1.0
    half = PROTOCOLS["ll"].bandwidth_efficiency
    return min(1.0, ceiling_bytes_per_s / (max(1, nics_used) * half * net_bytes_per_s))


def _scaled(hop: Hop, scale: float) -> Hop:
    return replace(hop, bandwidth_bytes_per_s=hop.bandwidth_bytes_per_s * scale)


def _xfer(hop: Hop, nbytes: float, proto: Protocol) -> float:
    return (
        hop.latency_s
        + proto.step_overhead_s(hop.tier)
        + nbytes / (proto.bandwidth_efficiency * hop.bandwidth_bytes_per_s)
    )


def _step(proto: Protocol, *parts: tuple[Hop, float] | None) -> float:
    """One step: the slowest of its concurrent (hop, bytes on the busiest port) parts, each with its hop's
    per-step overhead."""
    live = [_xfer(h, b, proto) for p in parts if p is not None for h, b in (p,)]
    return max(live, default=0.0)


def _net(paths: Paths, shape: Shape) -> Hop:
    """The inter-server hop of a snake ring: on a rail, except the closing hop of an odd server count."""
    return paths.rail if shape.servers % 2 == 0 else paths.cross_rail


def _rhd_rounds(shape: Shape, paths: Paths, nbytes: float, proto: Protocol) -> float:
    """One pass of recursive halving (or doubling) over contiguous ranks, + fold/unfold if n is not 2^k."""
    n, g = shape.n, paths.gpus_per_server
    p = 1 << (n.bit_length() - 1)
    t = 0.0
    for k in range(p.bit_length() - 1):
        d = p >> (k + 1)
        hop = paths.nvlink if d < shape.per_server else (paths.rail if d % g == 0 else paths.cross_rail)
        t += _step(proto, (hop, nbytes / 2 ** (k + 1)))
    if n > p:
        t += _step(proto, (paths.cross_rail if shape.servers > 1 else paths.nvlink, nbytes))
    return t


def _tree_path(shape: Shape, paths: Paths, nbytes: float, proto: Protocol, rail_bytes: float | None = None) -> float:
    """One piece from a leaf to the root (or back): the NVLink chain of a server, then the rail hops of
    the binary tree over the servers. `nbytes` per NVLink port, `rail_bytes` per NIC (default the same):
    trees that move in lockstep share the ports."""
    rail_hops = int(math.log2(shape.servers)) if shape.servers > 1 else 0
    rail = nbytes if rail_bytes is None else rail_bytes
    return (shape.per_server - 1) * _step(proto, (paths.nvlink, nbytes)) + rail_hops * _step(proto, (paths.rail, rail))


def collective_time_s(
    op: str,
    algorithm: str,
    shape: Shape,
    size_bytes: float,
    paths: Paths,
    *,
    protocol: str = "simple",
    channels: int = 1,
    pieces: int = 1,
) -> float:
    """Time of one collective; `size_bytes` in nccl-tests' convention (see workload.ops)."""
    proto = PROTOCOLS[protocol]
    n, s, L = shape.n, shape.servers, shape.per_server
    if n < 2:
        return 0.0
    c = max(1, channels)
    nics = min(c, L, paths.nics_per_server or L)  # channels share the server's NICs
    if protocol == "ll" and s == 1 and paths.ll_max_bytes_per_s:
        eff = ll_efficiency(paths.nvlink.bandwidth_bytes_per_s, paths.ll_max_bytes_per_s)
        proto = replace(proto, bandwidth_efficiency=eff)
    elif protocol == "ll" and s > 1:
        paths = paths.ll_across(s, nics)
    B = float(size_bytes)
    intra = L > 1
    inter = s > 1
    nvl, net = paths.nvlink, _net(paths, shape)
    t = proto.base_latency_s
    over = proto.step_overhead_s(NET if inter else NVLINK)  # per message of the direct algorithms

    def ring_step(chunk_bytes: float) -> float:  # every GPU sends one chunk per channel
        return _step(
            proto,
            (nvl, c * chunk_bytes) if intra else None,
            (net, chunk_bytes * math.ceil(c / nics)) if inter else None,
        )

    def ring_steps(k: int, chunk_bytes: float) -> float:
        """k steps of a ring whose channels run apart, each sending its next step once the last one's bytes have
        left (NCCL keeps up to NCCL_STEPS in flight; the lowering's `TaskGraph.drain_deps`).

        Inside one server every hop is alike and each step waits for the last one to arrive: k x (the busiest
        port's step + the hop's latency). Across servers the ring moves at its busiest port's pace (a NIC carrying
        ceil(c / NICs) channels): the longer of that port sending its k chunks back to back (then one hop's
        latency) and one chunk's journey round the ring, each hop at the chunk's own rate plus its latency, the
        network's on s of every n hops (NCCL's ring latency: `(nsteps - nInterSteps) * intraLat + nInterSteps *
        interLat`), not the slowest hop's latency on every step."""
        eff = proto.bandwidth_efficiency
        alpha_nvl = nvl.latency_s + proto.step_overhead_s(NVLINK)
        nvl_s = c * chunk_bytes / (eff * nvl.bandwidth_bytes_per_s) if intra else 0.0
        if not inter:
            return k * (nvl_s + alpha_nvl)
        alpha_net = net.latency_s + proto.step_overhead_s(NET)
        net_s = chunk_bytes * math.ceil(c / nics) / (eff * net.bandwidth_bytes_per_s)
        net_hops = k * s / n
        own_nvl_s = chunk_bytes / (eff * nvl.bandwidth_bytes_per_s) if intra else 0.0
        journey = (k - net_hops) * (own_nvl_s + alpha_nvl) + net_hops * (net_s + alpha_net)
        stream = k * max(nvl_s, net_s) + (alpha_net if net_s >= nvl_s else alpha_nvl)
        return max(journey, stream)

    if op == "barrier":
        return t + math.ceil(math.log2(n)) * _step(proto, (paths.cross_rail if inter else nvl, 0.0))
    if op == "send-recv":
        return t + _step(proto, (paths.rail if inter else nvl, B))
    if op in ("all-to-all", "all-to-allv"):
        remote = (n - L) / n * B
        local = (L - 1) / n * B
        if algorithm == "pxn":  # cross-rail blocks go over NVLink to the GPU on the destination's rail first
            local += remote * (L - 1) / L
            far = paths.rail
        else:
            far = paths.cross_rail
        # the n - 1 messages leave together (grouped point-to-point): one step's overhead, as lowered
        return t + _step(proto, (nvl, local) if intra else None, (far, remote) if inter else None)
    if op in ("reduce-scatter", "all-gather"):
        if algorithm == "ring":
            return t + ring_steps(n - 1, B / (n * c))
        if algorithm == "direct":
            return (
                t
                + (n - 1) * over
                + _step(
                    proto,
                    (nvl, (L - 1) * B / n) if intra else None,
                    (paths.cross_rail, (n - L) * B / n) if inter else None,
                )
            )
        if algorithm == "rhd":
            return t + _rhd_rounds(shape, paths, B, proto)
        if algorithm == "hierarchical":
            local = (L - 1) * _step(proto, (nvl, B / L)) if intra else 0.0
            cross = (s - 1) * _step(proto, (paths.rail, B / (L * s))) if inter else 0.0
            return t + local + cross
    if op == "all-reduce":
        if algorithm == "ring":
            return t + ring_steps(2 * (n - 1), B / (n * c))
        if algorithm == "direct":
            one = (n - 1) * over + _step(
                proto, (nvl, (L - 1) * B / n) if intra else None, (paths.cross_rail, (n - L) * B / n) if inter else None
            )
            return t + 2 * one
        if algorithm == "rhd":
            return t + 2 * _rhd_rounds(shape, paths, B, proto)
        if algorithm == "tree":
            # the larger of: one piece's trip up and down with the others following it (pipeline), and
            # every step's α plus the busiest port's total bytes (an interior head's NIC takes 3·B/T per
            # direction: two children up and the parent down; a chain GPU's NVLink 2·B)
            trees = 2 * c
            b = B / (trees * pieces)
            per_nic = math.ceil(trees / min(trees, L, paths.nics_per_server or L))
            per_piece = _step(
                proto, (nvl, 2 * trees * b) if intra else None, (paths.rail, 3 * b * per_nic) if inter else None
            )
            # the trees' chains start at different GPUs: at each step every GPU's NVLink port carries the
            # pieces of trees / L trees, every NIC those of its per_nic trees
            pipeline = (
                2 * _tree_path(shape, paths, b * max(1.0, trees / L), proto, b * per_nic) + (pieces - 1) * per_piece
            )
            port_s = max(
                2 * B / nvl.bandwidth_bytes_per_s if intra else 0.0,
                3 * B * per_nic / (trees * paths.rail.bandwidth_bytes_per_s) if inter else 0.0,
            )
            nvl_alpha = nvl.latency_s + proto.step_overhead_s(NVLINK)
            rail_alpha = paths.rail.latency_s + proto.step_overhead_s(NET)
            alphas = 2 * ((L - 1) * nvl_alpha + (int(math.log2(s)) * rail_alpha if inter else 0.0)) + (pieces - 1) * (
                rail_alpha if inter else nvl_alpha
            )
            return t + max(pipeline, alphas + port_s / proto.bandwidth_efficiency)
        if algorithm in ("hierarchical", "hierarchical-rhd"):
            local = (L - 1) * _step(proto, (nvl, B / L)) if intra else 0.0
            if not inter:
                cross = 0.0
            elif algorithm == "hierarchical":
                cross = 2 * (s - 1) * _step(proto, (paths.rail, B / (L * s)))
            else:
                cross = 2 * _rhd_rounds(Shape(s, s, 1), Paths(1, paths.rail, paths.rail, paths.rail), B / L, proto)
            return t + 2 * local + cross
        if algorithm == "nvls":
            # NVSwitch: each GPU link carries B per direction ((L-1)/L B of contributions + B/L result up,
            # B/L reduced + (L-1)/L B multicast down); rail switch (SHARP): each NIC carries B/L each way.
            # A pipeline of k stages (2 in-server, 2 more across servers) over P pieces: (P + k - 1)
            # times the slowest stage's share of one piece.
            # latency: NCCL's NVLS hardware latency (one NVSwitch round trip, 25 µs; SHARP across servers 18 µs
            # more), no per-step protocol overhead (tuning.cc 2.28: NVLS has no base latency either)
            eff = proto.bandwidth_efficiency
            local = B / (eff * NVLS_EFFICIENCY * nvl.bandwidth_bytes_per_s) if intra else 0.0
            cross = B / (L * eff * paths.rail.bandwidth_bytes_per_s) if inter else 0.0
            stages = 2 * intra + 2 * inter
            alphas = (NVLS_LATENCY_S + 2 * nvl.latency_s) * intra + (SHARP_LATENCY_S + 2 * paths.rail.latency_s) * inter
            return alphas + (pieces + stages - 1) / pieces * max(local, cross)
    if op in ("broadcast", "reduce"):
        if algorithm == "ring":  # the chain: a piece crosses n - 1 hops, the others follow it
            b = B / (c * pieces)
            fill = (n - s) * _step(proto, (nvl, b)) + (s - 1) * _step(proto, (net, b))
            return t + fill + (pieces - 1) * ring_step(b)
        if algorithm == "tree":
            b = B / pieces
            per_piece = _step(proto, (nvl, b) if intra else None, (paths.rail, 2 * b) if inter else None)
            return t + _tree_path(shape, paths, b, proto) + (pieces - 1) * per_piece
        if algorithm == "direct":
            return (
                t
                + (n - 1) * over
                + _step(
                    proto, (nvl, (L - 1) * B) if intra else None, (paths.cross_rail, (n - L) * B) if inter else None
                )
            )
    raise ValueError(f"no cost model for {op} / {algorithm}")
