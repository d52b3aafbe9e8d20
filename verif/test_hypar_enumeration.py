"""HyPar (issue 7): the batched timeline agrees exactly with simulate_step, and the full
2^(4x4) enumeration of Lenet-c under simulated time."""
import numpy as np
import pytest

from trainforge.errors import ParameterError
from trainforge.sim.hypar.builtins import builtin_network
from trainforge.sim.hypar.comm import LayerTensors
from trainforge.sim.hypar.config import ArrayConfig, TrainingSetup
from trainforge.sim.hypar.figures import full_enumeration
from trainforge.sim.hypar.network import Network
from trainforge.sim.hypar.partition import enumerate_partitions, strategy_choices
from trainforge.sim.hypar.simulator import RooflineNode, simulate_step, simulate_steps


def _random_partitions(rng, count, levels, layers):
    """Random partitions with a random mp density each, plus all-dp and all-mp."""
    density = rng.random((count, 1, 1))
    choices = rng.random((count, levels, layers)) < density
    choices[0], choices[1] = False, True
    return choices


def _assert_batch_equals_scalar(network, setup, array, choices, label):
    batch = simulate_steps(network, setup, choices, array, chunk=37)  # a chunk size that splits the batch
    for index, choice in enumerate(choices):
        step = simulate_step(network, setup, choice, array)
        where = f"{label} partition {index} {choice.astype(int).tolist()}"
        assert batch.seconds[index] == step.seconds, where
        assert batch.energy_joules[index] == step.energy_joules, where
        assert batch.communication_bytes[index] == step.communication_bytes, where


@pytest.mark.parametrize("name", ["Lenet-c", "Cifar-c", "AlexNet", "SFC"])
@pytest.mark.parametrize("topology", ["htree", "torus"])
def test_batched_timeline_equals_simulate_step_exactly(seed, name, topology):
    rng = np.random.default_rng(seed)
    network = builtin_network(name)
    levels = int(rng.integers(1, 5))
    setup = TrainingSetup(batch=int(rng.choice([32, 256, 4096])))
    array = ArrayConfig(levels=levels, topology=topology)
    choices = _random_partitions(rng, 60, levels, len(network))
    _assert_batch_equals_scalar(network, setup, array, choices, f"seed {seed} {name} H={levels} B={setup.batch}")


def test_batched_timeline_lenet_c_sample_of_full_space(seed):
    """The exact-agreement check on the very space the enumeration covers (Lenet-c, H = 4, batch 256)."""
    rng = np.random.default_rng(seed)
    network = builtin_network("Lenet-c")
    every = enumerate_partitions(len(network), 4)
    sample = every[rng.choice(len(every), size=200, replace=False)]
    _assert_batch_equals_scalar(network, TrainingSetup(), ArrayConfig(), sample, f"seed {seed}")


def test_batched_timeline_rejects_non_broadcasting_node_model():
    class PerLayerOnly:
        def phase_seconds(self, work):
            return RooflineNode().phase_seconds(work).reshape(-1)[:3]

    network = builtin_network("Lenet-c")
    with pytest.raises(ValueError, match="node model returned shape"):
        simulate_steps(network, TrainingSetup(), np.zeros((2, 4, 4), bool), node_model=PerLayerOnly())


def test_fat_tree_network_time_is_proxy_over_aggregate_leaf_bandwidth(seed):
    """First principles: on the fat tree a level-h exchange of c bytes per pair takes c 2^h / (2^H b), so the
    network's busy time is Algorithm 2's total traffic over the 2^H leaf links (the proxy *is* the serial
    network time). The torus has no such identity (its level-0 and level-2 splits are 2x slower per byte)."""
    rng = np.random.default_rng(seed)
    network = builtin_network("Lenet-c")
    array = ArrayConfig()
    for choice in _random_partitions(rng, 20, 4, len(network)):
        step = simulate_step(network, TrainingSetup(), choice, array)
        expected = step.communication_bytes / (array.accelerators * array.link_bits_per_second / 8)
        assert np.isclose(step.network_seconds, expected, rtol=1e-12), choice.astype(int).tolist()


