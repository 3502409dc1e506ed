"""Cabling plan: which NIC port goes to which switch interface, and which interfaces are uplinks.

Host ports on a rail switch follow one of three layouts (`fabric.port_layout`):

- rail-major (Figures 13-11/13-12): rail 1's hosts first (interfaces 1..H), then rail 2's, ...; uplinks after.
- host-major (Figure 13-4): host 1's rails first (a group of R interfaces per host); uplinks after.
- interleaved (Figure 13-6, Cisco Nexus 9348D-GX2A): the switch's ports in equal groups, each group
  holding a few host ports of one host and the rest uplinks; rails cycle across blocks of groups. For
  48 ports, 4 hosts, 8 rails: groups of 3 = (rail r, rail r+4, uplink); Rail-3 = 25, 28, 31, 34. The
  figure leaves interfaces 3, 6, ..., 48 unassigned; reading them as uplinks is our interpretation (16
  uplinks x 400 Gb/s = 32 host ports x 200 Gb/s: non-blocking).

Interfaces are 1-based, named Ethernet1/<n> (NX-OS style).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..units import bytes_per_s_to_gbps
from .build import server_position
from .design import Design
from .graph import NIC, RAIL, Fabric


def interleaved_layout(ports: int, hosts: int, rails: int) -> tuple[dict[tuple[int, int], int], list[int]] | None:
    """Figure 13-6's interleave: {(rail, host): interface} (0-based rail and host) and the spare interfaces,
    or None when `ports` does not split into equal groups.

    The smallest `a` (host ports per group, a divisor of `rails`) is chosen such that
    hosts * rails / a groups divide the port count: group q serves host q mod hosts, rail block q div hosts;
    its slot s carries rail block + s * rails / a; its remaining ports are spare (uplinks).
    """
    for a in range(1, rails + 1):
        if rails % a:
            continue
        groups = hosts * rails // a
        if ports % groups or ports // groups < a:
            continue
        size = ports // groups
        stride = rails // a
        mapping: dict[tuple[int, int], int] = {}
        spare: list[int] = []
        for q in range(groups):
            host, block = q % hosts, q // hosts
            for s in range(size):
                interface = q * size + s + 1
                if s < a:
                    mapping[block + s * stride, host] = interface
                else:
                    spare.append(interface)
        return mapping, spare
    return None


def rail_interface_blocks(ports: int, hosts: int, rails: int) -> dict[int, list[int]]:
    """Rail (0-based) -> its interfaces on one switch, Figure 13-6 style."""
    layout = interleaved_layout(ports, hosts, rails)
    if layout is None:
        raise ValueError(f"{ports} ports do not split into equal groups for {hosts} hosts x {rails} rails")
    mapping, _ = layout
    out: dict[int, list[int]] = {r: [] for r in range(rails)}
    for (rail, _host), interface in sorted(mapping.items(), key=lambda kv: kv[1]):
        out[rail].append(interface)
    return out


def single_switch_port(port: int, gpus_per_server: int) -> tuple[int, int]:
    """Figure 13-4: interface p (1-based) -> (host, rail), both 1-based: groups of `gpus_per_server` per host."""
    return (port - 1) // gpus_per_server + 1, (port - 1) % gpus_per_server + 1


@dataclass(frozen=True)
class LeafPorts:
    """Interface numbers of one rail switch's host ports and uplinks."""

    host: dict[tuple[int, int, int], int]  # (host in segment, rail within switch, NIC port) -> interface
    uplinks: list[int]


def leaf_ports(d: Design, layout: str) -> LeafPorts:
    hosts, per_host = d.servers_per_segment, d.rails_per_switch * d.ports_per_nic_per_plane
    n_host = hosts * per_host
    uplinks = d.leaf_up_ports
    slots: dict[tuple[int, int, int], int] = {}
    if layout == "interleaved":
        found = interleaved_layout(d.leaf_radix, hosts, per_host)
        if found is not None and len(found[1]) >= uplinks:
            mapping, spare = found
            for (slot, h), interface in mapping.items():
                r, k = divmod(slot, d.ports_per_nic_per_plane)
                slots[h, r, k] = interface
            return LeafPorts(slots, spare[:uplinks])
        layout = "rail-major"  # the interleave does not fit this switch: fall back
    for h in range(hosts):
        for r in range(d.rails_per_switch):
            for k in range(d.ports_per_nic_per_plane):
                if layout == "host-major":
                    slot = (h * d.rails_per_switch + r) * d.ports_per_nic_per_plane + k
                else:
                    slot = (r * hosts + h) * d.ports_per_nic_per_plane + k
                slots[h, r, k] = slot + 1
    return LeafPorts(slots, list(range(n_host + 1, n_host + uplinks + 1)))


