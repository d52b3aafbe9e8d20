"""The golden fixed-point SGD step of the CNN (``sim/neurotrainer/cnn_training.py``) against float64 numpy.

The RTL's step must equal the golden step bit for bit (``tb_nt_system.sequenced_sgd_step_cnn``); this file checks
that the golden step is the CNN's training step, layer by layer: each layer's output against float64 numpy (or
exact integer numpy) of the same operation on the golden step's own inputs, written here from the network's
definition, not from the compiler or the golden model:

- a MAC step floors (truncation) or rounds stochastically: under 1 LSB per accumulated product, so a K-term sum is
  within K LSB (truncation: below the exact value);
- f and f' are the system's LUTs (the table's plain-Python LUT, ``scenarios.nt_system.lut_reference``), max pooling
  takes the first maximum of each 2 x 2 window, and its backward pass puts dY at that position and 0 elsewhere:
  exact;
- the host's moves between runs are checked as data: ``fc``'s input is the pooled values, ``poolbp``'s dY is
  ``fcbp``'s output, ``convup``'s dY is ``act``'s.
"""
import numpy as np

from trainforge.sim.neurotrainer.cnn_training import cnn_sgd_step
from trainforge.sim.neurotrainer.executor import maxpool_decode
from trainforge.spec.neurotrainer import integration as spec

from scenarios.nt_system import cnn_problem, lut_reference


def _correlate(x, kernel):
    """Valid correlation: ``x`` (n, c, h, w), ``kernel`` (o, c, k, k) -> (n, o, h-k+1, w-k+1), float64."""
    k = kernel.shape[2]
    out = x.shape[2] - k + 1
    result = np.zeros((x.shape[0], kernel.shape[0], out, out))
    for a in range(k):
        for b in range(k):
            result += np.einsum("nchw,oc->nohw", x[:, :, a:a + out, b:b + out], kernel[:, :, a, b])
    return result


def _windows(tensor):
    """(n, c, h, w) -> (n, c, h/2, w/2, 4): each 2 x 2 window, row-major."""
    n, c, h, w = tensor.shape
    return tensor.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // 2, w // 2, 4)


def _within(name, got, exact, bound, lsb):
    error = np.abs(np.asarray(got) * lsb - exact)
    assert np.all(error <= bound * lsb), f"{name}: off the float64 step by {error.max() / lsb:.2f} LSB, bound {bound}"


def check_step(params, problem, golden):
    """Every layer of the golden CNN step against float64 / exact numpy on its own inputs (module docstring)."""
    lsb = 2.0 ** -params["frac_bits"]
    x, wc, w, t = (np.asarray(problem[name], dtype=np.int64) for name in ("x", "wc", "w", "target"))
    out = golden["outputs"]
    samples, k = x.shape[0], wc.shape[2]
    z1 = out["conv"]
    _within("conv", z1, _correlate(x * lsb, wc * lsb), k * k, lsb)
    assert np.all(z1 * lsb <= _correlate(x * lsb, wc * lsb) + 1e-12), "conv: truncation rounds up somewhere"
    activation = lut_reference(params, "f", z1, 32)
    values, argmax = maxpool_decode(out["pool"])
    windows = _windows(activation)
    assert np.array_equal(values, windows.max(axis=-1)), "pool: not the maximum of f(z1) in each window"
    assert np.array_equal(argmax, windows.argmax(axis=-1)), "pool: not the first argmax of each window"
    p = values.reshape(samples, -1).T
    _within("fc", out["fc"], (w * lsb) @ (p * lsb), p.shape[0], lsb)
    dz2 = (out["fc"] - t) >> problem["grad_shift"]
    assert np.array_equal(golden["dz2"], dz2), "the loss gradient is not (z2 - t) >> grad_shift"
    _within("fcbp", out["fcbp"], (w * lsb).T @ (dz2 * lsb), w.shape[0], lsb)
    _within("fcup", out["fcup"], (dz2 * lsb) @ (p * lsb).T, samples, lsb)
    dp = out["fcbp"].T.reshape(values.shape)
    routed = np.zeros(windows.shape, dtype=np.int64)
    np.put_along_axis(routed, argmax[..., None], dp[..., None], axis=-1)
    n, c, hp, wp, _ = routed.shape
    routed = routed.reshape(n, c, hp, wp, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, 2 * hp, 2 * wp)
    assert np.array_equal(out["poolbp"], routed), "poolbp: dY not routed to the argmax of its window"
    derivative = lut_reference(params, "df", z1, 32)
    _within("act", golden["dz1"], (derivative * lsb) * (out["poolbp"] * lsb), 1, lsb)
    dz1 = golden["dz1"]
    dwc = np.zeros(wc.shape)
    ho = dz1.shape[2]
    for a in range(k):
        for b in range(k):
            dwc[:, :, a, b] = np.einsum("nohw,nchw->oc", dz1 * lsb, x[:, :, a:a + ho, b:b + ho] * lsb)
    _within("convup", out["convup"], dwc, samples * ho * ho, lsb)


def _params(**overrides):
    return spec.PARAMS.resolve(**overrides)


def test_golden_cnn_step_is_the_float_step_within_the_rounding_bound(seed):
    for overrides in ({}, {"pes": 3, "lanes": 1, "seed": 77}):
        params = _params(**overrides)
        problem = cnn_problem(params, seed)
        golden = cnn_sgd_step(problem["x"], problem["wc"], problem["w"], problem["target"],
                              grad_shift=problem["grad_shift"], lr_shift=problem["lr_shift"], **params)
        check_step(params, problem, golden)
        assert np.array_equal(golden["outputs"]["convpe"], golden["outputs"]["conv"])
        for weights, gradient, updated in (("wc", "convup", "wc"), ("w", "fcup", "w")):
            moved = np.asarray(problem[weights]) - golden[updated]
            assert np.array_equal(moved, golden["outputs"][gradient] >> problem["lr_shift"]), \
                f"{weights}: the update is not W - (dW >> {problem['lr_shift']})"


def test_the_check_sees_a_wrong_route(seed):
    """The check fails on a golden step whose max-pooling backward puts dY at the window's first position."""
    params = _params()
    problem = cnn_problem(params, seed)
    golden = cnn_sgd_step(problem["x"], problem["wc"], problem["w"], problem["target"],
                          grad_shift=problem["grad_shift"], lr_shift=problem["lr_shift"], **params)
    wrong = {**golden, "outputs": dict(golden["outputs"])}
    routed = golden["outputs"]["poolbp"]
    first = np.zeros_like(routed)
    first[:, :, ::2, ::2] = _windows(routed).sum(axis=-1)
    assert not np.array_equal(first, routed), "every argmax is at position 0: the test would not see a wrong route"
    wrong["outputs"]["poolbp"] = first
    try:
        check_step(params, problem, wrong)
    except AssertionError as error:
        assert "poolbp" in str(error)
    else:
        raise AssertionError("the check did not see dY routed to the wrong position")
