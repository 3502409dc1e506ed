"""Byte counts in the terminal read at every scale (16,384 GPUs move petabytes per iteration)."""

from aifabric.report.terminal import fmt_bytes


def test_bytes_take_the_largest_unit_that_fits():
    assert fmt_bytes(4.78895554e15) == "4.79 PB"
    assert fmt_bytes(2.2268e14) == "222.68 TB"
    assert fmt_bytes(75.37e9) == "75.37 GB"
    assert fmt_bytes(32_770) == "32.77 kB"
    assert fmt_bytes(12) == "12 B"
