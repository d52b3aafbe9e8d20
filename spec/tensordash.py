"""What the TensorDash generators (``hw/tensordash``) and golden models (``golden/tensordash``) share.

Connectivity patterns of the lane multiplexers, and the scheduler's levels:
a pattern is an ordered tuple of options ``(step, offset)``, highest priority
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
Invalid patterns raise :class:`~trainforge.errors.ParameterError`.

Parameters
----------
See :data:`SCHEDULER_PARAMS`, :data:`PE_PARAMS`, :data:`TILE_PARAMS` and
:data:`TRANSPOSER_PARAMS`.
"""
from amaranth.lib import data

from ..errors import ParameterError
from . import mac as mac_spec, stream_stage
from .params import Param, ParamSchema

__all__ = ["PAPER_PATTERN", "SHALLOW_PATTERNS", "WIDE_PATTERN", "default_pattern", "parse_pattern",
           "format_pattern", "validate_pattern", "resolve_pattern", "option_slots", "lane_levels", "select_bits",
           "LANES", "DEPTH", "PATTERN", "WIDTH", "ACC_WIDTH", "SIGNED", "MAC", "MAC_NAMES", "pattern_of",
           "check_pattern", "SCHEDULER_PARAMS", "PE_PARAMS", "TILE_PARAMS", "TRANSPOSER_PARAMS", "FILL_LATENCY", "GROUP_REGISTERS", "latency", "rotates_window",
           "result_cycle",
           "SCHEDULER_LATENCY", "candidate_layout", "schedule_layout", "operand_shape",
           "result_shape", "pe_row_layout", "tile_row_layout", "tile_result_layout", "group_layout",
           "block_layout"]

#: The paper's 8 options for a 4-deep, 4-lane PE, in priority order (Section III-A).
PAPER_PATTERN = ((0, 0), (1, 0), (2, 0), (3, 0), (1, 1), (1, -1), (2, 2), (3, 3))

#: Our 4 options for shallow buffers (the paper uses 4 options for 2 and 3 deep, Section IV-D).
SHALLOW_PATTERNS = {
    2: ((0, 0), (1, 0), (1, 1), (1, -1)),       # Fig. 3c: lookahead 1, lookaside +-1
    3: ((0, 0), (1, 0), (2, 0), (1, 1)),        # lookahead 1 and 2, one lookaside
}

#: Our 8 options for the 16-lane, 3-deep PE (Fig. 14): lanes 5 apart never overlap, so 6 levels.
WIDE_PATTERN = ((0, 0), (1, 0), (2, 0), (1, 1), (1, -1), (2, 2), (2, -2), (1, 3))


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
    """``"0:0,1:0,1:1"`` -> ``((0, 0), (1, 0), (1, 1))``; raises :class:`ParameterError`."""
    options = []
    for item in text.split(","):
        step, sep, offset = item.strip().partition(":")
        try:
            if not sep:
                raise ValueError
            options.append((int(step), int(offset)))
        except ValueError:
            raise ParameterError(f"pattern option {item.strip()!r} is not of the form step:offset") from None
    return tuple(options)


def format_pattern(pattern):
    return ",".join(f"{step}:{offset}" for step, offset in pattern)


def validate_pattern(pattern, lanes, depth):
    """Return ``pattern`` as a tuple of ``(step, offset)`` if valid, else raise :class:`ParameterError`."""
    pattern = tuple(tuple(option) for option in pattern)
    if not pattern:
        raise ParameterError("the pattern has no options")
    seen = {}
    for index, option in enumerate(pattern):
        if len(option) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in option):
            raise ParameterError(f"option {index} {option!r} is not a (step, offset) pair of integers")
        step, offset = option
        if not 0 <= step < depth:
            raise ParameterError(f"option {index} {option}: step {step} is outside 0..{depth - 1} (depth {depth})")
        slot = (step, offset % lanes)
        if slot in seen:
            raise ParameterError(f"option {index} {option} repeats option {seen[slot]} {pattern[seen[slot]]}"
                               f" (offsets compare modulo {lanes} lanes)")
        seen[slot] = index
    if (0, 0) not in seen:
        raise ParameterError("the pattern has no (0, 0) option (the dense schedule)")
    if pattern[0][0] != 0 or pattern[0][1] % lanes != 0:
        raise ParameterError(f"the first option is {pattern[0]}, but the dense schedule (0, 0) must come first")
    return pattern


