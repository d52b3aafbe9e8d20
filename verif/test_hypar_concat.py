"""HyPar on networks with concatenations: the format's ``concat_from``, the per-slice inter-layer charge (worked by
hand), the frontier dynamic programme against brute force, GoogLeNet built in, and the simulator's task graph."""
import numpy as np
import pytest

from trainforge.errors import ConfigError
from trainforge.sim.hypar.builtins import builtin_network, conv, fc
from trainforge.sim.hypar.comm import LayerTensors, LevelCosts
from trainforge.sim.hypar.config import TrainingSetup
from trainforge.sim.hypar.network import Layer, Network, from_spec, to_spec
from trainforge.sim.hypar.partition import brute_force_two_groups, level_bytes_of, partition_two_groups, traffic_of
from trainforge.sim.hypar.simulator import _task_graph
from trainforge.spec import network as network_format

#: x (4 -> 4); p (4 -> 2) and q (4 -> 6) both read x; k (8 -> 2) reads the concatenation [p, q].
#: Edges: x -> p, x -> q (main), p -> k (2 of k's 8 inputs), q -> k (6 of 8).
CONCAT = Network("concat", (fc("x", 4, 4), fc("p", 4, 2), Layer("q", "fc", 4, 6, input_from="x"),
                            fc("k", 8, 2, concat_from=("p", "q"))))
TINY = TrainingSetup(batch=4, bytes_per_element=1)


def test_edges_of_a_concatenation():
    assert CONCAT.main_producer.tolist() == [-1, 0, 0, -1]
    assert CONCAT.concat_edges == ((1, 3), (2, 3))
    assert CONCAT.input_edges() == [(0, 1, 1.0), (0, 2, 1.0), (1, 3, 0.25), (2, 3, 0.75)]
    assert not CONCAT.is_chain


def test_concat_traffic_by_hand_one_level():
    """Batch 4, 1 B, both sides counted; x dp, p mp, q dp, k mp.
    Intra: x dp 2 x A(W) = 2 x 16 = 32; p mp 2 x (4 x 2) = 16; q dp 2 x 24 = 48; k mp 2 x (4 x 2) = 16.
    x -> p dp -> mp: F_p = 4 x 4 = 16, 2 x 16 = 32 bytes, 0.25 forward + 0.25 backward: 8 + 8.
    x -> q dp -> dp: 0.
    p -> k mp -> mp: p's slice of F_k is 2 of 8 channels, 4 x 2 = 8 elements, 16 bytes; 0.5 backward: 8.
    q -> k dp -> mp: q's slice, 4 x 6 = 24 elements, 48 bytes; 12 forward + 12 backward.
    k's transfers: forward 12, backward 8 + 12 = 20. Total 112 + 16 + 8 + 24 = 160."""
    traffic = traffic_of(CONCAT, TINY, [[False, True, False, True]])
    assert traffic.forward_transfer.tolist() == [[0, 8, 0, 12]]
    assert traffic.backward_transfer.tolist() == [[0, 8, 0, 20]]
    assert traffic.total_bytes == 160


def test_concat_traffic_by_hand_two_levels():
    """Level H1 as in the one-level test (160 B). Level H2: x dp, p dp, q mp, k mp, on the shares H1 left:
    x and q half the batch (2 samples), p and k half their C_in.
    Intra: x dp 2 x 16 = 32; p dp 2 x (2 x 2) = 8; q mp 2 x (2 x 6) = 24; k mp 2 x (4 x 2) = 16.
    Consumer rule (k's F in k's shape, 4 samples x 4 of 8 channels = 16 elements; slices 1/4 and 3/4):
    x -> q dp -> mp: F_q = 2 x 4 = 8 elements, 16 B: 4 + 4; p -> k dp -> mp: 4 elements, 8 B: 2 + 2;
    q -> k mp -> mp: 12 elements, 24 B: 12 backward. H2 = 80 + 8 + 4 + 12 = 104; total 160 + 2 x 104 = 368.
    Producer rule (each source's output in its own shape): H1 the same (every source holds its whole output);
    H2 x -> q: x's output, 2 x 4 = 8 elements: 4 + 4; p -> k: p's output, 4 x 2 = 8 elements, 16 B: 4 + 4;
    q -> k: q's output, 2 x 6 = 12 elements, 24 B: 12. H2 = 80 + 8 + 8 + 12 = 108; total 160 + 216 = 376."""
    choices = [[False, True, False, True], [False, False, True, True]]
    consumer = traffic_of(CONCAT, TINY, choices)
    assert consumer.forward_transfer[1].tolist() == [0, 0, 4, 2]
    assert consumer.backward_transfer[1].tolist() == [0, 0, 4, 14]
    assert consumer.total_bytes == 368
    producer = traffic_of(CONCAT, TrainingSetup(batch=4, bytes_per_element=1, inter_layer="producer"), choices)
    assert producer.forward_transfer[1].tolist() == [0, 0, 4, 4]
    assert producer.backward_transfer[1].tolist() == [0, 0, 4, 16]
    assert producer.total_bytes == 376


