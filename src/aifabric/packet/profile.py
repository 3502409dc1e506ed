"""A scenario's switch QoS profile (`fabric.qos`, scenario/qos_spec.py) as the packet engine's `PacketConfig`.

`apply_qos(cfg, qos, fabric)` replaces every switch, DCQCN and NIC setting the profile holds and keeps the run's
own options (explain, tracing, seed, transport, write-only); with `fabric` (a FabricSpec) the load balancing and
the flowlet gap come from `fabric.load_balancing` and `fabric.flowlet_gap_us`; the profile's DLB (`dlb.mode`
flowlet or per-packet), when on, is the switches' choice instead. KB = 1,000 bytes, MiB = 2^20.
"""

from __future__ import annotations

from dataclasses import replace

from .config import N_QUEUES, DcqcnConfig, LbConfig, PacketConfig, SwitchConfig

KB, MIB = 1000, 1 << 20
# Cisco DLB (Chapter 12) as the packet engine's switch policies (switch.py): flowlet mode re-chooses the
# least-loaded uplink after an idle gap; per-packet mode chooses the least-loaded uplink for every packet
DLB_MODES = {"flowlet": "flowlet", "per-packet": "adaptive"}


def _wred_bytes(w, q: int) -> tuple[int, int, float, int | None]:
    lo, hi, pct, drop = w.of(q)
    return int(lo * KB), int(hi * KB), pct / 100, None if drop is None else int(drop * KB)


def _pfc_bytes(p, prio: int) -> tuple[int, int, int | None]:
    xon, xoff, head = p.of(prio)
    return int(xon * KB), int(xoff * KB), None if head is None else int(head * KB)


def _pfc_per_priority(p) -> tuple[tuple[int, int, int, int | None], ...]:
    """The lossless priorities whose thresholds differ from the block's (canonical: sorted, none equal to it)."""
    base = _pfc_bytes(p, -1)
    own = ((q, *_pfc_bytes(p, q)) for q in sorted(set(p.priorities)))
    return tuple(x for x in own if x[1:] != base)


def switch_config(qos, forwarding_latency_s: float | None = None) -> SwitchConfig:
    """The profile as the switches' settings; WRED in a canonical form: the lowest WRED queue's thresholds as the
    base, the queues that differ from it in `wred_per_queue`."""
    w, p, b = qos.wred, qos.pfc, qos.buffer
    queues = sorted(set(w.queues))
    base = _wred_bytes(w, queues[0]) if queues else _wred_bytes(w, -1)
    own = tuple((q, *_wred_bytes(w, q)) for q in queues if _wred_bytes(w, q) != base)
    shares = tuple(qos.bandwidth_remaining_percent.get(q, 0) for q in range(N_QUEUES))
    return SwitchConfig(
        forwarding_latency_s=forwarding_latency_s,
        buffer_bytes=int(b.shared_mib * MIB),
        queue_limit_bytes=int(b.lossy_queue_limit_mib * MIB),
        dynamic_threshold_alpha=b.dynamic_threshold_alpha,
        strict_priority_queues=tuple(sorted(set(qos.strict_priority_queues))),
        bandwidth_remaining_percent=shares,
        dscp_to_queue=tuple(sorted(qos.dscp_to_queue().items())),
        default_queue=qos.default_qos_group,
        ecn_enabled=bool(w.queues),
        wred_ecn=w.ecn,
        ecn_queues=tuple(sorted(set(w.queues))),
        wred_min_bytes=base[0],
        wred_max_bytes=base[1],
        wred_pmax=base[2],
        wred_weight=w.weight,
        drop_threshold_bytes=base[3],
        wred_per_queue=own,
        pfc_enabled=p.enabled and bool(p.priorities),
        pfc_priorities=tuple(sorted(set(p.priorities))),
        pfc_xon_bytes=int(p.xon_kb * KB),
        pfc_xoff_bytes=int(p.xoff_kb * KB),
        pfc_headroom_bytes=None if p.headroom_kb is None else int(p.headroom_kb * KB),
        pfc_per_priority=_pfc_per_priority(p),
        pfc_quanta=p.quanta,
        pfc_watchdog_s=None if p.watchdog_ms is None else p.watchdog_ms / 1e3,
    )


def dcqcn_config(qos) -> DcqcnConfig:
    d = qos.dcqcn
    return DcqcnConfig(
        enabled=qos.congestion_control == "dcqcn",
        g=d.g,
        clamp_target_rate=d.clamp_target_rate,
        alpha_update_interval_s=d.alpha_update_interval_us / 1e6,
        rate_decrease_interval_s=d.rate_decrease_interval_us / 1e6,
        rate_increase_timer_s=d.rate_increase_timer_us / 1e6,
        byte_counter_bytes=int(round(d.byte_counter_mib * MIB)),
        fast_recovery_steps=d.fast_recovery_steps,
        r_ai_gbps=d.r_ai_mbps / 1e3,
        r_hai_gbps=d.r_hai_mbps / 1e3,
        min_rate_gbps=d.min_rate_mbps / 1e3,
        cnp_interval_s=d.cnp_interval_us / 1e6,
    )


def apply_qos(cfg: PacketConfig | None, qos, fabric=None) -> PacketConfig:
    """`cfg` with the profile's switch, DCQCN and NIC settings (and, given `fabric`, its load balancing)."""
    cfg = cfg or PacketConfig()
    nic = replace(
        cfg.nic,
        mtu_bytes=qos.roce_mtu_bytes,
        ack_every_packets=qos.ack_every_packets,
        data_dscp=qos.data_dscp,
        cnp_dscp=qos.cnp_dscp,
    )
    out = cfg.with_(switch=switch_config(qos, cfg.switch.forwarding_latency_s), dcqcn=dcqcn_config(qos), nic=nic)
    if fabric is not None:
        lb = fabric.load_balancing if fabric.load_balancing in ("ecmp", "flowlet", "spray", "adaptive") else "ecmp"
        out = out.with_(lb=LbConfig(mode=lb, flowlet_gap_s=fabric.flowlet_gap_us / 1e6, dre_tau_s=cfg.lb.dre_tau_s))
    dlb = qos.dlb
    if dlb.mode != "off":  # the switches' own choice on their uplinks, over the ECMP groups
        gap_us = (
            dlb.flowlet_aging_us
            if dlb.flowlet_aging_us is not None
            else (fabric.flowlet_gap_us if fabric is not None else out.lb.flowlet_gap_s * 1e6)
        )
        out = out.with_(lb=LbConfig(mode=DLB_MODES[dlb.mode], flowlet_gap_s=gap_us / 1e6, dre_tau_s=cfg.lb.dre_tau_s))
    return out
