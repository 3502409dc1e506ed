"""Wire-level arithmetic of the seeds' Ch. 9, 11 and 12: PFC quanta, CEV, ToS, RDMA Write segmentation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aifabric.packet.headers import (
    OP_WRITE_FIRST,
    OP_WRITE_LAST,
    OP_WRITE_MIDDLE,
    OP_WRITE_ONLY,
    RETH_BYTES,
    ROCE_HEADER_BYTES,
    pfc_bit_time_s,
    pfc_class_enable_vector,
    pfc_pause_s,
    pfc_quantum_s,
    segment_write,
    tos_byte,
)


def test_pfc_quanta_at_400_gbps_book_figure_11_4():
    """WE-09: 1 bit = 2.5 ps, 1 quantum = 512 bits = 1.28 ns, 0xFFFF quanta ~ 83.9 us (exact 83.8848 us)."""
    rate = 50e9  # 400 Gb/s in bytes per second
    assert pfc_bit_time_s(rate) == pytest.approx(2.5e-12)
    assert pfc_quantum_s(rate) == pytest.approx(1.28e-9)
    assert pfc_pause_s(0xFFFF, rate) == pytest.approx(83.8848e-6)
    assert round(pfc_pause_s(0xFFFF, rate) * 1e6, 1) == 83.9


@pytest.mark.parametrize("gbps, quantum_ns, max_us", [(100, 5.12, 335.54), (200, 2.56, 167.77), (800, 0.64, 41.94)])
def test_pfc_quanta_scale_inversely_with_link_speed(gbps, quantum_ns, max_us):
    """The derived rows of spec §4.6 (the book states only 400 Gb/s)."""
    rate = gbps * 1e9 / 8  # bytes per second
    assert pfc_quantum_s(rate) * 1e9 == pytest.approx(quantum_ns)
    assert pfc_pause_s(0xFFFF, rate) * 1e6 == pytest.approx(max_us, abs=0.01)


def test_pfc_quanta_out_of_range_is_refused():
    with pytest.raises(ValueError):
        pfc_pause_s(0x10000, 400e9)


def test_class_enable_vector_for_queue_3_is_0000_1000():
    """WE-10: bit i = priority i, rightmost bit = queue 0."""
    assert f"{pfc_class_enable_vector([3]):08b}" == "00001000"
    assert pfc_class_enable_vector([0, 7]) == 0b1000_0001


def test_tos_byte_of_rocev2_data_and_ce_mark():
    """DSCP 24 with ECN 10 (ECT) is ToS 0x62; CE-marked (11) it is 0x63; a CNP (DSCP 48) is 0xC0."""
    assert tos_byte(24, 0b10) == 0x62
    assert tos_byte(24, 0b11) == 0x63
    assert tos_byte(48, 0) == 0xC0


def test_three_packet_write_first_middle_last_book_figures_12_1_to_12_3():
    """WE-17: PSN 1 Write First with RETH -> block 2C, PSN 2 Middle -> 2D, PSN 3 Last -> 2E (each block
    directly after the previous one: the receiver places at base VA + cumulative offset)."""
    segs = segment_write(3 * 1024, 1024, start_psn=1)
    assert [(s.psn, s.opcode, s.has_reth) for s in segs] == [
        (1, OP_WRITE_FIRST, True),
        (2, OP_WRITE_MIDDLE, False),
        (3, OP_WRITE_LAST, False),
    ]
    blocks = {0: "2C", 1024: "2D", 2048: "2E"}
    assert [blocks[s.offset_bytes] for s in segs] == ["2C", "2D", "2E"]
    assert segs[0].wire_bytes == 1024 + ROCE_HEADER_BYTES + RETH_BYTES
    assert segs[1].wire_bytes == 1024 + ROCE_HEADER_BYTES


def test_write_only_puts_a_reth_in_every_packet_figure_12_7():
    segs = segment_write(3 * 1024, 1024, write_only=True)
    assert all(s.opcode == OP_WRITE_ONLY and s.has_reth for s in segs)


def test_single_packet_write_is_write_only():
    assert segment_write(100, 4096)[0].opcode == OP_WRITE_ONLY


@given(size=st.integers(1, 200_000), mtu=st.sampled_from([256, 1024, 4096]), start=st.integers(0, 0xFFFFFF))
def test_segmentation_covers_the_message_once_with_consecutive_psns(size, mtu, start):
    segs = segment_write(size, mtu, start_psn=start)
    assert sum(s.payload_bytes for s in segs) == size
    assert [s.offset_bytes for s in segs] == [i * mtu for i in range(len(segs))]
    assert all(s.payload_bytes <= mtu for s in segs)
    assert [s.psn for s in segs] == [(start + i) % (1 << 24) for i in range(len(segs))]
    assert sum(s.has_reth for s in segs) == 1  # RETH on First (or Only) only