def layout_used(d: Design, layout: str) -> str:
    """The layout `leaf_ports` applies: `interleaved` falls back to rail-major when the switch does not split."""
    if layout != "interleaved":
        return layout
    found = interleaved_layout(d.leaf_radix, d.servers_per_segment, d.rails_per_switch * d.ports_per_nic_per_plane)
    return "interleaved" if found is not None and len(found[1]) >= d.leaf_up_ports else "rail-major"


def rail_interfaces(d: Design, layout: str) -> dict[int, list[int]]:
    """Rail slot on one rail switch (0-based: rail within the switch x NIC ports per plane) -> its host
    interfaces in ascending order, under the layout the cabling plan uses (`leaf_ports`): the same
    numbers as cabling.csv."""
    ports = leaf_ports(d, layout)
    out: dict[int, list[int]] = {}
    for (_h, r, k), interface in ports.host.items():
        out.setdefault(r * d.ports_per_nic_per_plane + k, []).append(interface)
    return {slot: sorted(v) for slot, v in sorted(out.items())}


def interface_name(n: int) -> str:
    return f"Ethernet1/{n}"


HEADER = ("cable", "kind", "a_device", "a_port", "b_device", "b_port", "speed_gbps", "server", "rail", "gpus")


def cabling_rows(f: Fabric, layout: str = "rail-major") -> Iterator[tuple]:
    """One row per cable (host cables first): NIC port -> switch interface (with the server, its rail, 1-based,
    and the GPUs the NIC serves), then switch interface -> switch interface.

    Structured fabrics use the port layout; custom ones number each switch's interfaces in cable order.
    """
    d = f.design if isinstance(f.design, Design) and f.design.topology != "custom" else None
    ports = leaf_ports(d, layout) if d is not None else None
    next_free: dict[str, int] = {}
    used_uplinks: dict[str, int] = {}
    nic_port_no: dict[str, int] = {}
    gpus_of_nic: dict[str, list[int]] = {}
    for rank in range(f.world_size):
        gpus_of_nic.setdefault(f.rank_nic(rank), []).append(f.local_index(rank))

    def seq(switch: str) -> int:
        next_free[switch] = next_free.get(switch, 0) + 1
        return next_free[switch]

    def uplink_port(leaf: str) -> int:
        if ports is None:
            return seq(leaf)
        i = used_uplinks.get(leaf, 0)
        used_uplinks[leaf] = i + 1
        return ports.uplinks[i] if i < len(ports.uplinks) else len(ports.host) + i + 1

    cable = 0
    host_rows, fabric_rows = [], []
    for li in range(0, len(f.links), 2):
        link = f.links[li]
        a, b = f.nodes[link.src], f.nodes[link.dst]
        if a.kind == NIC and f.is_switch(b.id):
            k = nic_port_no.get(a.id, 0)
            nic_port_no[a.id] = k + 1
            if d is not None and ports is not None:
                _pod, _seg, host = server_position(d, a.server or 0)
                rail_in_switch = (a.index or 0) % d.rails_per_switch
                interface = ports.host[host, rail_in_switch, k // d.planes if d.planes > 1 else k]
            else:
                interface = seq(b.id)
            cable += 1
            host_rows.append(
                (
                    cable,
                    "host",
                    a.id,
                    f"port{k + 1}",
                    b.id,
                    interface_name(interface),
                    bytes_per_s_to_gbps(link.capacity_bytes_per_s),
                    a.server,
                    (a.index or 0) + 1,
                    " ".join(f"gpu{g}" for g in gpus_of_nic.get(a.id, [])),
                )
            )
        elif f.is_switch(a.id) and f.is_switch(b.id):
            pa = uplink_port(a.id) if d is not None and a.kind == RAIL else seq(a.id)
            pb = uplink_port(b.id) if d is not None and b.kind == RAIL else seq(b.id)
            fabric_rows.append((a.id, pa, b.id, pb, bytes_per_s_to_gbps(link.capacity_bytes_per_s), link.tier))
    yield from host_rows
    for a_id, pa, b_id, pb, gbps, tier in fabric_rows:
        cable += 1
        yield (cable, tier, a_id, interface_name(pa), b_id, interface_name(pb), gbps, "", "", "")
