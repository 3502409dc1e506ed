"""Packet-level simulation of the backend fabric: RoCEv2, ECN/WRED, PFC, DCQCN, load balancing, UET.

`Network(fabric, PacketConfig())` builds the devices and ports of a `Fabric`; `add_transfer` starts
RDMA Writes over routes; `run()` returns `PacketStats`. The engines' task graphs run through
`aifabric.engines.packet`; the seeds' scenarios through `aifabric.packet.scenarios`. See docs/packet.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # what the lazy exports below are, for type checkers
    from .config import DcqcnConfig, LbConfig, NicConfig, PacketConfig, SwitchConfig
    from .network import Network
    from .stats import PacketStats

_EXPORTS = {
    "DcqcnConfig": ".config",
    "LbConfig": ".config",
    "NicConfig": ".config",
    "PacketConfig": ".config",
    "SwitchConfig": ".config",
    "Network": ".network",
    "PacketStats": ".stats",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["DcqcnConfig", "LbConfig", "Network", "NicConfig", "PacketConfig", "PacketStats", "SwitchConfig"]
