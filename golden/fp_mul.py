"""Golden model of the ``fp_mul`` block (:class:`~trainforge.hw.fp.multiplier.FPMultiplier`): a product per pair."""
import numpy as np

from ..spec import fp_units as spec
from ..spec.mac import FLOAT_FORMATS
from .fp import fp_mul_exact

__all__ = ["fp_mul"]


def fp_mul(a, b, **params):
    """FP32 bits of the exact products of the operand pairs, in order (:func:`trainforge.golden.fp.fp_mul_exact`).

    Parameters
    ----------
    a, b : array_like of int
        Operand bit patterns of the block's format.
    **params :
        The block's parameters (:data:`trainforge.spec.fp_units.MUL_PARAMS`); ``format`` selects FP16 or BF16.

    Returns
    -------
    numpy.ndarray of uint32
    """
    params = spec.MUL_PARAMS.resolve(**params)
    return fp_mul_exact(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64), FLOAT_FORMATS[params["format"]])