def resolve_pattern(pattern, lanes, depth):
    """A pattern given as ``"default"``, a name of :data:`~trainforge.spec.tensordash_patterns.NAMED_PATTERNS`,
    text or a sequence, validated."""
    from .tensordash_patterns import NAMED_PATTERNS
    if isinstance(pattern, str):
        if pattern == "default":
            pattern = default_pattern(lanes, depth)
        elif pattern in NAMED_PATTERNS:
            pattern = NAMED_PATTERNS[pattern]
        else:
            pattern = parse_pattern(pattern)
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


# Parameters -----------------------------------------------------------------------------------------------------

#: Names of the MAC units behind the sparse interconnect (:mod:`trainforge.spec.mac`).
MAC_NAMES = mac_spec.MAC_NAMES

LANES = Param("lanes", int, 4, "multiplier lanes L", minimum=1, maximum=32)
DEPTH = Param("depth", int, 4, "staging buffer depth D (rows of lookahead)", minimum=2, maximum=5)
PATTERN = Param("pattern", str, "default",
                "mux options 'step:offset,...' in priority order, 'default' (paper's 8 for 4x4), or a name of"
                " spec.tensordash_patterns.NAMED_PATTERNS (e.g. 'paper', 'searched-4x4')")
WIDTH = Param("width", int, 8, "operand width in bits", minimum=2, maximum=32)
ACC_WIDTH = Param("acc_width", int, 32, "accumulator width in bits (wraps around)", minimum=2, maximum=64)
SIGNED = Param("signed", bool, True, "two's complement operands and accumulator")
MAC = mac_spec.MAC
PARTIAL_SUMS = mac_spec.PARTIAL_SUMS


def pattern_of(params):
    """The validated pattern, a tuple of ``(step, offset)``, of a resolved parameter dict."""
    try:
        return resolve_pattern(params["pattern"], params["lanes"], params["depth"])
    except ParameterError as error:
        raise ParameterError(f"parameter 'pattern' = {params['pattern']!r} is invalid ({error}); allowed: "
                             f"'default', a named pattern or 'step:offset,...' with distinct options, steps in "
                             f"0..{params['depth'] - 1} and (0, 0) first") from None


def check_pattern(params):
    """Schema constraint: the pattern is valid for the lanes and depth."""
    pattern_of(params)


#: Parameters of ``td_scheduler``.
SCHEDULER_PARAMS = ParamSchema((LANES, DEPTH, PATTERN), constraints=(check_pattern,))

#: Parameters of ``td_pe``.
PE_PARAMS = ParamSchema((
    LANES, DEPTH, PATTERN,
    Param("mode", str, "both", "which zero operands make a pair ineffectual", choices=("both", "b_only")),
    WIDTH, ACC_WIDTH, SIGNED, MAC, PARTIAL_SUMS,
), constraints=(check_pattern,))

#: Parameters of ``td_tile``.
TILE_PARAMS = ParamSchema((
    Param("rows", int, 4, "PE rows R (one B stream and scheduler each)", minimum=1, maximum=16),
    Param("cols", int, 4, "PE columns C (one A stream each)", minimum=1, maximum=8),
    LANES, DEPTH, PATTERN, WIDTH, ACC_WIDTH, SIGNED, MAC, PARTIAL_SUMS,
), constraints=(check_pattern,))

#: Parameters of ``td_transposer``.
TRANSPOSER_PARAMS = ParamSchema((
    Param("size", int, 4, "values per block and blocks per group", minimum=2, maximum=8),
    Param("width", int, 16, "bits per value", minimum=1, maximum=64),
))

# Latencies ------------------------------------------------------------------------------------------------------

#: PE and tile: cycles from the transfer of the first group on ``i_group`` to the first scheduling cycle
#: (a group register, then the window).
FILL_LATENCY = 2

