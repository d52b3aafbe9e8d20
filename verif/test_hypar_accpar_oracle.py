"""An independent oracle for the authors' partitioner (AccPar), against which sim/hypar is checked.

The authors' public partitioner is AccPar (github.com/linghaosong/AccPar, commit 8f28c36, MIT licence, by
Linghao Song; HyPar mode = two partition types, AccPar mode = three). No code of it is copied here: the
oracle below is written for this test from the cost rule its source states, in our own terms, and it imports
nothing from ``trainforge.sim.hypar`` but the network descriptions it is fed (the input, not the model):

* a layer is (batch, C_in, C_out, kernel area, input map area, output map area *after* pooling);
* a type splits one dimension in two: I (dp) the batch, II (mp) C_in, III C_out;
* a level's cost of a layer, in elements fetched by ONE group of the pair: I the weight gradient
  C_in C_out K^2, II the output (partial sums) batch C_out area_out, III the input error batch C_in area_in;
* the edge into a layer, charged to the reader with its own input X = batch C_in area_in (the consumer's
  tensors; F and E have the same size), is a fraction of X that depends only on the two types:
  0 when the reader wants what the producer left (I->I, II->III, III->II), 1/2 otherwise;
* one level is an exact minimum over the chain (the authors' ties: the lower type index wins), the next
  level works on the shares this one left, and the total is sum_h 2^h cost_h.

The model counts both groups in bytes: model bytes = oracle elements x 2 x bytes per element (and, as the
authors' network files, post-pooling partial sums).

The literal totals below were printed by the authors' C++ itself (its accpar.cpp/helper.cpp compiled with
g++ 12 outside this repository, main.cpp set to batch 256 and 4 levels and printing ``com_cost``; its own
``print_partitions`` recomputation gives the same numbers), on its own network files, reproduced in
ACCPAR_ALEXNET and ACCPAR_VGG11. They pin the oracle; the oracle then checks the model on all ten networks
and on random chains, not only on the two networks the authors ship.
"""
import numpy as np
import pytest

from trainforge.sim.hypar import third_type
from trainforge.sim.hypar.builtins import BUILTIN_NETWORKS, builtin_network
from trainforge.sim.hypar.config import TrainingSetup
from trainforge.sim.hypar.network import Layer, Network
from trainforge.sim.hypar.partition import format_choices, hierarchical_partition, strategy_choices, traffic_of

#: Fraction of the reader's input X moved by the edge (producer type, reader type), one group.
EDGE_FRACTION = np.array([[0.0, 0.5, 0.5],
                          [0.5, 0.5, 0.0],
                          [0.5, 0.0, 0.5]])


def oracle_partition(rows, batch, levels, types):
    """The authors' rule on a chain: total elements (one group, sum_h 2^h cost_h) and the types per level.

    Parameters
    ----------
    rows : list of tuple
        (C_in, C_out, kernel area, input area, pooled output area) per layer, in chain order.
    batch : int
    levels : int
    types : int
        2 (HyPar: I, II) or 3 (AccPar: I, II, III).
    """
    c_in, c_out, kernel, area_in, area_out = (np.array(column, dtype=float) for column in zip(*rows))
    share = np.ones((3, len(rows)))  # batch, C_in, C_out shares left by the levels above
    total, chosen = 0.0, []
    for level in range(levels):
        samples, inputs, outputs = batch * share[0], c_in * share[1], c_out * share[2]
        own = np.stack([inputs * outputs * kernel,            # I: weight gradient
                        samples * outputs * area_out,         # II: partial sums of the output
                        samples * inputs * area_in])[:types]  # III: error of the input
        reader_input = samples * inputs * area_in
        best = own[:, 0].copy()
        back = []
        for layer in range(1, len(rows)):
            # step[p, t]: best so far with the previous layer of type p, plus the edge p -> t
            step = best[:, None] + EDGE_FRACTION[:types, :types] * reader_input[layer]
            back.append(np.argmin(step, axis=0))  # argmin returns the first minimum: the lower type
            best = step.min(axis=0) + own[:, layer]
        last = int(np.argmin(best))
        total += 2 ** level * best[last]
        path = [last]
        for pointers in reversed(back):
            path.append(int(pointers[path[-1]]))
        path = path[::-1]
        chosen.append("".join(map(str, path)))
        for layer, kind in enumerate(path):
            share[kind, layer] *= 0.5
    return total, chosen


