"""One fixed-point SGD step of a two-layer MLP as the integrated system runs it (golden model of the step).

The step is the system's own layers, compiled for it (``compile_for_system``) and run one after
the other from a reset, the PEs' state (SR-LO's LFSR) carried from layer to layer as in the
hardware; the host does only what the system does not (the loss gradient and the weight
update, in integers). Every value is Q``frac_bits`` (``F``, the system's 32-bit format); the
activation ``f`` and its derivative are the vault controllers' LUTs (input and output Q8 with
the system's defaults, which must equal ``F``).

=====  ==========================================  ==================================
step   what                                        layer (``SGD_LAYERS``)
=====  ==========================================  ==================================
1      ``z1 = W1 x``                               ``fc_ff``, 32-bit, truncated
2      ``z2 = W2 f(z1)``                           ``fc_ff``, x read through f(x)
host   ``dz2 = (z2 - t) >> grad_shift``            (the loss gradient, as the paper allows)
3      ``da1 = W2^T dz2``                          ``fc_bp``, SR-LO
4      ``dz1 = f'(z1) da1``                        ``act_bp``, z read through f'(x), SR-LO
5      ``dW2 = dz2 f(z1)^T``                       ``fc_up``, x read through f(x), SR-LO
6      ``dW1 = dz1 x^T``                           ``fc_up``, SR-LO
host   ``W -= dW >> lr_shift``                     (arithmetic shift: floor)
=====  ==========================================  ==================================

The MSE loss's gradient is ``z2 - t`` (times ``2 / N``, folded into ``grad_shift``).
:func:`sgd_layers` compiles the six layers, :func:`layer_inputs` gives a layer's inputs from
the earlier layers' outputs (the host's moves, shared by the golden run and the RTL testbench),
:func:`sgd_step` runs them on the golden model.
"""
import numpy as np

from ...errors import ProgramError
from ...spec.neurotrainer import integration as spec
from .integration_layers import compile_for_system, run_layers

__all__ = ["SGD_LAYERS", "sgd_layers", "layer_inputs", "loss_gradient", "update", "sgd_step"]

#: The system layers of the step: (name, kind, options).
SGD_LAYERS = (
    ("ff1", "fc_ff", {"bits": 32}),
    ("ff2", "fc_ff", {"bits": 32, "lut": {"x": "f"}}),
    ("bp2", "fc_bp", {"bits": 32, "sr": True}),
    ("act1", "act_bp", {"sr": True}),
    ("up2", "fc_up", {"sr": True, "lut": {"x": "f"}}),
    ("up1", "fc_up", {"sr": True}),
)

_MASK32 = (1 << 32) - 1


def _signed32(values):
    values = np.asarray(values, dtype=np.int64) & _MASK32
    return values - ((values >> 31) << 32)


def sgd_layers(inputs, hidden, outputs, samples, **params):
    """The six compiled layers of the step, by name (``SGD_LAYERS``), for ``W1`` (hidden x inputs) and ``W2``.

    Raises
    ------
    ProgramError
        The LUTs' formats differ from the 32-bit format (``lut_frac_bits``, ``lut_out_frac_bits`` and
        ``frac_bits`` must be equal: the step passes f(z) and f'(z) on as Q``frac_bits``).
    """
    system = spec.PARAMS.resolve(**{key: value for key, value in params.items() if key in spec.PARAMS.names})
    if not system["frac_bits"] == system["lut_frac_bits"] == system["lut_out_frac_bits"]:
        raise ProgramError(f"the SGD step needs frac_bits = lut_frac_bits = lut_out_frac_bits; got "
                           f"{system['frac_bits']}, {system['lut_frac_bits']}, {system['lut_out_frac_bits']}")
    dims = {"ff1": dict(h=hidden, k=inputs, n=samples), "ff2": dict(h=outputs, k=hidden, n=samples),
            "bp2": dict(h=outputs, k=hidden, n=samples), "act1": dict(h=hidden, n=samples),
            "up2": dict(h=outputs, k=hidden, n=samples), "up1": dict(h=hidden, k=inputs, n=samples)}
    return {name: compile_for_system(kind, dims[name], **options, **params) for name, kind, options in SGD_LAYERS}


def loss_gradient(z2, target, grad_shift):
    """The host's ``dz2 = (z2 - t) >> grad_shift`` (arithmetic shift), as int64."""
    return (np.asarray(z2, dtype=np.int64) - np.asarray(target, dtype=np.int64)) >> grad_shift


def update(weights, gradient, lr_shift):
    """The host's ``W - (dW >> lr_shift)``, wrapped to signed 32 bits."""
    return _signed32(np.asarray(weights, dtype=np.int64) - (np.asarray(gradient, dtype=np.int64) >> lr_shift))


def layer_inputs(name, outputs, w1, w2, x, target, grad_shift):
    """The input tensors of layer ``name`` from the outputs of the layers before it (``outputs`` by name)."""
    if name == "ff1":
        return {"w": w1, "x": x}
    if name == "ff2":
        return {"w": w2, "x": outputs["ff1"]}
    dz2 = loss_gradient(outputs["ff2"], target, grad_shift)
    if name == "bp2":
        return {"w": w2, "dy": dz2}
    if name == "act1":
        return {"z": outputs["ff1"], "dx": outputs["bp2"]}
    if name == "up2":
        return {"dy": dz2, "x": outputs["ff1"]}
    if name == "up1":
        return {"dy": outputs["act1"], "x": x}
    raise KeyError(name)


def sgd_step(w1, w2, x, target, *, grad_shift=0, lr_shift=4, **params):
    """One SGD step on the golden model of the system.

    Parameters
    ----------
    w1, w2 : array_like of int
        Q``F`` weights, ``hidden x inputs`` and ``outputs x hidden``.
    x, target : array_like of int
        Q``F`` inputs (``inputs x samples``) and targets (``outputs x samples``).
    grad_shift, lr_shift : int
        The loss gradient's and the learning rate's right shifts.
    **params
        The NTSystem parameters.

    Returns
    -------
    dict
        ``outputs`` (every layer's output by name), ``dz2``, ``w1``, ``w2`` (the updated weights).
    """
    w1, w2, x = (np.asarray(a, dtype=np.int64) for a in (w1, w2, x))
    layers = sgd_layers(w1.shape[1], w1.shape[0], w2.shape[0], x.shape[1], **params)
    compiled, inputs, outputs = [], [], {}
    for name, _, _ in SGD_LAYERS:
        compiled.append(layers[name])
        inputs.append(layer_inputs(name, outputs, w1, w2, x, target, grad_shift))
        outputs[name] = run_layers(compiled, inputs, **params)[-1]["output"]
    return {"outputs": outputs, "dz2": loss_gradient(outputs["ff2"], target, grad_shift),
            "w1": update(w1, outputs["up1"], lr_shift), "w2": update(w2, outputs["up2"], lr_shift)}
