"""What to buy and what it gives: bill of materials, capacity per tier, failure domains.

All three read the built `Fabric` graph (so custom topologies get them too), in one pass over its
links. Capacities are per direction, in Gb/s. A switch's *down* capacity faces the servers, its *up*
capacity the next tier; oversubscription = down / up (1 = non-blocking, the book's Figure 13-8: 32 x 100
Gb/s down = 4 x 800 Gb/s up = 3.2 Tb/s).

Bisection bandwidth here is the worst balanced cut of the GPUs: a cut that sends every flow through
every switch tier (split by rails, segments and pods). It is min(host total, each tier's total
uplink capacity) / 2; full bisection = host total / 2.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from ..units import bytes_per_s_to_gbps
from .graph import NIC, RAIL, SPINE, SUPERSPINE, SWITCH_KINDS, SWITCH_LEVEL, Fabric

if TYPE_CHECKING:
    from .design import Design

TIER_NAMES = {RAIL: "rail (leaf)", SPINE: "spine", SUPERSPINE: "super-spine"}
SWITCH_ORDER = (RAIL, SPINE, SUPERSPINE)


@dataclass(frozen=True)
class SwitchTier:
    kind: str
    switches: int
    radix: int  # the largest radix in the tier
    ports_used: int
    ports_free: int
    fullest_ports_used: int  # the busiest switch of the tier
    port_speed_gbps: float = 0.0  # the fastest port in use on the tier (what its ports are bought for)


@dataclass(frozen=True)
class CableGroup:
    tier: str
    speed_gbps: float
    cables: int

    @property
    def transceivers(self) -> int:
        """Two optics per cable (one each end); DAC/AOC choice is left to the buyer."""
        return 2 * self.cables


@dataclass(frozen=True)
class BillOfMaterials:
    servers: int
    gpus: int
    nics: int
    nic_ports: int
    switch_tiers: list[SwitchTier]
    cables: list[CableGroup]
    nic_speed_gbps: float = 0.0  # per NIC port

    @property
    def switches(self) -> int:
        return sum(t.switches for t in self.switch_tiers)


@dataclass(frozen=True)
class TierCapacity:
    kind: str
    switches: int
    down_gbps: float  # per switch, the largest in the tier
    up_gbps: float  # per switch, the smallest in the tier
    total_down_gbps: float
    total_up_gbps: float
    oversubscription: float | None  # worst switch of the tier: down / up; None = top tier

    @property
    def non_blocking(self) -> bool:
        return self.oversubscription is None or self.oversubscription <= 1 + 1e-9


@dataclass(frozen=True)
class Capacity:
    tiers: list[TierCapacity]
    host_total_gbps: float
    per_gpu_scale_out_gbps: float  # NIC bandwidth a GPU gets with every GPU of its NIC busy
    per_gpu_pcie_gbps: float
    bottleneck: str  # inside the server: "NIC" or "PCIe"
    bisection_gbps: float
    notes: list[str] = field(default_factory=list)
    rail_only: bool = False  # no cross-rail switch path: the verdict holds per rail

    @property
    def full_bisection_gbps(self) -> float:
        return self.host_total_gbps / 2

    @property
    def non_blocking(self) -> bool:
        return all(t.non_blocking for t in self.tiers) and self.bisection_gbps >= self.full_bisection_gbps - 1e-6

    @property
    def verdict(self) -> str:
        if self.non_blocking and self.rail_only:
            return (
                "NON-BLOCKING within each rail; no switch path between rails (rail-only: cross-rail traffic "
                "is relayed over NVLink, PXN)"
            )
        if self.non_blocking:
            return "NON-BLOCKING: every tier carries its full down capacity up (1:1), full bisection"
        worst = max((t for t in self.tiers if t.oversubscription), key=lambda t: t.oversubscription or 0, default=None)
        ratio = f"{worst.oversubscription:.2f}:1 at the {TIER_NAMES[worst.kind]} tier" if worst else "no uplinks"
        return (
            f"BLOCKING: oversubscribed {ratio}; bisection {self.bisection_gbps / 1e3:,.1f} Tb/s of "
            f"{self.full_bisection_gbps / 1e3:,.1f} Tb/s"
        )


@dataclass(frozen=True)
class FailureDomain:
    element: str
    example: str
    gpus_cut_off: int  # lose every scale-out path
    gpus_partitioned: int  # still attached, but cut off from some peers (a switch-graph partition)
    gpus_degraded: int  # attached, with less bandwidth
    capacity_left: float  # fraction of the affected GPUs' (or their switches') bandwidth left
    effect: str


@dataclass
class _Scan:
    """One pass over the links: per-switch down/up capacity, ports, cables by speed, GPUs behind NICs."""

    down_gbps: dict[str, float]  # per switch: its links towards the servers
    up_gbps: dict[str, float]  # per switch: its links away from them
    ports: Counter
    cables: Counter
    nic_switches: dict[str, list[str]]
    gpus_of_nic: Counter
    port_gbps: dict[str, float] = field(default_factory=dict)  # per switch and per NIC: its fastest port


def _scan(f: Fabric) -> _Scan:
    level = {n: SWITCH_LEVEL.get(node.kind, 0) for n, node in f.nodes.items()}
    kind = {n: node.kind for n, node in f.nodes.items()}
    down_gbps: dict[str, float] = defaultdict(float)
    up_gbps: dict[str, float] = defaultdict(float)
    ports: Counter = Counter()
    cables: Counter = Counter()
    nic_switches: dict[str, list[str]] = defaultdict(list)
    port_gbps: dict[str, float] = defaultdict(float)
    for i, link in enumerate(f.links):
        ls, ld = level[link.src], level[link.dst]
        if not (ls or ld):
            continue  # inside a server
        gbps = bytes_per_s_to_gbps(link.capacity_bytes_per_s)
        if i % 2 == 0:  # a cable is links 2k (a->b) and 2k+1 (b->a): count it once
            cables[link.tier, gbps] += 1
        if not ls:
            if kind[link.src] == NIC:
                nic_switches[link.src].append(link.dst)
                port_gbps[link.src] = max(port_gbps[link.src], gbps)
            continue
        ports[link.src] += 1
        port_gbps[link.src] = max(port_gbps[link.src], gbps)
        if ld < ls:
            down_gbps[link.src] += gbps
        elif ld > ls:
            up_gbps[link.src] += gbps
    gpus_of_nic: Counter = Counter(f.rank_nic(r) for r in range(f.world_size))
    return _Scan(down_gbps, up_gbps, ports, cables, nic_switches, gpus_of_nic, port_gbps)


def bill_of_materials(f: Fabric, scan: _Scan | None = None) -> BillOfMaterials:
    scan = scan or _scan(f)
    tiers = []
    for kind in SWITCH_ORDER:
        nodes = [n for n in f.nodes.values() if n.kind == kind]
        if not nodes:
            continue
        used = [scan.ports[n.id] for n in nodes]
        radix = [n.radix or 0 for n in nodes]
        tiers.append(
            SwitchTier(
                kind,
                len(nodes),
                max(radix),
                sum(used),
                sum(max(0, r - u) for r, u in zip(radix, used, strict=True)),
                max(used),
                max(scan.port_gbps.get(n.id, 0.0) for n in nodes),
            )
        )
    cables = [
        CableGroup(tier, speed, n)
        for (tier, speed), n in sorted(scan.cables.items(), key=lambda kv: (kv[0][0] != "host", kv[0]))
    ]
    nics = len(scan.nic_switches)
    nic_ports = sum(len(v) for v in scan.nic_switches.values())
    servers = len({f.server_of(r) for r in range(f.world_size)})
    nic_gbps = max((scan.port_gbps.get(n, 0.0) for n in scan.nic_switches), default=0.0)
    return BillOfMaterials(servers, f.world_size, nics, nic_ports, tiers, cables, nic_gbps)


def capacity(f: Fabric, scan: _Scan | None = None) -> Capacity:
    scan = scan or _scan(f)
    tiers = []
    for kind in SWITCH_ORDER:
        ids = [n for n, node in f.nodes.items() if node.kind == kind]
        if not ids:
            continue
        down_gbps = np.array([scan.down_gbps.get(n, 0.0) for n in ids])
        up_gbps = np.array([scan.up_gbps.get(n, 0.0) for n in ids])
        has_up = up_gbps.sum() > 0
        ratio = (
            float(np.max(np.where(up_gbps > 0, down_gbps / np.where(up_gbps > 0, up_gbps, 1), np.inf)))
            if has_up
            else None
        )
        tiers.append(
            TierCapacity(
                kind,
                len(ids),
                float(down_gbps.max()),
                float(up_gbps.min()),
                float(down_gbps.sum()),
                float(up_gbps.sum()),
                ratio,
            )
        )
    host_total_gbps = sum(t.total_down_gbps for t in tiers if t.kind == RAIL)
    d = cast("Design | None", f.design)  # the graph keeps it untyped (the graph module imports no design)
    notes: list[str] = []
    nic_gbps = pcie_gbps = 0.0
    if d is not None:
        gpus_per_nic = d.gpus_per_server / d.nics_per_server
        nic_gbps = d.nic_ports * d.host_speed_gbps / gpus_per_nic
        pcie_gbps = d.pcie_bandwidth_gBps * 8
        if d.pcie_switch and d.nic_layout == "shared":
            notes.append(
                f"{d.gpus_per_server} GPUs share {d.nics_per_server} NIC(s) behind a PCIe switch: "
                f"{nic_gbps:g} Gb/s per GPU when all are busy (Figure 13-1)"
            )
    cut_gbps = [host_total_gbps] + [t.total_up_gbps for t in tiers if t.total_up_gbps > 0]
    bisection_gbps = min(cut_gbps) / 2
    if d is not None and d.topology == "rail-only":
        notes.append(
            "rail-only: no spine; cross-rail traffic is relayed over NVLink to the GPU on the "
            "destination rail (PXN); bisection counted for rail-aligned traffic"
        )
    if d is not None and d.topology == "single-switch":
        notes.append("single switch: non-blocking inside the switch, no redundancy (Figure 13-4)")
    return Capacity(
        tiers,
        host_total_gbps,
        nic_gbps,
        pcie_gbps,
        "NIC" if nic_gbps <= pcie_gbps else "PCIe",
        bisection_gbps,
        notes,
        rail_only=d is not None and d.topology == "rail-only",
    )


def _switch_edges(f: Fabric) -> tuple[list[str], np.ndarray, np.ndarray]:
    ids = [n for n, node in f.nodes.items() if node.kind in SWITCH_KINDS]
    index = {n: i for i, n in enumerate(ids)}
    pairs = [(index[link.src], index[link.dst]) for link in f.links if link.src in index and link.dst in index]
    rows, cols = (np.array(x, dtype=int) for x in zip(*pairs, strict=True)) if pairs else (np.zeros(0, int),) * 2
    return ids, rows, cols


def _switch_components(edges: tuple[list[str], np.ndarray, np.ndarray], removed: str | None) -> dict[str, int]:
    """Connected component of every switch once `removed` is gone."""
    ids, rows, cols = edges
    keep = np.ones(len(ids), dtype=bool)
    if removed is not None:
        keep[ids.index(removed)] = False
    mask = keep[rows] & keep[cols]
    graph = csr_matrix((np.ones(int(mask.sum())), (rows[mask], cols[mask])), shape=(len(ids), len(ids)))
    _, labels = connected_components(graph, directed=False)
    return {n: int(labels[i]) for i, n in enumerate(ids) if keep[i]}


def _nic_gpus_on(scan: _Scan, switches: set[str]) -> tuple[int, int]:
    """(GPUs whose NIC has every port on `switches`, GPUs whose NIC has some port there)."""
    cut = part = 0
    for nic, sws in scan.nic_switches.items():
        on = sum(1 for s in sws if s in switches)
        if on == len(sws):
            cut += scan.gpus_of_nic[nic]
        elif on:
            part += scan.gpus_of_nic[nic]
    return cut, part


def failure_domains(f: Fabric, scan: _Scan | None = None) -> list[FailureDomain]:
    """What losing one NIC, one host cable, one rail switch, one spine, one super-spine does."""
    scan = scan or _scan(f)
    out: list[FailureDomain] = []
    if not f.world_size:
        return out
    nic = f.rank_nic(0)
    n = scan.gpus_of_nic[nic]
    out.append(
        FailureDomain("NIC", nic, n, 0, 0, 0.0, f"its {n} GPU(s) lose the backend: the job halts" if n else "none")
    )
    ports = len(scan.nic_switches[nic])
    if ports > 1:
        out.append(
            FailureDomain(
                "NIC port / host cable",
                f"{nic} port1",
                0,
                0,
                n,
                (ports - 1) / ports,
                f"LAG keeps the GPU(s) attached at {(ports - 1) / ports:.0%} bandwidth",
            )
        )
    else:
        out.append(
            FailureDomain("NIC port / host cable", f"{nic} port1", n, 0, 0, 0.0, "single-homed: same as losing the NIC")
        )
    edges = _switch_edges(f)

    def islands(comps: dict[str, int]) -> int:
        return len({comps[s] for sws in scan.nic_switches.values() for s in sws if s in comps})

    baseline = islands(_switch_components(edges, None))  # rail-only fabrics start as islands (PXN joins them)
    for kind in SWITCH_ORDER:
        node = next((x for x in f.nodes.values() if x.kind == kind), None)
        if node is None:
            continue
        cut, degraded = _nic_gpus_on(scan, {node.id}) if kind == RAIL else (0, 0)
        # a GPU loses some peers when the surviving rail switches fall into more islands than before
        n_islands = islands(_switch_components(edges, node.id))
        partitioned = (f.world_size - cut) if n_islands > baseline else 0
        if kind == RAIL:
            left = 0.5 if degraded else 0.0
            if cut:
                effect = f"{cut} GPUs cut off (its rail's GPUs): the job halts"
            elif degraded:
                effect = f"{degraded} dual-homed GPUs keep one path at half bandwidth"
            else:
                effect = "no GPU attached"
            out.append(FailureDomain(TIER_NAMES[kind], node.id, cut, 0, degraded, left, effect))
            continue
        below = list(
            dict.fromkeys(f.links[li].dst for li in f.out_links[node.id] if f.level(f.links[li].dst) < f.level(node.id))
        )
        lost_gbps: defaultdict[str, float] = defaultdict(float)  # per switch below: its uplinks to this one
        for li in f.out_links[node.id]:
            link = f.links[li]
            if f.level(link.dst) < f.level(node.id):
                lost_gbps[link.dst] += bytes_per_s_to_gbps(link.capacity_bytes_per_s)
        left = min((1 - lost_gbps[s] / scan.up_gbps[s]) for s in below if scan.up_gbps.get(s)) if below else 1.0
        leafs = (
            set(below)
            if kind == SPINE
            else {f.links[li].dst for s in below for li in f.out_links[s] if f.nodes[f.links[li].dst].kind == RAIL}
        )
        cut_l, part_l = _nic_gpus_on(scan, leafs)
        degraded = cut_l + part_l
        if partitioned:
            effect = (
                f"rail switches split into {n_islands} islands: {partitioned} GPUs lose reachability "
                f"to some peers (cross-rail / inter-segment / inter-pod traffic)"
            )
        else:
            effect = f"{len(below)} {'rail' if kind == SPINE else 'spine'} switches keep {left:.0%} of their uplinks"
        out.append(FailureDomain(TIER_NAMES[kind], node.id, 0, partitioned, degraded, left, effect))
    return out


@dataclass(frozen=True)
class Plan:
    bom: BillOfMaterials
    capacity: Capacity
    failures: list[FailureDomain]

    def to_dict(self) -> dict:
        cap = asdict(self.capacity)
        cap.update(
            non_blocking=self.capacity.non_blocking,
            verdict=self.capacity.verdict,
            full_bisection_gbps=self.capacity.full_bisection_gbps,
        )
        bom = asdict(self.bom)
        for c, obj in zip(bom["cables"], self.bom.cables, strict=True):
            c["transceivers"] = obj.transceivers
        return {"bom": bom, "capacity": cap, "failure_domains": [asdict(x) for x in self.failures]}


def make_plan(f: Fabric) -> Plan:
    scan = _scan(f)
    return Plan(bill_of_materials(f, scan), capacity(f, scan), failure_domains(f, scan))
