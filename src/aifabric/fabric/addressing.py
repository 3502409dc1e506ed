"""Addressing plan: a subnet and a VLAN per rail (or per rail switch), and each rail switch's aggregate.

Layout: every rail switch gets one aligned block holding the subnets of its rails, so the switch can
advertise a single summary route (seeds Figure 13-10: connected routes -> BGP Loc-RIB -> aggregate ->
Adj-RIB-Out). The two switches of a dual-port (MLAG / ESI) pair share the rail's subnet. The rail
switch is the subnets' default gateway (.1); hosts follow from .2 in server order.

Subnets are the smallest that hold their hosts unless `fabric.subnet_prefix_length` sets them: the book's
/28 per rail of Figure 13-10 (4 hosts), /25 of Figure 13-11 (16 hosts), /24 of Figure 13-12 (32 hosts).

Aggregates are computed, not typed: the seeds' own summaries are wrong (spec errata #3 and #4):
10.0.1.0/28 + 10.0.2.0/28 is not inside 10.0.1.0/24 (the covering aggregate is 10.0.0.0/22), and
10.0.1.0/25 + 10.0.128.0/25 needs 10.0.0.0/16.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable
from dataclasses import dataclass

from .design import Design

# network address, gateway, broadcast
RESERVED_ADDRESSES = 3


def covering_aggregate(networks: Iterable[ipaddress.IPv4Network | str]) -> ipaddress.IPv4Network:
    """The smallest single prefix that contains every network."""
    nets = [ipaddress.IPv4Network(n) for n in networks]
    if not nets:
        raise ValueError("no networks to aggregate")
    lo = min(int(n.network_address) for n in nets)
    hi = max(int(n.broadcast_address) for n in nets)
    prefix = 32 - (lo ^ hi).bit_length()
    return ipaddress.IPv4Network((lo >> (32 - prefix) << (32 - prefix), prefix))


def prefix_for_hosts(hosts: int) -> int:
    """Longest prefix with room for `hosts` addresses plus network, gateway and broadcast."""
    return 32 - max(2, math.ceil(math.log2(hosts + RESERVED_ADDRESSES)))


@dataclass(frozen=True)
class Subnet:
    switch_group: tuple[int, int, int]  # (pod, segment, rail group)
    rails: tuple[int, ...]  # 0-based rails in this subnet
    network: ipaddress.IPv4Network
    vlan: int

    @property
    def gateway(self) -> ipaddress.IPv4Address:
        return self.network.network_address + 1


@dataclass(frozen=True)
class AddressPlan:
    design: Design
    block: ipaddress.IPv4Network
    per_rail: bool  # True: a subnet per rail; False: one per rail switch (rail group)
    vlan_base: int
    prefix: int | None = None  # subnet prefix length; None: the smallest subnet that holds the hosts

    @classmethod
    def of(
        cls,
        design: Design,
        block: str = "10.0.0.0/8",
        subnet_per: str = "rail",
        vlan_base: int = 101,
        prefix: int | None = None,
    ):
        return cls(design, ipaddress.IPv4Network(block), subnet_per == "rail", vlan_base, prefix)

    @classmethod
    def from_spec(cls, design: Design, fabric) -> AddressPlan:
        """The plan of a scenario's `fabric` section (address_block, subnet_per, vlan_base, subnet_prefix_length)."""
        return cls.of(
            design,
            fabric.address_block,
            fabric.subnet_per,
            fabric.vlan_base,
            getattr(fabric, "subnet_prefix_length", None),
        )

    # -- sizes ---------------------------------------------------------------------------------
    @property
    def hosts_per_subnet(self) -> int:
        d = self.design
        return d.servers_per_segment * (1 if self.per_rail else d.rails_per_switch)

    @property
    def smallest_prefix(self) -> int:
        """The longest prefix that holds a subnet's hosts, gateway, network and broadcast addresses."""
        return prefix_for_hosts(self.hosts_per_subnet)

    @property
    def subnet_prefix(self) -> int:
        """The given prefix length (the book's /28, /25, /24 of Figures 13-10..13-12), else the smallest fit."""
        return self.smallest_prefix if self.prefix is None else self.prefix

    def prefix_holds_hosts(self) -> bool:
        return self.subnet_prefix <= self.smallest_prefix

    @property
    def subnets_per_switch(self) -> int:
        return self.design.rails_per_switch if self.per_rail else 1

    @property
    def switch_block_size(self) -> int:
        return (1 << (32 - self.subnet_prefix)) * (1 << math.ceil(math.log2(self.subnets_per_switch)))

    @property
    def switch_groups(self) -> int:
        d = self.design
        return d.segments * d.groups_per_plane

    @property
    def addresses_needed(self) -> int:
        return self.switch_groups * self.switch_block_size

    def fits(self) -> bool:
        return self.addresses_needed <= self.block.num_addresses

    # -- addresses -----------------------------------------------------------------------------
    def _switch_base(self, pod: int, segment: int, group: int) -> int:
        d = self.design
        index = (pod * d.segments_per_pod + segment) * d.groups_per_plane + group
        return int(self.block.network_address) + index * self.switch_block_size

    def subnet_base(self, pod: int, segment: int, rail: int) -> int:
        d = self.design
        group, within = divmod(rail, d.rails_per_switch)
        slot = within if self.per_rail else 0
        return self._switch_base(pod, segment, group) + slot * (1 << (32 - self.subnet_prefix))

    def nic_ip(self, pod: int, segment: int, host_in_segment: int, rail: int) -> int:
        d = self.design
        within = 0 if self.per_rail else (rail % d.rails_per_switch) * d.servers_per_segment
        return self.subnet_base(pod, segment, rail) + 2 + within + host_in_segment

    def vlan(self, rail: int) -> int:
        return self.vlan_base + (rail if self.per_rail else rail // self.design.rails_per_switch)

    def subnets(self, pod: int, segment: int, group: int) -> list[Subnet]:
        d = self.design
        rails = [r for r in range(group * d.rails_per_switch, min((group + 1) * d.rails_per_switch, d.rails))]
        size = 32 - self.subnet_prefix
        if self.per_rail:
            return [
                Subnet(
                    (pod, segment, group),
                    (r,),
                    ipaddress.IPv4Network((self.subnet_base(pod, segment, r), 32 - size)),
                    self.vlan(r),
                )
                for r in rails
            ]
        return [
            Subnet(
                (pod, segment, group),
                tuple(rails),
                ipaddress.IPv4Network((self.subnet_base(pod, segment, rails[0]), 32 - size)),
                self.vlan(rails[0]),
            )
        ]

    def aggregate(self, pod: int, segment: int, group: int) -> ipaddress.IPv4Network:
        return covering_aggregate(s.network for s in self.subnets(pod, segment, group))

    def rows(self, limit: int | None = None):
        """(switch group, subnet, VLAN, gateway, aggregate) for every subnet, in allocation order."""
        d = self.design
        n = 0
        for pod in range(d.pods):
            for seg in range(d.segments_per_pod):
                for group in range(d.groups_per_plane):
                    subnets = self.subnets(pod, seg, group)
                    agg = covering_aggregate(s.network for s in subnets)
                    for s in subnets:
                        yield s, agg
                        n += 1
                        if limit is not None and n >= limit:
                            return
