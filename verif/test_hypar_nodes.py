"""Node models of the HyPar array (sim/hypar/nodes.py): each against its block's golden model.

Expected times are computed here independently: TensorDash from
``golden.tensordash.layer`` on whole random/constant tensors, CATERPILLAR from
``golden.caterpillar.core.schedule`` on this file's own im2col and command
tiling, NeuroTrainer from ``sim.neurotrainer.module.layer_pass_time``.
"""
import numpy as np
import pytest

from trainforge.errors import ParameterError

from trainforge.golden.caterpillar import core as cp
from trainforge.golden.tensordash.layer import layer_cycles, lower
from trainforge.sim.hypar.builtins import builtin_network
from trainforge.sim.hypar.config import ArrayConfig, TrainingSetup
from trainforge.sim.hypar.network import Layer, Network
from trainforge.sim.hypar.nodes import CaterpillarNode, NeuroTrainerNode, TensorDashNode, make_node
from trainforge.sim.hypar.partition import strategy_choices
from trainforge.sim.hypar.simulator import LayerWork, RooflineNode, simulate_step, simulate_steps

SEED = 20240611
UNBOUNDED = 1e30  # DRAM bandwidth that never limits, so the compute model is what is compared
OPERATIONS = ("AxW", "GxW", "GxA")


def _conv_network():
    return Network("small-conv", (
        Layer("conv1", "conv", 4, 8, kernel=3, in_height=6, in_width=6, out_height=6, out_width=6, padding=1),
        Layer("conv2", "conv", 8, 8, kernel=3, in_height=6, in_width=6, out_height=6, out_width=6, padding=1),
        Layer("fc", "fc", 8 * 36, 8),
    ))


def _fc_network():
    return Network("small-fc", (Layer("fc1", "fc", 16, 32), Layer("fc2", "fc", 32, 32), Layer("fc3", "fc", 32, 8)))


def _single_accelerator_seconds(node, network, batch):
    work = LayerWork.of(network, TrainingSetup(batch=batch), np.zeros((0, len(network)), dtype=bool))
    return node.phase_seconds(work)


def _tensors(layer, batch, activation_zero, gradient_zero):
    """Whole tensors of ``layer``: ``*_zero`` is a bool (all zero / all one) or a probability with an rng."""
    conv = layer.kind == "conv"
    a_shape = (batch, layer.in_channels, layer.in_height, layer.in_width) if conv else (batch, layer.in_channels)
    w_shape = (layer.out_channels, layer.in_channels, layer.kernel, layer.kernel) if conv else \
        (layer.out_channels, layer.in_channels)
    g_shape = (batch, layer.out_channels, layer.out_height, layer.out_width) if conv else (batch, layer.out_channels)
    rng = np.random.default_rng(SEED)

    def make(shape, zero):
        if isinstance(zero, bool):
            return np.zeros(shape) if zero else np.ones(shape)
        return (rng.random(shape) >= zero).astype(np.float64)
    return make(a_shape, activation_zero), np.ones(w_shape), make(g_shape, gradient_zero)


def _golden_tensordash_cycles(layer, batch, activation_zero, gradient_zero, dense=False):
    activations, weights, gradients = _tensors(layer, batch, activation_zero, gradient_zero)
    cycles = [layer_cycles(lower(op, activations, weights, gradients, stride=layer.stride, padding=layer.padding))
              for op in OPERATIONS]
    return np.array([c.dense if dense else c.tensordash for c in cycles], dtype=np.float64)


