"""What a packet run measured, as plain data that serializes to JSON.

Per port and queue: bytes and packets sent, peak depth, a depth time series (at most one sample per
`depth_sample_s`, plus every return to empty), ECN marks, drops by reason, PFC pause/resume frames sent
(counted on the port that carries them) and received, time spent paused per priority. Per flow:
completion time, retransmissions, timeouts, NAKs, out-of-order arrivals, CE marks seen, CNPs sent and
received, the DCQCN rate over time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..units import bytes_per_s_to_gbps
from .verbs import WcStatus


@dataclass
class PacketStats:
    drops: dict = field(default_factory=dict)  # (port, queue, reason) -> packets
    ecn_marks: dict = field(default_factory=dict)  # (port, queue) -> packets
    pfc_pause_sent: dict = field(default_factory=dict)  # (port carrying the frame, priority) -> frames
    pfc_resume_sent: dict = field(default_factory=dict)
    watchdog: dict = field(default_factory=dict)
    pfc_frames: list = field(default_factory=list)  # (t_s, port carrying it, priority, quanta), in time order
    flowlet_switches: int = 0
    pkey_violations: dict = field(default_factory=dict)  # (receiving NIC,) -> packets dropped for their P_Key
    deadlocks: list = field(default_factory=list)  # PFC deadlocks found (packet/deadlock.py): cycle, when, broken
    ports: list = field(default_factory=list)
    flows: list = field(default_factory=list)
    events: int = 0
    packet_hops: int = 0
    end_s: float = 0.0

    def collect(self, net) -> None:
        self.events = net.sim.events
        done = [f.done_t for f in net.flows if f.done_t is not None]
        self.end_s = max(done) if done else net.sim.now  # the last delivery (timers may run on after it)
        self.packet_hops = sum(p.tx_packets for p in net.ports)
        self.ports = []
        for p in net.ports:
            if not p.tx_packets and not any(p.pfc_rx):
                continue
            queues = []
            for q in range(8):
                if p.max_depth[q] or p.depth_series[q] or p.pfc_rx[q] or p.paused_total[q]:
                    queues.append(
                        {
                            "queue": q,
                            "max_depth_bytes": p.max_depth[q],
                            "ecn_marks": self.ecn_marks.get((p.name, q), 0),
                            "pfc_pause_received": p.pfc_rx[q],
                            "paused_s": p.paused_total[q],
                            "pfc_pause_sent": self.pfc_pause_sent.get((p.name, q), 0),
                            "pfc_resume_sent": self.pfc_resume_sent.get((p.name, q), 0),
                            "depth_series": list(map(list, p.depth_series[q])),
                        }
                    )
            self.ports.append(
                {
                    "port": p.name,
                    "link": p.link,
                    "switch_port": p.is_switch_port,
                    "tx_bytes": p.tx_bytes,
                    "tx_packets": p.tx_packets,
                    "queues": queues,
                }
            )
        self.flows = []
        for f in net.flows:
            row = {
                "flow": f.id,
                "name": f.name,
                "src": f.src.id,
                "size_bytes": f.size,
                "start_s": f.start_t,
                "done_s": f.done_t,
                "fct_s": None if f.done_t is None else f.done_t - f.start_t,
            }
            if hasattr(f, "rp"):
                row.update(
                    dst=f.dst.id,
                    qpn=f.qpn,
                    udp_sport=f.sport,
                    packets=f.n,
                    retransmissions=f.retx,
                    timeouts=f.timeouts,
                    naks=f.naks,
                    out_of_order=f.ooo,
                    ce_marked=f.ce_rx,
                    cnp_sent=f.cnp_tx,
                    cnp_received=f.cnp_rx,
                    final_rate_gbps=bytes_per_s_to_gbps(f.rp.rc_bytes_per_s),
                    rate_gbps=list(map(list, f.rate_log)),
                )
                if f.conn is not None:
                    status = f.error or (WcStatus.SUCCESS if f.acked_t is not None else None)
                    row.update(
                        local_qpn=f.conn.req.qpn,
                        qp_type=f.conn.req.type,
                        initial_psn=f.ipsn,
                        pkey=f.conn.req.pkey,
                        status=status and status.value,
                    )
                row.update(placement=f.placement, bitmap_peak_psns=f.window_peak, bitmap_bytes=-(-f.window_peak // 8))
                if not f.reliable:  # UC, UD: what the responder got (the sender's completion says nothing)
                    row.update(
                        delivered=f.delivered,
                        packets_lost=f.lost_packets,
                        packets_discarded=f.discarded,
                        messages_lost=f.messages_lost,
                    )
            self.flows.append(row)

    # -- totals ---------------------------------------------------------------------------------------
    def total_drops(self) -> int:
        return sum(self.drops.values())

    def total_ecn_marks(self) -> int:
        return sum(self.ecn_marks.values())

    def total_pauses(self) -> int:
        return sum(self.pfc_pause_sent.values())

    def flow(self, name: str) -> dict:
        return next(f for f in self.flows if f["name"] == name)

    def to_dict(self, series: bool = True) -> dict:
        def keyed(d, names):
            return [dict(zip(names, k), count=v) for k, v in sorted(d.items())]

        ports = (
            self.ports
            if series
            else [
                {**p, "queues": [{k: v for k, v in q.items() if k != "depth_series"} for q in p["queues"]]}
                for p in self.ports
            ]
        )
        flows = self.flows if series else [{k: v for k, v in f.items() if k != "rate_gbps"} for f in self.flows]
        return {
            "events": self.events,
            "packet_hops": self.packet_hops,
            "end_s": self.end_s,
            "totals": {
                "drops": self.total_drops(),
                "ecn_marks": self.total_ecn_marks(),
                "pfc_pause_frames": self.total_pauses(),
                "pfc_resume_frames": sum(self.pfc_resume_sent.values()),
                "retransmissions": sum(f.get("retransmissions", 0) for f in self.flows),
                "cnps": sum(f.get("cnp_sent", 0) for f in self.flows),
                "flowlet_switches": self.flowlet_switches,
            },
            "drops": keyed(self.drops, ("port", "queue", "reason")),
            "ecn_marks": keyed(self.ecn_marks, ("port", "queue")),
            "pfc_pause_sent": keyed(self.pfc_pause_sent, ("port", "priority")),
            "pfc_resume_sent": keyed(self.pfc_resume_sent, ("port", "priority")),
            "pfc_watchdog": keyed(self.watchdog, ("port", "priority")),
            "pkey_violations": keyed(self.pkey_violations, ("nic",)),
            "ports": ports,
            "flows": flows,
            **({"pfc_deadlocks": self.deadlocks} if self.deadlocks else {}),
            **(
                {"pfc_frames": [{"t_s": t, "port": p, "priority": q, "quanta": n} for t, p, q, n in self.pfc_frames]}
                if series
                else {}
            ),
        }
