"""The counted energy model of CATERPILLAR: golden event counts per microprogram, their sums over a network's
layers and cores (``sim/caterpillar/arch.py``), the pricing with Table 1, and the counterfactual chain.

Expected values are counted by hand from the microprograms' loops (``hw/caterpillar/core.py``), not from
the code under test. The RTL's counts are checked against the golden counts by ``tb_cp_core.scenario_table``.
"""
import pytest

from trainforge.golden.caterpillar import core
from trainforge.sim.caterpillar import arch
from trainforge.spec.caterpillar import CoreEvent as E

FPU, LOCAL, OFFCORE = 2.63, 3.5, 16.0


def _events(**given):
    events = dict.fromkeys(E, 0)
    events.update({E[name]: count for name, count in given.items()})
    return events


@pytest.mark.parametrize("op,mb,nb,qb,expected", [
    # GEMV forward, 3 x 2 blocks, n_r = 2: 6 steps x 4 PEs MAC and read; 2 output blocks x 2 lines x 1 add;
    # x (3 words of 2) in and into the buffer, read again in the second output block; 2 words out.
    (core.OP_GEMV_FORWARD, 3, 2, 1, _events(MAC=24, LOCAL_READ=24, ADD=4, BUFFER_WRITE=6, BUFFER_READ=6,
                                            OFFCORE_READ=6, OFFCORE_WRITE=4)),
    # GEMV backward, same matrix: e (2 words) in, 3 output blocks (e read again in 2 of them), 3 words out.
    (core.OP_GEMV_BACKWARD, 3, 2, 1, _events(MAC=24, LOCAL_READ=24, ADD=6, BUFFER_WRITE=4, BUFFER_READ=8,
                                             OFFCORE_READ=4, OFFCORE_WRITE=6)),
    # GEMM Mb 2, Kb 1, Qb 3: 6 output blocks of Kb * n_r = 2 rank-1 steps; each step the 2 PEs of one PE
    # column read (W read 3 times, once per qb); a word of B per step in; 2 words per block out.
    (core.OP_GEMM, 2, 1, 3, _events(MAC=48, LOCAL_READ=24, OFFCORE_READ=24, OFFCORE_WRITE=24)),
    # LOAD 2 x 2 blocks: 8 words of 2, each written into a row of 2 PEs.
    (core.OP_LOAD, 2, 2, 1, _events(LOCAL_WRITE=16, OFFCORE_READ=16)),
    # UPDATE Mb 2, Nb 3, batch 2: 4 words of x into the vector buffer, 6 of e into the error buffer; 12 MAC
    # steps x 4 PEs, each reading x_s (12 words) and, in the second row block, e_s (6 words); 6 words per PE
    # read once, written back once, with one subtraction each.
    (core.OP_UPDATE, 2, 3, 2, _events(MAC=48, LOCAL_READ=24, LOCAL_WRITE=24, ADD=24, BUFFER_WRITE=20,
                                      BUFFER_READ=36, OFFCORE_READ=20)),
])
def test_counts_by_hand(op, mb, nb, qb, expected):
    got = core.counts(op, mb, nb, qb, n_r=2)
    assert got == expected, f"{core.CoreOp(op).name}: {got}"


def test_tree_and_bus_reductions_add_alike():
    """A line of n_r partial sums takes n_r - 1 additions on the bus and over the tree (n_r = 3: 2 adds)."""
    for reduction in ("bus", "tree"):
        got = core.counts(core.OP_GEMV_FORWARD, 1, 1, n_r=3, reduction=reduction)
        assert got[E.ADD] == 3 * 2, (reduction, got)


def test_program_counts_sum_the_commands():
    commands = [{"op": core.OP_LOAD, "mb": 2, "nb": 2, "qb": 1}, {"op": core.OP_GEMM, "mb": 2, "nb": 1, "qb": 3}]
    got = core.program_counts(commands, n_r=2)
    assert got[E.OFFCORE_READ] == 16 + 24 and got[E.LOCAL_WRITE] == 16 and got[E.MAC] == 48, got


TWO_CORES = arch.Config("two cores of 2x2", c=1, n_r=2)
NO_ROOM = arch.Config("two cores of 2x2, one word per PE", c=1, n_r=2, local_words=1)


def test_sgd_step_of_one_layer_by_hand():
    """A 4 -> 2 layer on 2 cores of 2x2 PEs, one sample of SGD: each core holds 2 rows (1 x 1 block) and runs
    a forward GEMV (4 MACs, 4 reads, 2 adds, x 1 word in and buffered, 1 word out), a backward GEMV (the same
    with e) and a rank-1 UPDATE (4 MACs, 4 reads, 4 writes, 4 subtractions, x and e in and buffered (4 words),
    x read back once)."""
    per_core = _events(MAC=12, LOCAL_READ=12, LOCAL_WRITE=4, ADD=8, BUFFER_WRITE=8, BUFFER_READ=2,
                       OFFCORE_READ=8, OFFCORE_WRITE=4)
    got = arch.step_events((4, 2), "SGD", TWO_CORES)
    assert got == {event: 2 * count for event, count in per_core.items()}, got
    energy = arch.epoch_energy((4, 2), "SGD", 1, TWO_CORES)
    picojoules = (24 + 16) * FPU + (24 + 8) * LOCAL + (16 + 4) * LOCAL + (16 + 8) * OFFCORE
    assert energy["total_j"] == pytest.approx(picojoules * 1e-12)
    assert energy["gflops_per_w"] == pytest.approx(24 / (picojoules * 1e-12) / 1e9), "24 useful MACs (3 x 4 x 2)"
    # CP runs the same three commands (no fused pass is built): the same events.
    assert arch.step_events((4, 2), "CP", TWO_CORES) == got


