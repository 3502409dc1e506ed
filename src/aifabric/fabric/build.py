"""Builders: the scenario's cluster + fabric sections -> a `Fabric` graph.

`build(cluster, fabric)` dispatches on `fabric.topology`:

- single-switch (Figure 13-4): every NIC port on one switch; rails are VLANs on it.
- rail-only (§6.5): a rail switch per rail (or per `rails_per_switch` rails), no spine; the router
  relays cross-rail traffic over NVLink to the GPU on the destination rail (NCCL PXN).
- rail-optimized (Figures 13-7/13-8): host segments of rail switches, every rail switch to every
  spine of the pod (or a partial mesh), two-tier / three-stage.
- multi-pod (Figure 13-9): pods joined by super-spines, three-tier / five-stage.
- custom: switches and cables from the scenario; servers' insides from the cluster section.

Inside a server: GPUs on one NVSwitch (NVLink, per-direction = half the catalog's total), each GPU's
PCIe x16 to its NIC (or to a PCIe switch shared with the NICs), NIC ports to rail switches.
Ranks follow torchrun: rank = server * gpus_per_server + local.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..errors import InputError, Problem
from ..units import gBps_to_bytes_per_s, gbps_to_bytes_per_s, ns_to_s
from .addressing import AddressPlan
from .design import Design, resolve
from .graph import (
    GPU,
    NIC,
    NVSWITCH,
    PCIE_SWITCH,
    RAIL,
    SPINE,
    SUPERSPINE,
    TIER_HOST,
    TIER_NVLINK,
    TIER_PCIE,
    TIER_SPINE,
    TIER_SUPERSPINE,
    Fabric,
    Node,
)

if TYPE_CHECKING:  # the scenario imports the fabric (checks); the fabric needs only its types
    from ..scenario.fabric_spec import ClusterSpec, FabricSpec

PLANE_NAMES = "ABCD"
_NIC_ID = re.compile(r"^s(\d+)/nic(\d+)$")


def gpu_id(server: int, local: int) -> str:
    return f"s{server}/gpu{local}"


def nic_id(server: int, local: int) -> str:
    return f"s{server}/nic{local}"


def leaf_id(d: Design, pod: int, segment: int, plane: int, group: int) -> str:
    """rail3 | leaf1 (multi-rail) | pod1/seg2/rail3-B: only the parts that distinguish switches."""
    prefix = (f"pod{pod}/" if d.pods > 1 else "") + (f"seg{segment}/" if d.segments_per_pod > 1 else "")
    if d.topology == "single-switch":
        return prefix + "switch0"
    name = f"rail{group}" if d.rails_per_switch == 1 else f"leaf{group}"
    return prefix + name + (f"-{PLANE_NAMES[plane]}" if d.planes > 1 else "")


def spine_id(d: Design, pod: int, spine: int) -> str:
    return (f"pod{pod}/" if d.pods > 1 else "") + f"spine{spine}"


def superspine_id(k: int) -> str:
    return f"superspine{k}"


def server_position(d: Design, server: int) -> tuple[int, int, int]:
    """(pod, segment, host index within the segment) of a server."""
    pod, within = divmod(server, d.servers_per_pod)
    segment, host = divmod(within, d.servers_per_segment)
    return pod, segment, host


def _add_server(f: Fabric, d: Design, s: int, cluster: ClusterSpec, ip_of) -> list[str]:
    """A server's GPUs, NVSwitch, PCIe and NICs; returns its NIC ids (cables to switches come later)."""
    nvlink_bytes_per_s = gBps_to_bytes_per_s(d.nvlink_bandwidth_gBps / 2)  # per direction
    pcie_bytes_per_s = gBps_to_bytes_per_s(d.pcie_bandwidth_gBps)
    # NVLink latency is GPU<->GPU end to end: two hops through the NVSwitch
    nvlink_hop_s = ns_to_s(cluster.nvlink_latency_ns) / 2
    pcie_s = ns_to_s(cluster.pcie_latency_ns)
    nvs = f.add_node(Node(f"s{s}/nvswitch", NVSWITCH, server=s)).id
    nics = [f.add_node(Node(nic_id(s, i), NIC, server=s, index=i, ip=ip_of(s, i))).id for i in range(d.nics_per_server)]
    pcie_sw = None
    if d.pcie_switch:
        pcie_sw = f.add_node(Node(f"s{s}/pcie", PCIE_SWITCH, server=s)).id
        for nic in nics:
            f.add_cable(pcie_sw, nic, pcie_bytes_per_s, pcie_s / 2, TIER_PCIE)
    for g in range(d.gpus_per_server):
        gpu = f.add_node(Node(gpu_id(s, g), GPU, server=s, index=g)).id
        f.rank_gpu.append(gpu)
        f.add_cable(gpu, nvs, nvlink_bytes_per_s, nvlink_hop_s, TIER_NVLINK)
        nic = nics[d.nic_of_gpu(g)]
        if pcie_sw is None:
            up = len(f.links)
            f.add_cable(gpu, nic, pcie_bytes_per_s, pcie_s, TIER_PCIE)
            f.rank_nic_up.append((up,))
            f.rank_nic_down.append((up + 1,))
        else:
            up = len(f.links)
            f.add_cable(gpu, pcie_sw, pcie_bytes_per_s, pcie_s / 2, TIER_PCIE)
            sw_to_nic = f.link_between(pcie_sw, nic)
            f.rank_nic_up.append((up, sw_to_nic))
            f.rank_nic_down.append((sw_to_nic ^ 1, up + 1))  # cables are (a->b, b->a) consecutive
    return nics


