"""Prices: rough defaults, documented, and the user's own table over them.

The defaults are round figures of the order of 2024 street prices in USD, good to perhaps ±50 %: enough
to compare designs (a spine more or less, 400 vs 800 Gb/s optics), not to sign a purchase order. Put
your quotes in a file (a YAML mapping of `scenario/costs_spec.PriceTable` fields, or under a `prices:` key)
and give it as the scenario's `costs.prices: FILE` or `aifabric fabric plan --prices FILE`; what the file
leaves out keeps the default.

- GPU: A100 15,000 (40 GB 10,000; PCIe 12,000); H100 30,000 (PCIe 25,000); H200 35,000; B200 45,000;
  GB200 55,000; MI300X 15,000.
- Server without its GPUs and backend NICs, per GPU slot: 8,000 (SXM/OAM baseboard systems: CPUs, memory,
  NVSwitch, chassis, storage); 5,000 for PCIe cards; 12,000 GB200 (Grace, NVLink switch trays, liquid cooling).
- NIC by bandwidth: 100G 800; 200G 1,200; 400G 2,000; 800G 3,000.
- Switch, per port (every port of the box): 100G 250; 200G 450; 400G 700; 800G 1,200; 1.6T 2,000.
- Transceiver SR / DR / FR: 100G 100 / 150 / 200; 200G 250 / 300 / 400; 400G 500 / 600 / 800;
  800G 800 / 1,000 / 1,200.
- Cable: fiber 80; copper DAC 100G 60, 200G 100, 400G 150, 800G 250.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError, Problem
from ..scenario.costs_spec import PriceTable
from .power import Line, _network_lines

_GPU_USD = {
    "A100": 15_000,
    "A100-40GB": 10_000,
    "A100-PCIE": 12_000,
    "H100": 30_000,
    "H100-PCIE": 25_000,
    "H200": 35_000,
    "B200": 45_000,
    "GB200": 55_000,
    "MI300X": 15_000,
}
_SERVER_USD = {
    "A100": 8_000,
    "A100-40GB": 8_000,
    "A100-PCIE": 5_000,
    "H100": 8_000,
    "H100-PCIE": 5_000,
    "H200": 8_000,
    "B200": 8_000,
    "GB200": 12_000,
    "MI300X": 8_000,
}

DEFAULT_PRICES = PriceTable(
    gpu_usd=_GPU_USD,
    server_usd_per_gpu=_SERVER_USD,
    nic_usd={100: 800, 200: 1_200, 400: 2_000, 800: 3_000},
    switch_port_usd={100: 250, 200: 450, 400: 700, 800: 1_200, 1600: 2_000},
    transceiver_usd={
        "sr": {100: 100, 200: 250, 400: 500, 800: 800},
        "dr": {100: 150, 200: 300, 400: 600, 800: 1_000},
        "fr": {100: 200, 200: 400, 400: 800, 800: 1_200},
    },
    dac_cable_usd={100: 60, 200: 100, 400: 150, 800: 250},
    fiber_cable_usd=80,
    source="aifabric defaults (costs/prices.py): rough 2024 street prices, ±50 %",
)


def capital_lines(bom, gpu_name: str, optics, table: PriceTable = DEFAULT_PRICES) -> list[Line]:
    """What a fabric's bill of materials (fabric.plan.BillOfMaterials) costs to buy, line by line."""
    src = table.source
    lines = [
        Line("gpu", f"{gpu_name} GPU", bom.gpus, float(table.gpu_usd.get(gpu_name, 0.0)), src),
        Line(
            "server",
            f"server without GPUs and NICs, per GPU slot ({bom.servers:,} servers)",
            bom.gpus,
            float(table.server_usd_per_gpu.get(gpu_name, 0.0)),
            src,
        ),
    ]
    lines += _network_lines(
        bom,
        optics,
        table.nic_usd,
        table.switch_port_usd,
        table.transceiver_usd,
        (table.dac_cable_usd, float(table.fiber_cable_usd or 0.0)),
        0.0,
        src,
    )
    return lines


def table_data(data, source: str, field: str, where: str | None = None) -> dict:
    """A price or power file's mapping: the file itself, or its `prices:` / `power:` (or `costs:`) block;
    problems named `where` (default: `field`)."""
    if isinstance(data, dict) and isinstance(data.get("costs"), dict):
        data = data["costs"]
    if isinstance(data, dict) and isinstance(data.get(field), dict):
        data = data[field]
    if not isinstance(data, dict):
        raise InputError([Problem(where or field, f"{source}: expected a mapping of {field} entries")], source)
    return data


def load_prices(path: str | Path) -> PriceTable:
    """A price table file (YAML), its problems named `prices.<field>` with the file."""
    from pydantic import ValidationError

    from ..scenario.load import problems_from_validation, read_yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(
            [Problem("--prices", f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}")], str(path)
        ) from None
    data = table_data(read_yaml(text, str(path)), str(path), "prices", "--prices")
    try:
        return PriceTable.model_validate(data)
    except ValidationError as exc:
        raise InputError(
            [Problem(f"{path}: prices.{p.path}", p.message) for p in problems_from_validation(exc)], str(path)
        ) from None