@pytest.mark.parametrize("topology", ["htree", "torus"])
def test_lenet_c_full_enumeration_under_simulated_time(topology):
    """All 65,536 partitions (H1..H4 x four layers), simulated: HyPar's rank and the gap to the optimum."""
    network, setup, array = builtin_network("Lenet-c"), TrainingSetup(), ArrayConfig(topology=topology)
    result = full_enumeration(network, setup, array)
    assert result["partitions"] == 2 ** 16
    hypar = strategy_choices("HyPar", network, setup, 4)
    step = simulate_step(network, setup, hypar, array)
    dp = simulate_step(network, setup, strategy_choices("DP", network, setup, 4), array)
    assert result["hypar"]["seconds"] == step.seconds
    assert result["hypar"]["performance"] == dp.seconds / step.seconds
    # the reported optimum is a real partition whose scalar simulation gives the same time
    optimum = np.array([[bit == "1" for bit in row] for row in result["time"]["argmin_levels"]])
    assert simulate_step(network, setup, optimum, array).seconds == result["time"]["min_seconds"]
    assert result["time"]["min_seconds"] <= step.seconds
    assert np.isclose(result["time"]["gap_percent"], 100 * (step.seconds / result["time"]["min_seconds"] - 1))
    assert 1 <= result["time"]["rank"] <= result["partitions"]
    assert (result["time"]["rank"] == 1) == (result["time"]["gap_percent"] == 0)
    # Algorithm 2 is proxy-optimal for Lenet-c (the proxy enumeration), so it ranks first there
    assert result["proxy"]["rank"] == 1
    assert np.isclose(result["proxy"]["min_GB"], step.communication_bytes / 1e9, rtol=1e-12)


@pytest.mark.regress
@pytest.mark.parametrize("topology", ["htree", "torus"])
def test_batched_timeline_equals_simulate_step_large_sample(seed, topology):
    """make regress: exact agreement on 4,096 of the 65,536 Lenet-c partitions (about 8 s per topology)."""
    rng = np.random.default_rng(seed)
    network = builtin_network("Lenet-c")
    every = enumerate_partitions(len(network), 4)
    sample = every[rng.choice(len(every), size=4096, replace=False)]
    _assert_batch_equals_scalar(network, TrainingSetup(), ArrayConfig(topology=topology), sample, f"seed {seed}")


def test_paper_fig13_worked_arithmetic():
    """Section 6.5.2: VGG-E conv5 at batch 32, A(dW) = 512x512x3x3 and A(F_{l+1}) = 32x512x14x14 (the
    pre-pooling map); fc3 at batch 4096, A(dW) = A(F_{l+1}) = 4,096,000."""
    vgg_e = builtin_network("VGG-E")
    conv5 = vgg_e.layers[vgg_e.names.index("conv5_4")]
    tensors = LayerTensors.of(Network("conv5", (conv5,)), TrainingSetup(batch=32))
    assert (tensors.weights[0], tensors.partial_sums[0]) == (2_359_296, 3_211_264)
    fc3 = vgg_e.layers[vgg_e.names.index("fc3")]
    tensors = LayerTensors.of(Network("fc3", (fc3,)), TrainingSetup(batch=4096))
    assert tensors.weights[0] == tensors.partial_sums[0] == 4_096_000


def test_enumeration_beyond_2_to_the_20_partitions_is_refused():
    assert enumerate_partitions(5, 4).shape == (2 ** 20, 4, 5)
    with pytest.raises(ParameterError, match=r"^parameter 'levels\*layers' = 21 is invalid \(out of range\); "
                                             r"allowed: an integer in 0\.\.20$"):
        enumerate_partitions(7, 3)
