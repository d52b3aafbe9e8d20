"""Value predicates shared by the models' parameter validation.

The models validate their parameters in the constructor and raise their
family's error with the parameter's name, value and allowed range; these
predicates only say whether a value has the right type. ``bool`` is never a
number here (``True`` is not a count of 1), and numpy scalars are.
:func:`check_range` is the one range check of the models: it raises
:class:`~trainforge.errors.ParameterError` in the message format of
:class:`trainforge.spec.params.Param`.
"""
import math
import numbers

from .errors import ParameterError

__all__ = ["is_int", "is_real", "is_positive", "check_range"]


def is_int(value):
    """An integer (Python or numpy), not a ``bool``."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value):
    """A finite real number (Python or numpy), not a ``bool``."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def is_positive(value):
    """A finite real number above zero."""
    return is_real(value) and value > 0


def _bound(value, infinite):
    """A bound as the message shows it: ``inf`` for none, ``1e+06`` for large floats, ``1`` for ``1.0``."""
    if value is None:
        return infinite
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e6 else f"{value:g}"
    return str(value)


def check_range(name, value, minimum=None, maximum=None, kind="integer", exclusive_minimum=False,
                exclusive_maximum=False):
    """Return ``value`` if it lies in the range, else raise :class:`~trainforge.errors.ParameterError`.

    The message is the one of :meth:`trainforge.spec.params.Param.check`:
    ``parameter 'x' = 5 is invalid (out of range); allowed: an integer in 1..64``.

    Parameters
    ----------
    name : str
        Parameter name as the user spells it (may be dotted, ``"chip.cores"``).
    value : object
        The value to check.
    minimum, maximum : int or float, optional
        Inclusive bounds; ``None`` means unbounded on that side.
    kind : str
        ``"integer"`` (:func:`is_int`) or ``"number"`` (:func:`is_real`: finite, not ``bool``).
    exclusive_minimum, exclusive_maximum : bool
        The value must be strictly above ``minimum`` / strictly below ``maximum``.
    """
    if kind not in ("integer", "number"):
        raise ValueError(f"check_range: kind={kind!r}; allowed: integer, number")
    allowed = (f"{'an integer' if kind == 'integer' else 'a number'} in "
               f"{_bound(minimum, '-inf')}..{_bound(maximum, 'inf')}")
    excluded = ([_bound(minimum, "-inf")] if exclusive_minimum else []) + \
        ([_bound(maximum, "inf")] if exclusive_maximum else [])
    if excluded:
        allowed += f" (excluding {' and '.join(excluded)})"
    if not (is_int(value) if kind == "integer" else is_real(value)):
        reason = "not an integer" if kind == "integer" else "not a number"
        raise ParameterError(f"parameter '{name}' = {value!r} is invalid ({reason}); allowed: {allowed}")
    below = minimum is not None and (value <= minimum if exclusive_minimum else value < minimum)
    above = maximum is not None and (value >= maximum if exclusive_maximum else value > maximum)
    if below or above:
        raise ParameterError(f"parameter '{name}' = {value!r} is invalid (out of range); allowed: {allowed}")
    return value
