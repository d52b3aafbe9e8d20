"""Parameters shared by the TensorDash blocks: lanes, depth and the connectivity pattern."""
from ...golden.tensordash.pattern import PatternError, resolve_pattern
from ...spec.params import Param, ParamSchema
from ...errors import ParameterError

__all__ = ["LANES", "DEPTH", "PATTERN", "PATTERN_PARAMS", "check_pattern", "pattern_of"]

LANES = Param("lanes", int, 4, "multiplier lanes L", minimum=1, maximum=32)
DEPTH = Param("depth", int, 4, "staging buffer depth D (rows of lookahead)", minimum=2, maximum=5)
PATTERN = Param("pattern", str, "default",
                "mux options 'step:offset,...' in priority order, or 'default' (paper's 8 for 4x4)")


def pattern_of(params):
    """The validated pattern, a tuple of ``(step, offset)``, of a resolved parameter dict."""
    try:
        return resolve_pattern(params["pattern"], params["lanes"], params["depth"])
    except PatternError as error:
        raise ParameterError(f"parameter 'pattern' = {params['pattern']!r} is invalid ({error}); allowed: "
                         f"'default' or 'step:offset,...' with distinct options, steps in 0..{params['depth'] - 1}"
                         f" and (0, 0) first") from None


def check_pattern(params):
    """Schema constraint: the pattern is valid for the lanes and depth."""
    pattern_of(params)


PATTERN_PARAMS = ParamSchema((LANES, DEPTH, PATTERN), constraints=(check_pattern,))
