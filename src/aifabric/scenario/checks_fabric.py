"""Checks of the cluster and fabric sections (ports, speeds, counts), before anything is built.

Each problem names the field to change. Port counts come from the same resolved `Design` the builder
uses, so what is checked is what gets built.
"""

from __future__ import annotations

import ipaddress

from ..errors import Problem
from ..fabric.addressing import AddressPlan
from ..fabric.build import custom_problems, parse_nic
from ..fabric.design import TOPOLOGIES_WITH_SPINES, resolve
from .fabric_spec import ClusterSpec, FabricSpec

ETHERNET_SPEEDS_GBPS = (1, 10, 25, 40, 50, 100, 200, 400, 800, 1600)
NVL72_GPUS = 72


def _speed(path: str, gbps: float) -> list[Problem]:
    if gbps not in ETHERNET_SPEEDS_GBPS:
        return [
            Problem(path, f"{gbps:g} Gb/s is not an Ethernet port speed ({', '.join(map(str, ETHERNET_SPEEDS_GBPS))})")
        ]
    return []


def _radix(path: str, what: str, needed: int, parts: str, radix: int) -> list[Problem]:
    if needed > radix:
        return [Problem(path, f"each {what} needs {needed} ports ({parts}) but has {radix}")]
    return []


def check_cluster(c: ClusterSpec) -> list[Problem]:
    out: list[Problem] = []
    if c.scale_up == "nvl72" and c.gpus_per_server != NVL72_GPUS:
        out.append(
            Problem(
                "cluster.gpus_per_server", f"an NVL72 scale-up domain has {NVL72_GPUS} GPUs (got {c.gpus_per_server})"
            )
        )
    if c.nic_layout == "per-gpu" and c.nics_per_server not in (None, c.gpus_per_server):
        out.append(
            Problem(
                "cluster.nics_per_server",
                f"nic_layout per-gpu means one NIC per GPU: {c.gpus_per_server}, not {c.nics_per_server}",
            )
        )
    if c.nic_layout == "shared":
        if c.nics > c.gpus_per_server:
            out.append(
                Problem(
                    "cluster.nics_per_server",
                    f"{c.nics} shared NICs for {c.gpus_per_server} GPUs: use nic_layout per-gpu",
                )
            )
        elif c.gpus_per_server % c.nics:
            out.append(
                Problem("cluster.nics_per_server", f"{c.gpus_per_server} GPUs do not share {c.nics} NICs evenly")
            )
        if c.pcie_switch is False:
            out.append(Problem("cluster.pcie_switch", "GPUs share NICs through a PCIe switch (Figure 13-1)"))
    if c.nic_speed_gbps is not None:
        out += _speed("cluster.nic_speed_gbps", c.nic_speed_gbps)
    return out


def check_fabric_spec(c: ClusterSpec, f: FabricSpec) -> list[Problem]:
    out = _check_hardware(c, f)
    if not out:
        out += check_qos_of(c, f)
    return out


