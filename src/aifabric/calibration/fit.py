"""Fitting nccl-tests measurements to the collective cost model, per tier (NVLink, network).

The model is the simulator's own: what a workload's collective gets (engines/lower_collective.py
`plan`): `tuning.choose` among the algorithms NCCL runs (`algorithm="nccl"`: ring, tree, and NVLS inside
one node where the GPU has it), every protocol, channel count and pipeline depth, the fastest winning;
on `cost.Paths` whose hops are the nominal ones scaled by the calibration:

    hop bandwidth = bandwidth_efficiency × nominal     (NVLink: catalog total / 2 per direction;
                                                        network: NIC Gb/s / 8)
    hop latency   = route latency + extra_latency_us   (added to every step on that tier)

Route latencies are the scenario defaults' (`ClusterSpec`, `FabricSpec`): NVLink GPU-GPU 0.5 µs; one
rail GPU-PCIe-NIC-cable-switch-cable-NIC-PCIe-GPU 1.4 µs; across rails (rail, spine, rail) 2.8 µs. The
nominal bandwidths are line rates: the calibration's efficiency is what the simulator multiplies them by
(fabric/achievable.py), in place of the catalog's NVLink figure and the network's header overhead.

Two unknowns per tier, each fitted where it dominates, alternately until both settle:

- `bandwidth_efficiency`: for each of the largest sizes (>= max size / 16) the e at which the model's
  time equals the measured one (bisection on log e), averaged; then clipped to (0, 1]. Above 1 means
  the measurement beats the model's bound (NVLS / SHARP in-switch reduction, faster links than
  nominal): reported, not hidden.
- `extra_latency_us`: over the sizes <= 64 KiB, the x at which the mean log ratio model / measured is
  0 (the model is increasing in x: bisection in [floor, +1000 µs], the floor being the most negative
  value the simulator can represent: minus the latency of the link it adds x to).

Single-node measurements calibrate `nvlink`; multi-node ones `network`, with the NVLink hops at the
`nvlink` calibration when there is one. Times are the faster of out-of-place and in-place per size.

Both fits use that tuner rather than one fixed algorithm: for large buffers it picks ring / Simple
(with one channel per NIC across nodes) except where NVLS is available, and the efficiency then means
what the simulator will do with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property

from scipy.optimize import brentq

from ..collectives import Layout, not_applicable
from ..collectives.cost import Paths, Shape, busbw_factor
from ..collectives.tuning import choose
from ..errors import InputError, Problem
from ..scenario.fabric_spec import ClusterSpec, FabricSpec
from ..units import bytes_per_s_to_gBps, bytes_per_s_to_gbps, gBps_to_bytes_per_s, gbps_to_bytes_per_s, ns_to_s
from .nccl_tests import NcclTestsRun


def _default_ns(model, name: str) -> float:
    return float(model.model_fields[name].default)


_PCIE_S = ns_to_s(_default_ns(ClusterSpec, "pcie_latency_ns"))
_CABLE_S = ns_to_s(_default_ns(FabricSpec, "link_latency_ns"))
_SWITCH_S = ns_to_s(_default_ns(FabricSpec, "switch_latency_ns"))
NVLINK_LATENCY_S = ns_to_s(_default_ns(ClusterSpec, "nvlink_latency_ns"))
RAIL_LATENCY_S = 2 * _PCIE_S + 2 * _CABLE_S + _SWITCH_S
CROSS_RAIL_LATENCY_S = 2 * _PCIE_S + 4 * _CABLE_S + 3 * _SWITCH_S
# The simulator adds a tier's extra latency to one link of each hop (the GPU's link into the NVSwitch,
# half the NVLink latency; the NIC's cable into its switch) and keeps that link's latency >= 0
# (fabric/achievable.py): the most negative extra latency it can represent.
EXTRA_LATENCY_FLOOR_S = {"nvlink": -NVLINK_LATENCY_S / 2, "network": -_CABLE_S}

SIMULATOR_ALGORITHM = "nccl"  # the tuner's algorithm set for a workload's collectives
LARGE_FRACTION = 16  # sizes >= max / 16 fit the efficiency
SMALL_MAX_BYTES = 64 * 1024  # sizes <= 64 KiB fit the latency
MAX_EXTRA_LATENCY_S = 1000e-6
EFFICIENCY_RANGE = (1e-4, 1e4)  # bisection bracket of the unclipped efficiency
TIERS = ("nvlink", "network")


@dataclass(frozen=True)
class TierValues:
    """A tier's calibration in the model's units."""

    efficiency: float = 1.0
    extra_latency_s: float = 0.0


NOMINAL = TierValues()


@dataclass(frozen=True)
class Nominal:
    """A measurement's hops before calibration: line rates per direction (bytes/s); the route latencies are
    the module's. A rate of 0 stands for a hop the measurement never uses (`measurement` checks)."""

    gpus_per_server: int
    nvlink_bytes_per_s: float
    nic_bytes_per_s: float
    # NCCL's LL ceilings the simulator applies on these hops (fabric/achievable.py): inside one server, across 2 /
    # more servers (0: none)
    ll_max_bytes_per_s: float = 0.0
    ll_max_across_bytes_per_s: tuple[float, float] = (0.0, 0.0)

    def paths(self, nvlink: TierValues, network: TierValues) -> Paths:
        def rate(bytes_per_s: float, tier: TierValues) -> float:
            return bytes_per_s * tier.efficiency if bytes_per_s > 0 else math.inf

        nv_us, net_us = nvlink.extra_latency_s * 1e6, network.extra_latency_s * 1e6
        paths = Paths.simple(
            self.gpus_per_server,
            bytes_per_s_to_gBps(rate(self.nvlink_bytes_per_s, nvlink)),
            bytes_per_s_to_gbps(rate(self.nic_bytes_per_s, network)),
            nvlink_latency_us=NVLINK_LATENCY_S * 1e6 + nv_us,
            rail_latency_us=RAIL_LATENCY_S * 1e6 + net_us,
            spine_latency_us=CROSS_RAIL_LATENCY_S * 1e6 + net_us,
        )
        return replace(
            paths, ll_max_bytes_per_s=self.ll_max_bytes_per_s, ll_max_across_bytes_per_s=self.ll_max_across_bytes_per_s
        )


