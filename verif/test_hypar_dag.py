"""HyPar on networks with residual connections (DAGs): the communication model, the exact dynamic programme
over frontiers, ResNet-18/50 built in, and the common network format."""
import numpy as np
import pytest

from trainforge.errors import ConfigError
from trainforge.sim.hypar.builtins import DAG_NETWORKS, builtin_network, fc
from trainforge.sim.hypar.comm import LayerTensors, LevelCosts
from trainforge.sim.hypar.config import TrainingSetup
from trainforge.sim.hypar.network import Layer, Network, from_spec, to_spec
from trainforge.sim.hypar.partition import (brute_force_two_groups, hierarchical_partition, level_bytes_of,
                                            partition_two_groups, traffic_of)
from trainforge.sim.hypar.simulator import simulate_step, simulate_steps

#: a (4 -> 4), b (4 -> 4), c (4 -> 4, plus a's output), d (4 -> 2): edges a->b, b->c, c->d and the residual a->d.
RESIDUAL = Network("residual", (fc("a", 4, 4), fc("b", 4, 4),
                                Layer("c", "fc", 4, 4, residual_from="a"), fc("d", 4, 2)))


def test_edges_of_a_residual_network():
    assert RESIDUAL.main_producer.tolist() == [-1, 0, 1, 2]
    assert RESIDUAL.residual_edges == ((0, 3),)
    assert not RESIDUAL.is_chain


def test_residual_traffic_by_hand():
    """Batch 2, 1 B, one level, a dp, b mp, c mp, d mp (both sides counted):
    intra a dp 2 x 16 = 32, b mp 2 x (2 x 4) = 16, c mp 16, d mp 2 x (2 x 2) = 8;
    a -> b dp -> mp 2 x (0.25 + 0.25) x 8 = 4 + 4; b -> c mp -> mp 2 x 0.5 x 8 = 8 (backward);
    c -> d mp -> mp 8 (backward); residual a -> d dp -> mp (d's input, 2 x 4) 4 + 4. Total 104."""
    choices = np.array([[False, True, True, True]])
    traffic = traffic_of(RESIDUAL, TrainingSetup(batch=2, bytes_per_element=1), choices)
    assert traffic.forward_transfer.tolist() == [[0, 4, 0, 4]]
    assert traffic.backward_transfer.tolist() == [[0, 4, 8, 12]]
    assert traffic.total_bytes == 104
    # without the residual connection, d's 4 + 4 from a disappear
    chain = Network("chain", (fc("a", 4, 4), fc("b", 4, 4), fc("c", 4, 4), fc("d", 4, 2)))
    assert traffic_of(chain, TrainingSetup(batch=2, bytes_per_element=1), choices).total_bytes == 96


def _random_dag_costs(rng, layers):
    draw = lambda size: rng.lognormal(10, 2, size=size)  # noqa: E731
    producer = np.array([-1] + [int(rng.integers(max(0, index - 3), index)) for index in range(1, layers)])
    boundary = np.where(producer < 0, 0.0, draw(layers))
    edges = [(int(rng.integers(0, consumer - 1)), consumer) for consumer in range(2, layers) if rng.random() < 0.4]
    extra = {}
    if edges:
        extra = {"branch_source": np.array([e[0] for e in edges]),
                 "branch_reader": np.array([e[1] for e in edges]), "branch_boundary": draw(len(edges))}
    return LevelCosts(intra_dp=draw(layers), intra_mp=draw(layers), dp_mp_forward=0.25 * boundary,
                      dp_mp_backward=0.25 * boundary, mp_to_any_backward=0.5 * boundary, main_producer=producer,
                      **extra)


def test_frontier_dynamic_programme_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    for trial in range(60):
        costs = _random_dag_costs(rng, int(rng.integers(1, 14)))
        total, choice = partition_two_groups(costs)
        best, _ = brute_force_two_groups(costs)
        assert np.isclose(total, best, rtol=1e-12), f"seed {seed} trial {trial}: {total} vs {best}"
        assert np.isclose(level_bytes_of(costs, choice), total, rtol=1e-12), f"seed {seed} trial {trial}"


