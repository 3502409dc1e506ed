"""Power per component: GPUs, servers, NICs, switches, optics, each figure with where it comes from.

What is counted is the equipment's maximum (datasheet) power, as the book's Chapter 8 example counts GPUs
(50,000 x 350 W = 17.5 MW): a training job keeps GPUs near their limit, and a facility is provisioned for it.

- **GPUs**: the catalog's `tdp_w` (its datasheet; `catalog.GpuSpec.tdp_source`).
- **Servers** without their GPUs and backend NICs (CPUs, memory, NVSwitch chips, fans, storage, front-end
  network, power-supply losses), per GPU slot: the vendor system's maximum power less its GPUs and backend
  NICs. NVIDIA DGX A100 datasheet: 6.5 kW max for 8 x 400 W GPUs and 8 x 200 Gb/s NICs -> 390 W per GPU;
  DGX H100 datasheet: ~10.2 kW max for 8 x 700 W and 8 x 400 Gb/s -> 550 W (H200 and MI300X systems taken as
  the same); DGX B200 datasheet: ~14.3 kW max for 8 x 1,000 W -> 760 W; GB200 NVL72: ~120 kW per rack
  (NVIDIA, 2024) for 72 x 1,200 W and 72 x 800 Gb/s -> 420 W (Grace CPUs, NVLink switch trays). PCIe cards
  in a general-purpose two-socket server: ~2 kW for 8 slots -> 250 W (rough).
- **NICs** by bandwidth (port speed x ports): 100 Gb/s 15 W, 200 Gb/s 20 W, 400 Gb/s 25 W, 800 Gb/s 40 W:
  the maximum power of NVIDIA ConnectX-6 / ConnectX-7 / ConnectX-8 class adapters with passive cables,
  rounded (rough: check your adapter's specification table).
- **Switches** (without optics): a base (CPU, fans, power supplies) plus a share of the ASIC and SerDes per
  port, by speed: 250 W + 64 x 9 W = 826 W for 64 x 400 Gb/s (a 25.6 Tb/s Tomahawk 4 / Spectrum-3 class
  box), 250 W + 64 x 14 W = 1,146 W for 64 x 800 Gb/s (51.2 Tb/s, Tomahawk 5 / Spectrum-4 class): rough,
  of the order vendors publish as typical power; every port of the box counts, used or not.
- **Optics**: per transceiver, by speed and reach, bounded by the module form factors' power classes
  (QSFP28 100G class 4: 3.5 W; QSFP-DD / OSFP 400G: up to 12 / 15 W; OSFP 800G: up to ~17 W): multimode SR
  (~100 m) the least, single-mode DR (500 m) and FR (2 km) more; passive copper (DAC) none. Two per cable.

A scenario's `costs.power` replaces any of these (scenario/costs_spec.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..catalog import GPUS
from ..scenario.costs_spec import PowerTable

SERVER_OVERHEAD_SOURCES = {
    "A100": "DGX A100 datasheet: 6.5 kW max - 8 x 400 W GPUs - 8 NICs, per GPU",
    "H100": "DGX H100 datasheet: ~10.2 kW max - 8 x 700 W GPUs - 8 NICs, per GPU",
    "B200": "DGX B200 datasheet: ~14.3 kW max - 8 x 1,000 W GPUs - 8 NICs, per GPU",
    "GB200": "GB200 NVL72: ~120 kW per rack - 72 x 1,200 W GPUs - 72 NICs, per GPU",
    "PCIE": "rough: a two-socket server with 8 PCIe GPUs, ~2 kW besides them",
}
_OVERHEAD_OF = {
    "A100": "A100",
    "A100-40GB": "A100",
    "A100-PCIE": "PCIE",
    "H100": "H100",
    "H100-PCIE": "PCIE",
    "H200": "H100",
    "MI300X": "H100",
    "B200": "B200",
    "GB200": "GB200",
}
_OVERHEAD_W = {"A100": 390.0, "H100": 550.0, "B200": 760.0, "GB200": 420.0, "PCIE": 250.0}

DEFAULT_POWER = PowerTable(
    gpu_w={name: spec.tdp_w for name, spec in GPUS.items()},
    server_overhead_w_per_gpu={name: _OVERHEAD_W[kind] for name, kind in _OVERHEAD_OF.items()},
    nic_w={100: 15, 200: 20, 400: 25, 800: 40},
    switch_base_w=250,
    switch_port_w={100: 4, 200: 6, 400: 9, 800: 14, 1600: 22},
    transceiver_w={
        "dac": {100: 0, 200: 0, 400: 0, 800: 0},
        "sr": {100: 2.5, 200: 4.5, 400: 8, 800: 13},
        "dr": {100: 3.5, 200: 5.5, 400: 10, 800: 15},
        "fr": {100: 4, 200: 6, 400: 12, 800: 16},
    },
    source="aifabric defaults (costs/power.py): datasheet maxima; NICs, switches and optics rough",
)


def merged(default, override):
    """`default` (a PowerTable or PriceTable) with every entry `override` gives put over it."""
    data = default.model_dump()
    for name in type(default).model_fields:
        if name not in override.model_fields_set:
            continue
        value = getattr(override, name)
        if isinstance(value, dict) and isinstance(data.get(name), dict):
            nested = {k: ({**data[name].get(k, {}), **v} if isinstance(v, dict) else v) for k, v in value.items()}
            data[name] = {**data[name], **nested}
        else:
            data[name] = value
    if override.source:
        data["source"] = f"{override.source} (over {default.source})"
    return type(default).model_validate(data)


def by_speed(table: dict[float, float], speed_gbps: float) -> float:
    """The figure for a speed: its own entry, else the next speed up, else the fastest scaled by speed."""
    if not table:
        return 0.0
    if speed_gbps in table:
        return float(table[speed_gbps])
    above = [s for s in table if s >= speed_gbps]
    if above:
        return float(table[min(above)])
    top = max(table)
    return float(table[top]) * speed_gbps / top


@dataclass(frozen=True)
class Line:
    """One row of a bill: what, how many, each, in total; and where the figure comes from."""

    kind: str  # gpu | server | nic | switch | transceiver | cable
    item: str
    count: int
    each: float
    source: str = ""

    @property
    def total(self) -> float:
        return self.count * self.each

    def to_dict(self, unit: str) -> dict:
        return {
            "kind": self.kind,
            "item": self.item,
            "count": self.count,
            f"{unit}_each": self.each,
            unit: self.total,
            "source": self.source,
        }


NETWORK_KINDS = ("nic", "switch", "transceiver", "cable")


def gpu_power_w(gpu_name: str, count: int, table: PowerTable = DEFAULT_POWER) -> float:
    """GPUs x watts each (the book's Chapter 8: 50,000 x 350 W = 17.5 MW)."""
    return count * float(table.gpu_w[gpu_name])


POWER_SOURCES = {
    "nic": "NVIDIA ConnectX-6/7/8 class adapters' maximum power, rounded (rough)",
    "switch": "rough: base 250 W + per port by speed, of the order of 25.6 / 51.2 Tb/s switches' typical power, "
    "without optics",
    "transceiver": "rough, within the form factors' power classes (QSFP28 3.5 W, QSFP-DD 400G 12 W, OSFP 800G ~17 W)",
}


def power_lines(bom, gpu_name: str, optics, table: PowerTable = DEFAULT_POWER) -> list[Line]:
    """The power bill of a fabric's bill of materials (fabric.plan.BillOfMaterials). A line whose figure is
    the default cites the default's source; one the scenario changed cites the scenario's table."""
    own = table.source
    gpu_w = float(table.gpu_w.get(gpu_name, 0.0))
    gpu_src = GPUS[gpu_name].tdp_source if gpu_name in GPUS and gpu_w == GPUS[gpu_name].tdp_w else own
    over_w = float(table.server_overhead_w_per_gpu.get(gpu_name, 0.0))
    kind = _OVERHEAD_OF.get(gpu_name)
    over_src = SERVER_OVERHEAD_SOURCES[kind] if kind and over_w == _OVERHEAD_W[kind] else own
    lines = [
        Line("gpu", f"{gpu_name} GPU", bom.gpus, gpu_w, gpu_src),
        Line(
            "server",
            f"server without GPUs and NICs, per GPU slot ({bom.servers:,} servers)",
            bom.gpus,
            over_w,
            over_src,
        ),
    ]
    net = _network_lines(
        bom, optics, table.nic_w, table.switch_port_w, table.transceiver_w, None, table.switch_base_w or 0.0, own
    )
    if table is not DEFAULT_POWER:
        d = DEFAULT_POWER
        default = {
            (x.kind, x.item): x.each
            for x in _network_lines(bom, optics, d.nic_w, d.switch_port_w, d.transceiver_w, None, d.switch_base_w, "")
        }
    else:
        default = {(x.kind, x.item): x.each for x in net}
    return lines + [
        Line(x.kind, x.item, x.count, x.each, POWER_SOURCES[x.kind] if default.get((x.kind, x.item)) == x.each else own)
        for x in net
    ]


def _network_lines(bom, optics, nic, port, transceiver, cable, switch_base, source) -> list[Line]:
    """NICs, switches, transceivers (and cables, for prices: `cable` = (dac table, fiber price))."""
    from ..fabric.plan import TIER_NAMES

    out: list[Line] = []
    if bom.nics:
        bw = bom.nic_speed_gbps * bom.nic_ports / bom.nics
        out.append(Line("nic", f"NIC {bw:g} Gb/s", bom.nics, by_speed(nic, bw), source))
    for t in bom.switch_tiers:
        each = switch_base + t.radix * by_speed(port, t.port_speed_gbps)
        out.append(
            Line("switch", f"{TIER_NAMES[t.kind]} switch, {t.radix} x {t.port_speed_gbps:g}G", t.switches, each, source)
        )
    for c in bom.cables:
        reach = getattr(optics, c.tier, "dr") if c.tier in ("host", "spine", "superspine") else "dr"
        if reach != "dac":
            out.append(
                Line(
                    "transceiver",
                    f"{c.tier} {c.speed_gbps:g}G {reach.upper()} transceiver",
                    c.transceivers,
                    by_speed(transceiver.get(reach, {}), c.speed_gbps),
                    source,
                )
            )
        if cable is not None:
            dac, fiber = cable
            each = by_speed(dac, c.speed_gbps) if reach == "dac" else fiber
            out.append(
                Line(
                    "cable",
                    f"{c.tier} {c.speed_gbps:g}G {'copper (DAC)' if reach == 'dac' else 'fiber'} cable",
                    c.cables,
                    each,
                    source,
                )
            )
        elif reach == "dac":
            out.append(
                Line("transceiver", f"{c.tier} {c.speed_gbps:g}G copper (DAC), no optics", c.cables, 0.0, source)
            )
    return out