@dataclass(frozen=True)
class Measurement:
    """One nccl-tests run as the fit sees it: the group's shape and (size, time) pairs."""

    label: str
    op: str
    n: int
    servers: int
    per_server: int
    sizes: tuple[int, ...]
    times_s: tuple[float, ...]
    nominal: Nominal
    in_switch: bool = False  # NVLS may be chosen (the simulator: GPUs with NVLink SHARP, a one-node group)

    @property
    def tier(self) -> str:
        return "nvlink" if self.servers == 1 else "network"

    @cached_property
    def shape(self) -> Shape:
        if self.op == "send-recv":  # the model's send-recv is one pair; across nodes when there are several
            return Shape(2, 2, 1) if self.servers > 1 else Shape(2, 1, 2)
        return Shape(self.n, self.servers, self.per_server)

    @cached_property
    def _runnable(self):
        layout = Layout(self.per_server)
        if self.op == "send-recv":
            group = [0, self.per_server] if self.servers > 1 else [0, 1]
        else:
            group = list(range(self.n))
        return lambda alg: not_applicable(self.op, alg, group, layout) is None

    def model_time_s(self, size_bytes: float, nvlink: TierValues, network: TierValues) -> float:
        """The simulator's time for one size: the tuner's fastest choice on the calibrated paths."""
        return choose(
            self.op,
            self.shape,
            size_bytes,
            self.nominal.paths(nvlink, network),
            algorithm=SIMULATOR_ALGORITHM,
            in_switch=self.in_switch,
            runnable=self._runnable,
        ).time_s

    def large(self) -> list[int]:
        top = max(self.sizes)
        return [i for i, s in enumerate(self.sizes) if s * LARGE_FRACTION >= top]

    def small(self) -> list[int]:
        return [i for i, s in enumerate(self.sizes) if s <= SMALL_MAX_BYTES]

    def busbw_gBps(self, size_bytes: float, time_s: float) -> float:
        return size_bytes / time_s * busbw_factor(self.op, self.n) / 1e9 if time_s > 0 else 0.0


