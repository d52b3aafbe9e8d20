"""AccPar's third partition type (split C_out) next to HyPar's two."""
import itertools

import numpy as np
import pytest

from trainforge.errors import ConfigError
from trainforge.sim.hypar import third_type
from trainforge.sim.hypar.builtins import BUILTIN_NETWORKS, DAG_NETWORKS, builtin_network, fc
from trainforge.sim.hypar.config import TrainingSetup
from trainforge.sim.hypar.network import Network
from trainforge.sim.hypar.partition import frontier_partition, hierarchical_partition

TWO = Network("two", (fc("a", 4, 6), fc("b", 6, 2)))
SMALL = TrainingSetup(batch=2, bytes_per_element=1)


def test_by_hand():
    """Batch 2, 1 B, both groups counted.
    Level 0, a type 2, b type 1: a reduces E_a, 2 x (2 x 4) = 16; b reduces its output, 2 x (2 x 2) = 8;
    the edge 2 -> 1 is free (a's C_out split is b's C_in split). Level 0 = 24.
    (b type 0 instead: 2 x A(dW_b) = 2 x 12 = 24 and the edge 2 -> 0, 2 x (0.25 + 0.25) x (2 x 6) = 12: 52.)
    Level 1, both type 2: a holds C_out 3: E_a 2 x 4 -> 16; b holds C_in 3: E_b 2 x 3 -> 12;
    the edge 2 -> 2 gathers b's input, 2 x 0.5 x (2 x 3) = 6. Level 1 = 34. Total 24 + 2 x 34 = 92."""
    assert third_type.traffic_bytes(TWO, SMALL, [[2, 1], [2, 2]]) == 92
    assert third_type.traffic_bytes(TWO, SMALL, [[2, 0]]) == 52


@pytest.mark.parametrize("name", [*BUILTIN_NETWORKS, *DAG_NETWORKS])
@pytest.mark.parametrize("inter_layer", ["consumer", "producer"])
def test_two_type_partitions_cost_the_same(name, inter_layer):
    """On dp/mp partitions the three-type model is HyPar's model (chains and residual networks)."""
    network, setup = builtin_network(name), TrainingSetup(inter_layer=inter_layer)
    total, choices = hierarchical_partition(network, setup, 4)
    assert third_type.traffic_bytes(network, setup, choices.astype(int)) == pytest.approx(total, rel=1e-12)


def test_each_level_is_the_exact_minimum(seed):
    """One level of random fc chains and residual networks: the frontier programme against all 3^L types."""
    rng = np.random.default_rng(seed)
    for trial in range(20):
        layers = int(rng.integers(1, 7))
        widths = rng.integers(1, 300, size=layers + 1)
        network = Network("random", tuple(fc(f"f{i}", int(a), int(b))
                                          for i, (a, b) in enumerate(zip(widths, widths[1:]))))
        setup = TrainingSetup(batch=int(rng.integers(1, 600)))
        shares = (np.ones(layers), np.ones(layers), np.ones(layers))
        best = min(third_type.level_bytes(network, setup, shares, np.array(types))
                   for types in itertools.product(range(3), repeat=layers))
        intra, edges = third_type.level_costs(network, setup, shares)
        total, types = frontier_partition(intra.tolist(), third_type._incoming(layers, edges))
        assert total == pytest.approx(best, rel=1e-12), f"seed {seed} trial {trial}"
        assert third_type.level_bytes(network, setup, shares, np.array(types)) == pytest.approx(total, rel=1e-12)


# The authors' partitioner in AccPar mode (h_partition with three types; same source, settings and counting as
# AUTHORS in test_hypar_conventions.py): total elements fetched by one group, and its types per level.
AUTHORS_ACCPAR = {
    "AlexNet": (83_145_184, ["00000121", "00000211", "00000121", "00000212"]),
    "VGG-A": (174_333_248, ["00000000121", "00000000121", "00000000112", "00000001211"]),
}


@pytest.mark.parametrize("name", list(AUTHORS_ACCPAR))
def test_agreement_with_the_authors_accpar_mode(name):
    """With post-pooling partial sums (the authors' Vgg11.txt gives pooled outputs) ours = theirs x 2 x 4 B."""
    total, types = third_type.hierarchical_partition(builtin_network(name), TrainingSetup(
        mp_partial_sums="post_pooling"), 4)
    elements, partition = AUTHORS_ACCPAR[name]
    assert third_type.format_types(types) == partition
    assert total == pytest.approx(2 * 4 * elements, rel=0.005)


def test_bad_types_are_refused():
    with pytest.raises(ConfigError, match=r"^types: expected values 0, 1 or 2, got \[0, 3\]$"):
        third_type.traffic_bytes(TWO, SMALL, [[0, 3]])
    with pytest.raises(ConfigError, match=r"layer 'a' at level H2"):
        third_type.traffic_bytes(TWO, SMALL, [[0, 1], [0, 1]])


def test_fig8_reports_the_comparison():
    from trainforge.sim.hypar.config import ArrayConfig
    from trainforge.sim.hypar.figures import third_type_comparison
    rows = third_type_comparison(TrainingSetup(), ArrayConfig().levels)["networks"]
    assert set(rows) == {*BUILTIN_NETWORKS, *DAG_NETWORKS}
    assert rows["ResNet-50"]["residual"] and not rows["VGG-A"]["residual"]
    assert rows["SCONV"]["three_types_GB"] == rows["SCONV"]["HyPar_GB"]  # all dp either way
