"""Power and cost: the book's Chapter 8 arithmetic, the bill of a fabric by hand, the user's own tables."""

from __future__ import annotations

import json

import pytest
import yaml

from aifabric.catalog import GPUS
from aifabric.cli import run_app
from aifabric.cli.app import app
from aifabric.costs import energy
from aifabric.costs.model import fabric_costs, tokens_per_iteration
from aifabric.costs.power import DEFAULT_POWER, by_speed, gpu_power_w
from aifabric.costs.prices import DEFAULT_PRICES
from aifabric.fabric import build
from aifabric.fabric.plan import bill_of_materials
from aifabric.scenario import demo_scenario, parse_scenario
from aifabric.scenario.costs_spec import CostsSpec
from aifabric.scenario.fabric_spec import ClusterSpec, FabricSpec


def test_the_books_chapter_8_example():
    """Deep Learning for Network Engineers, Chapter 8: 50,000 GPUs x 350 W = 17.5 MW; two months (60 days =
    1,440 h) -> 25,200 MWh; at $0.10 per kWh -> $2,520,000 (GPUs alone, no facility overhead)."""
    it_w = gpu_power_w("H100-PCIE", 50_000)  # a 350 W part
    assert it_w == 17.5e6
    e = energy(it_w, 60 * 24, 0.10)
    assert e.power_mw == pytest.approx(17.5)
    assert e.energy_mwh == pytest.approx(25_200)
    assert e.cost_usd == pytest.approx(2_520_000)
    # a facility at PUE 1.5 draws half as much again, and pays half as much again
    assert energy(it_w, 1440, 0.10, pue=1.5).cost_usd == pytest.approx(3_780_000)


def test_the_training_run_of_the_cost_model_is_the_books_arithmetic():
    """A 50,000-GPU cluster whose other parts draw nothing, run 1,440 hours: the model's training-run energy
    and price are Chapter 8's."""
    cluster = ClusterSpec(gpu="H100-PCIE", servers=1, gpus_per_server=8)
    bom = bill_of_materials(build(cluster, FabricSpec(topology="single-switch")))
    bom = type(bom)(**{**bom.__dict__, "gpus": 50_000, "nics": 0, "switch_tiers": [], "cables": []})
    spec = CostsSpec(
        price_per_kwh=0.10, pue=1.0, training_hours=1440, power={"server_overhead_w_per_gpu": {"H100-PCIE": 0}}
    )
    fc = fabric_costs(bom, "H100-PCIE", spec)
    assert fc.it_power_w == 17.5e6
    e, _ = fc.over(spec.training_hours)
    assert (e.energy_mwh, e.cost_usd) == (pytest.approx(25_200), pytest.approx(2_520_000))


def test_every_gpu_has_its_datasheet_power():
    expected = {
        "A100": 400,
        "A100-40GB": 400,
        "A100-PCIE": 300,
        "H100": 700,
        "H100-PCIE": 350,
        "H200": 700,
        "B200": 1000,
        "GB200": 1200,
        "MI300X": 750,
    }
    assert {n: g.tdp_w for n, g in GPUS.items()} == expected
    assert all(
        "datasheet" in g.tdp_source or "data sheet" in g.tdp_source or "NVL72" in g.tdp_source for g in GPUS.values()
    )


def test_the_bill_of_a_two_tier_fabric_by_hand():
    """8 servers x 8 H100 at 400 Gb/s, one segment: 8 rail switches and 8 spines (64-port, 400G): every line is
    count x figure, and the network is NICs + switches + optics + cables."""
    fabric = build(ClusterSpec(servers=8, gpus_per_server=8, nic_speed_gbps=400), FabricSpec(spines=8))
    fc = fabric_costs(bill_of_materials(fabric), "H100")
    power = {x.item: x for x in fc.power}
    assert power["H100 GPU"].total == 64 * 700
    assert power["server without GPUs and NICs, per GPU slot (8 servers)"].total == 64 * 550
    assert power["NIC 400 Gb/s"].total == 64 * 25
    switch_w = 250 + 64 * 9
    assert power["rail (leaf) switch, 64 x 400G"].total == 8 * switch_w
    assert power["spine switch, 64 x 400G"].total == 8 * switch_w
    assert power["host 400G SR transceiver"].total == 128 * 8  # 64 cables, two ends
    assert power["spine 400G DR transceiver"].total == 128 * 10
    assert fc.it_power_w == pytest.approx(64 * 700 + 64 * 550 + 64 * 25 + 16 * switch_w + 128 * 18)
    assert fc.facility_power_w == pytest.approx(fc.it_power_w * 1.2)
    capital = {x.item: x.total for x in fc.capital}
    assert capital["H100 GPU"] == 64 * 30_000
    assert capital["spine switch, 64 x 400G"] == 8 * 64 * 700
    assert capital["host 400G fiber cable"] == 64 * 80
    network = sum(x.total for x in fc.capital if x.kind in ("nic", "switch", "transceiver", "cable"))
    assert fc.network_capex_usd == network and fc.capex_usd > network
    assert all(x.source for x in fc.power + fc.capital)  # every figure says where it comes from


def test_oversubscription_buys_fewer_spines():
    cluster = ClusterSpec(servers=8, gpus_per_server=8, nic_speed_gbps=400)
    full, quarter = (
        fabric_costs(bill_of_materials(build(cluster, FabricSpec(leaf_oversubscription=r))), "H100") for r in (1, 4)
    )
    assert quarter.network_capex_usd < full.network_capex_usd
    assert quarter.capex_usd - quarter.network_capex_usd == full.capex_usd - full.network_capex_usd


