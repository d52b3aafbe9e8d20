"""The placer of chained training steps (``sim/neurotrainer/step_program.py``): what it refuses."""
import pytest

from trainforge.errors import ProgramError
from trainforge.sim.neurotrainer.integration_layers import compile_for_system
from trainforge.sim.neurotrainer.sequenced_training import sequenced_sgd_program
from trainforge.sim.neurotrainer.step_program import StepLayer, place_step
from trainforge.spec.neurotrainer import integration as spec


def _fc(kind, dims, **options):
    return compile_for_system(kind, dims, **options)


def test_a_link_between_different_placements_is_refused():
    """fc_up reads x as [column][sample] with the samples unpadded; fc_ff writes y with the samples padded to whole
    lane groups: with 3 samples on 2 lanes the element orders differ."""
    steps = [StepLayer("ff", _fc("fc_ff", dict(h=4, k=6, n=3), bits=32)),
             StepLayer("up", _fc("fc_up", dict(h=3, k=4, n=3)), {"x": ("ff", "y")})]
    with pytest.raises(ProgramError, match="not placed as the tensor it reads"):
        place_step(steps, (2,))
    steps[0] = StepLayer("ff", _fc("fc_ff", dict(h=4, k=6, n=4), bits=32))
    steps[1] = StepLayer("up", _fc("fc_up", dict(h=3, k=4, n=4)), {"x": ("ff", "y")})
    placed = place_step(steps, (2,))
    assert placed.offsets["up"][-1] - placed.offsets["ff"][-1] == 24      # y after x (6 x 4 words) in ff's frame


def test_a_link_to_a_later_layer_or_a_missing_tensor_is_refused():
    ff = _fc("fc_ff", dict(h=4, k=6, n=4), bits=32)
    with pytest.raises(ProgramError, match="no earlier layer"):
        place_step([StepLayer("a", ff, {"x": ("b", "y")}), StepLayer("b", ff)], (2,))
    with pytest.raises(ProgramError, match="no earlier layer"):
        place_step([StepLayer("a", ff), StepLayer("b", ff, {"x": ("a", "dz")})], (2,))


def test_links_that_put_two_live_tensors_in_one_place_are_refused():
    """With 3 PEs x 1 lane and 2 samples, act_bp's z and dx (2 words per PE apart) tie bp2's W2^T rows (3 words
    per PE) into ff1pe's W1, both loaded by the host before the first run: refused, not silently overwritten."""
    params = spec.PARAMS.resolve(pes=3, lanes=1)
    with pytest.raises(ProgramError, match="while both are live"):
        sequenced_sgd_program(6, 6, 3, 2, **params)
    sequenced_sgd_program(6, 6, 3, 3, **params)


def test_runs_must_cut_the_layers():
    ff = _fc("fc_ff", dict(h=4, k=6, n=4), bits=32)
    with pytest.raises(ProgramError, match="runs"):
        place_step([StepLayer("a", ff), StepLayer("b", ff)], (1,))
    with pytest.raises(ProgramError, match="before run 1"):
        place_step([StepLayer("a", ff, {}, {"x": 1}), StepLayer("b", ff)], (1, 1))