def oracle_cost(rows, batch, partition):
    """The authors' rule for a given partition (one string of type digits per level): total elements, one group."""
    share = [[1.0, 1.0, 1.0] for _ in rows]  # batch, C_in, C_out shares of each layer
    total = 0.0
    for level, types in enumerate(partition):
        cost = 0.0
        for layer, ((c_in, c_out, kernel, area_in, area_out), kind) in enumerate(zip(rows, map(int, types))):
            samples, inputs, outputs = batch * share[layer][0], c_in * share[layer][1], c_out * share[layer][2]
            cost += (inputs * outputs * kernel, samples * outputs * area_out, samples * inputs * area_in)[kind]
            if layer:
                cost += EDGE_FRACTION[int(types[layer - 1]), kind] * samples * inputs * area_in
        for layer, kind in enumerate(map(int, types)):
            share[layer][kind] *= 0.5
        total += 2 ** level * cost
    return total


def oracle_rows(network):
    """Our built-in network as the oracle's rows (pooled output area computed here, not by the model)."""
    rows = []
    for layer in network.layers:
        height, width = layer.out_height, layer.out_width
        if layer.pool_kernel:
            height = (height - layer.pool_kernel) // layer.pool_stride + 1
            width = (width - layer.pool_kernel) // layer.pool_stride + 1
        rows.append((layer.in_channels, layer.out_channels, layer.kernel ** 2, layer.in_height * layer.in_width,
                     height * width))
    return rows


# The authors' network files (networks/Alexnet.txt, networks/Vgg11.txt): C_in, C_out, K^2, in area, out area.
# Their AlexNet differs from ours (224 input, pooling after conv2, conv3, conv5); their VGG11 is our VGG-A.
ACCPAR_ALEXNET = [(3, 96, 121, 224 * 224, 55 * 55), (96, 256, 25, 55 * 55, 27 * 27), (256, 384, 9, 27 * 27, 13 * 13),
                  (384, 384, 9, 13 * 13, 13 * 13), (384, 256, 9, 13 * 13, 6 * 6), (9216, 4096, 1, 1, 1),
                  (4096, 4096, 1, 1, 1), (4096, 1000, 1, 1, 1)]
ACCPAR_VGG11 = [(3, 64, 9, 224 ** 2, 112 ** 2), (64, 128, 9, 112 ** 2, 56 ** 2), (128, 256, 9, 56 ** 2, 56 ** 2),
                (256, 256, 9, 56 ** 2, 28 ** 2), (256, 512, 9, 28 ** 2, 28 ** 2), (512, 512, 9, 28 ** 2, 14 ** 2),
                (512, 512, 9, 14 ** 2, 14 ** 2), (512, 512, 9, 14 ** 2, 7 ** 2), (25088, 4096, 1, 1, 1),
                (4096, 4096, 1, 1, 1), (4096, 1000, 1, 1, 1)]

#: Printed by the compiled authors' partitioner, batch 256, 4 levels: total elements (one group) and types.
AUTHORS_PRINTED = {
    ("AlexNet", 2): (100_397_536, ["00000111"] * 4),
    ("AlexNet", 3): (83_145_184, ["00000121", "00000211", "00000121", "00000212"]),
    ("VGG11", 2): (190_602_560, ["00000000111"] * 4),
    ("VGG11", 3): (174_333_248, ["00000000121", "00000000121", "00000000112", "00000001211"]),
}


#: Printed by the compiled authors' partitioner for fixed partitions (every level alike), batch 256, 4 levels.
AUTHORS_PRINTED_FIXED = {
    ("AlexNet", "00000000"): 935_516_640, ("AlexNet", "11111111"): 2_720_462_848,
    ("VGG11", "00000000000"): 1_992_770_880, ("VGG11", "11111111111"): 12_377_167_872,
}


