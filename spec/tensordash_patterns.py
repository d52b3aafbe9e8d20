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

__all__ = ["NAMED_PATTERNS", "SEARCHED_4X4", "TWO_LEVEL_4X4", "SEARCHED_16X3"]

#: Best of the search for 4 lanes, 4 deep, 8 options, <= 4 levels (every set of 7 slots, ordered by the search's
#: rule, the 6 best re-ordered): no lookahead; lookasides to lanes +1, +2 and -1 on steps 1 to 3.
SEARCHED_4X4 = ((0, 0), (1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (3, 2), (3, -1))

#: Best of the same search restricted to schedulers of <= 2 levels (136 admissible sets; with 4 lanes the greedy
#: levels are 1, 2 or 4, never 3): two options per step, lanes 0 and 2 (and 1 and 3) reach disjoint halves of the
#: buffer and decide at once. Half the paper's scheduler depth, the paper's mux width; what lets the PE close
#: timing at 100 MHz.
TWO_LEVEL_4X4 = ((0, 0), (0, 1), (1, 1), (1, 2), (2, 2), (2, -1), (3, 2), (3, -1))

#: Best of the search for 16 lanes, 3 deep, 8 options, <= 6 levels (both lookaheads and 5 lookasides at most 4
#: lanes away, steps 1 and 2): three step-1 lookasides come before the lookaheads.
SEARCHED_16X3 = ((0, 0), (1, 3), (1, -4), (1, 4), (1, 0), (2, 0), (2, 3), (2, 1))

#: Name -> pattern. ``paper``: Section III-A (4 lanes, 4 deep); ``wide``: our 16-lane 3-deep default;
#: ``searched-4x4``, ``two-level-4x4`` and ``searched-16x3``: :data:`SEARCHED_4X4`, :data:`TWO_LEVEL_4X4` and
#: :data:`SEARCHED_16X3`.
NAMED_PATTERNS = {
    "paper": PAPER_PATTERN,
    "wide": WIDE_PATTERN,
    "searched-4x4": SEARCHED_4X4,
    "two-level-4x4": TWO_LEVEL_4X4,
    "searched-16x3": SEARCHED_16X3,
}
