"""Packet-level simulation of the backend fabric: RoCEv2, ECN/WRED, PFC, DCQCN, load balancing, UET.

`Network(fabric, PacketConfig())` builds the devices and ports of a `Fabric`; `add_transfer` starts
RDMA Writes over routes; `run()` returns `PacketStats`. The engines' task graphs run through
`aifabric.engines.packet`; the seeds' scenarios through `aifabric.packet.scenarios`. See docs/packet.md.
"""

from .config import DcqcnConfig, LbConfig, NicConfig, PacketConfig, SwitchConfig
from .network import Network
from .stats import PacketStats

__all__ = ["DcqcnConfig", "LbConfig", "Network", "NicConfig", "PacketConfig", "PacketStats", "SwitchConfig"]