def build_structured(cluster: ClusterSpec, fabric: FabricSpec, name: str = "fabric") -> Fabric:
    """single-switch, rail-only, rail-optimized and multi-pod: one parametric Clos builder."""
    d = resolve(cluster, fabric)
    plan = AddressPlan.from_spec(d, fabric)
    host_bytes_per_s = gbps_to_bytes_per_s(d.host_speed_gbps)
    spine_bytes_per_s = gbps_to_bytes_per_s(d.spine_speed_gbps)
    superspine_bytes_per_s = gbps_to_bytes_per_s(d.superspine_speed_gbps)
    cable_s = ns_to_s(fabric.link_latency_ns)
    f = Fabric(
        name=name, gpus_per_server=d.gpus_per_server, switch_latency_s=ns_to_s(fabric.switch_latency_ns), design=d
    )

    leafs: dict[tuple[int, int, int, int], str] = {}
    for pod in range(d.pods):
        for seg in range(d.segments_per_pod):
            for plane in range(d.planes):
                for group in range(d.groups_per_plane):
                    node = Node(
                        leaf_id(d, pod, seg, plane, group),
                        RAIL,
                        index=group,
                        pod=pod,
                        segment=seg,
                        plane=plane,
                        radix=d.leaf_radix,
                    )
                    leafs[pod, seg, plane, group] = f.add_node(node).id
        for j in range(d.spines_per_pod):
            f.add_node(Node(spine_id(d, pod, j), SPINE, index=j, pod=pod, radix=d.spine_radix))
    per_plane = d.superspines_per_plane
    for k in range(d.superspines):
        f.add_node(
            Node(
                superspine_id(k),
                SUPERSPINE,
                index=k,
                plane=k // per_plane if per_plane else 0,
                radix=d.superspine_radix,
            )
        )

    def ip_of(server: int, nic: int) -> int:
        pod, seg, host = server_position(d, server)
        return plan.nic_ip(pod, seg, host, d.rail_of_nic(nic))

    for s in range(cluster.servers):
        pod, seg, _ = server_position(d, s)
        for i, nic in enumerate(_add_server(f, d, s, cluster, ip_of)):
            group = d.rail_of_nic(i) // d.rails_per_switch
            for port in range(d.nic_ports):
                plane = port if d.planes > 1 else 0
                f.add_cable(nic, leafs[pod, seg, plane, group], host_bytes_per_s, cable_s, TIER_HOST)

    for pod in range(d.pods):
        pod_leafs = [
            leafs[pod, seg, plane, group]
            for seg in range(d.segments_per_pod)
            for plane in range(d.planes)
            for group in range(d.groups_per_plane)
        ]
        for li, leaf in enumerate(pod_leafs):
            for j in range(d.spines_per_leaf):
                spine = (li + j) % d.spines_per_pod if d.partial_mesh else j
                for _ in range(d.links_per_spine):
                    f.add_cable(leaf, spine_id(d, pod, spine), spine_bytes_per_s, cable_s, TIER_SPINE)
        for j in range(d.spines_per_pod if d.superspines else 0):
            plane = j % d.superspine_planes
            for m in range(per_plane):
                for _ in range(d.links_per_superspine):
                    f.add_cable(
                        spine_id(d, pod, j),
                        superspine_id(plane * per_plane + m),
                        superspine_bytes_per_s,
                        cable_s,
                        TIER_SUPERSPINE,
                    )
    return f


def build_rail_optimized(cluster: ClusterSpec, fabric: FabricSpec, name: str = "fabric") -> Fabric:
    """Rail-optimized two-tier leaf/spine (seeds Ch. 13, Figures 13-7/13-8), whatever `fabric.topology` says."""
    if fabric.topology != "rail-optimized":
        fabric = fabric.model_copy(update={"topology": "rail-optimized"})
    return build_structured(cluster, fabric, name)