def measurement(
    run: NcclTestsRun,
    nvlink_gBps_per_direction: float,
    nic_gbps: float,
    nvls: bool = False,
    ll_max_gBps: float = 0.0,
    ll_max_across_gBps: tuple[float, float] = (0.0, 0.0),
) -> Measurement:
    """`run` with its nominal hops (0 for a bandwidth the run does not use: no NVLink peer, one node);
    `nvls`: the GPUs have NVLink SHARP (the model may then reduce in the switch inside one node);
    `ll_max_gBps`, `ll_max_across_gBps`: NCCL's LL ceilings for the GPU and the servers' CPUs, as the simulator
    will apply them (catalog `nccl_ll_max_gBps`, `NCCL_LL_MAX_ACROSS_GBPS`; 0: none)."""
    rows = sorted((r for r in run.rows if r.size_bytes > 0 and r.best.time_us > 0), key=lambda r: r.size_bytes)
    where = run.label
    if run.gpus < 2:
        raise InputError(Problem(where, f"{run.gpus} GPU: a collective needs at least 2 to measure anything"))
    if not rows:
        raise InputError(Problem(where, "no row with a positive size and time"))
    if run.gpus_per_node > 1 and not nvlink_gBps_per_direction > 0:
        raise InputError(
            Problem(
                "--gpu",
                f"{where}: {run.gpus_per_node} GPUs per node talk over NVLink, whose "
                "nominal bandwidth comes from the catalog: pass --gpu",
            )
        )
    if run.nodes > 1 and not nic_gbps > 0:
        raise InputError(Problem("--nic-gbps", f"{where}: {run.nodes} nodes: the NIC speed is needed"))
    by_size: dict[int, float] = {}
    for r in rows:  # a size measured twice: the faster
        t = r.best.time_us * 1e-6
        by_size[r.size_bytes] = min(t, by_size.get(r.size_bytes, math.inf))
    nominal = Nominal(
        run.gpus_per_node,
        gBps_to_bytes_per_s(nvlink_gBps_per_direction) if run.gpus_per_node > 1 else 0.0,
        gbps_to_bytes_per_s(nic_gbps) if run.nodes > 1 else 0.0,
        gBps_to_bytes_per_s(ll_max_gBps),
        (gBps_to_bytes_per_s(ll_max_across_gBps[0]), gBps_to_bytes_per_s(ll_max_across_gBps[1])),
    )
    return Measurement(
        where,
        run.op,
        run.gpus,
        run.nodes,
        run.gpus_per_node,
        tuple(by_size),
        tuple(by_size.values()),
        nominal,
        nvls and run.nodes == 1,
    )


@dataclass(frozen=True)
class TierFit:
    tier: str
    efficiency: float  # in (0, 1]: what the calibration holds
    raw_efficiency: float  # the average before clipping (> 1: the measurement beats the model's bound)
    efficiency_at_largest: float  # unclipped, at each measurement's largest size, averaged
    extra_latency_us: float
    large_rows: int
    small_rows: int
    notes: tuple[str, ...] = field(default=())

    @property
    def values(self) -> TierValues:
        return TierValues(self.efficiency, self.extra_latency_us * 1e-6)


def _split(tier: str, mine: TierValues, nvlink: TierValues) -> tuple[TierValues, TierValues]:
    """(nvlink, network) values: the tier being fitted takes `mine`; the other its known calibration."""
    return (mine, NOMINAL) if tier == "nvlink" else (nvlink, mine)


def _bisect(f, lo: float, hi: float, tol: float) -> float:
    """The root of an increasing f in [lo, hi] (f(lo) < 0 < f(hi)): Brent's method, i.e. bisection sped
    up by secant steps where they help (the model is piecewise linear in 1/e and in the latency)."""
    return float(brentq(f, lo, hi, xtol=tol, rtol=1e-12))


def row_efficiency(m: Measurement, i: int, tier: str, extra_s: float, nvlink: TierValues) -> float:
    """The e (unclipped, within EFFICIENCY_RANGE) at which the model's time for row i is the measured one."""
    size, t = m.sizes[i], m.times_s[i]

    def excess(log_e: float) -> float:  # decreasing in e -> increasing in -log e
        nv, net = _split(tier, TierValues(math.exp(log_e), extra_s), nvlink)
        return t - m.model_time_s(size, nv, net)

    lo, hi = (math.log(v) for v in EFFICIENCY_RANGE)
    if excess(lo) >= 0:
        return EFFICIENCY_RANGE[0]
    if excess(hi) <= 0:
        return EFFICIENCY_RANGE[1]
    return math.exp(_bisect(excess, lo, hi, 1e-7))


def _fit_efficiency(ms: list[Measurement], tier: str, extra_s: float, nvlink: TierValues) -> float:
    """The per-row efficiency averaged over the large rows."""
    per_row = [row_efficiency(m, i, tier, extra_s, nvlink) for m in ms for i in m.large()]
    return sum(per_row) / len(per_row)


def _latency_mismatch(ms: list[Measurement], tier: str, efficiency: float, nvlink: TierValues):
    """extra latency (s) -> mean log(model / measured) over the small rows: increasing in the latency."""
    rows = [(m, i) for m in ms for i in m.small()]

    def mismatch(extra_s: float) -> float:
        nv, net = _split(tier, TierValues(efficiency, extra_s), nvlink)
        return sum(math.log(m.model_time_s(m.sizes[i], nv, net) / m.times_s[i]) for m, i in rows) / len(rows)

    return mismatch