@pytest.mark.parametrize("sparsity", [0.0, 1.0])
def test_tensordash_layer_time_is_golden_cycles_over_clock(sparsity):
    network, batch = _conv_network(), 2
    node = TensorDashNode(tiles=2, frequency_hz=1e9, dram_bytes_per_second=UNBOUNDED, activation_sparsity=sparsity,
                          gradient_sparsity=sparsity)
    seconds = _single_accelerator_seconds(node, network, batch)
    zero = sparsity == 1.0
    # conv2 is a middle layer: its activations and gradients have the given sparsity
    expected = _golden_tensordash_cycles(network.layers[1], batch, zero, zero) / (2 * 1e9)
    assert np.array_equal(seconds[:, 1], expected), f"conv2: expected {expected}, got {seconds[:, 1]}"
    # first layer: dense input image, no backward pass; last layer: dense loss gradient
    first = _golden_tensordash_cycles(network.layers[0], batch, False, zero) / (2 * 1e9)
    assert np.array_equal(seconds[:, 0], [first[0], 0.0, first[2]]), f"conv1: expected {first}, got {seconds[:, 0]}"
    last = _golden_tensordash_cycles(network.layers[2], batch, zero, False) / (2 * 1e9)
    assert np.array_equal(seconds[:, 2], last), f"fc: expected {last}, got {seconds[:, 2]}"


def test_tensordash_random_sparsity_matches_golden_on_independent_tensors():
    network, batch, sparsity = _conv_network(), 2, 0.5
    node = TensorDashNode(tiles=1, frequency_hz=1e9, dram_bytes_per_second=UNBOUNDED, activation_sparsity=sparsity,
                          gradient_sparsity=sparsity)
    seconds = _single_accelerator_seconds(node, network, batch)[:, 1]
    expected = _golden_tensordash_cycles(network.layers[1], batch, sparsity, sparsity) / 1e9
    # different random draws of the same i.i.d. sparsity: a few percent apart at this size
    assert np.allclose(seconds, expected, rtol=0.05), f"seed {SEED}: expected {expected}, got {seconds}"


def test_tensordash_sampled_speedup_matches_exact_on_a_larger_layer():
    conv = Layer("conv", "conv", 32, 32, kernel=3, in_height=16, in_width=16, out_height=16, out_width=16, padding=1)
    first = Layer("conv0", "conv", 4, 32, kernel=1, in_height=16, in_width=16, out_height=16, out_width=16)
    network = Network("three", (first, conv, Layer("fc", "fc", 32 * 256, 4)))
    sampled = TensorDashNode(tiles=1, frequency_hz=1e9, dram_bytes_per_second=UNBOUNDED, activation_sparsity=0.6,
                             gradient_sparsity=0.6, budget=1024)
    exact = TensorDashNode(tiles=1, frequency_hz=1e9, dram_bytes_per_second=UNBOUNDED, activation_sparsity=0.6,
                           gradient_sparsity=0.6, budget=10 ** 9)
    fast = _single_accelerator_seconds(sampled, network, 2)[:, 1]
    full = _single_accelerator_seconds(exact, network, 2)[:, 1]
    assert np.allclose(fast, full, rtol=0.04), f"sampled {fast} vs exact {full}"


def test_tensordash_time_falls_with_sparsity_and_is_dense_at_zero():
    network, batch = _fc_network(), 8
    totals = []
    for sparsity in (0.0, 0.3, 0.6, 0.9):
        node = TensorDashNode(tiles=1, frequency_hz=1e9, dram_bytes_per_second=UNBOUNDED,
                              activation_sparsity=sparsity, gradient_sparsity=sparsity)
        seconds = _single_accelerator_seconds(node, network, batch)
        totals.append(seconds[:, 1].sum())
        if sparsity == 0.0:
            dense = np.stack([_golden_tensordash_cycles(layer, batch, False, False, dense=True) / 1e9
                              for layer in network.layers], axis=1)
            dense[1, 0] = 0.0
            assert np.array_equal(seconds, dense), f"sparsity 0: expected the dense tile {dense}, got {seconds}"
    assert all(later < earlier for earlier, later in zip(totals, totals[1:])), f"fc2 times {totals}"


def _im2col_gemms(layer, batch, in_channels):
    patch = in_channels * layer.kernel ** 2
    positions = batch * layer.out_height * layer.out_width
    return [(layer.out_channels, patch, positions), (patch, layer.out_channels, positions),
            (layer.out_channels, positions, patch)]


