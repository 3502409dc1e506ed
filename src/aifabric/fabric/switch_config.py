"""Switch configuration from the plan the tool builds: NX-OS text and SONiC config_db.json, one per switch.

What each switch gets (the fabric's switches, their cabling-plan interfaces, the addressing plan, BGP):

- the QoS profile (`fabric.qos`) as Deep Learning for Network Engineers, Chapter 11 (Figure 11-8) configures it in
  six steps: classification (class-map type qos, Example 11-1), the internal QoS label (policy-map type qos,
  Example 11-2), scheduling with WRED/ECN (policy-map type queuing, Example 11-3), PFC and MTU (policy-map type
  network-qos, Example 11-4) with the PFC watchdog (Example 11-5), the system-level binding (system qos, Example
  11-6), and the interfaces (Example 11-7); Dynamic Load Balancing (Chapter 12, Example 12-1) in the profile's
  `dlb.mode` (flowlet or per-packet, its flowlet aging and MAC), or when `fabric.load_balancing` is flowlet,
  adaptive (mode flowlet) or spray (mode per-packet);
- host ports: access ports in their rail's VLAN; the rail switch is the rail subnet's gateway (an SVI per VLAN,
  Chapter 13, Figures 13-10..13-12); inter-switch links: routed point-to-point /31s;
- eBGP (RFC 7938 style, not in the book): the super-spines one ASN, each pod's spines one ASN, every rail switch
  its own; a rail switch announces its rail subnets and their aggregate (summary-only).

Choices of ours, documented in docs/fabric.md: ASNs from the private 4-byte range (super-spines 4200000000, the
spines of pod p 4200000001 + p, rail switch k 4201000000 + k); loopbacks (router ids) the first /16 of
`fabric.underlay_block`, the inter-switch /31s from the second /16 on, in cabling order; SONiC port names
Ethernet<4 x (n - 1)> for NX-OS Ethernet1/<n>; PFC thresholds on NX-OS as `pause buffer-size (xOFF + headroom)
pause-threshold xOFF resume-threshold xON` under the network-qos class (the Nexus 9000 form; other platforms
differ).
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field

from .addressing import AddressPlan
from .cabling import cabling_rows
from .design import Design
from .graph import RAIL, SPINE, SUPERSPINE, Fabric

ASN_SUPERSPINE = 4_200_000_000
ASN_SPINE = 4_200_000_001
ASN_LEAF = 4_201_000_000
ROLE = {RAIL: "rail", SPINE: "spine", SUPERSPINE: "superspine"}
KB = 1000


@dataclass
class PortCfg:
    name: str  # Ethernet1/<n>
    kind: str  # "host" or the link tier ("spine", "superspine")
    peer: str
    peer_port: str
    speed_gbps: float
    vlan: int | None = None  # host ports: the rail's VLAN
    rail: int | None = None  # host ports: 1-based rail
    ip: ipaddress.IPv4Interface | None = None  # routed ports: this end's /31

    @property
    def number(self) -> int:
        return int(self.name.split("/")[-1])


@dataclass
class Neighbor:
    ip: ipaddress.IPv4Address
    asn: int
    name: str


@dataclass
class SwitchCfg:
    id: str
    role: str
    asn: int
    loopback: ipaddress.IPv4Interface
    ports: list[PortCfg] = field(default_factory=list)
    svis: list[tuple[int, ipaddress.IPv4Interface]] = field(default_factory=list)  # (VLAN, gateway/prefix)
    networks: list[ipaddress.IPv4Network] = field(default_factory=list)  # announced rail subnets
    aggregates: list[ipaddress.IPv4Network] = field(default_factory=list)
    neighbors: list[Neighbor] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # comments written at the top of its configuration

    @property
    def hostname(self) -> str:
        return self.id.replace("/", "-")

    def uplinks(self) -> list[PortCfg]:
        return [p for p in self.ports if p.kind != "host"]


def _asn(f: Fabric, node_id: str, leaf_ordinal: dict[str, int]) -> int:
    node = f.nodes[node_id]
    if node.kind == SUPERSPINE:
        return ASN_SUPERSPINE
    if node.kind == SPINE:
        return ASN_SPINE + (node.pod or 0)
    return ASN_LEAF + leaf_ordinal[node_id]


def switch_plans(f: Fabric, fabric_spec) -> list[SwitchCfg]:
    """Every switch of a structured fabric with its ports, addresses, BGP neighbours and aggregates."""
    d = f.design
    if not isinstance(d, Design) or d.topology == "custom":
        raise ValueError("a custom topology has no addressing plan to configure")
    plan = AddressPlan.from_spec(d, fabric_spec)
    underlay = ipaddress.IPv4Network(fabric_spec.underlay_block)
    loop_base = int(underlay.network_address)
    p2p_base = loop_base + (1 << 16)
    switches = [n for n, node in f.nodes.items() if f.is_switch(n)]
    leaf_ordinal = {n: i for i, n in enumerate(n for n in switches if f.nodes[n].kind == RAIL)}
    cfg = {
        n: SwitchCfg(
            n, ROLE[f.nodes[n].kind], _asn(f, n, leaf_ordinal), ipaddress.IPv4Interface((loop_base + i + 1, 32))
        )
        for i, n in enumerate(switches)
    }
    p2p = 0
    for row in cabling_rows(f, fabric_spec.port_layout):
        _cable, kind, a, a_port, b, b_port, gbps, _server, rail, _gpus = row
        if kind == "host":
            cfg[b].ports.append(PortCfg(b_port, "host", a, a_port, gbps, plan.vlan(int(rail) - 1), int(rail)))
            continue
        lo = p2p_base + 2 * p2p
        p2p += 1
        ia, ib = ipaddress.IPv4Interface((lo, 31)), ipaddress.IPv4Interface((lo + 1, 31))
        cfg[a].ports.append(PortCfg(a_port, kind, b, b_port, gbps, ip=ia))
        cfg[b].ports.append(PortCfg(b_port, kind, a, a_port, gbps, ip=ib))
        cfg[a].neighbors.append(Neighbor(ib.ip, cfg[b].asn, b))
        cfg[b].neighbors.append(Neighbor(ia.ip, cfg[a].asn, a))
    for n in switches:
        node = f.nodes[n]
        sw = cfg[n]
        sw.ports.sort(key=lambda p: p.number)
        if node.kind == RAIL:
            subnets = plan.subnets(node.pod or 0, node.segment or 0, node.index or 0)
            sw.svis = [(s.vlan, ipaddress.IPv4Interface((s.gateway, s.network.prefixlen))) for s in subnets]
            sw.networks = [s.network for s in subnets]
            agg = plan.aggregate(node.pod or 0, node.segment or 0, node.index or 0)
            sw.aggregates = [agg] if len(subnets) > 1 or agg != subnets[0].network else []
            if d.planes > 1:
                sw.notes.append(
                    "dual-port NICs (Figure 13-5): this switch and its twin of the other plane hold the "
                    "same rail gateways (an anycast / MLAG gateway pair); configure the pairing itself "
                    "(vPC or ESI) for your platform"
                )
    return [cfg[n] for n in switches]


# -- NX-OS ---------------------------------------------------------------------------------------------
def _kb(x: float) -> str:
    return f"{x:g}"


def nxos_qos(qos, headroom_bytes: int | None = None) -> list[str]:
    """The six steps of Figure 11-8 for a profile (steps 1-5; step 6 is per interface: `nxos_interface_qos`)."""
    w, p = qos.wred, qos.pfc
    lines = ["! Step 1: classification (Deep Learning for Network Engineers, Chapter 11, Example 11-1)"]
    for c in qos.classes:
        lines += [f"class-map type qos match-any {c.name}", f"  match dscp {','.join(map(str, c.dscp))}"]
    lines += ["!", "! Step 2: internal QoS label (Example 11-2)", "policy-map type qos QOS_CLASSIFICATION"]
    for c in qos.classes:
        lines += [f"  class {c.name}", f"    set qos-group {c.qos_group}"]
    lines += ["  class class-default", f"    set qos-group {qos.default_qos_group}"]
    lines += ["!", "! Step 3: scheduling, WRED and ECN (Example 11-3)", "policy-map type queuing QOS_EGRESS_PORT"]
    for q in range(7, -1, -1):
        lines.append(f"  class type queuing c-out-8q-q{q}" if q else "  class type queuing c-out-8q-q-default")
        if q in qos.strict_priority_queues:
            lines.append("    priority level 1")
        else:
            lines.append(f"    bandwidth remaining percent {qos.bandwidth_remaining_percent.get(q, 0)}")
        if q in w.queues:
            lo, hi, pct, _drop = w.of(q)
            lines.append(
                f"    random-detect minimum-threshold {_kb(lo)} kbytes maximum-threshold "
                f"{_kb(hi)} kbytes drop-probability {_kb(pct)} weight {w.weight}" + (" ecn" if w.ecn else "")
            )
    lines += ["!", "! Step 4: lossless class, MTU and PFC (Example 11-4)", "policy-map type network-qos qos_network"]
    lossless = p.priorities if p.enabled else []
    for q in range(8):
        if q not in lossless and q:
            continue
        lines.append(f"  class type network-qos c-8q-nq{q}" if q else "  class type network-qos c-8q-nq-default")
        lines.append(f"    mtu {qos.mtu_bytes}")
        if q in lossless:  # the priority's own thresholds (pfc.per_priority) or the block's
            xon_kb, xoff_kb, head_kb = p.of(q)
            lines.append(f"    pause pfc-cos {q}")
            head = head_kb * KB if head_kb is not None else headroom_bytes
            size = f"buffer-size {int(xoff_kb * KB + (head or 0))} " if head is not None else ""
            lines.append(f"    pause {size}pause-threshold {int(xoff_kb * KB)} resume-threshold {int(xon_kb * KB)}")
    lines += ["!", "! PFC watchdog (Example 11-5)"]
    if p.enabled and p.watchdog_ms is not None:
        lines += [
            "priority-flow-control watch-dog-interval on",
            f"priority-flow-control watch-dog interval {int(round(p.watchdog_ms))}",
        ]
    else:
        lines.append("no priority-flow-control watch-dog-interval on")
    lines += [
        "!",
        "! Step 5: system-level binding (Example 11-6)",
        "system qos",
        "  service-policy type network-qos qos_network",
        "  service-policy type queuing output QOS_EGRESS_PORT",
    ]
    return lines


def nxos_interface_qos(qos) -> list[str]:
    """Step 6 (Example 11-7), under every interface."""
    out = []
    if qos.pfc.enabled:
        out.append("  priority-flow-control mode auto")
        if qos.pfc.watchdog_ms is not None:
            out.append("  priority-flow-control watch-dog")
    out.append("  service-policy type qos input QOS_CLASSIFICATION")
    return out


def dlb_setting(qos, fabric_spec) -> tuple[str, float, str]:
    """(mode off | flowlet | per-packet, flowlet aging in us, MAC) the switches run: the profile's `dlb` when on;
    otherwise what `fabric.load_balancing` asks of them (flowlet and adaptive: flowlet, spray: per-packet)."""
    d = qos.dlb
    aging = d.flowlet_aging_us if d.flowlet_aging_us is not None else fabric_spec.flowlet_gap_us
    if d.mode != "off":
        return d.mode, aging, d.mac_address
    lb = fabric_spec.load_balancing
    mode = {"flowlet": "flowlet", "adaptive": "flowlet", "spray": "per-packet"}.get(lb, "off")
    return mode, aging, d.mac_address


def nxos(sw: SwitchCfg, qos, fabric_spec, headroom_bytes: int | None = None, title: str = "") -> str:
    lines = [
        f"! {title or sw.id}: {sw.role} switch {sw.id}, generated by aifabric fabric config",
        "! DCQCN's reaction point (the rate cuts) runs in the NICs; the switches mark ECN and send PFC",
        *(f"! {n}" for n in sw.notes),
        f"hostname {sw.hostname}",
        "feature bgp",
        "feature lldp",
    ]
    if sw.svis:
        lines.append("feature interface-vlan")
    lines.append("!")
    lines += nxos_qos(qos, headroom_bytes)
    lines += [
        "!",
        f"! ECMP hash fields: {', '.join(fabric_spec.ecmp_hash_fields)}",
        nxos_load_sharing(fabric_spec.ecmp_hash_fields),
    ]
    mode, aging_us, mac = dlb_setting(qos, fabric_spec)
    ups = sw.uplinks()
    if mode != "off" and ups:
        lines += ["!", "! Dynamic Load Balancing (Chapter 12, Example 12-1)", "hardware profile dlb"]
        lines += [f"  dlb-interface Eth1/{p.number}" for p in ups]
        lines += [f"  mac-address {mac.lower()}", f"  mode {mode}"]
        if mode == "flowlet":
            lines.append(f"  flowlet-aging {aging_us:g}")
    lines += ["!", "! Step 6: interfaces (Example 11-7)"]
    vlans = sorted({v for v, _ in sw.svis} | {p.vlan for p in sw.ports if p.vlan is not None})
    for v in vlans:
        lines += [
            f"vlan {v}",
            f"  name rail{v - fabric_spec.vlan_base + 1}"
            if fabric_spec.subnet_per == "rail"
            else f"  name rails-vlan{v}",
        ]
    for p in sw.ports:
        lines.append(f"interface {p.name}")
        if p.kind == "host":
            lines.append(f"  description {p.peer} {p.peer_port} (rail {p.rail})")
        else:
            lines.append(f"  description {p.peer} {p.peer_port}")
        lines += [f"  speed {int(p.speed_gbps * 1000)}", f"  mtu {qos.mtu_bytes}"]
        if p.kind == "host":
            lines += ["  switchport", "  switchport mode access", f"  switchport access vlan {p.vlan}"]
        else:
            lines += ["  no switchport", f"  ip address {p.ip}"]
        lines += [*nxos_interface_qos(qos), "  lldp transmit", "  lldp receive", "  no shutdown"]
    for v, gw in sw.svis:
        lines += [f"interface Vlan{v}", f"  ip address {gw}", "  no shutdown"]
    lines += ["interface loopback0", f"  ip address {sw.loopback}"]
    lines += ["!", f"router bgp {sw.asn}", f"  router-id {sw.loopback.ip}", "  address-family ipv4 unicast"]
    lines += [f"    network {n}" for n in sw.networks]
    lines += [f"    aggregate-address {a} summary-only" for a in sw.aggregates]
    lines.append("    maximum-paths 64")
    for nb in sw.neighbors:
        lines += [
            f"  neighbor {nb.ip}",
            f"    remote-as {nb.asn}",
            f"    description {nb.name}",
            "    address-family ipv4 unicast",
        ]
    return "\n".join(lines) + "\n"


def nxos_load_sharing(fields) -> str:
    """`ip load-sharing` for the hashed header fields (the addresses, then the L4 ports)."""
    ends = {("src", "dst"): "source-destination", ("src",): "source", ("dst",): "destination"}
    ip = tuple(e for e in ("src", "dst") if f"{e}_ip" in fields)
    port = tuple(e for e in ("src", "dst") if f"{e}_port" in fields)
    line = "ip load-sharing address " + ends.get(ip, "source-destination")
    return line + (f" port {ends[port]}" if port else "")


SONIC_HASH = {
    "src_ip": "SRC_IP",
    "dst_ip": "DST_IP",
    "protocol": "IP_PROTOCOL",
    "src_port": "L4_SRC_PORT",
    "dst_port": "L4_DST_PORT",
}


# -- SONiC -----------------------------------------------------------------------------------------------
MAP = "AIFABRIC"


def sonic_port_name(nxos_name: str) -> str:
    return f"Ethernet{4 * (int(nxos_name.split('/')[-1]) - 1)}"


def sonic(sw: SwitchCfg, qos, fabric_spec, headroom_bytes: int | None = None) -> dict:
    """config_db.json tables for one switch."""
    w, p = qos.wred, qos.pfc
    ports = {sonic_port_name(x.name): x for x in sw.ports}
    lossless = [q for q in p.priorities] if p.enabled else []
    db: dict = {
        "DEVICE_METADATA": {
            "localhost": {
                "hostname": sw.hostname,
                "bgp_asn": str(sw.asn),
                "type": "SpineRouter" if sw.role != "rail" else "LeafRouter",
                "docker_routing_config_mode": "split",
            }
        },
        "LOOPBACK_INTERFACE": {"Loopback0": {}, f"Loopback0|{sw.loopback}": {}},
        "PORT": {
            name: {
                "alias": x.name,
                "speed": str(int(x.speed_gbps * 1000)),
                "mtu": str(qos.mtu_bytes),
                "admin_status": "up",
                "description": f"{x.peer} {x.peer_port}",
            }
            for name, x in ports.items()
        },
        "DSCP_TO_TC_MAP": {MAP: {str(dscp): str(qos.queue_of(dscp)) for dscp in range(64)}},
        "TC_TO_QUEUE_MAP": {MAP: {str(q): str(q) for q in range(8)}},
        "TC_TO_PRIORITY_GROUP_MAP": {MAP: {str(q): str(q) for q in range(8)}},
        "MAP_PFC_PRIORITY_TO_QUEUE": {MAP: {str(q): str(q) for q in range(8)}},
        "SCHEDULER": {},
        "WRED_PROFILE": {},
        "QUEUE": {},
        "PORT_QOS_MAP": {},
        "BUFFER_POOL": {
            "ingress_lossless_pool": {
                "type": "ingress",
                "mode": "dynamic",
                "size": str(int(qos.buffer.shared_mib * (1 << 20))),
            },
            "egress_lossy_pool": {
                "type": "egress",
                "mode": "dynamic",
                "size": str(int(qos.buffer.shared_mib * (1 << 20))),
            },
        },
        "BUFFER_PROFILE": {},
        "BUFFER_PG": {},
        "PFC_WD": {},
        "BGP_NEIGHBOR": {
            str(nb.ip): {"asn": str(nb.asn), "name": nb.name, "admin_status": "up"} for nb in sw.neighbors
        },
    }
    for q in range(8):
        if q in qos.strict_priority_queues:
            db["SCHEDULER"][f"scheduler.{q}"] = {"type": "STRICT"}
        else:
            db["SCHEDULER"][f"scheduler.{q}"] = {
                "type": "DWRR",
                "weight": str(qos.bandwidth_remaining_percent.get(q, 0)),
            }
    wred_name: dict[int, str] = {}
    for q in sorted(set(w.queues)):
        lo, hi, pct, _drop = w.of(q)
        name = "AIFABRIC_ECN" if q not in w.per_queue else f"AIFABRIC_ECN_Q{q}"
        wred_name[q] = name
        prof = {
            "wred_green_enable": "true",
            "wred_yellow_enable": "true",
            "wred_red_enable": "true",
            "ecn": "ecn_all" if w.ecn else "ecn_none",
        }
        for color in ("green", "yellow", "red"):
            prof[f"{color}_min_threshold"] = str(int(lo * KB))
            prof[f"{color}_max_threshold"] = str(int(hi * KB))
            prof[f"{color}_drop_probability"] = f"{pct:g}"
        db["WRED_PROFILE"][name] = prof
    pg_profile: dict[int, str] = {}  # lossless priority -> its buffer profile (its own thresholds, or the block's)
    for q in lossless:
        xon_kb, xoff_kb, head_kb = p.of(q)
        name = f"pg_lossless_profile_{q}" if q in p.per_priority else "pg_lossless_profile"
        pg_profile[q] = name
        head = head_kb * KB if head_kb is not None else (headroom_bytes or 0)
        db["BUFFER_PROFILE"][name] = {
            "pool": "ingress_lossless_pool",
            "xon": str(int(xon_kb * KB)),
            "xoff": str(int(head)),
            "size": str(int(xoff_kb * KB + head)),
            "dynamic_th": "0",
        }
    alpha = qos.buffer.dynamic_threshold_alpha
    if alpha is not None:  # SONiC's dynamic_th is log2(alpha)
        db["BUFFER_PROFILE"]["egress_lossy_profile"] = {
            "pool": "egress_lossy_pool",
            "size": "0",
            "dynamic_th": str(int(round(math.log2(alpha)))),
        }
    for name in ports:
        for q in range(8):
            entry = {"scheduler": f"scheduler.{q}"}
            if q in wred_name:
                entry["wred_profile"] = wred_name[q]
            db["QUEUE"][f"{name}|{q}"] = entry
        qm = {"dscp_to_tc_map": MAP, "tc_to_queue_map": MAP, "tc_to_pg_map": MAP}
        if lossless:
            qm |= {"pfc_enable": ",".join(map(str, lossless)), "pfc_to_queue_map": MAP}
            for profile in dict.fromkeys(pg_profile.values()):
                pgs = ",".join(str(q) for q in lossless if pg_profile[q] == profile)
                db["BUFFER_PG"][f"{name}|{pgs}"] = {"profile": profile}
            if p.watchdog_ms is not None:
                db["PFC_WD"][name] = {
                    "action": "drop",
                    "detection_time": str(int(round(p.watchdog_ms))),
                    "restoration_time": str(int(round(2 * p.watchdog_ms))),
                }
        db["PORT_QOS_MAP"][name] = qm
    if lossless and p.watchdog_ms is not None:
        db["PFC_WD"]["GLOBAL"] = {"POLL_INTERVAL": str(max(1, int(round(p.watchdog_ms / 4))))}
    vlans = sorted({x.vlan for x in sw.ports if x.vlan is not None} | {v for v, _ in sw.svis})
    if vlans:
        db["VLAN"] = {f"Vlan{v}": {"vlanid": str(v)} for v in vlans}
        db["VLAN_MEMBER"] = {
            f"Vlan{x.vlan}|{name}": {"tagging_mode": "untagged"} for name, x in ports.items() if x.vlan is not None
        }
        db["VLAN_INTERFACE"] = {**{f"Vlan{v}": {} for v, _ in sw.svis}, **{f"Vlan{v}|{gw}": {} for v, gw in sw.svis}}
    routed = {name: x for name, x in ports.items() if x.ip is not None}
    if routed:
        db["INTERFACE"] = {**{name: {} for name in routed}, **{f"{name}|{x.ip}": {} for name, x in routed.items()}}
    db["SWITCH_HASH"] = {"GLOBAL": {"ecmp_hash": [SONIC_HASH[f] for f in fabric_spec.ecmp_hash_fields]}}
    if sw.aggregates:
        db["BGP_AGGREGATE_ADDRESS"] = {str(a): {"summary-only": "true"} for a in sw.aggregates}
    if sw.networks:
        db["BGP_NETWORK"] = {str(n): {} for n in sw.networks}
    return db


# -- NX-OS import --------------------------------------------------------------------------------------------
_UNIT = {"bytes": 1e-3, "kbytes": 1.0, "mbytes": 1e3, "kb": 1.0, "mb": 1e3}


class NxosParseError(ValueError):
    pass


def _queue_of(class_name: str) -> int:
    """c-out-8q-q3 -> 3, c-out-8q-q-default -> 0, c-8q-nq3 -> 3, c-8q-nq-default -> 0."""
    import re

    class_name = re.sub(r"[^\w-]", "", class_name)  # the book's text carries markdown around names
    tail = class_name.rsplit("q", 1)[-1]
    if class_name.endswith("default"):
        return 0
    if not tail.isdigit() or not 0 <= int(tail) < 8:
        raise NxosParseError(f"unknown queuing class {class_name!r} (c-out-8q-q0..7, c-8q-nq0..7)")
    return int(tail)


def _name(token: str) -> str:
    import re

    return re.sub(r"[^\w.-]", "", token)  # quotes and markdown around a name in prose


def _tokens(text: str) -> list[str]:
    import re

    lines = [ln.split("!", 1)[0] for ln in text.splitlines()]  # `!` starts a comment
    joined = re.sub(r"-[ \t]*\n[ \t]*", "-", "\n".join(lines))  # the book's wrapped `maximum-\nthreshold`
    return [
        t for t in re.split(r"\s+", joined) if t and t not in ("switch(config)#",) and not t.startswith("switch(config")
    ]


def _nic_dscps(qos: dict) -> dict:
    """The NICs' DSCPs that a switch's QoS configuration implies (it does not hold them: they are set on the NICs):
    the RoCEv2 data on the lossless class's DSCP and CNPs on the strict-priority class's, where the profile's
    defaults (24, 48) would not land there, e.g. a fabric that carries RoCEv2 on DSCP 26."""
    from ..scenario.qos_spec import QosSpec

    fields = QosSpec.model_fields
    data_dscp, cnp_dscp = fields["data_dscp"].default, fields["cnp_dscp"].default
    classes = qos.get("classes", [])
    default = qos.get("default_qos_group", 0)
    queue_of = {d: c["qos_group"] for c in classes for d in c["dscp"]}
    lossless = set(qos["pfc"]["priorities"]) if qos["pfc"]["enabled"] else set()
    strict = set(qos.get("strict_priority_queues", ()))
    out: dict = {}
    data_q = queue_of.get(data_dscp, default)
    if lossless and data_q not in lossless:
        found = [c["dscp"][0] for c in classes if c["qos_group"] in lossless]
        if found:
            out["data_dscp"] = found[0]
            data_q = queue_of[found[0]]
    cnp_q = queue_of.get(cnp_dscp, default)
    if cnp_q == data_q or (strict and cnp_q not in strict):
        found = [c["dscp"][0] for c in classes if c["qos_group"] in strict and c["qos_group"] != data_q]
        if found:
            out["cnp_dscp"] = found[0]
    return out


def _pause_thresholds(by_queue: dict[int, dict]) -> dict:
    """The network-qos classes' `pause buffer-size .. pause-threshold .. resume-threshold ..` as the pfc block's
    thresholds (the lowest class's) and `per_priority` for the classes whose thresholds differ."""

    def kb(d: dict) -> dict:
        out = {}
        if "resume-threshold" in d:
            out["xon_kb"] = d["resume-threshold"] / KB
        if "pause-threshold" in d:
            out["xoff_kb"] = d["pause-threshold"] / KB
        if "buffer-size" in d and "pause-threshold" in d:
            out["headroom_kb"] = (d["buffer-size"] - d["pause-threshold"]) / KB
        return out

    from ..scenario.qos_spec import PfcSpec

    found = {q: kb(d) for q, d in sorted(by_queue.items()) if kb(d)}
    if not found:
        return {}
    base = found[min(found)]
    block = {k: base.get(k, PfcSpec.model_fields[k].default) for k in ("xon_kb", "xoff_kb")}
    own = {q: {**block, **t} for q, t in found.items() if t != base}
    return {**base, **({"per_priority": own} if own else {})}


def parse_nxos_qos(text: str) -> dict:
    """An NX-OS QoS configuration (the six steps of Figure 11-8) read back into a `fabric.qos` mapping: class maps
    and their DSCPs, QoS groups, strict priority and bandwidth shares, WRED/ECN, MTU, PFC CoS and thresholds, the
    PFC watchdog, DLB (`hardware profile dlb`: mode, flowlet aging, MAC). What NX-OS does not hold (the NICs'
    DCQCN, DSCPs, path MTU) keeps its default."""
    t = _tokens(text)
    classes: dict[str, list[int]] = {}
    groups: dict[str, int] = {}
    strict: list[int] = []
    shares: dict[int, int] = {}
    wred_by_queue: dict[int, dict] = {}
    wred_queues: list[int] = []
    pfc: dict = {}
    pfc_by_queue: dict[int, dict] = {}  # a network-qos class's pause thresholds
    cos: list[int] = []
    mtu = None
    dlb: dict = {}
    mode: str | None = None
    cur_class, queue = "", 0
    i, n = 0, len(t)

    def num(k: int) -> float:
        try:
            return float(t[k])
        except (IndexError, ValueError):
            raise NxosParseError(f"expected a number after {' '.join(t[max(0, k - 2) : k])!r}") from None

    while i < n:
        w = t[i]
        if w == "class-map" and t[i + 1 : i + 3] == ["type", "qos"]:
            cur_class = _name(t[i + 4] if t[i + 3].startswith("match-") else t[i + 3])
            classes.setdefault(cur_class, [])
            mode = "class-map"
            i += 5 if t[i + 3].startswith("match-") else 4
        elif w == "match" and t[i + 1 : i + 2] == ["dscp"] and mode == "class-map":
            i += 2
            while i < n and all(part.isdigit() for part in t[i].strip(",").split(",") if part):
                classes[cur_class] += [int(x) for x in t[i].split(",") if x]
                i += 1
        elif w == "policy-map" and t[i + 1] == "type":
            mode = {"qos": "qos", "queuing": "queuing", "network-qos": "nq"}.get(t[i + 2])
            i += 4
        elif w == "system" and t[i + 1 : i + 2] == ["qos"]:
            mode = None
            i += 2
        elif w == "class" and mode == "qos":
            cur_class = _name(t[i + 1])
            i += 2
        elif w == "set" and t[i + 1 : i + 2] == ["qos-group"] and mode == "qos":
            groups[cur_class] = int(num(i + 2))
            i += 3
        elif w == "class" and t[i + 1 : i + 2] == ["type"] and mode in ("queuing", "nq"):
            queue = _queue_of(t[i + 3])
            i += 4
        elif w == "priority" and t[i + 1 : i + 2] == ["level"] and mode == "queuing":
            strict.append(queue)
            i += 3
        elif w == "bandwidth" and t[i + 1 : i + 3] == ["remaining", "percent"] and mode == "queuing":
            shares[queue] = int(num(i + 3))
            i += 4
        elif w == "random-detect" and mode == "queuing":
            wred_queues.append(queue)
            wred = wred_by_queue.setdefault(queue, {})
            i += 1
            while i < n and t[i] in ("minimum-threshold", "maximum-threshold", "drop-probability", "weight", "ecn"):
                key = t[i]
                if key == "ecn":
                    wred["ecn"] = True
                    i += 1
                elif key.endswith("threshold"):
                    scale = _UNIT.get(t[i + 2].lower()) if i + 2 < n else None
                    value = num(i + 1) * (scale if scale is not None else 1e-3)
                    wred["min_kb" if key.startswith("min") else "max_kb"] = value
                    i += 3 if scale is not None else 2
                else:
                    wred["drop_probability_percent" if key == "drop-probability" else "weight"] = num(i + 1)
                    i += 2
        elif w == "mtu" and mode == "nq":
            mtu = int(num(i + 1))
            i += 2
        elif w == "pause" and mode == "nq":
            i += 1
            while i < n and t[i] in ("pfc-cos", "buffer-size", "pause-threshold", "resume-threshold"):
                key, value = t[i], num(i + 1)
                if key == "pfc-cos":
                    cos.append(int(value))
                else:
                    pfc_by_queue.setdefault(queue, {})[key] = value
                i += 2
        elif w == "priority-flow-control" and t[i + 1 : i + 3] == ["watch-dog", "interval"]:
            pfc["watchdog_ms"] = num(i + 3)
            i += 4
        elif w == "no" and t[i + 1 : i + 3] == ["priority-flow-control", "watch-dog-interval"]:
            pfc["watchdog_off"] = True
            i += 3
        elif w == "hardware" and t[i + 1 : i + 3] == ["profile", "dlb"]:
            mode, dlb["mode"] = "dlb", "flowlet"  # NX-OS's default DLB mode
            i += 3
        elif w == "mode" and mode == "dlb" and i + 1 < n:
            if t[i + 1] not in ("flowlet", "per-packet"):
                raise NxosParseError(f"DLB mode {t[i + 1]!r}: flowlet or per-packet")
            dlb["mode"] = t[i + 1]
            i += 2
        elif w == "flowlet-aging" and mode == "dlb":
            dlb["flowlet_aging_us"] = num(i + 1)
            i += 2
        elif w == "mac-address" and mode == "dlb" and i + 1 < n:
            dlb["mac_address"] = t[i + 1].upper()
            i += 2
        elif w in ("interface", "router", "vlan", "feature") and mode == "dlb":
            mode = None
            i += 1
        else:
            i += 1
    if not classes and not shares and not wred_queues:
        raise NxosParseError(
            "no class-map type qos, queuing policy or random-detect found: not an NX-OS QoS configuration"
        )
    qos: dict = {}
    if classes:
        qos["classes"] = [{"name": c, "dscp": d, "qos_group": groups[c]} for c, d in classes.items() if c in groups]
        missing = [c for c in classes if c not in groups]
        if missing:
            raise NxosParseError(f"class-map {missing[0]} has no `set qos-group` in the policy-map type qos")
    if "class-default" in groups:
        qos["default_qos_group"] = groups["class-default"]
    if strict or shares:
        qos["strict_priority_queues"] = sorted(set(strict))
        qos["bandwidth_remaining_percent"] = {q: v for q, v in sorted(shares.items()) if v and q not in strict}
    if wred_queues:
        queues = sorted(set(wred_queues))
        base = wred_by_queue[queues[0]]
        qos["wred"] = {
            "queues": queues,
            **{k: v for k, v in base.items() if k not in ("ecn", "weight")},
            "weight": int(base.get("weight", 0)),
            "ecn": any(x.get("ecn", False) for x in wred_by_queue.values()),
        }
        own = {
            q: {k: v for k, v in wred_by_queue[q].items() if k in ("min_kb", "max_kb", "drop_probability_percent")}
            for q in queues[1:]
            if {k: v for k, v in wred_by_queue[q].items() if k != "ecn"}
            != {k: v for k, v in base.items() if k != "ecn"}
        }
        if own:
            qos["wred"]["per_queue"] = own
    p: dict = {"enabled": bool(cos), "priorities": sorted(set(cos))}
    p.update(_pause_thresholds(pfc_by_queue))
    if pfc.get("watchdog_off"):
        p["watchdog_ms"] = None
    elif "watchdog_ms" in pfc:
        p["watchdog_ms"] = pfc["watchdog_ms"]
    qos["pfc"] = p
    qos.update(_nic_dscps(qos))
    if mtu is not None:
        qos["mtu_bytes"] = mtu
    if dlb:
        if dlb["mode"] != "flowlet":
            dlb.pop("flowlet_aging_us", None)
        qos["dlb"] = dlb
    return qos
