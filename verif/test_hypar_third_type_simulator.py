"""The step simulator on three-type partitions (AccPar's type III): a timeline worked by hand, the traffic split by
task, the batched simulator, and the refusals."""
import numpy as np
import pytest

from trainforge.errors import ConfigError
from trainforge.sim.hypar import third_type
from trainforge.sim.hypar.builtins import builtin_network, fc
from trainforge.sim.hypar.config import ArrayConfig, NodeConfig, TrainingSetup
from trainforge.sim.hypar.network import Network
from trainforge.sim.hypar.nodes import make_node
from trainforge.sim.hypar.partition import hierarchical_partition
from trainforge.sim.hypar.nodes import _per_shape_seconds
from trainforge.sim.hypar.simulator import LayerWork, RooflineNode, _task_graph, simulate_step, simulate_steps

#: a (4 -> 4), b (4 -> 6), c (6 -> 2).
THREE = Network("three", (fc("a", 4, 4), fc("b", 4, 6), fc("c", 6, 2)))
SMALL = TrainingSetup(batch=2, bytes_per_element=1)
#: One MAC per second, DRAM too fast to matter: a phase takes its MAC count in seconds.
ONE_MAC = RooflineNode(NodeConfig(units_per_hmc=1, macs_per_cycle=1.0, frequency_hz=1.0, dram_bytes_per_second=1e15))
#: Two accelerators on a 2 bit/s link: a pair byte takes 1 / (2 x 0.25 B/s) = 2 s.
SLOW = ArrayConfig(levels=1, topology="htree", link_bits_per_second=2.0)


def test_traffic_by_task_by_hand():
    """Batch 2, 1 B, both groups counted; a type 0 (dp), b type 2 (C_out), c type 1 (mp).
    gradient reduce a: 2 x A(W_a) = 2 x 16 = 32; backward reduce b: 2 x A(E_b) = 2 x (2 x 4) = 16;
    forward reduce c: 2 x (2 x 2) = 8; a -> b, 0 -> 2: 0.5 of 2 x A(F_b) = 16 forward; b -> c, 2 -> 1: free."""
    traffic = third_type.traffic_of(THREE, SMALL, [[0, 2, 1]])
    assert traffic.gradient_reduce.tolist() == [[32, 0, 0]]
    assert traffic.backward_reduce.tolist() == [[0, 16, 0]]
    assert traffic.forward_reduce.tolist() == [[0, 0, 8]]
    assert traffic.forward_transfer.tolist() == [[0, 8, 0]]
    assert traffic.backward_transfer.tolist() == [[0, 0, 0]]
    assert traffic.total_bytes == 64 == third_type.traffic_bytes(THREE, SMALL, [[0, 2, 1]])


def test_timeline_by_hand():
    """Per accelerator: a 1 sample x 4 x 4 = 16 MACs per phase (no backward: first layer); b 2 samples x 4 x 3
    (half of C_out) = 24; c 2 x 3 (half of C_in) x 2 = 12. Network at 2 s per pair byte: fwd-transfer b 16 s,
    fwd-reduce c 16 s, bwd-reduce b 32 s, grad-reduce a 64 s.
    fwd a 0-16, fwd-transfer b 16-32, fwd b 32-56, fwd c 56-68, fwd-reduce c 68-84, bwd c 84-96, grad c 96-108,
    bwd b 108-132, grad b 132-156, bwd-reduce b 132-164; a's backward needs E_b reduced: bwd a (0 MACs) at 164,
    grad a 164-180, grad-reduce a 180-244. Step 244 s."""
    step = simulate_step(THREE, SMALL, [[0, 2, 1]], SLOW, node_model=ONE_MAC)
    events = {event.name: (event.resource, event.start, event.end) for event in step.events}
    assert events["bwd-reduce 1"] == ("network", 132, 164)
    assert events["grad 0"] == ("compute", 164, 180)
    assert events["grad-reduce 0"] == ("network", 180, 244)
    assert step.seconds == 244
    assert step.compute_seconds == 16 + 24 + 12 + 12 + 12 + 24 + 24 + 0 + 16
    assert step.network_seconds == 16 + 16 + 32 + 64
    assert step.communication_bytes == 64
    assert "fwd-reduce 1" not in events and "grad-reduce 1" not in events  # type III: neither
    deps = {name: set(needs) for name, _, _, needs in _task_graph(THREE, backward_reduce=True)}
    assert deps["bwd-reduce 1"] == {"bwd 1"}
    assert deps["bwd-transfer 1"] == {"bwd 1", "bwd-reduce 1"}  # E_b goes to a once reduced


