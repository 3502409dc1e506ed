"""The fit inverts the cost model: outputs generated from the model itself with a known efficiency and
extra latency give them back; the real A100 output gives its measured busbw over NVLink's line rate."""

from __future__ import annotations

from pathlib import Path

import pytest
from calib_synth import output
from hypothesis import given, settings
from hypothesis import strategies as st

from aifabric.calibration.fit import NOMINAL, Measurement, Nominal, TierValues, calibrate, measurement, row_efficiency
from aifabric.calibration.nccl_tests import parse_file, parse_text
from aifabric.catalog import gpu

DATA = Path(__file__).parent / "data"
H100_NVLINK_GBPS = gpu("H100").nvlink_bandwidth_gBps / 2  # per direction
NIC_GBPS = 400
SIZES = [8 * 4**k for k in range(16)]  # 8 B .. 8 GiB, factor 4: 6 sizes <= 64 KiB, 3 >= max / 16


def generated(op: str, nodes: int, per_node: int, nvlink: TierValues, network: TierValues, nvls: bool = False) -> str:
    """An nccl-tests output whose times are the simulator's model with these calibrations."""
    probe = Measurement(
        "gen",
        op,
        nodes * per_node,
        nodes,
        per_node,
        tuple(SIZES),
        (1.0,) * len(SIZES),
        Nominal(per_node, H100_NVLINK_GBPS * 1e9 if per_node > 1 else 0.0, NIC_GBPS * 1e9 / 8 if nodes > 1 else 0.0),
        in_switch=nvls and nodes == 1,
    )
    times = [probe.model_time_s(s, nvlink, network) * 1e6 for s in SIZES]
    return output(op, nodes, per_node, SIZES, times)


def fit_texts(*texts: str, nvls: bool = False):
    runs = [r for i, t in enumerate(texts) for r in parse_text(t, f"gen{i}.txt")]
    return calibrate([measurement(r, H100_NVLINK_GBPS, NIC_GBPS, nvls) for r in runs])


def close(a: float, b: float, rel: float = 0.01) -> bool:
    return abs(a - b) <= rel * abs(b)


@pytest.mark.parametrize("nvls", [False, True])
def test_single_node_recovers_nvlink_efficiency_and_latency(nvls):
    """e = 0.8, +3 µs per step back within 1 %; with NVLink SHARP the model may reduce in the switch."""
    cal = fit_texts(generated("all-reduce", 1, 8, TierValues(0.8, 3e-6), NOMINAL, nvls), nvls=nvls)
    fit = cal.tiers["nvlink"]
    assert set(cal.tiers) == {"nvlink"}
    assert close(fit.efficiency, 0.8) and close(fit.extra_latency_us, 3.0)
    assert cal.files[0].rms_error_pct < 1.0


@pytest.mark.parametrize("op", ["all-reduce", "all-gather", "reduce-scatter"])
def test_multi_node_recovers_the_network_with_nvlink_fitted_first(op):
    nvlink, network = TierValues(0.8, 3e-6), TierValues(0.7, 6e-6)
    cal = fit_texts(generated("all-reduce", 1, 8, nvlink, NOMINAL), generated(op, 2, 8, nvlink, network))
    nv, net = cal.tiers["nvlink"], cal.tiers["network"]
    assert close(nv.efficiency, 0.8) and close(nv.extra_latency_us, 3.0)
    assert close(net.efficiency, 0.7) and close(net.extra_latency_us, 6.0)


def test_network_alone_takes_nvlink_as_nominal():
    cal = fit_texts(generated("all-reduce", 4, 8, NOMINAL, TierValues(0.8, 3e-6)))
    fit = cal.tiers["network"]
    assert close(fit.efficiency, 0.8) and close(fit.extra_latency_us, 3.0)


def test_faster_than_the_nominal_bound_is_clipped_and_said():
    """In-switch reduction (NVLS) beats the ring's bound: the efficiency is clipped to 1 with a note."""
    cal = fit_texts(generated("all-reduce", 1, 8, TierValues(1.3, 1e-6), NOMINAL))
    fit = cal.tiers["nvlink"]
    assert fit.efficiency == 1.0 and close(fit.raw_efficiency, 1.3)
    assert any("NVLS" in n for n in fit.notes)


