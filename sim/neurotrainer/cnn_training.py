"""One fixed-point SGD step of a small CNN on the integrated system, its layers run by the iBuffer / layer sequencer.

The network: a 1-channel ``h x h`` image, one ``k x k`` convolution with ``o`` output channels,
f(x) (the vault controllers' LUT), 2 x 2 max pooling, one fully connected layer to ``classes``
outputs, MSE loss. All 32-bit, Q``F`` (``frac_bits`` = ``lut_frac_bits`` = ``lut_out_frac_bits``),
SR-LO in the backward pass and the weight gradients. ``samples`` = ``lanes x pes`` (one window
group per PE: the ``act_bp`` view below needs it).

======  =========  ============================================  ===============================================
run     layer      what                                          how
======  =========  ============================================  ===============================================
1       ``conv``   ``z1 = conv(x, Wc)`` (PE vaults)              ``conv_ff``, 32-bit, truncated
1       ``pool``   ``p = maxpool(f(z1))``, argmax kept           ``maxpool``, x = ``conv``'s output through f(x)
host               ``p``'s values into the common vault          (move: PE vaults -> common, argmax bits dropped)
2       ``fc``     ``z2 = W p``                                  ``fc_ff``, 32-bit, truncated
host               ``dz2 = (z2 - t) >> grad_shift``              (the loss gradient)
3       ``fcbp``   ``dp = W^T dz2`` (common vault)               ``fc_bp``, SR-LO
3       ``fcup``   ``dW = dz2 p^T``                              ``fc_up``, x = ``fc``'s x, SR-LO
host               ``dp`` into the PE vaults, pooled layout      (move: common -> PE vaults)
4       ``poolbp`` ``da1`` = ``dp`` routed to the argmax         ``maxpool_bp``, pooled = ``pool``'s output
4       ``convpe`` ``z1`` again, where ``act`` reads it          ``conv_ff`` (host writes ``x`` again), truncated
4       ``act``    ``dz1 = f'(z1) da1``                          ``act_bp``: z = ``convpe``'s, dx = ``poolbp``'s
host               ``dz1`` into the common vault                 (move: PE vaults -> common; x again, conv_up's layout)
5       ``convup`` ``dWc = corr(x, dz1)``                        ``conv_up``, SR-LO
host               ``W -= dW >> lr_shift``, ``Wc -= dWc >> lr_shift``
======  =========  ============================================  ===============================================

Where a layer reads what an earlier layer wrote in the same placement, the sequencer runs them
back to back (:func:`~trainforge.sim.neurotrainer.step_program.place_step` links): ``pool``
reads ``conv``'s output, ``poolbp`` reads ``pool``'s words, ``fcup`` shares ``fc``'s input and
``act`` reads ``convpe``'s and ``poolbp``'s outputs as an ``(pes * o * ho * wo, lanes)`` matrix
(the same vault slots). The system has no vault-to-vault copy (the paper's data preparation,
not built), so the three moves between the PE vaults and the common vault are the host's; each
ends a run. ``convpe`` recomputes ``z1`` beside ``poolbp``'s output because ``act_bp`` reads ``z``
and ``dx`` from one program at a fixed distance; it is a truncated product of the same
operands, equal to ``conv``'s bit for bit (:func:`cnn_sgd_step` asserts it).
"""
import numpy as np

from ...errors import ProgramError
from ...spec.neurotrainer import integration as spec
from .executor import maxpool_decode
from .integration_layers import compile_for_system
from .step_program import StepLayer, golden_run, place_step
from .system_training import loss_gradient, update

__all__ = ["CNN_RUNS", "cnn_sgd_program", "cnn_host_tensors", "cnn_sgd_step", "act_view"]

#: Layers per iBuffer run (the host between runs: a move, the loss gradient, a move, a move).
CNN_RUNS = (2, 1, 2, 3, 1)

POOL = 2


def _geometry(image, kernel, channels, classes, samples):
    out = image - kernel + 1
    if out % POOL:
        raise ProgramError(f"the convolution's output {out} x {out} does not tile into {POOL} x {POOL} windows")
    pooled = out // POOL
    return {"n": samples, "h": image, "k": kernel, "o": channels, "ho": out, "hp": pooled,
            "features": channels * pooled * pooled, "classes": classes}


def act_view(pes, lanes, positions):
    """``act_bp``'s ``(pes * positions, lanes)`` matrix element -> the ``(samples, positions)`` activation's element.

    Row ``p * positions + j``, lane ``l`` is sample ``p * lanes + l``, position ``j``: in a PE vault both are
    ``[position][lane]`` (``maxpool`` / ``conv_ff``'s layout with one window group per PE).
    """
    def view(index):
        row, lane = index // lanes, index % lanes
        pe, position = row // positions, row % positions
        return (pe * lanes + lane) * positions + position
    return view


