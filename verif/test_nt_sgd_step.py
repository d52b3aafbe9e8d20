"""The golden fixed-point SGD step of the system (``sim/neurotrainer/system_training.py``, and the step as the
sequencer runs it, ``sim/neurotrainer/sequenced_training.py``) against float64 numpy.

The RTL's step must equal the golden step bit for bit (``tb_nt_system.sgd_step_mlp``,
``sequenced_sgd_step_mlp``); this file
checks that the golden step is the MLP's training step: every layer's output within an error bound
of the float64 step. The float step uses the system's LUT values for f and f' (the table's
plain-Python LUT, ``scenarios.nt_system.lut_reference``, on the exactly rounded ``z1``), so the
bound only has to cover the fixed-point arithmetic, propagated to first order:

- a MAC step floors (truncation) or rounds stochastically: under 1 LSB per accumulated product, so
  a K-term sum is off by at most K LSB;
- an error e in a LUT input moves its output by at most ``max|f'| e`` (sigmoid 1/4, its derivative
  1/10) plus 2 LSB (the interpolation's floors between the two evaluations);
- errors in the operands of a product or a sum add up as ``|a| e_b + e_a |b| + e_a e_b``.
"""
import numpy as np

from trainforge.sim.neurotrainer.integration_layers import run_layers
from trainforge.sim.neurotrainer.sequenced_training import sequenced_sgd_step
from trainforge.sim.neurotrainer.system_training import sgd_step
from trainforge.spec.neurotrainer import integration as spec

from scenarios.nt_system import lut_reference, sequenced_samples, sgd_problem

SLOPES = {"sigmoid": (0.25, 0.1), "tanh": (1.0, 0.77), "relu": (1.0, 0.0)}


def _float_step(params, problem):
    frac = params["frac_bits"]
    lsb = 2.0 ** -frac
    w1, w2, x, t = (np.asarray(problem[name], dtype=np.float64) * lsb for name in ("w1", "w2", "x", "target"))
    z1 = w1 @ x
    z1_words = np.round(z1 / lsb).astype(np.int64)
    a1 = lut_reference(params, "f", z1_words, 32) * lsb
    d1 = lut_reference(params, "df", z1_words, 32) * lsb
    z2 = w2 @ a1
    dz2 = (z2 - t) / 2 ** problem["grad_shift"]
    da1 = w2.T @ dz2
    dz1 = d1 * da1
    return {"ff1": z1, "ff2": z2, "bp2": da1, "act1": dz1, "up2": dz2 @ a1.T, "up1": dz1 @ x.T,
            "a1": a1, "d1": d1, "dz2": dz2, "x": x, "w2": w2}


def _bounds(params, problem, ref):
    lsb = 2.0 ** -params["frac_bits"]
    slope_f, slope_df = SLOPES[params["activation"]]
    inputs, samples = np.asarray(problem["x"]).shape
    hidden, outputs = np.asarray(problem["w1"]).shape[0], np.asarray(problem["w2"]).shape[0]
    e_z1 = np.full((hidden, samples), inputs * lsb)
    e_a1 = slope_f * (e_z1 + lsb / 2) + 2 * lsb
    e_d1 = slope_df * (e_z1 + lsb / 2) + 2 * lsb
    w2, a1, d1, dz2, x = (np.abs(ref[name]) for name in ("w2", "a1", "d1", "dz2", "x"))
    e_z2 = w2 @ e_a1 + hidden * lsb
    e_dz2 = e_z2 / 2 ** problem["grad_shift"] + lsb
    e_da1 = w2.T @ e_dz2 + outputs * lsb
    da1 = np.abs(ref["bp2"])
    e_dz1 = d1 * e_da1 + e_d1 * da1 + e_d1 * e_da1 + lsb
    dz1 = np.abs(ref["act1"])
    return {"ff1": e_z1, "ff2": e_z2, "bp2": e_da1, "act1": e_dz1,
            "up2": dz2 @ e_a1.T + e_dz2 @ a1.T + e_dz2 @ e_a1.T + samples * lsb,
            "up1": e_dz1 @ x.T + samples * lsb}


def _check(params, problem, golden):
    lsb = 2.0 ** -params["frac_bits"]
    ref = _float_step(params, problem)
    bounds = _bounds(params, problem, ref)
    for name, bound in bounds.items():
        error = np.abs(golden["outputs"][name] * lsb - ref[name])
        worst = np.unravel_index(np.argmax(error - bound), error.shape)
        assert np.all(error <= bound), (f"{name}: golden step off the float step by {error[worst]:.4f} at {worst}, "
                                        f"bound {bound[worst]:.4f}")