def test_energy_counts_the_split_work():
    """The same MACs and DRAM words per array whatever the split (only the communicated words differ)."""
    dp = simulate_step(THREE, SMALL, [[0, 0, 0]], SLOW, node_model=ONE_MAC)
    mixed = simulate_step(THREE, SMALL, [[0, 2, 1]], SLOW, node_model=ONE_MAC)
    words_per_byte, remote_and_local = 0.25, 2
    extra = (mixed.communication_bytes - dp.communication_bytes) * words_per_byte * remote_and_local * 640e-12
    # DRAM bytes per phase of one accelerator, (F_l + W_l + F_{l+1}) x 3 phases (2 for a), x 2 accelerators:
    # dp: a (1x4 + 16 + 1x4) x 2, b (1x4 + 24 + 1x6) x 3, c (1x6 + 12 + 1x2) x 3
    # mixed: a (1x4 + 16 + 1x4) x 2, b (2x4 + 12 + 2x3) x 3, c (2x3 + 6 + 2x2) x 3
    dram_change = ((8 + 12 + 6) * 3 + (6 + 6 + 4) * 3 - (4 + 24 + 6) * 3 - (6 + 12 + 2) * 3) * 2
    expected = extra + dram_change * words_per_byte * 640e-12
    assert mixed.energy_joules - dp.energy_joules == pytest.approx(expected, rel=1e-9)


def test_batched_simulator_equals_the_reference(seed):
    """simulate_steps on random three-type partitions of Lenet-c (H = 3) equals simulate_step bit for bit;
    dp/mp partitions give the same step whether run alone or in a batch with type III."""
    rng = np.random.default_rng(seed)
    network, setup, array = builtin_network("Lenet-c"), TrainingSetup(), ArrayConfig(levels=3)
    types = rng.integers(0, 3, size=(12, 3, len(network)))
    types[0] = hierarchical_partition(network, setup, 3)[1]
    batch = simulate_steps(network, setup, types, array)
    for index, row in enumerate(types):
        step = simulate_step(network, setup, row, array)
        assert batch.seconds[index] == step.seconds, f"seed {seed} partition {index}"
        assert batch.energy_joules[index] == step.energy_joules
        assert batch.communication_bytes[index] == step.communication_bytes
    assert batch.seconds[0] == simulate_step(network, setup, types[0].astype(bool), array).seconds


@pytest.mark.parametrize("name", ["SFC", "AlexNet", "ResNet-18"])
def test_accpar_partitions_simulate(name):
    network, setup = builtin_network(name), TrainingSetup()
    total, types = third_type.hierarchical_partition(network, setup, 4)
    step = simulate_step(network, setup, types)
    assert step.communication_bytes == pytest.approx(total, rel=1e-12)
    assert step.seconds >= step.compute_seconds


def test_refusals():
    with pytest.raises(ConfigError, match=r"^types: expected values 0, 1 or 2, got \[0, 3\]$"):
        simulate_step(THREE, SMALL, [[0, 3, 0]], ArrayConfig(levels=1))


def test_node_models_time_the_output_channel_share():
    """a dp (1 sample, C_in 4, C_out 4), b type III (2 samples, C_in 4, C_out 3 of 6), c mp (2, 3 of 6, 2): the
    node models get each share's shape, b with half its output channels."""
    seen = []

    def record(index, layer, samples, in_channels):
        seen.append((layer.name, samples, in_channels, layer.out_channels))
        return np.zeros(3)
    _per_shape_seconds(LayerWork.of_types(THREE, SMALL, np.array([[0, 2, 1]])), record)
    assert seen == [("a", 1, 4, 4), ("b", 2, 4, 3), ("c", 2, 3, 2)]
    seen.clear()
    _per_shape_seconds(LayerWork.of(THREE, SMALL, np.array([[False, False, True]])), record)
    assert seen == [("a", 1, 4, 4), ("b", 1, 4, 6), ("c", 2, 3, 2)]


def test_batched_equals_reference_with_a_block_node(seed):
    rng = np.random.default_rng(seed)
    network, setup, array = builtin_network("Lenet-c"), TrainingSetup(), ArrayConfig(levels=2)
    node = make_node("caterpillar")
    types = rng.integers(0, 3, size=(4, 2, len(network)))
    types[0, 0, 1] = 2
    batch = simulate_steps(network, setup, types, array, node_model=node)
    for index, row in enumerate(types):
        assert batch.seconds[index] == simulate_step(network, setup, row, array, node_model=node).seconds
