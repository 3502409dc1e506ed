"""What the agreement tests compare: a rank's predicted ops and its traced ops in one form,
(op, group, bytes, blocking), the initial Broadcast left out of the trace (setup, not an iteration)."""

from __future__ import annotations

from aifabric.workload.ops import Collective, Recv, Send


def predicted_ops(workload, rank):
    out = []
    for op in workload.ranks[rank]:
        if isinstance(op, Collective):
            out.append((op.op, op.group, op.size_bytes, op.blocking))
        elif isinstance(op, (Send, Recv)):
            out.append(("send" if isinstance(op, Send) else "recv", (op.src, op.dst), op.size_bytes, True))
    return out


def traced_ops(trace, rank):
    return [
        (e["op"], tuple(e["group"]), e["bytes"], not e["async_op"])
        for e in trace.comms[rank]
        if e["tag"] != "init/broadcast"
    ]
