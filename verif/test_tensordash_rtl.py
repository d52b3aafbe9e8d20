"""TensorDash RTL checks in ``make test`` beyond the registry's: the 4x4 tile cycle-exact on Icarus, and a
convolution layer's three training operations mapped onto the 4x4 tile RTL (values and cycles).

The registry runs the 4x4 tile's whole testbench on both simulators under ``make regress`` (its Verilator
build is slow).
"""
import numpy as np
import pytest

from trainforge.sim.tensordash.rtl import check_operations

import simulate


def test_tile_4x4_cycle_exact_icarus(seed):
    """Random streams at 0 to 99.99% sparsity: every result's value and cycle as the golden tile model."""
    simulate.run("td_tile", "tb_td_tile", {}, "icarus", seed, testcase="random_sparsity_cycle_exact")


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