_KIND = {"rail": RAIL, "leaf": RAIL, "spine": SPINE, "superspine": SUPERSPINE}
_TIER_OF_UPPER = {RAIL: TIER_HOST, SPINE: TIER_SPINE, SUPERSPINE: TIER_SUPERSPINE}


def parse_nic(endpoint: str) -> tuple[int, int] | None:
    m = _NIC_ID.match(endpoint)
    return (int(m.group(1)), int(m.group(2))) if m else None


def custom_problems(cluster: ClusterSpec, fabric: FabricSpec) -> list[Problem]:
    """Endpoints that do not exist, NICs left unconnected, duplicate switch names."""
    out: list[Problem] = []
    custom = fabric.custom
    if custom is None:
        return [Problem("fabric.custom", "topology: custom needs a custom section with switches and links")]
    names: set[str] = set()
    for i, sw in enumerate(custom.switches):
        if sw.id in names or parse_nic(sw.id):
            out.append(Problem(f"fabric.custom.switches[{i}].id", f"{sw.id!r} is a duplicate or a NIC's name"))
        names.add(sw.id)
    nics = cluster.nics
    connected: set[tuple[int, int]] = set()
    for i, link in enumerate(custom.links):
        for end in ("a", "b"):
            value = getattr(link, end)
            nic = parse_nic(value)
            if nic is not None:
                if nic[0] >= cluster.servers or nic[1] >= nics:
                    out.append(
                        Problem(
                            f"fabric.custom.links[{i}].{end}",
                            f"{value!r}: the cluster has servers s0..s{cluster.servers - 1} with nic0..nic{nics - 1}",
                        )
                    )
                connected.add(nic)
            elif value not in names:
                out.append(
                    Problem(
                        f"fabric.custom.links[{i}].{end}",
                        f"unknown endpoint {value!r}: not a switch id nor s<server>/nic<index>",
                    )
                )
        if parse_nic(link.a) and parse_nic(link.b):
            out.append(Problem(f"fabric.custom.links[{i}]", "a cable between two NICs: one end must be a switch"))
    missing = cluster.servers * nics - len(connected)
    if missing > 0 and not out:
        first = next((s, n) for s in range(cluster.servers) for n in range(nics) if (s, n) not in connected)
        out.append(Problem("fabric.custom.links", f"{missing} NICs have no cable (first: {nic_id(*first)})"))
    return out


def build_custom(cluster: ClusterSpec, fabric: FabricSpec, name: str = "fabric") -> Fabric:
    problems = custom_problems(cluster, fabric)
    if problems:
        raise InputError(problems)
    custom = fabric.custom
    assert custom is not None
    d = resolve(cluster, fabric.model_copy(update={"topology": "rail-only"}))
    d = Design(**{**d.__dict__, "topology": "custom"})
    f = Fabric(
        name=name, gpus_per_server=cluster.gpus_per_server, switch_latency_s=ns_to_s(fabric.switch_latency_ns), design=d
    )
    for i, sw in enumerate(custom.switches):
        f.add_node(Node(sw.id, _KIND[sw.kind], index=i, radix=sw.radix or fabric.switch_radix))
    base = int(AddressPlan.of(d, fabric.address_block).block.network_address)
    for s in range(cluster.servers):
        _add_server(f, d, s, cluster, lambda srv, nic: base + 2 + srv * d.nics_per_server + nic)
    host_gbps = d.host_speed_gbps
    for link in custom.links:
        a, b = link.a, link.b
        if parse_nic(b):  # NIC first, switch second
            a, b = b, a
        if parse_nic(a):
            tier, gbps = TIER_HOST, link.speed_gbps or host_gbps
        else:
            ka, kb = f.nodes[a].kind, f.nodes[b].kind
            upper = ka if f.level(a) >= f.level(b) else kb
            tier, gbps = _TIER_OF_UPPER[upper] if ka != kb else TIER_SPINE, link.speed_gbps or fabric.link_speed_gbps
        latency = ns_to_s(link.latency_ns if link.latency_ns is not None else fabric.link_latency_ns)
        for _ in range(link.count):
            f.add_cable(a, b, gbps_to_bytes_per_s(gbps), latency, tier)
    return f


def build(cluster: ClusterSpec, fabric: FabricSpec, name: str = "fabric") -> Fabric:
    """The fabric of a scenario, by `fabric.topology`."""
    if fabric.topology == "custom":
        return build_custom(cluster, fabric, name)
    return build_structured(cluster, fabric, name)
