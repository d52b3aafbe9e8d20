"""Named TensorDash connectivity patterns, accepted wherever a pattern is (``pattern="searched-4x4"``).

:data:`NAMED_PATTERNS` maps a name to an ordered tuple of ``(step, offset)``
options (:mod:`trainforge.spec.tensordash`). A name does not fix the PE
shape: :func:`~trainforge.spec.tensordash.resolve_pattern` validates the
pattern against the lanes and depth it is used with. The ``searched-*``
patterns are the best found by ``trainforge tensordash patterns``
(:mod:`trainforge.sim.tensordash.patterns`; method and scores in
``hw/tensordash/README.md``, "Connectivity patterns").
"""
from .tensordash import PAPER_PATTERN, WIDE_PATTERN

__all__ = ["NAMED_PATTERNS"]

#: Name -> pattern. ``paper``: Section III-A (4 lanes, 4 deep); ``wide``: our 16-lane 3-deep default.
NAMED_PATTERNS = {
    "paper": PAPER_PATTERN,
    "wide": WIDE_PATTERN,
}
