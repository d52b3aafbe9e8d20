"""Workloads for the foundation's ``make bench`` (timed there, never asserted here)."""
from trainforge.sim.hypar.builtins import builtin_network, fc
from trainforge.sim.hypar.config import TrainingSetup
from trainforge.sim.hypar.network import Network
from trainforge.sim.hypar.partition import hierarchical_partition, strategy_choices
from trainforge.sim.hypar.simulator import simulate_step

_SETUP = TrainingSetup()


def _synthetic_network(layers=10_000):
    sizes = [64 + (97 * index) % 4000 for index in range(layers + 1)]
    return Network("synthetic", tuple(fc(f"fc{i}", a, b) for i, (a, b) in enumerate(zip(sizes, sizes[1:]))))


def _dp_vgg_e():
    return hierarchical_partition(builtin_network("VGG-E"), _SETUP, 1)


def _hierarchical_alexnet():
    return hierarchical_partition(builtin_network("AlexNet"), _SETUP, 4)


_SYNTHETIC = {}


def _synthetic_network_once():
    if "network" not in _SYNTHETIC:
        _SYNTHETIC["network"] = _synthetic_network()
    return _SYNTHETIC["network"]


def _synthetic_10000_layers_10_levels():
    # Target: under 0.2 s (Algorithm 2 only; the network is built once, outside the timed call).
    return hierarchical_partition(_synthetic_network_once(), _SETUP, 10)


def _build_synthetic_10000_layers():
    return _synthetic_network()


def _simulate_vgg_a_step():
    network = builtin_network("VGG-A")
    return simulate_step(network, _SETUP, strategy_choices("HyPar", network, _SETUP, 4))


BENCHMARKS = {
    "hypar_dp_vgg_e": (_dp_vgg_e, {"network": "VGG-E", "levels": 1, "algorithm": "1 (layer-wise DP)",
                                   "batch": _SETUP.batch}),
    "hypar_hierarchical_alexnet_h4": (_hierarchical_alexnet, {"network": "AlexNet", "levels": 4,
                                                              "algorithm": "2 (hierarchical)",
                                                              "batch": _SETUP.batch}),
    "hypar_partition_10000_layers_h10": (_synthetic_10000_layers_10_levels, {
        "network": "synthetic, 10000 fully connected layers", "levels": 10, "algorithm": "2 (hierarchical)",
        "batch": _SETUP.batch, "target_s": 0.2, "excludes": "building the network (hypar_build_10000_layers)"}),
    "hypar_build_10000_layers": (_build_synthetic_10000_layers, {
        "network": "synthetic, 10000 fully connected layers", "what": "Network construction with shape checks"}),
    "hypar_simulate_vgg_a_step": (_simulate_vgg_a_step, {"network": "VGG-A", "levels": 4, "partition": "HyPar",
                                                         "simulator": "one training step, H-tree"}),
}