def test_small_resnet_dynamic_programme_equals_brute_force():
    """ResNet-18 cut after conv3_1b (8 layers, a projection, three residual sums) plus a 1x1 head, batch 32."""
    resnet = builtin_network("ResNet-18")
    cut = resnet.names.index("conv3_2a")
    network = Network("cut", resnet.layers[:cut] + (Layer("head", "conv", 128, 10, kernel=1, in_height=28,
                                                           in_width=28, out_height=28, out_width=28),))
    assert len(network) == 9 and len(network.residual_edges) == 4
    setup = TrainingSetup(batch=32)
    costs = LevelCosts.of(LayerTensors.of(network, setup), setup, network)
    assert partition_two_groups(costs)[0] == pytest.approx(brute_force_two_groups(costs)[0], rel=1e-12)


@pytest.mark.parametrize("name", list(DAG_NETWORKS))
def test_dag_networks(name):
    network = builtin_network(name)
    setup = TrainingSetup()
    total, choices = hierarchical_partition(network, setup, 4)
    assert np.isclose(traffic_of(network, setup, choices).total_bytes, total)
    dp = traffic_of(network, setup, np.zeros_like(choices)).total_bytes
    assert np.isclose(dp, 15 * 2 * 4 * sum(layer.weights for layer in network.layers))
    assert total <= dp
    step = simulate_step(network, setup, choices)
    batch = simulate_steps(network, setup, np.stack([choices, np.zeros_like(choices)]))
    assert batch.seconds[0] == step.seconds and batch.communication_bytes[0] == step.communication_bytes


def test_resnet_weights_and_edges():
    """ResNet-18: 11,678,912 conv/fc weights (torchvision's 11.69 M parameters less biases and batch norm);
    ResNet-50: 25,502,912 (25.56 M). Residual edges: one per reader of each block output."""
    counts = {name: sum(layer.weights for layer in builtin_network(name).layers) for name in ("ResNet-18", "ResNet-50")}
    assert counts == {"ResNet-18": 11_678_912, "ResNet-50": 25_502_912}
    assert len(builtin_network("ResNet-18").residual_edges) == 11  # 8 blocks, +3 projections read a block output


@pytest.mark.parametrize("name", list(DAG_NETWORKS))
def test_common_format_round_trip(name):
    network = builtin_network(name)
    assert from_spec(to_spec(network)) == network


def test_dag_errors_name_the_layer():
    with pytest.raises(ConfigError, match=r"^layer 'c': residual_from='a' gives 4 x 1x1, the layer's output is "
                                          r"3 x 1x1$"):
        Network("bad", (fc("a", 4, 4), fc("b", 4, 4), Layer("c", "fc", 4, 3, residual_from="a"), fc("d", 3, 2)))
    with pytest.raises(ConfigError, match=r"^layer 'b': input_from='z' is not an earlier layer$"):
        Network("bad", (fc("a", 4, 4), Layer("b", "fc", 4, 4, input_from="z")))
    with pytest.raises(ConfigError, match=r"^layer 'b': residual_from on a layer no other layer reads"):
        Network("bad", (fc("a", 4, 4), Layer("b", "fc", 4, 4, residual_from="a")))


def test_timeline_waits_for_every_producer_and_reader():
    """The residual network a, b, c (+a), d: d's forward transfer waits for a and c; a's backward waits for the
    error transfers of both its readers, b and d."""
    from trainforge.sim.hypar.simulator import _task_graph
    deps = {name: set(needs) for name, _, _, needs in _task_graph(RESIDUAL)}
    assert deps["fwd-transfer 3"] == {"fwd 2", "fwd-reduce 2", "fwd 0", "fwd-reduce 0"}
    assert deps["bwd 0"] == deps["grad 0"] == {"bwd-transfer 1", "bwd-transfer 3"}
    assert deps["bwd 3"] == {"fwd-reduce 3"}
    chain = Network("chain", (fc("a", 4, 4), fc("b", 4, 4), fc("c", 4, 2)))
    assert [name for name, *_ in _task_graph(chain)] == [
        "fwd 0", "fwd-reduce 0", "fwd-transfer 1", "fwd 1", "fwd-reduce 1", "fwd-transfer 2", "fwd 2",
        "fwd-reduce 2", "bwd 2", "grad 2", "grad-reduce 2", "bwd-transfer 2", "bwd 1", "grad 1", "grad-reduce 1",
        "bwd-transfer 1", "bwd 0", "grad 0", "grad-reduce 0"]