def _check_hardware(c: ClusterSpec, f: FabricSpec) -> list[Problem]:
    out = check_cluster(c)
    if out:
        return out
    if f.topology == "custom":
        out += custom_problems(c, f)
        if not out and f.custom is not None:
            out += _custom_ports(c, f)
        return out
    if f.custom is not None:
        out.append(Problem("fabric.custom", f"only used with topology: custom (topology is {f.topology})"))
    d = resolve(c, f)
    # GPU and server counts that do not fill the design
    if c.servers % d.pods:
        out.append(Problem("fabric.pods", f"{c.servers} servers do not fill {d.pods} pods evenly"))
    elif d.servers_per_pod % d.servers_per_segment:
        out.append(
            Problem(
                "fabric.servers_per_segment",
                f"{d.servers_per_pod} servers per pod do not fill host segments of {d.servers_per_segment}",
            )
        )
    if d.nics_per_server % d.rails_per_switch:
        out.append(
            Problem(
                "fabric.rails_per_switch",
                f"{d.nics_per_server} rails do not fill switches of {d.rails_per_switch} rails",
            )
        )
    # spines
    if f.topology in TOPOLOGIES_WITH_SPINES:
        if d.spines_per_pod == 0 and d.leafs_per_pod > 1 and (not f.pxn or d.segments_per_pod > 1):
            out.append(
                Problem(
                    "fabric.spines",
                    "must be >= 1: cross-rail traffic between servers needs a spine "
                    "(or use topology: rail-only / pxn: true with one segment)",
                )
            )
        if f.leaf_oversubscription is not None and "spines" in f.model_fields_set:
            out.append(Problem("fabric.leaf_oversubscription", "give either spines or leaf_oversubscription, not both"))
        if f.spine_cabling == "partial-mesh" and (f.spines_per_leaf is None or f.spines_per_leaf >= d.spines_per_pod):
            out.append(
                Problem(
                    "fabric.spines_per_leaf",
                    f"a partial mesh connects each leaf to fewer than the {d.spines_per_pod} spines",
                )
            )
        out += _speed("fabric.link_speed_gbps", f.link_speed_gbps)
        if d.spines_per_pod and f.link_speed_gbps < d.host_speed_gbps:
            out.append(
                Problem(
                    "fabric.link_speed_gbps",
                    f"{f.link_speed_gbps:g} Gb/s uplinks are slower than the "
                    f"{d.host_speed_gbps:g} Gb/s NIC ports: one flow could "
                    "not run at line rate",
                )
            )
    if f.topology == "multi-pod":
        if d.superspines == 0:
            out.append(Problem("fabric.superspines", "a multi-pod fabric needs super-spines"))
        elif d.superspines % d.superspine_planes:
            out.append(
                Problem(
                    "fabric.superspines", f"{d.superspines} super-spines do not split into {d.superspine_planes} planes"
                )
            )
        if f.superspine_link_speed_gbps is not None:
            out += _speed("fabric.superspine_link_speed_gbps", f.superspine_link_speed_gbps)
        if f.spine_oversubscription is not None and "superspines" in f.model_fields_set:
            out.append(
                Problem("fabric.spine_oversubscription", "give either superspines or spine_oversubscription, not both")
            )
    elif f.pods > 1 or f.superspines:
        field = "fabric.pods" if f.pods > 1 else "fabric.superspines"
        out.append(Problem(field, f"pods and super-spines need topology: multi-pod (topology is {f.topology})"))
    if f.topology in ("single-switch", "rail-only") and f.servers_per_segment not in (None, c.servers):
        out.append(
            Problem("fabric.servers_per_segment", f"a {f.topology} fabric has one segment of all {c.servers} servers")
        )
    # ports beyond radix
    up = f"{d.spines_per_leaf} spines x {d.links_per_spine} links" if d.spines_per_pod else "no uplinks"
    hosts = f"{d.servers_per_segment} servers x {d.rails_per_switch * d.ports_per_nic_per_plane} ports"
    what = "switch" if f.topology == "single-switch" else "rail switch"
    out += _radix("fabric.switch_radix", what, d.leaf_host_ports + d.leaf_up_ports, f"{hosts} + {up}", d.leaf_radix)
    if d.spines_per_pod:
        ss = f" + {d.spine_up_ports} super-spine links" if d.superspines else ""
        out += _radix(
            "fabric.spine_radix" if f.spine_radix else "fabric.switch_radix",
            "spine",
            d.spine_down_ports + d.spine_up_ports,
            f"{d.spine_down_ports} rail-switch links{ss}",
            d.spine_radix,
        )
    if d.superspines:
        out += _radix(
            "fabric.superspine_radix" if f.superspine_radix else "fabric.switch_radix",
            "super-spine",
            d.superspine_down_ports,
            f"{d.pods} pods x spines of its plane x {d.links_per_superspine}",
            d.superspine_radix,
        )
    plan = AddressPlan.from_spec(d, f)
    if not plan.prefix_holds_hosts():
        out.append(
            Problem(
                "fabric.subnet_prefix_length",
                f"a /{plan.subnet_prefix} holds {(1 << (32 - plan.subnet_prefix)) - 3} hosts after the "
                f"network, gateway and broadcast addresses; a subnet here has {plan.hosts_per_subnet} "
                f"(/{plan.smallest_prefix} or shorter)",
            )
        )
    elif not plan.fits():
        out.append(
            Problem(
                "fabric.address_block",
                f"the rail subnets need {plan.addresses_needed:,} addresses; "
                f"{f.address_block} has {plan.block.num_addresses:,}",
            )
        )
    underlay = ipaddress.IPv4Network(f.underlay_block)
    if underlay.overlaps(plan.block):
        out.append(
            Problem(
                "fabric.underlay_block",
                f"{f.underlay_block} overlaps address_block {f.address_block}: "
                "loopbacks and inter-switch links need their own block",
            )
        )
    elif underlay.prefixlen > 15:
        out.append(
            Problem(
                "fabric.underlay_block",
                f"must be a /15 or larger (a /16 of loopbacks, then the inter-switch /31s; got /{underlay.prefixlen})",
            )
        )
    if plan.vlan(d.rails - 1) > 4094:
        out.append(Problem("fabric.vlan_base", f"rail VLANs would reach {plan.vlan(d.rails - 1)} (> 4094)"))
    return out