def _params(**overrides):
    return spec.PARAMS.resolve(**overrides)


def test_golden_step_is_the_float_step_within_the_rounding_bound(seed):
    for overrides in ({}, {"pes": 3, "lanes": 3, "seed": 77}):
        params = _params(**overrides)
        problem = sgd_problem(params, seed)
        golden = sgd_step(problem["w1"], problem["w2"], problem["x"], problem["target"],
                          grad_shift=problem["grad_shift"], lr_shift=problem["lr_shift"], **params)
        _check(params, problem, golden)
        lr = 2.0 ** -problem["lr_shift"]
        for weights, gradient, updated in (("w1", "up1", "w1"), ("w2", "up2", "w2")):
            moved = np.asarray(problem[weights]) - golden[updated]
            assert np.array_equal(moved, golden["outputs"][gradient] >> problem["lr_shift"]), \
                f"{weights}: the update is not W - (dW >> {problem['lr_shift']}) (lr = {lr})"


def test_the_bound_sees_a_wrong_step(seed):
    """The check fails on a golden step that takes f(z1) for f'(z1) in the backward pass."""
    params = _params()
    problem = sgd_problem(params, seed)
    golden = sgd_step(problem["w1"], problem["w2"], problem["x"], problem["target"],
                      grad_shift=problem["grad_shift"], lr_shift=problem["lr_shift"], **params)
    ref = _float_step(params, problem)
    frac = params["frac_bits"]
    wrong = {**golden, "outputs": dict(golden["outputs"])}
    wrong["outputs"]["act1"] = np.round(ref["a1"] * ref["bp2"] * 2 ** frac).astype(np.int64)
    try:
        _check(params, problem, wrong)
    except AssertionError as error:
        assert "act1" in str(error)
    else:
        raise AssertionError("the bound did not see f(z1) used for f'(z1)")


def test_sequenced_golden_step_is_the_float_step_within_the_rounding_bound(seed):
    """The step as the sequencer runs it (``sim/neurotrainer/sequenced_training.py``: chained placements, ``bp2`` in
    the ``fc_up`` form, ``z1`` recomputed into the PE vaults, two iBuffer runs) is the same training step: every
    layer within the float64 bound, ``z1`` recomputed equal to the forward pass's, the update ``W - (dW >> s)``."""
    for overrides in ({}, {"pes": 3, "lanes": 1, "seed": 77}):
        params = _params(**overrides)
        problem = sgd_problem(params, seed, samples=sequenced_samples(params))
        golden = sequenced_sgd_step(problem["w1"], problem["w2"], problem["x"], problem["target"],
                                    grad_shift=problem["grad_shift"], lr_shift=problem["lr_shift"], **params)
        _check(params, problem, golden)
        assert np.array_equal(golden["outputs"]["ff1pe"], golden["outputs"]["ff1"])
        for weights, gradient in (("w1", "up1"), ("w2", "up2")):
            moved = np.asarray(problem[weights]) - golden[weights]
            assert np.array_equal(moved, golden["outputs"][gradient] >> problem["lr_shift"])


def test_sequenced_placement_keeps_live_tensors(seed):
    """Every tensor a later layer of the sequenced step reads is still in its vault when it is read: the golden run
    of the placed program equals the layers run one by one, each from the host's images of its inputs (so no layer
    overwrote another's live input), bit for bit, the LFSR carried in both."""
    params = _params()
    problem = sgd_problem(params, seed, samples=sequenced_samples(params))
    golden = sequenced_sgd_step(problem["w1"], problem["w2"], problem["x"], problem["target"],
                                grad_shift=problem["grad_shift"], lr_shift=problem["lr_shift"], **params)
    program = golden["program"]
    w1, w2, x = (np.asarray(problem[name]) for name in ("w1", "w2", "x"))
    outputs = golden["outputs"]
    dz2 = golden["dz2"]
    given = {"ff1": {"w": w1, "x": x}, "ff2": {"w": w2, "x": outputs["ff1"]}, "bp2": {"dy": w2.T, "x": dz2.T},
             "ff1pe": {"dy": w1, "x": x.T}, "act1": {"z": outputs["ff1pe"], "dx": outputs["bp2"]},
             "up2": {"dy": dz2, "x": outputs["ff1"]}, "up1": {"dy": outputs["act1"], "x": x}}
    one_by_one = run_layers([program.layers[name] for name in program.order],
                            [given[name] for name in program.order], **params)
    for name, result in zip(program.order, one_by_one):
        assert np.array_equal(result["output"], outputs[name]), f"{name}: the chained run read an overwritten input"
