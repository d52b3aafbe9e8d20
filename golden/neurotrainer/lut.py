"""Golden model of :class:`trainforge.hw.neurotrainer.lut.NTLut`: f(x) and f'(x) by table and linear interpolation.

The PMAG computes the activation function and its derivative, and exp/log for softmax
and cross-entropy, with look-up tables (Section 3.2). The exact rules (bit-exact with
the hardware):

- Input ``x``: 16-bit two's complement, ``frac_bits`` fraction bits; output ``y``: 16-bit
  two's complement, ``out_frac_bits`` fraction bits.
- The table covers the whole input range in ``2**table_bits`` equal segments. With
  ``u = x + 2**15`` (the input read as an offset-binary number, ``0 .. 2**16 - 1``) and
  ``G = 16 - table_bits``: segment ``i = u >> G``, position ``j = u & (2**G - 1)``.
- The table holds ``2**table_bits + 1`` breakpoints ``T[n] = sat16(round(f(x_n) * 2**out_frac_bits))``
  at ``x_n = (n * 2**G - 2**15) / 2**frac_bits``; where ``f`` is undefined (log of x <= 0)
  ``T[n]`` is the most negative output.
- ``y = T[i] + floor((T[i+1] - T[i]) * j / 2**G)``: exact in integers, never outside
  ``[T[i], T[i+1]]``, so no saturation is needed after the table.
"""
import numpy as np

__all__ = ["FUNCTIONS", "USAGE_DOMAINS", "reference", "lut_table", "nt_lut", "interpolation_error"]

#: The functions a LUT can hold: activations, their derivatives, and exp/log.
FUNCTIONS = ("relu", "relu_grad", "tanh", "tanh_grad", "sigmoid", "sigmoid_grad", "exp", "log")

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
    raise ValueError(f"unknown LUT function {function!r}; known: {', '.join(FUNCTIONS)}")


def _to_fixed(values, frac_bits):
    scaled = np.round(np.nan_to_num(values, nan=-np.inf, posinf=np.inf, neginf=-np.inf) * (1 << frac_bits))
    return np.clip(scaled, -(1 << 15), (1 << 15) - 1).astype(np.int64)


def lut_table(function, table_bits, frac_bits, out_frac_bits):
    """The ``2**table_bits + 1`` breakpoints (int64, signed 16-bit values)."""
    gap = 1 << (16 - table_bits)
    points = (np.arange((1 << table_bits) + 1, dtype=np.int64) * gap - (1 << 15)) / (1 << frac_bits)
    with np.errstate(over="ignore"):
        return _to_fixed(reference(function, points), out_frac_bits)


def nt_lut(x, *, function="tanh", table_bits=6, frac_bits=12, out_frac_bits=12, **_):
    """Outputs of the LUT unit for signed 16-bit inputs ``x`` (int64 array, same shape)."""
    x = np.asarray(x, dtype=np.int64)
    table = lut_table(function, table_bits, frac_bits, out_frac_bits)
    shift = 16 - table_bits
    offset = (x & 0xFFFF) ^ 0x8000
    segment, position = offset >> shift, offset & ((1 << shift) - 1)
    low, high = table[segment], table[segment + 1]
    return low + (((high - low) * position) >> shift)


def interpolation_error(function, table_bits, frac_bits=12, out_frac_bits=12):
    """Error of the LUT against numpy over every 16-bit input where ``f`` is representable.

    Returns
    -------
    dict
        ``max_error_lsb``, ``rms_error_lsb`` (in output LSBs, ``2**-out_frac_bits``),
        ``max_error`` (real units), ``inputs`` (how many inputs were compared: those where
        ``f`` is defined and inside the output range), ``worst_x`` (real input of the
        largest error), and ``usage_max_error_lsb``/``usage_rms_error_lsb`` over the inputs
        in :data:`USAGE_DOMAINS` (the whole range for the activations).
    """
    x = np.arange(-(1 << 15), 1 << 15, dtype=np.int64)
    real_x = x / (1 << frac_bits)
    with np.errstate(over="ignore"):
        exact = reference(function, real_x)
    limit = (1 << 15) / (1 << out_frac_bits)
    usable = np.isfinite(exact) & (exact >= -limit) & (exact < limit - 1.0 / (1 << out_frac_bits))
    got = nt_lut(x, function=function, table_bits=table_bits, frac_bits=frac_bits,
                 out_frac_bits=out_frac_bits) / (1 << out_frac_bits)
    low, high = USAGE_DOMAINS.get(function, (-np.inf, np.inf))
    in_domain = (real_x >= low) & (real_x <= high)
    domain_error = np.abs(got - exact)[usable & in_domain]
    error = np.abs(got - exact)[usable]
    worst = int(np.argmax(error))
    return {
        "function": function,
        "table_bits": table_bits,
        "entries": (1 << table_bits) + 1,
        "inputs": int(usable.sum()),
        "max_error": float(error[worst]),
        "max_error_lsb": float(error[worst] * (1 << out_frac_bits)),
        "rms_error_lsb": float(np.sqrt(np.mean(error ** 2)) * (1 << out_frac_bits)),
        "worst_x": float(real_x[usable][worst]),
        "usage_domain": [float(low), float(high)],
        "usage_max_error_lsb": float(domain_error.max() * (1 << out_frac_bits)),
        "usage_rms_error_lsb": float(np.sqrt(np.mean(domain_error ** 2)) * (1 << out_frac_bits)),
    }