def _custom_ports(c: ClusterSpec, f: FabricSpec) -> list[Problem]:
    assert f.custom is not None
    out: list[Problem] = []
    radix = {s.id: s.radix or f.switch_radix for s in f.custom.switches}
    used = dict.fromkeys(radix, 0)
    nic_gbps = c.nic_speed_gbps
    for i, link in enumerate(f.custom.links):
        for end in (link.a, link.b):
            if end in used:
                used[end] += link.count
        if link.speed_gbps is not None:
            out += _speed(f"fabric.custom.links[{i}].speed_gbps", link.speed_gbps)
            host = parse_nic(link.a) or parse_nic(link.b)
            if host and nic_gbps is not None and link.speed_gbps != nic_gbps:
                out.append(
                    Problem(
                        f"fabric.custom.links[{i}].speed_gbps",
                        f"the NIC port runs at {nic_gbps:g} Gb/s, the cable at {link.speed_gbps:g}",
                    )
                )
    out += _custom_islands(c, f)
    for i, sw in enumerate(f.custom.switches):
        if used[sw.id] > radix[sw.id]:
            out.append(
                Problem(
                    f"fabric.custom.switches[{i}].radix", f"{sw.id} needs {used[sw.id]} ports but has {radix[sw.id]}"
                )
            )
    return out


def _custom_islands(c: ClusterSpec, f: FabricSpec) -> list[Problem]:
    """Switches in several islands are fine only if every island reaches every server (PXN relays across)."""
    assert f.custom is not None
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    servers_on: dict[str, set[int]] = {}
    for link in f.custom.links:
        a, b = parse_nic(link.a), parse_nic(link.b)
        if a is None and b is None:
            parent[find(link.a)] = find(link.b)
    for link in f.custom.links:
        nic, switch = (parse_nic(link.a), link.b) if parse_nic(link.a) else (parse_nic(link.b), link.a)
        if nic is not None:
            servers_on.setdefault(find(switch), set()).add(nic[0])
    islands = list(servers_on.values())
    if len(islands) > 1 and any(len(x) < c.servers for x in islands):
        return [
            Problem(
                "fabric.custom.links",
                f"the switches form {len(islands)} islands and some servers are not "
                "on every island: they cannot reach each other",
            )
        ]
    return []


def check_fabric(s) -> list[Problem]:
    """Checks of a scenario's (or any object's with .cluster and .fabric) hardware sections."""
    return check_fabric_spec(s.cluster, s.fabric)


def check_qos_of(c: ClusterSpec, f: FabricSpec) -> list[Problem]:
    """The QoS profile's cross-field rules, with the headroom checked against the fabric's fastest link."""
    from .checks_qos import check_qos

    nic_gbps = c.nic_speed_gbps
    if nic_gbps is None and f.topology != "custom":
        nic_gbps = resolve(c, f).host_speed_gbps
    return check_qos(f.qos, f, nic_gbps)
