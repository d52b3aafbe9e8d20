"""Golden model of the ``fp32_add`` block (:class:`trainforge.hw.fp.adder.FP32Adder`): one sum per operand pair."""
import numpy as np

from ..spec import fp_units as spec
from .fp import fp32_add as add

__all__ = ["fp32_add"]


def fp32_add(a, b, **params):
    """FP32 bits of the sums of the operand pairs, in order (:func:`trainforge.golden.fp.fp32_add`).

    Parameters
    ----------
    a, b : array_like of int
        FP32 bit patterns.
    **params :
        The block's parameters (:data:`trainforge.spec.fp_units.ADD_PARAMS`); the register stages do not
        change the sums.

    Returns
    -------
    numpy.ndarray of uint32
    """
    spec.ADD_PARAMS.resolve(**params)
    return add(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))
