"""Value predicates shared by the models' parameter validation.

The models validate their parameters in the constructor and raise their
family's error with the parameter's name, value and allowed range; these
predicates only say whether a value has the right type. ``bool`` is never a
number here (``True`` is not a count of 1), and numpy scalars are.
"""
import math
import numbers

__all__ = ["is_int", "is_real", "is_positive"]


def is_int(value):
    """An integer (Python or numpy), not a ``bool``."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value):
    """A finite real number (Python or numpy), not a ``bool``."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def is_positive(value):
    """A finite real number above zero."""
    return is_real(value) and value > 0