def test_staged_weights_when_the_network_does_not_fit():
    """No room: each core LOADs its panel before the forward and the backward pass (4 words written and read
    off-core each) and STOREs it after the update (4 local reads, 4 off-core writes)."""
    fitting = arch.step_events((4, 2), "SGD", TWO_CORES)
    staged = arch.step_events((4, 2), "SGD", NO_ROOM)
    extra = {event: staged[event] - fitting[event] for event in E}
    assert extra == _events(LOCAL_WRITE=2 * 8, OFFCORE_READ=2 * 8, LOCAL_READ=2 * 4, OFFCORE_WRITE=2 * 4), extra


def test_mbgd_step_by_hand_and_off_core_when_it_does_not_fit():
    """A 4 -> 2 layer, minibatch 2, on 2 cores of 2x2: forward GEMM on W^T in row panels of 1 (Mb 1, Kb 2,
    Qb 1: 4 steps, 16 MACs, 8 reads, 4 words of B in, 2 words of C out, in operands of 2), backward GEMM on W in
    row panels of 2 (Mb 1, Kb 1: 2 steps), rank-2 UPDATE (Mb 1, Nb 1)."""
    forward = _events(MAC=16, LOCAL_READ=8, OFFCORE_READ=8, OFFCORE_WRITE=4)
    backward = _events(MAC=8, LOCAL_READ=4, OFFCORE_READ=4, OFFCORE_WRITE=4)
    update = _events(MAC=8, LOCAL_READ=4, LOCAL_WRITE=4, ADD=4, BUFFER_WRITE=8, BUFFER_READ=4, OFFCORE_READ=8)
    expected = {event: 2 * (forward[event] + backward[event] + update[event]) for event in E}
    got = arch.step_events((4, 2), "MBGD", TWO_CORES, 2)
    assert got == expected, got
    # Without room the weights are loaded from off-core for the forward GEMM (each core's 1 x 4 panel of W^T
    # padded to 2 x 4: 2 x 8 words) and for the backward GEMM (2 x 4 words), and stored back after the update
    # (2 x 4 words).
    staged = arch.step_events((4, 2), "MBGD", NO_ROOM, 2)
    assert staged[E.OFFCORE_READ] - got[E.OFFCORE_READ] == 16 + 8, staged
    assert staged[E.OFFCORE_WRITE] - got[E.OFFCORE_WRITE] == 8, staged
    assert arch.epoch_energy((4, 2), "MBGD", 4, NO_ROOM, 2)["offcore_j"] > \
        arch.epoch_energy((4, 2), "MBGD", 4, TWO_CORES, 2)["offcore_j"]


@pytest.mark.parametrize("network,config", [("500-500-500-10", "2x16-cores-4x4"),
                                            ("2500-2000-1500-1000-500-10", "2x16-cores-4x4"),
                                            ("2500-2000-1500-1000-500-10", "2x4-cores-16x16")])
def test_counterfactual_chain_ends_at_the_section34_counts(network, config):
    """With every counterfactual applied, SGD and CP are priced exactly as Section 3.4 counts them; MBGD too
    where the network fits (where it does not, ours reads the weights off-core, Section 3.4's model did not)."""
    widths, array = arch.NETWORKS[network], arch.CONFIGS[config]
    for method, batch in (("SGD", 1), ("CP", 1), ("MBGD", 50)):
        chain = arch.counterfactual_energy(widths, method, 1800, array, batch)["gflops_per_w"]
        paper_counts = arch.section34_energy(widths, method, 1800, array, batch)["gflops_per_w"]
        if method == "MBGD" and not arch.fits(widths, array):
            assert chain < paper_counts, (method, chain, paper_counts)
        else:
            assert chain == pytest.approx(paper_counts, rel=1e-9), (method, chain, paper_counts)
        assert arch.counterfactual_energy(widths, method, 1800, array, batch, upto=0)["gflops_per_w"] == \
            pytest.approx(arch.epoch_energy(widths, method, 1800, array, batch)["gflops_per_w"])


def test_a_rejected_command_costs_no_event():
    """An out-of-range command (``mb`` above ``max_blocks``, an op that is no CoreOp) is not executed: the
    program's counts are those of the commands the core runs."""
    load = {"op": core.OP_LOAD, "mb": 2, "nb": 2, "qb": 1}
    rejected = [{"op": core.OP_LOAD, "mb": 9, "nb": 2, "qb": 1}, {"op": 5, "mb": 1, "nb": 1, "qb": 1}]
    assert core.program_counts([load, *rejected], n_r=2, max_blocks=8) == core.program_counts([load], n_r=2)