def test_same_choice_slices_cost_the_single_edge():
    """When every concatenated source makes the same choice, the slices sum to the edge of one producer
    with the reader's whole input (k reading one 8-wide layer m instead)."""
    single = Network("single", (fc("x", 4, 4), fc("m", 4, 8), fc("k", 8, 2)))
    for sources, reader in ((False, True), (True, True), (True, False)):
        concat = traffic_of(CONCAT, TINY, [[False, sources, sources, reader]])
        chain = traffic_of(single, TINY, [[False, sources, reader]])
        assert concat.forward_transfer[0, 3] == chain.forward_transfer[0, 2]
        assert concat.backward_transfer[0, 3] == chain.backward_transfer[0, 2]


def _random_concat_network(rng, layers):
    """fc layers; each layer reads the previous one, an earlier one, or the concatenation of 2-3 earlier ones."""
    built = [fc("l0", int(rng.integers(1, 50)), int(rng.integers(1, 50)))]
    for index in range(1, layers):
        roll, name, outputs = rng.random(), f"l{index}", int(rng.integers(1, 50))
        if index >= 2 and roll < 0.5:
            sources = sorted(rng.choice(index, size=min(index, int(rng.integers(2, 4))), replace=False).tolist())
            width = sum(built[source].out_channels for source in sources)
            built.append(fc(name, width, outputs, concat_from=tuple(f"l{source}" for source in sources)))
        else:
            source = index - 1 if roll < 0.8 else int(rng.integers(0, index))
            built.append(Layer(name, "fc", built[source].out_channels, outputs, input_from=f"l{source}"))
    return Network("random", tuple(built))


def test_frontier_dynamic_programme_equals_brute_force_with_concatenations(seed):
    rng = np.random.default_rng(seed)
    for trial in range(25):
        network = _random_concat_network(rng, int(rng.integers(2, 12)))
        setup = TrainingSetup(batch=int(rng.integers(1, 300)), inter_layer=("consumer", "producer")[trial % 2])
        costs = LevelCosts.of(LayerTensors.of(network, setup), setup, network)
        total, choice = partition_two_groups(costs)
        best, _ = brute_force_two_groups(costs)
        assert total == pytest.approx(best, rel=1e-12), f"seed {seed} trial {trial}"
        assert level_bytes_of(costs, choice) == pytest.approx(total, rel=1e-12), f"seed {seed} trial {trial}"


def _googlenet_cut():
    """GoogLeNet's stem and inception 3a (9 layers) and a 1x1 head reading the 3a concatenation."""
    googlenet = builtin_network("GoogLeNet")
    cut = googlenet.names.index("inception3b_1x1")
    head = conv("head", 256, 10, 1, 28, concat_from=tuple(f"inception3a_{branch}" for branch in
                                                          ("1x1", "3x3", "5x5", "pool_proj")))
    return Network("cut", googlenet.layers[:cut] + (head,))


@pytest.mark.parametrize("inter_layer", ["consumer", "producer"])
def test_small_googlenet_dynamic_programme_equals_brute_force(inter_layer):
    network = _googlenet_cut()
    assert len(network) == 10 and len(network.concat_edges) == 4
    setup = TrainingSetup(batch=32, inter_layer=inter_layer)
    costs = LevelCosts.of(LayerTensors.of(network, setup), setup, network)
    assert partition_two_groups(costs)[0] == pytest.approx(brute_force_two_groups(costs)[0], rel=1e-12)


#: GoogLeNet, Szegedy et al. 2015, Table 1, written out here: module -> (input depth, #1x1, #3x3 reduce, #3x3,
#: #5x5 reduce, #5x5, pool proj, output depth).
TABLE_1 = {"3a": (192, 64, 96, 128, 16, 32, 32, 256), "3b": (256, 128, 128, 192, 32, 96, 64, 480),
           "4a": (480, 192, 96, 208, 16, 48, 64, 512), "4b": (512, 160, 112, 224, 24, 64, 64, 512),
           "4c": (512, 128, 128, 256, 24, 64, 64, 512), "4d": (512, 112, 144, 288, 32, 64, 64, 528),
           "4e": (528, 256, 160, 320, 32, 128, 128, 832), "5a": (832, 256, 160, 320, 32, 128, 128, 832),
           "5b": (832, 384, 192, 384, 48, 128, 128, 1024)}


