"""HyPar's array node: several processing units per HMC (one per vault), timed as a roofline."""
import numpy as np
import pytest

from trainforge.errors import ParameterError
from trainforge.sim.hypar.builtins import fc
from trainforge.sim.hypar.config import ArrayConfig, NodeConfig, TrainingSetup
from trainforge.sim.hypar.network import Network
from trainforge.sim.hypar.nodes import make_node
from trainforge.sim.hypar.simulator import LayerWork, RooflineNode, simulate_step

#: fc 256 -> 256 at batch 64 on one accelerator: 64 x 256 x 256 = 4,194,304 MACs per phase;
#: DRAM streams (F 16,384 + W 65,536 + output 16,384 elements) x 4 B = 393,216 B per phase.
LAYER = Network("one", (fc("fc", 256, 256),))
SETUP = TrainingSetup(batch=64)
MACS = 4_194_304
DRAM_BYTES = 393_216


def _phases(node):
    return RooflineNode(node).phase_seconds(LayerWork.of(LAYER, SETUP, np.zeros((0, 1), dtype=bool)))[:, 0]


def test_default_is_sixteen_units_per_hmc():
    assert NodeConfig().units_per_hmc == 16


@pytest.mark.parametrize("units", [1, 4, 16])
def test_compute_bound_phase_by_hand(units):
    """Forward and gradient: 4,194,304 MACs over units x 168 MACs x 250 MHz (compute-bound: 16 units take
    6.24 us, the DRAM 1.23 us); the first layer has no backward."""
    forward, backward, gradient = _phases(NodeConfig(units_per_hmc=units))
    assert forward == gradient == MACS / (units * 168 * 250e6)
    assert backward == 0


def test_dram_bound_when_units_are_many():
    """1,024 units would take 0.0975 us of compute: the shared 320 GB/s DRAM (1.2288 us) sets the pace."""
    forward, _, _ = _phases(NodeConfig(units_per_hmc=1024))
    assert forward == DRAM_BYTES / 320e9


def test_step_compute_scales_with_units():
    one = simulate_step(LAYER, SETUP, np.zeros((0, 1), bool), ArrayConfig(levels=0),
                        node_model=RooflineNode(NodeConfig(units_per_hmc=1)))
    sixteen = simulate_step(LAYER, SETUP, np.zeros((0, 1), bool), ArrayConfig(levels=0))
    assert np.isclose(one.compute_seconds, 2 * MACS / (168 * 250e6))
    assert np.isclose(one.compute_seconds / sixteen.compute_seconds, 16)
    assert one.energy_joules == sixteen.energy_joules  # the same MACs and DRAM words


def test_bad_unit_counts():
    with pytest.raises(ParameterError, match=r"^parameter 'units_per_hmc' = 0 is invalid \(out of range\); "
                                             r"allowed: an integer in 1\.\.1024$"):
        NodeConfig(units_per_hmc=0)
    with pytest.raises(ParameterError, match="applies to node=roofline only"):
        make_node("caterpillar", units_per_hmc=4)
    assert make_node("roofline", units_per_hmc=4).node.units_per_hmc == 4


def test_cli_units_per_hmc(capsys):
    from trainforge.cli import main
    assert main(["hypar", "simulate", "Lenet-c", "--units-per-hmc", "1", "--json"]) == 0
    one = capsys.readouterr().out
    assert main(["hypar", "simulate", "Lenet-c", "--json"]) == 0
    assert one != capsys.readouterr().out
    assert main(["hypar", "simulate", "Lenet-c", "--node", "caterpillar", "--units-per-hmc", "4"]) == 2
    assert "--units-per-hmc" in capsys.readouterr().err
