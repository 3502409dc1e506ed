"""The packet engine's results are unchanged by its speed work (issue 18, item 2: "equal to today's on the tests'
scenarios").

Each case runs a scenario and reduces everything the run reports to one SHA-256: every flow's FCT, retransmissions,
timeouts, NAKs, CE marks, CNPs and DCQCN rate history, every port's bytes, packets, queue maxima and depth series, the
ECN marks, drops by reason, PFC frames (with their times), the scenario's findings and its --explain log. The events
the simulator ran are kept beside it (they change only if the engine schedules differently).

The expected values (golden_counters.json) were recorded from the reference implementation at the commit named in
that file; the assertion is only "unchanged from that implementation", never a claim that those values are right
(the other packet tests say what is right). Re-record (`python tests/packet/test_golden_counters.py --record`) only
for a deliberate change of the engine's results, and say so in the commit.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from aifabric.packet.config import DcqcnConfig, LbConfig, NicConfig, PacketConfig, SwitchConfig
from aifabric.packet.network import Network
from aifabric.packet.scenarios import SCENARIOS, run_scenario
from aifabric.packet.topo import ecmp_route, fat_tree, five_tuple

GOLDEN = Path(__file__).with_name("golden_counters.json")


def _digest(obj) -> str:
    text = json.dumps(obj, sort_keys=True, default=repr, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _run_dict(net: Network, st) -> tuple[dict, int]:
    d = st.to_dict(series=True)
    events = d.pop("events")
    d["log"] = net.events_log
    d["log_dropped"] = net.log_dropped
    d["now"] = net.sim.now
    d["captured"] = len(net.captured)
    return d, events


def _scenario(name: str, cfg: PacketConfig) -> tuple[str, list[int]]:
    r = run_scenario(name, cfg)
    runs, events = {}, []
    for label, net, st in r.runs:
        runs[label], ev = _run_dict(net, st)
        events.append(ev)
    return _digest({"findings": r.findings, "table": r.table, "runs": runs}), events


def _permutation(hosts: int, mb: float, cfg: PacketConfig, seed: int = 1) -> tuple[str, list[int]]:
    """bench/bench_packet.py's case: a permutation on a two-tier fat tree, one flow per host."""
    per_leaf = 16
    f = fat_tree(hosts, per_leaf, max(1, min(8, hosts // per_leaf)), 400)
    net = Network(f, cfg.with_(seed=seed), hash_seed=seed)
    net.loop = "compiled"  # the compiled core where it covers the case (packet/fastcore.py), else the reference
    rng = np.random.default_rng(seed)
    while True:
        p = rng.permutation(hosts)
        if not np.any(p == np.arange(hosts)):
            break
    for s, d in enumerate(int(x) for x in p):
        qpn, rqpn = 0x100 + s, 0x800 + d
        flow = five_tuple(f, f"h{s}", f"h{d}", qpn, rqpn)
        route = ecmp_route(f, f"h{s}", f"h{d}", flow, hash_seed=seed)
        net.add_transfer(route, mb * 1e6, name=f"h{s}->h{d}", qpn=qpn, sport=flow.src_port)
    st = net.run()
    d, ev = _run_dict(net, st)
    return _digest(d), [ev]


LOSSY = SwitchConfig(pfc_enabled=False, queue_limit_bytes=200_000)  # drops, NAKs, go-back-N, timeouts

CASES = {
    # the seeds' scenarios, as the packet tests run them (with the --explain log)
    **{f"scenario:{name}": (lambda name=name: _scenario(name, PacketConfig(explain=True))) for name in SCENARIOS},
    # incast without PFC and with a small queue limit: drops, NAKs, retransmissions
    "incast-lossy": lambda: _scenario("incast", PacketConfig(explain=True, switch=LOSSY)),
    "incast-lossy-nodcqcn": lambda: _scenario("incast", PacketConfig(switch=LOSSY, dcqcn=DcqcnConfig(enabled=False))),
    "incast-wred-average": lambda: _scenario("incast", PacketConfig(switch=SwitchConfig(wred_weight=4))),
    "incast-dynamic-threshold": lambda: _scenario(
        "incast",
        PacketConfig(switch=SwitchConfig(pfc_enabled=False, dynamic_threshold_alpha=0.01, queue_limit_bytes=2_000_000)),
    ),
    "incast-uc": lambda: _scenario("incast", PacketConfig(switch=LOSSY, nic=NicConfig(transport="uc"))),
    "incast-write-only": lambda: _scenario("incast", PacketConfig(switch=LOSSY, nic=NicConfig(write_only=True))),
    # bench_packet.py's permutation (ECMP) and the other load balancers on it
    "permutation-32-ecmp": lambda: _permutation(32, 2.0, PacketConfig()),
    "permutation-64-ecmp-9000": lambda: _permutation(64, 1.0, PacketConfig(nic=NicConfig(mtu_bytes=9000))),
    "permutation-32-flowlet": lambda: _permutation(32, 1.0, PacketConfig(lb=LbConfig(mode="flowlet"))),
    "permutation-32-adaptive": lambda: _permutation(32, 1.0, PacketConfig(lb=LbConfig(mode="adaptive"))),
    "permutation-32-spray": lambda: _permutation(32, 1.0, PacketConfig(lb=LbConfig(mode="spray"))),
    "permutation-32-uet": lambda: _permutation(32, 1.0, PacketConfig(nic=NicConfig(transport="uet"))),
    "permutation-32-explain": lambda: _permutation(32, 0.5, PacketConfig(explain=True)),
}


def _golden() -> dict:
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("case", sorted(CASES))
def test_results_unchanged(case):
    want = _golden()["cases"][case]
    digest, events = CASES[case]()
    assert digest == want["sha256"], f"{case}: results differ from the reference implementation"
    assert events == want["events"], f"{case}: the simulator ran {events} events, the reference {want['events']}"


def _record() -> None:
    import subprocess

    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    out = {
        "comment": (
            "Recorded from the reference (pure-Python) packet engine at the commit below; the tests assert only that "
            "results are unchanged from it (issue 18 item 2), not that they are right."
        ),
        "commit": commit,
        "cases": {},
    }
    for name in sorted(CASES):
        digest, events = CASES[name]()
        out["cases"][name] = {"sha256": digest, "events": events}
        print(name, digest[:12], events, flush=True)
    GOLDEN.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    if "--record" in sys.argv:
        _record()


def test_the_commands_list_of_stories_is_the_engines_list_of_scenarios():
    """cli/packet_cmd.py keeps its own copy of the scenario names (importing the command must not import the packet
    engine); it must name exactly the scenarios packet/scenarios.py runs."""
    from aifabric.cli.packet_cmd import STORIES

    assert tuple(STORIES) == tuple(SCENARIOS)