def test_a_speed_between_entries_takes_the_next_one_up():
    table = {100: 1.0, 400: 4.0, 800: 8.0}
    assert (by_speed(table, 400), by_speed(table, 200), by_speed(table, 1600)) == (4.0, 4.0, 16.0)


def test_tokens_per_iteration():
    s = demo_scenario()
    tokens, unit = tokens_per_iteration(s)
    assert unit == "tokens" and tokens == s.workload.global_batch_size * 2048


def test_prices_from_a_file_override_the_defaults(ch14_data, write_scenario, tmp_path):
    (tmp_path / "quotes.yaml").write_text(
        yaml.safe_dump(
            {"prices": {"gpu_usd": {"H100": 25_000}, "switch_port_usd": {400: 500}, "source": "our quotes, May"}}
        )
    )
    ch14_data["costs"] = {"prices": "quotes.yaml", "pue": 1.1, "training_hours": 100}
    path = write_scenario(ch14_data)
    from aifabric.scenario import load_scenario

    s = load_scenario(path)
    assert s.costs.prices.gpu_usd == {"H100": 25_000}
    fabric = build(s.cluster, s.fabric)
    fc = fabric_costs(bill_of_materials(fabric), "H100", s.costs)
    capital = {x.item: x for x in fc.capital}
    assert capital["H100 GPU"].each == 25_000 and "our quotes" in capital["H100 GPU"].source
    assert capital["rail (leaf) switch, 64 x 400G"].each == 64 * 500
    assert capital["NIC 400 Gb/s"].each == DEFAULT_PRICES.nic_usd[400]  # left out: the default
    # the scenario carries the table itself: a copy in a run folder needs no other file
    again = parse_scenario(s.model_dump(mode="json", exclude_unset=True))
    assert again.costs.prices.gpu_usd == {"H100": 25_000}


def test_bad_cost_inputs_are_refused_by_field(ch14_data, write_scenario, tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"gpu_usd": {"H100": -1}, "nic_usd": {"fast": 3}}))
    ch14_data["costs"] = {"prices": "bad.yaml", "pue": 0.8, "tokens_to_train": 1e12, "training_hours": 10}
    assert run_app(app, ["validate", str(write_scenario(ch14_data))]) == 2
    err = capsys.readouterr().err
    assert "costs.prices.gpu_usd.H100" in err and "costs.pue: must be >= 1" in err
    assert "costs.prices.nic_usd" in err
    ch14_data["costs"] = {"prices": "missing.yaml"}
    assert run_app(app, ["validate", str(write_scenario(ch14_data))]) == 2
    assert "costs.prices: cannot read" in capsys.readouterr().err
    ch14_data["costs"] = {"tokens_to_train": 1e12, "training_hours": 10}
    assert run_app(app, ["validate", str(write_scenario(ch14_data))]) == 2
    assert "not both" in capsys.readouterr().err


def test_the_run_summary_carries_power_and_cost(ch14_data, write_scenario, tmp_path, capsys):
    ch14_data["costs"] = {"tokens_to_train": 1e9}
    out = tmp_path / "run"
    assert run_app(app, ["simulate", str(write_scenario(ch14_data)), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    c = json.loads((out / "summary.json").read_text())["costs"]
    assert c["unit"] == "samples" and c["tokens_per_iteration"] == 16384
    it = c["per_iteration"]
    assert it["energy_kwh"] == pytest.approx(
        c["power"]["facility_w"] * json.loads((out / "summary.json").read_text())["iteration_time_s"] / 3.6e6
    )
    assert c["training"]["iterations"] == -(-1e9 // 16384)
    assert c["capital"]["total_usd"] > c["capital"]["network_usd"] > 0
    for row in ("power", "capital", "cost per iteration", "training run"):
        assert row in text
    page = (out / "report.html").read_text()
    assert "Power and cost" in page and "H100 datasheet" in page


def test_fabric_plan_prints_power_and_cost_and_takes_a_price_file(tmp_path, capsys):
    from importlib import resources

    fabric = resources.files("aifabric.scenarios").joinpath("fabric.yaml")
    prices = tmp_path / "p.yaml"
    prices.write_text("gpu_usd: {H100: 1000}\n")
    out = tmp_path / "plan"
    assert run_app(app, ["fabric", "plan", str(fabric), "--prices", str(prices), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Power and capital" in text and "$1,000" in text and "an hour of running" in text
    assert "NVIDIA H100 datasheet" in text and "DGX H100 datasheet" in text  # the figures' sources
    plan = json.loads((out / "plan.json").read_text())
    gpu = next(x for x in plan["costs"]["capital"]["items"] if x["kind"] == "gpu")
    assert gpu["usd_each"] == 1000 and gpu["count"] == 64
    assert plan["costs"]["power"]["it_w"] > 64 * 700
    prices.write_text("gpu_usd: {H100: cheap}\n")
    assert run_app(app, ["fabric", "plan", str(fabric), "--prices", str(prices)]) == 2
    assert "prices.gpu_usd.H100" in capsys.readouterr().err


def test_defaults_cover_every_gpu():
    assert set(DEFAULT_POWER.gpu_w) == set(GPUS) == set(DEFAULT_PRICES.gpu_usd)
    assert set(DEFAULT_POWER.server_overhead_w_per_gpu) == set(GPUS) == set(DEFAULT_PRICES.server_usd_per_gpu)
