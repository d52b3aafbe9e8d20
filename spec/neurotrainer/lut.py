"""What the LUT unit's generator and golden model share: parameters, functions and the breakpoint table.

The table is computed at elaboration by the generator and read by the golden model.

Word rule (the LUTs on a vault controller's read path, ``nt_system``): a 32-bit vault word
is one element, saturated to signed 16 bits before the table and its result sign-extended
to 32 bits; a word of a 16-bit layer is two elements (``spec/neurotrainer/packing.py``), each
half through its own table read, the results packed the same way.

Parameters
----------
See :data:`PARAMS`: ``function``, ``table_bits``, ``frac_bits``, ``out_frac_bits``.
"""
import numpy as np

from ...errors import ParameterError
from ..params import Param, ParamSchema

__all__ = ["FUNCTIONS", "USAGE_DOMAINS", "PARAMS", "LATENCY", "reference", "lut_table"]

#: The functions a LUT can hold: activations, their derivatives, and exp/log.
FUNCTIONS = ("relu", "relu_grad", "tanh", "tanh_grad", "sigmoid", "sigmoid_grad", "exp", "log")

#: The parameters of ``nt_lut``.
PARAMS = ParamSchema((
    Param("function", str, "tanh", "function held in the table", choices=FUNCTIONS),
    Param("table_bits", int, 6, "log2 of the number of table segments", minimum=1, maximum=12),
    Param("frac_bits", int, 12, "fraction bits of the 16-bit input", minimum=0, maximum=15),
    Param("out_frac_bits", int, 12, "fraction bits of the 16-bit output", minimum=0, maximum=15),
))

#: Cycles from the acceptance of an input to its result on ``o_y``, without stalls.
LATENCY = 2

#: Input intervals where softmax and cross-entropy use exp and log: exp(x - max(x)) with
#: x - max(x) <= 0, and log of probabilities (here from 1/16 up).
USAGE_DOMAINS = {"exp": (-np.inf, 0.0), "log": (1.0 / 16, np.inf)}


def reference(function, x):
    """numpy's value of ``function`` at the real numbers ``x`` (NaN where undefined)."""
    x = np.asarray(x, dtype=np.float64)
    if function == "relu":
        return np.maximum(x, 0.0)
    if function == "relu_grad":
        return (x > 0).astype(np.float64)
    if function == "tanh":
        return np.tanh(x)
    if function == "tanh_grad":
        return 1.0 - np.tanh(x) ** 2
    sigmoid = 0.5 * (1.0 + np.tanh(0.5 * x))
    if function == "sigmoid":
        return sigmoid
    if function == "sigmoid_grad":
        return sigmoid * (1.0 - sigmoid)
    if function == "exp":
        return np.exp(x)
    if function == "log":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(x > 0, np.log(np.where(x > 0, x, 1.0)), np.nan)
    raise ParameterError(f"unknown LUT function {function!r}; known: {', '.join(FUNCTIONS)}")


def _to_fixed(values, frac_bits):
    scaled = np.round(np.nan_to_num(values, nan=-np.inf, posinf=np.inf, neginf=-np.inf) * (1 << frac_bits))
    return np.clip(scaled, -(1 << 15), (1 << 15) - 1).astype(np.int64)


def lut_table(function, table_bits, frac_bits, out_frac_bits):
    """The ``2**table_bits + 1`` breakpoints (int64, signed 16-bit values)."""
    gap = 1 << (16 - table_bits)
    points = (np.arange((1 << table_bits) + 1, dtype=np.int64) * gap - (1 << 15)) / (1 << frac_bits)
    with np.errstate(over="ignore"):
        return _to_fixed(reference(function, points), out_frac_bits)