def _caterpillar_cycles(m, k, q, n_r, max_blocks):
    """One LOAD per resident W chunk, one GEMM command per (M, K, Q) chunk, each issue + 1 cycles."""
    mb, kb, qb = -(-m // n_r), -(-k // n_r), -(-q // n_r)
    total = 0
    for m_start in range(0, mb, max_blocks):
        m_len = min(max_blocks, mb - m_start)
        for k_start in range(0, kb, max_blocks):
            k_len = min(max_blocks, kb - k_start)
            total += cp.schedule(cp.OP_LOAD, m_len, k_len, n_r=n_r).issue_cycles + cp.COMMAND_LATENCY
            for q_start in range(0, qb, max_blocks):
                q_len = min(max_blocks, qb - q_start)
                total += cp.schedule(cp.OP_GEMM, m_len, k_len, q_len, n_r=n_r).issue_cycles + cp.COMMAND_LATENCY
    return total


@pytest.mark.parametrize("max_blocks", [64, 3])
def test_caterpillar_layer_time_is_golden_schedule_over_clock(max_blocks):
    network, batch = _conv_network(), 2
    node = CaterpillarNode(cores=2, n_r=4, frequency_hz=1e9, dram_bytes_per_second=UNBOUNDED, max_blocks=max_blocks)
    seconds = _single_accelerator_seconds(node, network, batch)
    for index, layer in enumerate(network.layers):
        expected = np.array([_caterpillar_cycles(m, k, q, 4, max_blocks) for m, k, q in
                             _im2col_gemms(layer, batch, layer.in_channels)]) / (2 * 1e9)
        if index == 0:
            expected[1] = 0.0
        assert np.array_equal(seconds[:, index], expected), \
            f"{layer.name}, max_blocks {max_blocks}: expected {expected}, got {seconds[:, index]}"


def test_node_time_is_the_slower_of_compute_and_dram():
    network = _fc_network()
    work = LayerWork.of(network, TrainingSetup(batch=8), np.zeros((0, 3), dtype=bool))
    compute = CaterpillarNode(dram_bytes_per_second=UNBOUNDED).phase_seconds(work)
    slow = CaterpillarNode(dram_bytes_per_second=1e6).phase_seconds(work)
    expected = np.where(work.macs > 0, np.maximum(compute, work.dram_bytes / 1e6), 0.0)
    assert np.array_equal(slow, expected), f"expected {expected}, got {slow}"


def test_neurotrainer_layer_time_is_module_pass_time():
    module = pytest.importorskip("trainforge.sim.neurotrainer.module")
    network, batch = _conv_network(), 4
    seconds = _single_accelerator_seconds(NeuroTrainerNode(), network, batch)
    conv_dims = {"in_channels": 8, "out_channels": 8, "kernel": 3, "in_h": 6, "in_w": 6, "out_h": 6, "out_w": 6,
                 "stride": 1, "batch": batch}
    fc_dims = {"inputs": 288, "outputs": 8, "batch": batch}
    for index, kind, dims in ((1, "conv", conv_dims), (2, "fc", fc_dims)):
        expected = [module.layer_pass_time(module.paper_precision(module.ModuleConfig(), name), kind, dims,
                                           name).seconds for name in ("ff", "bp", "up")]
        assert np.array_equal(seconds[:, index], expected), \
            f"{network.layers[index].name}: expected {expected}, got {seconds[:, index]}"


def _nodes():
    nodes = [RooflineNode(), TensorDashNode(activation_sparsity=0.5, gradient_sparsity=0.7), CaterpillarNode()]
    try:
        nodes.append(NeuroTrainerNode())
    except ImportError:
        pass
    return nodes


@pytest.mark.parametrize("topology", ["htree", "torus"])
def test_batched_simulation_equals_single_with_every_node(topology):
    network, setup = builtin_network("Lenet-c"), TrainingSetup()
    array = ArrayConfig(levels=4, topology=topology)
    rng = np.random.default_rng(SEED)
    choices = rng.random((6, 4, len(network))) < 0.5
    choices[0] = strategy_choices("HyPar", network, setup, 4)
    for node in _nodes():
        batch = simulate_steps(network, setup, choices, array, node_model=node)
        for index, partition in enumerate(choices):
            single = simulate_step(network, setup, partition, array, node_model=node)
            assert batch.seconds[index] == single.seconds, (
                f"{type(node).__name__} partition {index} seed {SEED}: batched {batch.seconds[index]} "
                f"vs single {single.seconds}")
            assert batch.energy_joules[index] == single.energy_joules


@pytest.mark.parametrize("build, name", [
    (lambda: TensorDashNode(tiles=0), "tiles"),
    (lambda: TensorDashNode(frequency_hz=-1.0), "frequency_hz"),
    (lambda: TensorDashNode(dram_bytes_per_second=0.0), "dram_bytes_per_second"),
    (lambda: TensorDashNode(activation_sparsity=1.5), "activation_sparsity"),
    (lambda: TensorDashNode(gradient_sparsity=-0.1), "gradient_sparsity"),
    (lambda: TensorDashNode(depth=7), "depth"),
    (lambda: CaterpillarNode(cores=0), "cores"),
    (lambda: CaterpillarNode(n_r=1), "n_r"),
    (lambda: CaterpillarNode(max_blocks=0), "max_blocks"),
    (lambda: CaterpillarNode(frequency_hz=0), "frequency_hz"),
    (lambda: make_node("gpu"), "node"),
    (lambda: make_node("caterpillar", (0.5, 0.5)), "sparsity"),
])
def test_bad_node_arguments_name_the_parameter(build, name):
    with pytest.raises(ParameterError, match=name):
        build()


def test_caterpillar_node_ranges_are_the_cp_core_block_ranges():
    """n_r 2..16, max_blocks 1..4096, sram_depth 2..65536 as the cp_core hardware declares them."""
    with pytest.raises(ParameterError, match=r"^parameter 'n_r' = 17 is invalid \(out of range\); "
                                             r"allowed: an integer in 2\.\.16$"):
        CaterpillarNode(n_r=17)
    with pytest.raises(ParameterError, match=r"'sram_depth' = 65537 .* 2\.\.65536$"):
        CaterpillarNode(sram_depth=65537)
    assert CaterpillarNode(max_blocks=4096).max_blocks == 4096
    node = CaterpillarNode()
    assert (node.n_r, node.max_blocks, node.sram_depth) == (4, 64, 8192)
    assert TensorDashNode().depth == 4


def test_bad_neurotrainer_config_names_the_parameter():
    pytest.importorskip("trainforge.sim.neurotrainer.module")
    with pytest.raises(TypeError, match="config"):
        NeuroTrainerNode(config="fast")


@pytest.mark.parametrize("arguments", [["--node", "gpu"], ["--node", "tensordash", "--sparsity", "1.2"],
                                       ["--node", "tensordash", "--sparsity", "a,b"],
                                       ["--node", "roofline", "--sparsity", "0.5"]])
def test_cli_bad_node_exits_2_and_writes_nothing(tmp_path, capsys, arguments):
    from trainforge.cli import main
    out = tmp_path / "reports"
    for command in (["hypar", "simulate", "Lenet-c"], ["hypar", "figures", "--only", "nodes", "--out", str(out)]):
        try:
            code = main(command + arguments)
        except SystemExit as exit_info:
            code = exit_info.code
        assert code == 2, f"{command + arguments}: exit {code}"
    assert not out.exists(), "nothing may be written on a usage error"
    assert "sparsity" in capsys.readouterr().err


def test_cli_simulate_with_tensordash_node(capsys):
    from trainforge.cli import main
    import json
    code = main(["hypar", "simulate", "Lenet-c", "--node", "tensordash", "--sparsity", "0.4,0.8", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["node"] == "tensordash"
    expected = simulate_step(builtin_network("Lenet-c"), TrainingSetup(),
                             strategy_choices("HyPar", builtin_network("Lenet-c"), TrainingSetup(), 4),
                             node_model=TensorDashNode(activation_sparsity=0.4, gradient_sparsity=0.8)).seconds
    assert result["strategies"]["HyPar"]["seconds"] == expected, f"expected {expected}, got {result}"
