"""TensorDash RTL checks in ``make test`` beyond the registry's: the 4x4 tile's scenario table on Icarus, a
convolution layer's three training operations mapped onto the 4x4 tile RTL (values and cycles), and the RTL
points of ``trainforge tensordash speedup --rtl`` (cycles of the PE and the 4x4 tile against the golden model).

The registry runs the 4x4 tile's whole testbench on both simulators under ``make regress`` (its Verilator
build is slow).
"""
import json

import numpy as np
import pytest

from trainforge.cli import main
from trainforge.golden.tensordash.core import CoreRun
from trainforge.spec.tensordash import result_cycle
from trainforge.golden.tensordash.pe import td_tile
from trainforge.commands.tensordash import rtl_speedup
from trainforge.commands.tensordash.rtl import check_operations

from trainforge import simulation


def test_tile_4x4_cycle_exact_icarus(seed):
    """The 4x4 tile's scenario table: dense to all-zero and adversarial streams, every result's value as the
    reference and, at full rate, its cycle as the golden tile model."""
    simulation.run("td_tile", "tb_td_tile", {}, "icarus", seed, testcase="scenario_table")


@pytest.mark.parametrize("simulator", ["icarus", pytest.param("verilator", marks=pytest.mark.regress)])
def test_layer_operations_through_rtl_tile(simulator, seed):
    """A small sparse convolution layer: A*W, G*W (rotated filters) and G*A through the RTL tile."""
    rng = np.random.default_rng(seed)
    acts = rng.integers(-20, 21, (1, 5, 5, 5)) * (rng.random((1, 5, 5, 5)) < 0.5)
    weights = rng.integers(-20, 21, (6, 5, 3, 3))
    grads = rng.integers(-20, 21, (1, 6, 5, 5)) * (rng.random((1, 6, 5, 5)) < 0.3)
    for row in check_operations(acts, weights, grads, padding=1, simulator=simulator):
        assert row["values_agree"], f"seed {seed} {row['operation']}: RTL results differ from the direct computation"
        assert row["cycles_agree"], (f"seed {seed} {row['operation']}: golden {row['golden_cycles']} cycles,"
                                     f" RTL {row['rtl_cycles']}")
        assert row["rtl_cycles"] < row["dense_cycles"], f"seed {seed} {row}: no cycles saved at 50%/70% sparsity"


def _speedup_rtl(tmp_path, seed, sparsities):
    """``speedup --rtl`` on Icarus: the random-sparsity figure's PE and 4x4 tile, 2 dot products of 24 rows."""
    return main(["tensordash", "speedup", "--samples", "2", "--stream-rows", "16", "--rtl", "--simulator", "icarus",
                 "--rtl-figures", "random_sparsity", "--rtl-sparsities", *sparsities, "--rtl-samples", "2",
                 "--rtl-stream-rows", "24", "--rtl-seed", str(seed), "--out", str(tmp_path)])


def test_speedup_rtl_cycles_equal_golden(tmp_path, seed):
    """The RTL points of the speedup figure: RTL cycles and values equal the golden model's, in the report."""
    assert _speedup_rtl(tmp_path, seed, ["0.5", "0.9"]) == 0
    report = json.loads((tmp_path / "speedup.json").read_text())["rtl"]
    assert [(p["series"], p["sparsity"]) for p in report["points"]] == \
        [("pe", 0.5), ("pe", 0.9), ("tile_4x4", 0.5), ("tile_4x4", 0.9)]
    for point in report["points"]:
        assert point["rtl_cycles"] == point["golden_cycles"], \
            f"seed {seed} {point['series']} at {point['sparsity']}: golden {point['golden_cycles']}, RTL {point}"
        assert point["values_agree"], f"seed {seed} {point['series']} at {point['sparsity']}: RTL results differ"
        assert point["golden_cycles"] < point["dense_cycles"], f"seed {seed}: no cycles saved at 50/90% {point}"
    assert report["all_agree"]


def test_speedup_rtl_disagreement_exits_1(tmp_path, seed, monkeypatch, capsys):
    """An RTL run one cycle slower per dot product (simulator replaced by the golden model + 1 cycle each):
    the report is written, the disagreement is named and the command exits 1."""
    def slower_rtl(stream, simulator, block, params):
        a, b, clear, read = stream
        expected = td_tile(a, b, clear, read, **params).reshape(int(read.sum()), -1)
        return expected, np.cumsum(np.full(len(expected), 7)) + result_cycle(params, 0) - 1

    monkeypatch.setattr(rtl_speedup, "run_stream", slower_rtl)
    monkeypatch.setattr(rtl_speedup, "run_cores", lambda *args, **kwargs: CoreRun(
        cycles=np.full(2, 6), macs=np.zeros(2, np.int64)))
    assert _speedup_rtl(tmp_path, seed, ["0.9"]) == 1
    report = json.loads((tmp_path / "speedup.json").read_text())["rtl"]
    assert not report["all_agree"], report
    for point in report["points"]:
        assert (point["golden_cycles"], point["rtl_cycles"], point["cycles_agree"]) == (12, 14, False), point
    assert "RTL DISAGREES with the golden model" in capsys.readouterr().err
