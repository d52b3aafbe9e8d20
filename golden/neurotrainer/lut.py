"""Golden model of :class:`trainforge.hw.neurotrainer.lut.NTLUT`: f(x) and f'(x) by table and linear interpolation.

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

from ...spec.neurotrainer.lut import FUNCTIONS, PARAMS, USAGE_DOMAINS, lut_table, reference

__all__ = ["FUNCTIONS", "USAGE_DOMAINS", "reference", "lut_table", "nt_lut", "nt_lut_words", "interpolation_error"]

_DEFAULTS = PARAMS.defaults


def nt_lut(x, *, function=_DEFAULTS["function"], table_bits=_DEFAULTS["table_bits"],
           frac_bits=_DEFAULTS["frac_bits"], out_frac_bits=_DEFAULTS["out_frac_bits"], **_):
    """Outputs of the LUT unit for signed 16-bit inputs ``x`` (int64 array, same shape)."""
    x = np.asarray(x, dtype=np.int64)
    table = lut_table(function, table_bits, frac_bits, out_frac_bits)
    shift = 16 - table_bits
    offset = (x & 0xFFFF) ^ 0x8000
    segment, position = offset >> shift, offset & ((1 << shift) - 1)
    low, high = table[segment], table[segment + 1]
    return low + (((high - low) * position) >> shift)


def nt_lut_words(words, bits, **params):
    """The LUT applied to 32-bit vault words (int64 array of unsigned 32-bit values, same shape).

    ``bits = 32``: one element per word, saturated to signed 16 bits before the table, the
    result sign-extended to 32 bits. ``bits = 16``: two elements per word, each half through
    the table (``spec/neurotrainer/packing.py``). ``params``: :func:`nt_lut`'s.
    """
    words = np.asarray(words, dtype=np.int64) & 0xFFFFFFFF
    if bits == 32:
        element = np.clip(words - ((words >> 31) << 32), -(1 << 15), (1 << 15) - 1)
        return nt_lut(element, **params) & 0xFFFFFFFF
    low, high = words & 0xFFFF, words >> 16
    return (nt_lut(low, **params) & 0xFFFF) | ((nt_lut(high, **params) & 0xFFFF) << 16)


def interpolation_error(function, table_bits, frac_bits=_DEFAULTS["frac_bits"],
                        out_frac_bits=_DEFAULTS["out_frac_bits"]):
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