#: PE and tile: group registers in front of the window. Three let ``i_group.ready`` be a function of
#: registers (a register is free at the start of the cycle) and still keep the window full at full rate.
GROUP_REGISTERS = 3


def latency(params):
    """PE and tile: cycles from the scheduling cycle that drains a ``read`` row to its result on ``o_sum``.

    Registered selects, the window rotated into stream order (a tile of more
    than one row, :func:`rotates_window`), registered multiplier operands, the
    multiplier's, the lane reduction's and the accumulator's stages
    (:mod:`trainforge.spec.mac`), then the output stream stage.
    """
    return (2 + rotates_window(params) + mac_spec.multiply_stages(params) + mac_spec.tree_stages(params)
            + mac_spec.accumulate_stages(params) + 1)


def rotates_window(params):
    """Whether the PE or tile rotates each operand stream's window into stream order in a registered stage.

    A tile of more than one row does: a column's A window then serves all its PEs through 8-input
    muxes, instead of each PE's lanes reaching every window slot (16 inputs for the paper's pattern).
    A single row of PEs (the PE) folds the head into each lane's select instead.
    """
    return params.get("rows", 1) > 1


def result_cycle(params, read_cycle):
    """Cycle of a result on ``o_sum``, counted from the first group's transfer, at full rate.

    ``read_cycle`` is the scheduling cycle (from 0) that drained the ``read`` row.
    """
    return FILL_LATENCY + read_cycle + latency(params)


#: ``td_scheduler``: cycles from an accepted candidate vector to its schedule on ``o_schedule`` (one stream stage).
SCHEDULER_LATENCY = stream_stage.LATENCY

# Layouts --------------------------------------------------------------------------------------------------------


def candidate_layout(params):
    """Payload of the scheduler's ``i_candidates``: ``candidates`` (depth x lanes bits) and ``visible``."""
    return data.StructLayout({
        "candidates": data.ArrayLayout(params["lanes"], params["depth"]),
        "visible": params["depth"],
    })


def schedule_layout(params):
    """Payload of the scheduler's ``o_schedule``: ``ms``, ``active``, ``chosen``, ``advance``."""
    lanes, depth = params["lanes"], params["depth"]
    return data.StructLayout({
        "ms": data.ArrayLayout(select_bits(pattern_of(params)), lanes),
        "active": lanes,
        "chosen": data.ArrayLayout(lanes, depth),
        "advance": range(depth + 1),
    })


def operand_shape(params):
    """Shape of one operand of a PE or tile (:func:`trainforge.spec.mac.operand_shape`)."""
    return mac_spec.operand_shape(params)


def result_shape(params):
    """Shape of one accumulator, ``o_sum`` of the PE or one element of the tile's (:mod:`trainforge.spec.mac`)."""
    return mac_spec.result_shape(params)


def pe_row_layout(params):
    """One PE stream row: ``a`` and ``b`` (``lanes`` operands each), ``clear``, ``read``."""
    operand = operand_shape(params)
    return data.StructLayout({
        "a": data.ArrayLayout(operand, params["lanes"]),
        "b": data.ArrayLayout(operand, params["lanes"]),
        "clear": 1,
        "read": 1,
    })


def tile_row_layout(params):
    """One tile stream row: ``a[col][lane]``, ``b[row][lane]``, ``clear``, ``read``."""
    operand = operand_shape(params)
    return data.StructLayout({
        "a": data.ArrayLayout(data.ArrayLayout(operand, params["lanes"]), params["cols"]),
        "b": data.ArrayLayout(data.ArrayLayout(operand, params["lanes"]), params["rows"]),
        "clear": 1,
        "read": 1,
    })


def tile_result_layout(params):
    """Payload of the tile's ``o_sum``: ``rows`` x ``cols`` accumulators."""
    return data.ArrayLayout(data.ArrayLayout(result_shape(params), params["cols"]), params["rows"])


def group_layout(row_layout, depth):
    """Payload of ``i_group``: ``depth`` stream rows of ``row_layout``."""
    return data.ArrayLayout(row_layout, depth)


def block_layout(params):
    """Payload of the transposer's ``i_block`` and ``o_block``: ``size`` values of ``width`` bits."""
    return data.ArrayLayout(params["width"], params["size"])
