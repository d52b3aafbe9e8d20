"""The analytic NeuroTrainer module model (``sim/neurotrainer/module.py``, kept for HyPar's node model) and the reports.

The family's figures come from the compiled programs (``sim/neurotrainer/program_time.py``,
``verif/test_nt_program_time.py``); the report commands compile every AlexNet layer, so their
tests run with ``--regress``. Properties only: no paper figure is an expected value here.
"""
import json
import math
from dataclasses import replace

import numpy as np
import pytest

from trainforge.cli import main
from trainforge.errors import ParameterError
from trainforge.sim.neurotrainer.module import ModuleConfig, layer_pass_time, paper_precision
from trainforge.sim.neurotrainer.networks import layers
from trainforge.sim.neurotrainer.system_report import CENTRAL_UNITS, scaling_report


def _random_layer(rng):
    batch = int(rng.choice([1, 7, 32, 33, 64]))
    if rng.random() < 0.5:
        return "fc", {"inputs": int(rng.integers(1, 5000)), "outputs": int(rng.integers(1, 5000)), "batch": batch}
    kernel, stride, groups = int(rng.choice([1, 3, 5, 11])), int(rng.choice([1, 2, 4])), int(rng.choice([1, 2]))
    out = int(rng.integers(1, 40))
    size = (out - 1) * stride + kernel
    return "conv", {"in_channels": groups * int(rng.integers(1, 100)), "out_channels": groups * int(rng.integers(1, 100)),
                    "kernel": kernel, "in_h": size, "in_w": size, "out_h": out, "out_w": out, "stride": stride,
                    "groups": groups, "batch": batch}


@pytest.mark.parametrize("pes, macs, clock", [(15, 32, 2.5e9), (31, 32, 2.5e9), (4, 8, 1e9)])
def test_peak_is_pes_times_macs_times_two_ops_times_clock(pes, macs, clock):
    narrow = ModuleConfig(pes=pes, macs_per_pe=macs, clock_hz=clock, wide=False)
    wide = replace(narrow, wide=True)
    assert wide.peak_ops == pytest.approx(pes * macs * 2 * clock), (wide.peak_ops, pes * macs * 2 * clock)
    assert narrow.peak_ops == pytest.approx(2 * pes * macs * 2 * clock), (narrow.peak_ops, 4 * pes * macs * clock)


def test_paper_precision_is_16_bit_ff_and_32_bit_bp_up():
    config = ModuleConfig()
    assert [paper_precision(config, p).wide for p in ("ff", "bp", "up")] == [False, True, True]


def test_every_pass_takes_at_least_its_macs_at_peak_and_losses_add_up():
    rng = np.random.default_rng(4)
    for _ in range(60):
        kind, dims = _random_layer(rng)
        for pass_name in ("ff", "bp", "up"):
            config = paper_precision(ModuleConfig(), pass_name)
            result = layer_pass_time(config, kind, dims, pass_name)
            floor = result.macs / (config.peak_ops / 2)
            assert result.seconds >= floor * (1 - 1e-12), (kind, dims, pass_name, result.seconds, floor)
            assert result.compute_seconds >= floor * (1 - 1e-12), (kind, dims, pass_name)
            assert all(v >= -1e-15 for v in result.losses.values()), (kind, dims, pass_name, result.losses)
            assert sum(result.losses.values()) == pytest.approx(result.seconds, rel=1e-9), (kind, dims, pass_name)
            assert result.losses["compute at peak"] == pytest.approx(floor, rel=1e-9)
            assert result.tops <= result.peak_tops * (1 + 1e-12)


@pytest.mark.parametrize("wide", [False, True])
def test_doubling_the_batch_doubles_fc_ff_compute(wide):
    config = ModuleConfig(wide=wide)
    base = {"inputs": 4096, "outputs": 1000}
    one = layer_pass_time(config, "fc", {**base, "batch": 32}, "ff")
    two = layer_pass_time(config, "fc", {**base, "batch": 64}, "ff")
    assert two.compute_seconds == pytest.approx(2 * one.compute_seconds), (one.compute_seconds, two.compute_seconds)
    assert two.macs == 2 * one.macs


def test_fc_ff_traffic_follows_the_mapping():
    """Weights once per lane group from the dedicated vault; every output merged once over the bus."""
    config = ModuleConfig(wide=True)
    dims = {"inputs": 1000, "outputs": 300, "batch": 64}
    result = layer_pass_time(config, "fc", dims, "ff")
    rows_pe = math.ceil(300 / config.pes)
    groups = math.ceil(64 / config.macs_per_pe)
    assert result.traffic["dedicated_read"] == pytest.approx(groups * rows_pe * 1000), result.traffic
    assert result.traffic["merge"] == pytest.approx(300 * 64), result.traffic


def test_outer_product_becomes_dedicated_vault_bound_when_samples_are_few():
    """FC UP writes one dW word per `batch` MACs: below k samples the write-back outruns the MACs."""
    config = ModuleConfig(wide=True)
    small = layer_pass_time(config, "fc", {"inputs": 4096, "outputs": 4096, "batch": 8}, "up")
    assert small.bound == "dedicated vault", (small.bound, small.losses)
    writes = small.traffic["dedicated_write"] / config.dedicated_words_per_cycle / config.clock_hz
    assert small.seconds >= writes, (small.seconds, writes)
    name = "dedicated vault: dW write-back (no reuse in the outer product)"
    assert small.losses[name] > 0.5 * small.seconds, small.losses


