"""Units, in one place. Internally: seconds, bytes, bytes per second, FLOP per second.

Network speeds are quoted in Gb/s (10^9 bits per second), scale-up bandwidths in GB/s
(10^9 bytes per second, per direction), compute in TFLOP/s (10^12 FLOP per second).
"""

BITS_PER_BYTE = 8
GIGA = 1e9


def gbps_to_bytes_per_s(rate_gbps: float) -> float:
    """Gb/s (decimal gigabits per second) to bytes per second."""
    return rate_gbps * GIGA / BITS_PER_BYTE


def gBps_to_bytes_per_s(rate_gBps: float) -> float:
    """GB/s (decimal gigabytes per second) to bytes per second."""
    return rate_gBps * GIGA


def bytes_per_s_to_gbps(rate_bytes_per_s):
    """Bytes per second (a float or a numpy array) to Gb/s, as line rates are printed."""
    return rate_bytes_per_s * BITS_PER_BYTE / GIGA


def bytes_per_s_to_gBps(rate_bytes_per_s):
    """Bytes per second (a float or a numpy array) to GB/s, as scale-up bandwidths are printed."""
    return rate_bytes_per_s / GIGA


def ns_to_s(t_ns: float) -> float:
    return t_ns * 1e-9


BYTES_PER_ELEMENT = {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
"""Storage size of one element of each precision, in bytes (seeds Ch. 1: FP32 = 4 bytes, FP16 = 2)."""