def test_no_small_sizes_leaves_the_latency_alone():
    text = generated("all-reduce", 1, 8, TierValues(0.6, 3e-6), NOMINAL)
    big = "\n".join(
        line for line in text.splitlines() if not line.strip()[:1].isdigit() or int(line.split()[0]) >= 1 << 20
    )
    fit = fit_texts(big).tiers["nvlink"]
    assert fit.small_rows == 0 and fit.extra_latency_us == 0.0 and any("not fitted" in n for n in fit.notes)


@settings(max_examples=25, deadline=None)
@given(st.floats(0.05, 1.0), st.integers(20, 33), st.sampled_from([(1, 8), (2, 8), (4, 1)]))
def test_row_efficiency_inverts_the_model(e, log2_size, layout):
    nodes, per_node = layout
    m = Measurement(
        "p",
        "all-reduce",
        nodes * per_node,
        nodes,
        per_node,
        (2**log2_size,),
        (1.0,),
        Nominal(per_node, H100_NVLINK_GBPS * 1e9, NIC_GBPS * 1e9 / 8),
    )
    tier = m.tier
    mine = TierValues(e, 2e-6)
    nv, net = (mine, NOMINAL) if tier == "nvlink" else (NOMINAL, mine)
    t = m.model_time_s(2**log2_size, nv, net)
    m = Measurement("p", m.op, m.n, m.servers, m.per_server, m.sizes, (t,), m.nominal)
    assert close(row_efficiency(m, 0, tier, 2e-6, NOMINAL), e, 1e-4)


def test_a100_sample_efficiency_is_busbw_over_the_nvlink_line_rate():
    """8 x A100 all_reduce_perf: at 4 GiB the fitted efficiency is the measured busbw over 300 GB/s
    (NVLink 3 per direction), within 1 %: a ring's time there is all bandwidth."""
    run = parse_file(DATA / "a100_sxm4_80gb_8gpu_all_reduce_perf_g8.txt")[0]
    line_rate = gpu("A100").nvlink_bandwidth_gBps / 2
    cal = calibrate([measurement(run, line_rate, 200)])
    fit = cal.tiers["nvlink"]
    top = run.rows[-1].best.busbw_gBps
    assert close(fit.efficiency_at_largest, top / line_rate)
    # the average runs over 256 MiB .. 4 GiB, where busbw climbs toward its top
    lowest = min(r.best.busbw_gBps for r in run.rows if r.size_bytes * 16 >= run.rows[-1].size_bytes)
    assert lowest / line_rate < fit.efficiency < top / line_rate * 1.01
    assert cal.files[0].measured_busbw_gBps == pytest.approx(top, rel=1e-3)
    assert fit.extra_latency_us > 0  # 39 µs at 8 B: slower than the model's bare overheads


def test_the_fit_models_nccls_ll_ceilings_as_the_simulator_applies_them():
    """Small multi-node sizes run LL, which NCCL holds under its ceiling across servers (AMD: 22.5 GB/s on two):
    outputs generated with the ceilings fit back exactly when the fit knows them, and a fit that ignored them
    would put LL's lost bandwidth into the latency."""
    across = (22.5e9, 19.0e9)
    nvlink, network = NOMINAL, TierValues(0.8, 3e-6)

    def nominal(ceilings: bool) -> Nominal:
        return Nominal(8, H100_NVLINK_GBPS * 1e9, NIC_GBPS * 1e9 / 8, 0.0, across if ceilings else (0.0, 0.0))

    probe = Measurement("gen", "all-reduce", 16, 2, 8, tuple(SIZES), (1.0,) * len(SIZES), nominal(True))
    text = output("all-reduce", 2, 8, SIZES, [probe.model_time_s(s, nvlink, network) * 1e6 for s in SIZES])
    [run] = parse_text(text, "amd.txt")
    knows = calibrate([measurement(run, H100_NVLINK_GBPS, NIC_GBPS, ll_max_across_gBps=(22.5, 19.0))])
    fit = knows.tiers["network"]
    assert close(fit.efficiency, 0.8) and close(fit.extra_latency_us, 3.0)
    blind = calibrate([measurement(run, H100_NVLINK_GBPS, NIC_GBPS)]).tiers["network"]
    assert blind.extra_latency_us > 1.03 * fit.extra_latency_us  # 3.18 µs: LL's lost bandwidth taken for latency