def test_more_bandwidth_or_less_latency_never_slows_a_pass():
    rng = np.random.default_rng(7)
    base = ModuleConfig()
    faster = (replace(base, vault_bytes_per_s=20e9), replace(base, common_vault_bytes_per_s=20e9, bus_bits=64),
              replace(base, vault_latency_s=0.0))
    for _ in range(30):
        kind, dims = _random_layer(rng)
        for pass_name in ("ff", "bp", "up"):
            slow = layer_pass_time(paper_precision(base, pass_name), kind, dims, pass_name).seconds
            for config in faster:
                fast = layer_pass_time(paper_precision(config, pass_name), kind, dims, pass_name).seconds
                assert fast <= slow * (1 + 1e-9), (kind, dims, pass_name, config, fast, slow)


@pytest.mark.parametrize("field, value, allowed", [
    ("pes", 0, "1..1024"), ("macs_per_pe", 2.5, "1..1024"), ("clock_hz", -1.0, "(0, 1e11]"),
    ("wide", 1, "true or false"), ("vault_bytes_per_s", 0, "(0, 1e15]"), ("bus_bits", 12, "multiple of 8"),
    ("output_buffer_bytes", 1000, "multiple of 256"), ("vault_latency_s", float("nan"), "[0, 1e-3)"),
])
def test_invalid_config_names_parameter_value_and_range(field, value, allowed):
    with pytest.raises(ParameterError) as info:
        ModuleConfig(**{field: value})
    message = str(info.value)
    assert field in message and repr(value) in message and allowed in message, message


@pytest.mark.parametrize("kind, dims, pass_name, word", [
    ("mlp", {"inputs": 1, "outputs": 1, "batch": 1}, "ff", "kind"),
    ("fc", {"inputs": 1, "outputs": 1, "batch": 1}, "fp", "pass_name"),
    ("fc", {"inputs": 1, "outputs": 1}, "ff", "batch"),
    ("fc", {"inputs": 0, "outputs": 1, "batch": 1}, "ff", "dims.inputs"),
    ("conv", {"in_channels": 3, "out_channels": 4, "kernel": 3, "in_h": 8, "in_w": 8, "out_h": 8, "out_w": 8,
              "stride": 1, "batch": 1, "groups": 2}, "ff", "dims.in_channels"),
    ("conv", {"in_channels": 4, "out_channels": 4, "kernel": 3, "in_h": 8, "in_w": 8, "out_h": 20, "out_w": 8,
              "stride": 1, "batch": 1}, "ff", "dims.out_h"),
])
def test_invalid_layer_raises_naming_the_parameter(kind, dims, pass_name, word):
    with pytest.raises(ParameterError) as info:
        layer_pass_time(ModuleConfig(), kind, dims, pass_name)
    assert word in str(info.value), str(info.value)


def test_central_unit_update_is_the_slower_of_arithmetic_and_memory():
    unit = CENTRAL_UNITS["k1"](ModuleConfig())
    weights = 1_000_000
    for modules in (1, 4):
        expected = max(weights * (modules + 1) / unit.ops_per_s, weights * 4 * (modules + 2) / unit.memory_bytes_per_s)
        assert unit.update_seconds(weights, modules) == pytest.approx(expected)


@pytest.mark.regress
def test_scaling_throughput_is_modules_times_batch_over_t1_t2_t3():
    report = scaling_report("alexnet", 32, (1, 3))
    for curve in report["curves"].values():
        for point in curve["points"]:
            total = point["t1_s"] + point["t2_s"] + point["t3_s"]
            assert point["images_per_s"] == pytest.approx(point["modules"] * 32 / total), point
        assert curve["points"][1]["t2_s"] == pytest.approx(3 * curve["points"][0]["t2_s"])


@pytest.mark.regress
def test_alexnet_cli_writes_json_and_png(tmp_path, capsys):
    """Compiles every AlexNet layer pass for the module (about 20 s per buffer size)."""
    assert main(["neurotrainer", "alexnet", "--batch", "16", "--buffers", "8", "--no-counterfactuals", "--out",
                 str(tmp_path)]) == 0
    report = json.loads((tmp_path / "alexnet.json").read_text())
    assert (tmp_path / "alexnet.png").stat().st_size > 0
    expected = len(layers("alexnet", 16)) * 3 - 1
    assert len(report["rows"]) == expected, (len(report["rows"]), expected)
    assert [f"{row['layer']} {row['pass']}" for row in report["not_compiled"]] == ["C1 bp"]
    total = sum(row["seconds"] for row in report["rows"]) / 16
    assert report["totals"]["training_s_per_image"] == pytest.approx(total)
    assert "C1" in capsys.readouterr().out
    assert (tmp_path / "program_time_cache.json").exists()


@pytest.mark.regress
def test_scaling_cli_json(tmp_path, capsys):
    assert main(["neurotrainer", "scaling", "--network", "alexnet", "--modules", "1,2", "--out", str(tmp_path),
                 "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [p["modules"] for p in printed["curves"]["k1"]["points"]] == [1, 2]
    assert (tmp_path / "scaling_alexnet.png").exists()


@pytest.mark.parametrize("argv", [
    ["alexnet", "--batch", "0"], ["alexnet", "--batch", "x"], ["alexnet", "--buffers", "6"], ["scaling", "--modules", "0"],
    ["scaling", "--modules", "1,a"], ["scaling", "--link-gbps", "0"],
])
def test_cli_bad_arguments_exit_2_and_write_nothing(tmp_path, argv):
    out = tmp_path / "out"
    assert main(["neurotrainer", *argv, "--out", str(out)]) == 2
    assert not out.exists()
