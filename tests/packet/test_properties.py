"""Properties over random small fabrics and traffic: every byte arrives once; lossless stays lossless."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.packet.config import LbConfig, NicConfig, PacketConfig
from aifabric.packet.network import Network
from aifabric.packet.topo import ecmp_route, fat_tree, five_tuple


@settings(max_examples=12, deadline=None)
@given(
    flows=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(1, 300_000)), min_size=1, max_size=6),
    lb=st.sampled_from(["ecmp", "flowlet", "spray", "adaptive"]),
    transport=st.sampled_from(["rc", "uet"]),
    write_only=st.booleans(),
    seed=st.integers(0, 3),
)
def test_every_flow_completes_exactly_and_the_lossless_class_never_drops(flows, lb, transport, write_only, seed):
    f = fat_tree(8, 4, 2, 100)
    net = Network(
        f,
        PacketConfig(lb=LbConfig(mode=lb), nic=NicConfig(transport=transport, write_only=write_only), seed=seed),
        hash_seed=seed,
    )
    made = []
    for i, (s, d, size) in enumerate(flows):
        if s == d:
            continue
        ft = five_tuple(f, f"h{s}", f"h{d}", 0x100 + i, 0x900 + i)
        made.append(net.add_transfer(ecmp_route(f, f"h{s}", f"h{d}", ft, seed), size, qpn=0x100 + i, sport=ft.src_port))
    st_ = net.run()
    assert st_.total_drops() == 0
    for fl in made:
        assert fl.done_t is not None and fl.n_got == fl.n and fl.acked_t is not None
        assert fl.done_t > fl.start_t
    # no packet is left anywhere: every switch's shared buffer and ingress counters are back to zero
    for dev in net.devices:
        if hasattr(dev, "buffer_used"):
            assert dev.buffer_used == 0 and not any(dev.ingress.values())