@pytest.mark.parametrize("name, types", list(AUTHORS_PRINTED))
def test_oracle_cost_of_the_authors_partitions(name, types):
    rows = {"AlexNet": ACCPAR_ALEXNET, "VGG11": ACCPAR_VGG11}[name]
    elements, partition = AUTHORS_PRINTED[name, types]
    assert oracle_cost(rows, 256, partition) == elements


@pytest.mark.parametrize("name, levels", list(AUTHORS_PRINTED_FIXED))
def test_oracle_cost_of_dp_and_mp(name, levels):
    rows = {"AlexNet": ACCPAR_ALEXNET, "VGG11": ACCPAR_VGG11}[name]
    assert oracle_cost(rows, 256, [levels] * 4) == AUTHORS_PRINTED_FIXED[name, levels]


@pytest.mark.parametrize("name", list(BUILTIN_NETWORKS))
@pytest.mark.parametrize("strategy", ["DP", "MP", "Trick"])
def test_baselines_equal_the_oracle_on_the_ten_networks(name, strategy):
    """Fixed partitions (MP charges every mp -> mp edge at every level) cost what the oracle says."""
    network = builtin_network(name)
    choices = strategy_choices(strategy, network, _setup(), 4)
    elements = oracle_cost(oracle_rows(network), 256, format_choices(choices))
    assert traffic_of(network, _setup(), choices).total_bytes == pytest.approx(2 * 4 * elements, rel=1e-12)


@pytest.mark.parametrize("name, types", list(AUTHORS_PRINTED))
def test_oracle_gives_what_the_authors_code_printed(name, types):
    rows = {"AlexNet": ACCPAR_ALEXNET, "VGG11": ACCPAR_VGG11}[name]
    assert oracle_partition(rows, 256, 4, types) == AUTHORS_PRINTED[name, types]


def _setup(batch=256):
    return TrainingSetup(batch=batch, mp_partial_sums="post_pooling")  # the authors' sizing; consumer rule


@pytest.mark.parametrize("name", list(BUILTIN_NETWORKS))
def test_hypar_equals_the_oracle_on_the_ten_networks(name):
    """Two types: our Algorithm 2 total = oracle x 2 groups x 4 B, and the same partition at every level."""
    network = builtin_network(name)
    elements, partition = oracle_partition(oracle_rows(network), 256, 4, 2)
    total, choices = hierarchical_partition(network, _setup(), 4)
    assert format_choices(choices) == partition
    assert total == pytest.approx(2 * 4 * elements, rel=1e-12)


@pytest.mark.parametrize("name", list(BUILTIN_NETWORKS))
def test_three_types_equal_the_oracle_on_the_ten_networks(name):
    network = builtin_network(name)
    elements, partition = oracle_partition(oracle_rows(network), 256, 4, 3)
    total, types = third_type.hierarchical_partition(network, _setup(), 4)
    assert third_type.format_types(types) == partition
    assert total == pytest.approx(2 * 4 * elements, rel=1e-12)


def test_random_fc_chains_equal_the_oracle(seed):
    """Random fully connected chains, batch and level count, both modes: the same totals and partitions."""
    rng = np.random.default_rng(seed)
    for trial in range(30):
        widths = [int(width) for width in rng.integers(1, 5000, size=int(rng.integers(2, 9)))]
        network = Network("random", tuple(Layer(f"f{i}", "fc", a, b) for i, (a, b) in
                                          enumerate(zip(widths, widths[1:]))))
        levels = int(rng.integers(1, 5))
        batch = 2 ** levels * int(rng.integers(1, 64))  # at least one sample per group at every level
        for types in (2, 3):
            elements, partition = oracle_partition(oracle_rows(network), batch, levels, types)
            if types == 2:
                total, choices = hierarchical_partition(network, _setup(batch), levels)
                ours = format_choices(choices)
            else:
                total, chosen = third_type.hierarchical_partition(network, _setup(batch), levels)
                ours = third_type.format_types(chosen)
            where = f"seed {seed} trial {trial} widths {widths} batch {batch} levels {levels} types {types}"
            assert total == pytest.approx(2 * 4 * elements, rel=1e-9), where
            assert ours == partition, where