def fit_tier(ms: list[Measurement], tier: str, nvlink: TierValues = NOMINAL, *, rounds: int = 12) -> TierFit:
    """The tier's efficiency and extra latency from its measurements (all of one tier); `nvlink`: the
    NVLink calibration multi-node measurements use for their NVLink hops."""
    if tier not in TIERS or not ms or any(m.tier != tier for m in ms):
        raise ValueError(f"fit_tier({tier!r}) needs measurements of that tier")
    notes: list[str] = []
    lo_s = EXTRA_LATENCY_FLOOR_S[tier]
    small_rows = sum(len(m.small()) for m in ms)
    extra_s, efficiency = 0.0, 1.0
    raw = 1.0
    for _ in range(rounds):
        raw = _fit_efficiency(ms, tier, extra_s, nvlink)
        new_eff = min(raw, 1.0)
        new_extra = extra_s
        if small_rows:
            mismatch = _latency_mismatch(ms, tier, new_eff, nvlink)
            if mismatch(lo_s) >= 0:
                new_extra = lo_s
            elif mismatch(MAX_EXTRA_LATENCY_S) <= 0:
                new_extra = MAX_EXTRA_LATENCY_S
            else:
                new_extra = _bisect(mismatch, lo_s, MAX_EXTRA_LATENCY_S, 1e-11)
        settled = abs(new_eff - efficiency) < 1e-6 and abs(new_extra - extra_s) < 1e-9
        efficiency, extra_s = new_eff, new_extra
        if settled:
            break
    at_largest = sum(row_efficiency(m, len(m.sizes) - 1, tier, extra_s, nvlink) for m in ms) / len(ms)
    if raw > 1.0:
        why = (
            "links faster than nominal"
            if all(m.in_switch for m in ms)
            else "in-switch reduction (NVLS / SHARP, which the model takes only for NVLink SHARP GPUs inside one "
            "node) or links faster than nominal"
        )
        notes.append(
            f"measured faster than the model allows at nominal bandwidth (efficiency {raw:.3f} > 1): "
            f"{why}; clipped to 1.0"
        )
    if not small_rows:
        notes.append(f"no sizes <= {SMALL_MAX_BYTES // 1024} KiB: extra latency not fitted (0)")
    elif extra_s <= lo_s:
        notes.append(
            f"small sizes run faster than the model's fixed overheads allow (launch, protocol steps): "
            f"extra latency at its floor, {lo_s * 1e6:g} µs (a link's latency cannot go below 0)"
        )
    elif extra_s >= MAX_EXTRA_LATENCY_S:
        notes.append(f"small sizes slower than the model with +{MAX_EXTRA_LATENCY_S * 1e6:g} µs per step: capped")
    return TierFit(
        tier, efficiency, raw, at_largest, extra_s * 1e6, sum(len(m.large()) for m in ms), small_rows, tuple(notes)
    )


def rms_error_pct(m: Measurement, nvlink: TierValues, network: TierValues) -> float:
    """Root mean square of model / measured - 1 over every size, in %."""
    errs = [m.model_time_s(s, nvlink, network) / t - 1 for s, t in zip(m.sizes, m.times_s)]
    return 100 * math.sqrt(sum(e * e for e in errs) / len(errs))


@dataclass(frozen=True)
class FileFit:
    """One measurement's own fit (the table's row)."""

    measurement: Measurement
    fit: TierFit
    measured_busbw_gBps: float  # at the largest size
    nominal_busbw_gBps: float  # the model's at the largest size, nominal bandwidth, no extra latency
    rms_error_pct: float


@dataclass(frozen=True)
class Calibration:
    files: tuple[FileFit, ...]
    tiers: dict[str, TierFit]  # every measurement of a tier together: what the calibration file holds


def calibrate(ms: list[Measurement]) -> Calibration:
    """NVLink first (single-node measurements), then the network with the NVLink hops so calibrated."""
    tiers: dict[str, TierFit] = {}
    for tier in TIERS:
        mine = [m for m in ms if m.tier == tier]
        if mine:
            tiers[tier] = fit_tier(mine, tier, tiers["nvlink"].values if "nvlink" in tiers else NOMINAL)
    nvlink = tiers["nvlink"].values if "nvlink" in tiers else NOMINAL
    files = []
    for m in ms:
        own = fit_tier([m], m.tier, nvlink) if len([x for x in ms if x.tier == m.tier]) > 1 else tiers[m.tier]
        nv, net = _split(m.tier, own.values, nvlink)
        size, t = m.sizes[-1], m.times_s[-1]
        nominal_t = m.model_time_s(size, *_split(m.tier, NOMINAL, nvlink))
        files.append(FileFit(m, own, m.busbw_gBps(size, t), m.busbw_gBps(size, nominal_t), rms_error_pct(m, nv, net)))
    return Calibration(tuple(files), tiers)
