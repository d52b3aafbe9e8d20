"""Sparse connectivity patterns of the TensorDash lane multiplexers, and the scheduler's levels.

A pattern is an ordered tuple of options ``(step, offset)``, highest priority
first: lane ``i`` may take the pair at staging-buffer row ``step`` and lane
``(i + offset) mod lanes`` (lanes form a ring). Every lane has the same
pattern, shifted to its own position (paper, Section III-A, Fig. 5).

Rules a valid pattern obeys (:func:`validate_pattern`):

- every option is a pair of integers with ``0 <= step < depth``;
- no two options name the same buffer slot (offsets compare modulo ``lanes``);
- the first option is ``(0, 0)``, the dense schedule. Because only lane ``i``
  can reach ``(0, i)`` first, the head row is always fully drained, so every
  cycle advances the buffer by at least one row and TensorDash is never slower
  than the dense PE.

The text form, used as a block parameter, is ``"step:offset,step:offset,..."``
or ``"default"`` for :func:`default_pattern`.
"""
__all__ = ["PatternError", "PAPER_PATTERN", "SHALLOW_PATTERNS", "WIDE_PATTERN", "default_pattern", "parse_pattern", "format_pattern", "validate_pattern",
           "resolve_pattern", "option_slots", "lane_levels", "select_bits"]

#: The paper's 8 options for a 4-deep, 4-lane PE, in priority order (Section III-A).
PAPER_PATTERN = ((0, 0), (1, 0), (2, 0), (3, 0), (1, 1), (1, -1), (2, 2), (3, 3))

#: Our 4 options for shallow buffers (the paper uses 4 options for 2 and 3 deep, Section IV-D).
SHALLOW_PATTERNS = {
    2: ((0, 0), (1, 0), (1, 1), (1, -1)),       # Fig. 3c: lookahead 1, lookaside +-1
    3: ((0, 0), (1, 0), (2, 0), (1, 1)),        # lookahead 1 and 2, one lookaside
}

#: Our 8 options for the 16-lane, 3-deep PE (Fig. 14): lanes 5 apart never overlap, so 6 levels.
WIDE_PATTERN = ((0, 0), (1, 0), (2, 0), (1, 1), (1, -1), (2, 2), (2, -2), (1, 3))


class PatternError(ValueError):
    """An invalid connectivity pattern; the message says which option breaks which rule."""


def default_pattern(lanes, depth):
    """The default pattern for ``lanes`` x ``depth``.

    4 deep: the paper's 8 options. 5 deep: those plus ``(4, 0)``. 2 and 3
    deep: :data:`SHALLOW_PATTERNS`, except 16 lanes 3 deep, which uses
    :data:`WIDE_PATTERN`. Options that coincide modulo ``lanes`` (narrow PEs)
    are dropped, keeping the first.
    """
    if depth == 3 and lanes == 16:
        options = WIDE_PATTERN
    elif depth in SHALLOW_PATTERNS:
        options = SHALLOW_PATTERNS[depth]
    elif depth == 4:
        options = PAPER_PATTERN
    elif depth == 5:
        options = PAPER_PATTERN + ((4, 0),)
    else:
        options = tuple((step, 0) for step in range(depth))
    kept, seen = [], set()
    for step, offset in options:
        if (step, offset % lanes) not in seen:
            seen.add((step, offset % lanes))
            kept.append((step, offset))
    return tuple(kept)


def parse_pattern(text):
    """``"0:0,1:0,1:1"`` -> ``((0, 0), (1, 0), (1, 1))``; raises :class:`PatternError`."""
    options = []
    for item in text.split(","):
        step, sep, offset = item.strip().partition(":")
        try:
            if not sep:
                raise ValueError
            options.append((int(step), int(offset)))
        except ValueError:
            raise PatternError(f"pattern option {item.strip()!r} is not of the form step:offset") from None
    return tuple(options)


def format_pattern(pattern):
    return ",".join(f"{step}:{offset}" for step, offset in pattern)


def validate_pattern(pattern, lanes, depth):
    """Return ``pattern`` as a tuple of ``(step, offset)`` if valid, else raise :class:`PatternError`."""
    pattern = tuple(tuple(option) for option in pattern)
    if not pattern:
        raise PatternError("the pattern has no options")
    seen = {}
    for index, option in enumerate(pattern):
        if len(option) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in option):
            raise PatternError(f"option {index} {option!r} is not a (step, offset) pair of integers")
        step, offset = option
        if not 0 <= step < depth:
            raise PatternError(f"option {index} {option}: step {step} is outside 0..{depth - 1} (depth {depth})")
        slot = (step, offset % lanes)
        if slot in seen:
            raise PatternError(f"option {index} {option} repeats option {seen[slot]} {pattern[seen[slot]]}"
                               f" (offsets compare modulo {lanes} lanes)")
        seen[slot] = index
    if (0, 0) not in seen:
        raise PatternError("the pattern has no (0, 0) option (the dense schedule)")
    if pattern[0][0] != 0 or pattern[0][1] % lanes != 0:
        raise PatternError(f"the first option is {pattern[0]}, but the dense schedule (0, 0) must come first")
    return pattern


def resolve_pattern(pattern, lanes, depth):
    """A pattern given as ``"default"``, text or a sequence, validated."""
    if isinstance(pattern, str):
        pattern = default_pattern(lanes, depth) if pattern == "default" else parse_pattern(pattern)
    return validate_pattern(pattern, lanes, depth)


def select_bits(pattern):
    """Width of one lane's select signal MS_i."""
    return max(1, (len(pattern) - 1).bit_length())


def option_slots(pattern, lanes, lane):
    """The buffer slots ``(row, lane)`` that ``lane`` can read, in priority order."""
    return tuple((step, (lane + offset) % lanes) for step, offset in pattern)


def lane_levels(pattern, lanes):
    """The scheduler's levels: lists of lanes whose options never overlap.

    Greedy in lane order: each lane joins the first level holding no lane
    with a common slot. Lanes of one level decide at once; the levels decide
    one after the other, each seeing what the earlier ones left.
    """
    slots = [set(option_slots(pattern, lanes, lane)) for lane in range(lanes)]
    levels = []
    for lane in range(lanes):
        for level in levels:
            if all(not (slots[lane] & slots[other]) for other in level):
                level.append(lane)
                break
        else:
            levels.append([lane])
    return [tuple(level) for level in levels]
