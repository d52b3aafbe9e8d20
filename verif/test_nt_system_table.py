"""The ``nt_system`` scenario table's inputs follow the lowering the compiler picks.

A convolution without stride or padding takes the direct lowering when it fits the PE's buffers
and falls back to the tiled one (im2col plus the tiled matmul) when it does not. The two take
different input tensors for ``conv_bp`` (``dy_padded`` against ``dy``). A table that drew the
direct lowering's inputs for a fallen-back layer failed with ``KeyError: 'dy'`` for some seeds
(CI, stop 14); this pins the case that did.
"""
import numpy as np

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