def cnn_sgd_program(image, kernel, channels, classes, **params):
    """The step's layers compiled for the system and placed (:class:`~.step_program.PlacedStep`).

    Raises
    ------
    ProgramError
        The LUTs' formats differ from the 32-bit format, the convolution's output does not tile into pooling
        windows, or the placements do not fit (as ``place_step`` finds them).
    """
    system = spec.PARAMS.resolve(**{key: value for key, value in params.items() if key in spec.PARAMS.names})
    if not system["frac_bits"] == system["lut_frac_bits"] == system["lut_out_frac_bits"]:
        raise ProgramError(f"the CNN step needs frac_bits = lut_frac_bits = lut_out_frac_bits; got "
                           f"{system['frac_bits']}, {system['lut_frac_bits']}, {system['lut_out_frac_bits']}")
    pes, lanes = system["pes"], system["lanes"]
    g = _geometry(image, kernel, channels, classes, pes * lanes)
    conv = dict(n=g["n"], d=1, h=image, w=image, o=channels, hk=kernel, wk=kernel)
    pool = dict(n=g["n"], c=channels, h=g["ho"], w=g["ho"], r=POOL)
    fc = dict(h=classes, k=g["features"], n=g["n"])
    positions = channels * g["ho"] * g["ho"]
    view = act_view(pes, lanes, positions)

    def layer(kind, dims, **options):
        return compile_for_system(kind, dims, **options, **params)

    steps = [
        StepLayer("conv", layer("conv_ff", conv, bits=32)),
        StepLayer("pool", layer("maxpool", pool, lut={"x": "f"}), {"x": ("conv", "y")}),
        StepLayer("fc", layer("fc_ff", fc, bits=32), {}, {"x": 1}),
        StepLayer("fcbp", layer("fc_bp", fc, bits=32, sr=True), {}, {"dy": 2}),
        StepLayer("fcup", layer("fc_up", fc, sr=True), {"x": ("fc", "x")}, {"dy": 2}),
        StepLayer("poolbp", layer("maxpool_bp", pool), {"pooled": ("pool", "y")}, {"dy": 3}),
        StepLayer("convpe", layer("conv_ff", conv, bits=32), {"w": ("conv", "w")}, {"x": 3}),
        StepLayer("act", layer("act_bp", dict(h=pes * positions, n=lanes), sr=True),
                  {"z": ("convpe", "y", view), "dx": ("poolbp", "dx", view)}),
        StepLayer("convup", layer("conv_up", conv, sr=True), {}, {"dy": 4, "x": 4}),
    ]
    return place_step(steps, CNN_RUNS, **params)


def _act_tensor(matrix, samples, shape):
    """``act``'s ``(pes * positions, lanes)`` output as the ``(samples, o, ho, wo)`` activation gradient."""
    matrix = np.asarray(matrix)
    lanes = matrix.shape[1]
    positions = int(np.prod(shape))
    by_pe = matrix.reshape(-1, positions, lanes)                 # [pe][position][lane]
    return by_pe.transpose(0, 2, 1).reshape(samples, *shape)


def cnn_host_tensors(x, wc, w, target, grad_shift):
    """The host's inputs before each run (``golden_run``'s ``host_tensors``): the image, the kernel and the
    weights, then the moves and the loss gradient from the outputs read so far."""
    x, wc, w = (np.asarray(a, dtype=np.int64) for a in (x, wc, w))
    samples, out = x.shape[0], x.shape[2] - wc.shape[2] + 1
    activation = (wc.shape[0], out, out)

    def tensors(run, outputs):
        if run == 0:
            return {("conv", "x"): x, ("conv", "w"): wc, ("fc", "w"): w, ("fcbp", "w"): w}
        if run == 1:
            values, _ = maxpool_decode(outputs["pool"])
            return {("fc", "x"): values.reshape(samples, -1).T}
        if run == 2:
            dz2 = loss_gradient(outputs["fc"], target, grad_shift)
            return {("fcbp", "dy"): dz2, ("fcup", "dy"): dz2}
        if run == 3:
            pooled_shape = outputs["pool"].shape
            return {("poolbp", "dy"): outputs["fcbp"].T.reshape(pooled_shape), ("convpe", "x"): x}
        if run == 4:
            return {("convup", "dy"): _act_tensor(outputs["act"], samples, activation),
                    ("convup", "x"): x}
        raise KeyError(run)
    return tensors


def cnn_sgd_step(x, wc, w, target, *, grad_shift=0, lr_shift=3, **params):
    """One SGD step of the CNN on the golden model of the system, run as the sequencer runs it.

    Parameters
    ----------
    x : array_like of int
        Q``F`` images, ``(lanes * pes, 1, h, h)``.
    wc : array_like of int
        Q``F`` kernels ``(o, 1, k, k)``.
    w, target : array_like of int
        Q``F`` weights ``(classes, o * (h - k + 1)**2 / 4)`` and targets ``(classes, samples)``.

    Returns
    -------
    dict
        ``outputs`` (every layer's output by name), ``dz2``, ``da1`` (``poolbp``'s output), ``dz1`` (the
        activation gradient as ``(samples, o, ho, wo)``), ``wc``, ``w`` (the updated weights), ``program``,
        ``finals`` (every vault after each run).
    """
    x, wc, w = (np.asarray(a, dtype=np.int64) for a in (x, wc, w))
    program = cnn_sgd_program(x.shape[2], wc.shape[2], wc.shape[0], w.shape[0], **params)
    run = golden_run(program, cnn_host_tensors(x, wc, w, target, grad_shift), **params)
    outputs = run["outputs"]
    assert np.array_equal(outputs["convpe"], outputs["conv"]), "z1 recomputed beside poolbp differs from conv's"
    return {"outputs": outputs, "dz2": loss_gradient(outputs["fc"], target, grad_shift),
            "dz1": _act_tensor(outputs["act"], x.shape[0], outputs["conv"].shape[1:]),
            "wc": update(wc, outputs["convup"], lr_shift), "w": update(w, outputs["fcup"], lr_shift),
            "program": program, "finals": run["finals"]}