def test_googlenet_against_table_1():
    network = builtin_network("GoogLeNet")
    layers = {layer.name: layer for layer in network.layers}
    assert len(network) == 3 + 6 * 9 + 1
    for module, (depth, ones, reduce3, threes, reduce5, fives, proj, output) in TABLE_1.items():
        prefix = f"inception{module}"
        assert layers[f"{prefix}_1x1"].in_channels == depth
        weights = sum(layers[f"{prefix}_{branch}"].weights for branch in
                      ("1x1", "3x3_reduce", "3x3", "5x5_reduce", "5x5", "pool_proj"))
        assert weights == depth * (ones + reduce3 + reduce5 + proj) + 9 * reduce3 * threes + 25 * reduce5 * fives
        assert ones + threes + fives + proj == output
    # the stem (7x7 conv, 1x1 reduce, 3x3 conv) and the 1024 -> 1000 classifier
    stem = 3 * 64 * 49 + 64 * 64 + 64 * 192 * 9
    assert layers["fc"].in_channels == 1024
    modules = sum(depth * (a + b + d + g) + 9 * b * c + 25 * d * e for depth, a, b, c, d, e, g, _ in TABLE_1.values())
    assert sum(layer.weights for layer in network.layers) == stem + modules + 1024 * 1000
    # map sizes: 28x28 for 3a/3b, 14x14 for 4a-4e, 7x7 for 5a/5b
    assert [layers[f"inception{m}_3x3"].in_height for m in ("3a", "3b", "4a", "4e", "5a", "5b")] == \
        [28, 28, 14, 14, 7, 7]


def test_timeline_waits_for_every_concatenated_source():
    """k's forward transfer waits for p and q; p's and q's backward wait for k's error transfer, x's for
    the transfers of both its readers."""
    deps = {name: set(needs) for name, _, _, needs in _task_graph(CONCAT)}
    assert deps["fwd-transfer 3"] == {"fwd 1", "fwd-reduce 1", "fwd 2", "fwd-reduce 2"}
    assert deps["bwd 1"] == deps["bwd 2"] == {"bwd-transfer 3"}
    assert deps["bwd 0"] == {"bwd-transfer 1", "bwd-transfer 2"}


def test_format_round_trip_and_errors():
    network = builtin_network("GoogLeNet")
    assert from_spec(to_spec(network)) == network
    text = network_format.dumps(to_spec(network), "json")
    assert '"concat_from": [' in text
    assert from_spec(network_format.loads(text, "g.json", "json")) == network
    record = CONCAT.to_dict()
    assert record["layers"][3]["concat_from"] == ["p", "q"]
    with pytest.raises(ConfigError, match=r"^f\.yaml: layers\[3\]\.concat_from\[1\]: expected the name of an "
                                          r"earlier layer, got 'z'$"):
        network_format.from_dict({**record, "layers": record["layers"][:3] + [
            {**record["layers"][3], "concat_from": ["p", "z"]}]}, "f.yaml")
    with pytest.raises(ConfigError, match=r"^f\.yaml: layers\[3\]\.concat_from: expected either input_from or "
                                          r"concat_from, got both$"):
        network_format.from_dict({**record, "layers": record["layers"][:3] + [
            {**record["layers"][3], "input_from": "p"}]}, "f.yaml")
    with pytest.raises(ConfigError, match=r"^f\.yaml: layers\[3\]\.concat_from: expected at least 2 item\(s\), "
                                          r"got 1$"):
        network_format.from_dict({**record, "layers": record["layers"][:3] + [
            {**record["layers"][3], "concat_from": ["p"]}]}, "f.yaml")
    with pytest.raises(ConfigError, match=r"^network 'bad': layer 'k': in_channels=9 but the concatenation of p, q "
                                          r"gives 2 \+ 6 = 8$"):
        from_spec(network_format.from_dict({"name": "bad", "layers": record["layers"][:3] + [
            {**record["layers"][3], "in_channels": 9}]}))
    with pytest.raises(ConfigError, match=r"^layer 'c': input map 4x4 but concatenated layer 'b' produces 2x2$"):
        Network("bad", (conv("a", 1, 2, 1, 4), conv("b", 2, 2, 1, 4, pool=2),
                        conv("c", 4, 2, 1, 4, concat_from=("a", "b"))))
