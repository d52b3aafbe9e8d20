"""The ``nt_system`` scenario table's inputs follow the lowering the compiler picks.

A convolution without stride or padding takes the direct lowering when it fits the PE's buffers
and falls back to the tiled one (im2col plus the tiled matmul) when it does not. The two take
different input tensors for ``conv_bp`` (``dy_padded`` against ``dy``). A table that drew the
direct lowering's inputs for a fallen-back layer failed with ``KeyError: 'dy'`` for some seeds
(CI, stop 14); this pins the case that did.
"""
import numpy as np
import pytest

from trainforge.errors import ProgramError
from trainforge.golden.neurotrainer.integration import joined_writes
from trainforge.hw.registry import BLOCKS
from trainforge.sim.neurotrainer import executor

from scenarios import nt_system as table

#: The conv_bp of the failing seed: 3 PEs, 1 lane; too large for the direct lowering.
FALLEN_BACK = dict(n=1, d=3, h=3, w=3, o=3, hk=3, wk=3)


def test_a_conv_bp_that_falls_back_to_the_tiled_lowering_gets_its_inputs_and_numpys_output():
    params = BLOCKS["nt_system"].resolve(pes=3, lanes=1)
    compiled = table.compile_for_system("conv_bp", FALLEN_BACK, **params)
    assert compiled.copy_jobs, "the case no longer falls back to the tiled lowering: pick another"
    assert set(compiled.inputs) == {"dy", "w"}
    layer, reference = table._integer_layer(params, np.random.default_rng(7), "conv_bp", FALLEN_BACK)
    assert set(layer["inputs"]) == set(compiled.inputs)
    output = executor.execute(compiled, layer["inputs"])["output"]
    np.testing.assert_array_equal(np.asarray(output), np.asarray(reference))


def test_every_hand_written_layer_is_built_at_the_make_test_parameters():
    """The hand-written layers return None when their programs do not fit, and the tables then leave them out
    without a word: a builder whose own assertion broke (``compile_layer`` raises ``AssertionError``) would make the
    hand-written scenario, the sequencer's hand-written program and the power-on test vanish while ``make test``
    stays green. At every ``make test`` parameter set of ``nt_system`` each of them must exist."""
    for overrides in BLOCKS["nt_system"].test_params:
        params = BLOCKS["nt_system"].resolve(**overrides)
        generator = np.random.default_rng(11)
        for build in (table.handwritten_layer, table.select_layer, table.common_vault_layer):
            assert build(params, generator) is not None, f"{build.__name__} gave no layer at {overrides}"
        assert table.power_on_scenario(params, 11) is not None, f"no power-on scenario at {overrides}"
        names = [scenario.name for scenario in table.scenarios(params, 11)]
        assert table.HANDWRITTEN in names, f"no hand-written scenario row at {overrides}"
        sequenced = [program["name"] for program in table.sequenced_programs(params, 11)]
        assert any(name.startswith("hand-written PMAG programs") for name in sequenced), \
            f"no hand-written sequenced program at {overrides}"


def test_the_golden_system_model_meets_the_early_end_mark_scenario():
    """``end_mark_early_scenario``'s expected images (the executor's, with the join worked out in closed form) equal
    the golden system model's (``joined_writes``), at every ``make test`` and ``make regress`` parameter set; and the
    scenario is not the as-compiled run: every PE vault holds END-MARK words."""
    block = BLOCKS["nt_system"]
    for overrides in (*block.test_params, *block.regress_params):
        params = block.resolve(**overrides)
        scenario = table.end_mark_early_scenario(params, 11)
        assert scenario is not None, f"no early END-MARK scenario at {overrides}"
        golden = table.golden(params, scenario).items
        for port, expected in scenario.expected.items():
            assert golden[port] == expected, f"{port} at {overrides}"
        for pe in range(params["pes"]):
            marks = scenario.expected[f"vault {pe + 1}"][0].count(table.END_MARK_32)
            assert marks >= 1, f"PE {pe}'s vault holds no END-MARK at {overrides}"


@pytest.mark.parametrize("words, pad, programs, block, values, aligned", [
    # Legal: each program's data requests are one END-MARK's words.
    ([1, 2, 3, 4], [0, 0, 0, 0], [2, 2], 2, [1, 2, 3, 4], True),
    # A pad request writes 0 and takes no word.
    ([1, 2, 3, 4], [0, 1, 0, 0, 0], [3, 2], 2, [1, 0, 2, 3, 4], True),
    # Sent 1, 2, 3, END-MARK, 4: program 0 takes 1, 2 and its END drops 3; program 1's data request takes the
    # END-MARK (0xFFFF in a 16-bit layer) and its END takes 4.
    ([1, 2, 3, 4], [0, 0, 0], [2, 1], 3, [1, 2, 0xFFFF], False),
])
def test_joined_writes_hand_worked(words, pad, programs, block, values, aligned):
    got, got_aligned = joined_writes(np.array(words), np.array(pad, dtype=bool), programs, block, False)
    assert got.tolist() == values and got_aligned == aligned


@pytest.mark.parametrize("words, programs, block", [
    ([1, 2], [3], 2),          # the third data request waits for a word
    ([1, 2], [2], 3),          # the END request waits (no END-MARK after a partial block)
    ([1, 2, 3, 4], [2], 2),    # words 3, 4 and an END-MARK left for the next layer
])
def test_joined_writes_refuses_what_it_does_not_follow(words, programs, block):
    with pytest.raises(ProgramError):
        joined_writes(np.array(words), np.zeros(sum(programs), dtype=bool), programs, block, True)
