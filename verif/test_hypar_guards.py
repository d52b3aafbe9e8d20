"""HyPar guards: a dp level may not leave a group with less than one sample."""
import numpy as np
import pytest

from trainforge.errors import ConfigError
from trainforge.sim.hypar.builtins import builtin_network, fc
from trainforge.sim.hypar.config import ArrayConfig, TrainingSetup
from trainforge.sim.hypar.network import Network
from trainforge.sim.hypar.partition import hierarchical_partition, traffic_of
from trainforge.sim.hypar.simulator import simulate_step, simulate_steps

TWO = Network("two", (fc("a", 8, 4), fc("b", 4, 2)))


def test_algorithm2_names_layer_and_level():
    """AlexNet, batch 8, 10 levels: conv1 stays dp, 8 -> 4 -> 2 -> 1 samples after H1..H3, H4 would leave 0.5."""
    with pytest.raises(ConfigError, match=r"^network 'AlexNet': layer 'conv1' at level H4: data parallelism would "
                                          r"leave 0\.5 samples \(less than one\) per group of batch 8; "):
        hierarchical_partition(builtin_network("AlexNet"), TrainingSetup(batch=8), 10)


def test_given_partition_names_first_short_level_and_layer():
    """Batch 2: layer b is dp at H1 (1 sample left) and at H2 (0.5): refused at H2; layer a is mp at H2."""
    choices = np.array([[False, False], [True, False]])
    with pytest.raises(ConfigError, match=r"^network 'two': layer 'b' at level H2: .* leave 0\.5 samples"):
        traffic_of(TWO, TrainingSetup(batch=2), choices)
    with pytest.raises(ConfigError, match=r"layer 'b' at level H2"):
        simulate_step(TWO, TrainingSetup(batch=2), choices, ArrayConfig(levels=2))
    with pytest.raises(ConfigError, match=r"layer 'b' at level H2"):
        simulate_steps(TWO, TrainingSetup(batch=2), np.stack([~choices, choices]), ArrayConfig(levels=2))


def test_one_sample_per_accelerator_is_allowed():
    """Batch 4 over two dp levels leaves exactly one sample: fine; an uneven 1.5 is fine too (>= 1)."""
    assert traffic_of(TWO, TrainingSetup(batch=4), np.zeros((2, 2), bool)).total_bytes > 0
    assert traffic_of(TWO, TrainingSetup(batch=6), np.zeros((2, 2), bool)).total_bytes > 0
    with pytest.raises(ConfigError, match=r"layer 'a' at level H2: .* leave 0\.75 samples"):
        traffic_of(TWO, TrainingSetup(batch=3), np.zeros((2, 2), bool))


def test_cli_refuses_with_status_2(capsys):
    from trainforge.cli import main
    assert main(["hypar", "partition", "AlexNet", "--batch", "8", "--levels", "10"]) == 2
    assert "layer 'conv1' at level H4" in capsys.readouterr().err
