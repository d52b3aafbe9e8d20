"""Scenario table of ``td_scheduler``: candidate vectors in, one schedule per vector out.

Reference: the selection rule of the paper (Section III-A, Fig. 6) worked
out lane by lane in plain Python, independent of the numpy golden model:

- lane ``i`` may read slot ``(step, (i + offset) mod lanes)`` for each
  option ``(step, offset)`` of the pattern, in priority order;
- the lanes are grouped into levels: in lane order, a lane joins the first
  level none of whose lanes shares a slot with it (a new level otherwise);
- level after level, lane after lane, a lane takes its first option whose
  slot is visible and still holds an effectual pair, and removes it;
- ``AS`` is the number of leading rows that are visible and left empty.

A few vectors of the paper's 4 x 4 PE are also worked out by hand. At full
rate each schedule leaves :data:`~trainforge.spec.tensordash.SCHEDULER_LATENCY`
cycle after its vector entered.
"""
import numpy as np

from trainforge.golden.tensordash.scheduler import schedule
from trainforge.spec import tensordash as spec

from scenario import Scenario, Transactions, random_pattern, rng_for

#: (name, vectors, density, valid probability, ready probability) of the random scenarios.
RANDOM = (
    ("sparse vectors, full rate", 40, 0.1, 1.0, 1.0),
    ("half-dense vectors, full rate", 40, 0.5, 1.0, 1.0),
    ("dense vectors, producer gaps and consumer stalls", 60, 0.9, 0.6, 0.5),
    ("mixed densities, slow consumer", 60, None, 1.0, 0.3),
)


def _slots(pattern, lanes, lane):
    return [(step, (lane + offset) % lanes) for step, offset in pattern]


def _levels(pattern, lanes):
    levels = []
    for lane in range(lanes):
        mine = set(_slots(pattern, lanes, lane))
        for level in levels:
            if not any(mine & set(_slots(pattern, lanes, other)) for other in level):
                level.append(lane)
                break
        else:
            levels.append([lane])
    return levels


def reference(params, rows, visible):
    """The schedule of one vector (``rows``: per row an int of ``lanes`` bits; ``visible``: an int of ``depth`` bits)."""
    lanes, depth = params["lanes"], params["depth"]
    pattern = spec.pattern_of(params)
    left = {(row, lane) for row in range(depth) for lane in range(lanes)
            if visible >> row & 1 and rows[row] >> lane & 1}
    ms, active, chosen = [0] * lanes, 0, [0] * depth
    for level in _levels(pattern, lanes):
        for lane in level:
            for index, slot in enumerate(_slots(pattern, lanes, lane)):
                if slot in left:
                    left.remove(slot)
                    ms[lane] = index
                    active |= 1 << lane
                    chosen[slot[0]] |= 1 << slot[1]
                    break
    advance = 0
    for row in range(depth):
        if not visible >> row & 1 or any((row, lane) in left for lane in range(lanes)):
            break
        advance += 1
    return {"ms": ms, "active": active, "chosen": chosen, "advance": advance}


#: The paper's 4 x 4 pattern, written out here (Section III-A): (+0, i), (+1, i), (+2, i), (+3, i), then the
#: lookasides (+1, i+1), (+1, i-1), (+2, i+2), (+3, i+3). The hand-worked vectors below hold for it only.
PAPER_4X4 = ((0, 0), (1, 0), (2, 0), (3, 0), (1, 1), (1, -1), (2, 2), (3, 3))


def _hand_worked(params):
    """Vectors of the paper's 4-lane, 4-deep PE with its own pattern, schedules worked out by hand."""
    if (params["lanes"], params["depth"]) != (4, 4) or spec.pattern_of(params) != PAPER_4X4:
        return []
    every = {"candidates": [0b1111] * 4, "visible": 0b1111}
    nothing = {"candidates": [0] * 4, "visible": 0b1111}
    # Row 0 empty, row 1 full: every lane looks ahead one row, option 1 (1, 0).
    ahead = {"candidates": [0, 0b1111, 0, 0], "visible": 0b1111}
    # Only column 0 has pairs (the levels of the 4 x 4 PE are [0], [1], [2], [3]).
    column0 = {"candidates": [0b0001] * 4, "visible": 0b1111}
    hidden = {"candidates": [0b1111] * 4, "visible": 0b0000}
    return [
        (every, {"ms": [0, 0, 0, 0], "active": 0b1111, "chosen": [0b1111, 0, 0, 0], "advance": 1}),
        (nothing, {"ms": [0, 0, 0, 0], "active": 0, "chosen": [0, 0, 0, 0], "advance": 4}),
        # rows 2 and 3 are empty and visible too: all four rows drain.
        (ahead, {"ms": [1, 1, 1, 1], "active": 0b1111, "chosen": [0, 0b1111, 0, 0], "advance": 4}),
        # lane 0: (0,0). lane 1: options (0,1) (1,1) (2,1) (3,1) (1,2) (1,0) -> (1,0), index 5.
        # lane 2: (0,2) (1,2) (2,2) (3,2) (1,3) (1,1) (2,0) -> (2,0), index 6.
        # lane 3: (0,3) (1,3) (2,3) (3,3) (1,0) taken (1,2) (2,1) (3,2): idle; (3,0) is left, so AS = 3.
        (column0, {"ms": [0, 5, 6, 0], "active": 0b0111, "chosen": [0b0001, 0b0001, 0b0001, 0], "advance": 3}),
        (hidden, {"ms": [0, 0, 0, 0], "active": 0, "chosen": [0, 0, 0, 0], "advance": 0}),
    ]


#: Fig. 6 worked by hand, and further cases of the paper's 4 x 4 PE: (what it shows, vector, schedule).
#:
#: How Fig. 6 is read: the paper's text (Section III-A) gives the scheduler's structure, not a numbered
#: example: 4 levels, exactly one lane per level, each level's 8b-to-3b priority encoder picks its lane's
#: first effectual option from the *current* Z and removes it (OR gate) before the next level; AS follows
#: from what is left. It does not say which lane sits in which level: we read lane 0 in the first level,
#: lane 3 in the last. Z here is the effectual-and-not-taken bit vector (a set bit = an effectual pair;
#: the paper's Z_A | Z_B marks the zeros, its complement is what is drawn here). Candidate row r is an int
#: whose bit l is lane l; option indices (MS_i) of lane i, in priority order:
#: 0 (0,i)  1 (1,i)  2 (2,i)  3 (3,i)  4 (1,i+1)  5 (1,i-1)  6 (2,i+2)  7 (3,i+3), lanes mod 4.
#: The paper's AS is 2 bits (rows drained 1..3, or 4 coded as 0); ours counts 0..4 (visible rows can cut it
#: to 0), so a fully drained window shows as 4.
FIG6_CASES = (
    # Fig. 6, level by level. Z: row0 = lane 1; row1 = lanes 0, 3; row2 = lane 2; row3 = lane 3.
    # level 1, lane 0: (0,0) empty, (1,0) set -> MS 1; Z row1 = lane 3.
    # level 2, lane 1: (0,1) set -> MS 0; Z row0 = {}.
    # level 3, lane 2: (0,2), (1,2) empty, (2,2) set -> MS 2; Z row2 = {}.
    # level 4, lane 3: (0,3) empty, (1,3) set -> MS 1; Z row1 = {}.
    # Left: row3 lane 3 only -> rows 0, 1, 2 drained, AS = 3.
    ("Fig. 6: one lane per level, each on the Z its predecessors left",
     {"candidates": [0b0010, 0b1001, 0b0100, 0b1000], "visible": 0b1111},
     {"ms": [1, 0, 2, 1], "active": 0b1111, "chosen": [0b0010, 0b1001, 0b0100, 0], "advance": 3}),
    # Lookahead 3, 2, 1, 0: lane l has its only pair in row 3 - l; each takes its own lookahead.
    ("lookahead ladder",
     {"candidates": [0b1000, 0b0100, 0b0010, 0b0001], "visible": 0b1111},
     {"ms": [3, 2, 1, 0], "active": 0b1111, "chosen": [0b1000, 0b0100, 0b0010, 0b0001], "advance": 4}),
    # Lookahead before lookaside: lane 0 sees (1,0) (option 1) and (1,1) (option 4) and takes (1,0);
    # lane 1 then takes its own lookahead (1,1) (option 1); lanes 2 and 3: nothing reachable -> idle.
    ("lookahead before lookaside",
     {"candidates": [0, 0b0011, 0, 0], "visible": 0b1111},
     {"ms": [1, 1, 0, 0], "active": 0b0011, "chosen": [0, 0b0011, 0, 0], "advance": 4}),
    # Level conflict: the pair (1,1) is lane 1's own lookahead (its option 1), but lane 0 decides first
    # and reaches it as lookaside (1,0+1) (option 4): lane 0 takes it, lane 1 is left idle.
    ("an earlier level steals a later lane's lookahead",
     {"candidates": [0, 0b0010, 0, 0], "visible": 0b1111},
     {"ms": [4, 0, 0, 0], "active": 0b0001, "chosen": [0, 0b0010, 0, 0], "advance": 4}),
    # Only (1,2): lane 0 cannot reach it; lane 1 takes it as lookaside (1,1+1) (option 4); lane 2's own
    # lookahead and lane 3's lookaside (1,3-1) (option 5) find it gone.
    ("lookaside +1 by level 2",
     {"candidates": [0, 0b0100, 0, 0], "visible": 0b1111},
     {"ms": [0, 4, 0, 0], "active": 0b0010, "chosen": [0, 0b0100, 0, 0], "advance": 4}),
    # Lookaside -1: row0 lanes 0, 2 and row1 lane 0. Lane 0 takes (0,0); lane 1: (0,1) (1,1) (2,1) (3,1)
    # (1,2) empty, (1,0) set -> option 5; lane 2 takes (0,2); lane 3: nothing -> idle.
    ("lookaside -1",
     {"candidates": [0b0101, 0b0001, 0, 0], "visible": 0b1111},
     {"ms": [0, 5, 0, 0], "active": 0b0111, "chosen": [0b0101, 0b0001, 0, 0], "advance": 4}),
    # Lookaside (+3, i+3) on two lanes: row0 lane 2, row3 lanes 2 and 3. Lane 0: options 0..6 empty,
    # option 7 (3,3) set -> MS 7. Lane 1: (0,1) (1,1) (2,1) (3,1) (1,2) (1,0) (2,3) (3,0) all empty -> idle.
    # Lane 2: (0,2) -> MS 0 (its (3,2), option 3, stays). Lane 3: (0,3) (1,3) (2,3) empty, (3,3) taken,
    # (1,0) (1,2) (2,1) empty, (3,2) set -> MS 7. Nothing left: AS = 4.
    ("lookaside +3 on two lanes",
     {"candidates": [0b0100, 0, 0, 0b1100], "visible": 0b1111},
     {"ms": [7, 0, 0, 7], "active": 0b1101, "chosen": [0b0100, 0, 0, 0b1100], "advance": 4}),
    # Lookaside (+2, i+2): row2 lane 3 only. Lane 0: (2,2)? no; lane 1: (2,3) is its option 6 -> MS 6,
    # before lane 3 (level 4) would take it as its own lookahead.
    ("lookaside +2",
     {"candidates": [0, 0, 0b1000, 0], "visible": 0b1111},
     {"ms": [0, 6, 0, 0], "active": 0b0010, "chosen": [0, 0, 0b1000, 0], "advance": 4}),
    # AS after a partial drain: row0 lanes 0, 2, row1 full. Lanes 0, 2: (0,i); lanes 1, 3: (1,i).
    # Row1 keeps lanes 0 and 2 -> AS = 1.
    ("AS = 1: row 1 not drained",
     {"candidates": [0b0101, 0b1111, 0, 0], "visible": 0b1111},
     {"ms": [0, 1, 0, 1], "active": 0b1111, "chosen": [0b0101, 0b1010, 0, 0], "advance": 1}),
    # AS stops at the first row that is not visible: rows 2, 3 hidden (a dot-product boundary), so their
    # pairs are not candidates; every lane takes (0,i), row1 is empty: AS = 2, not 4.
    ("AS = 2: rows 2 and 3 hidden",
     {"candidates": [0b1111, 0, 0b1111, 0b1111], "visible": 0b0011},
     {"ms": [0, 0, 0, 0], "active": 0b1111, "chosen": [0b1111, 0, 0, 0], "advance": 2}),
    # Row 0 hidden: lane 0 takes (1,0); the others reach no visible pair; AS = 0 although a pair was taken.
    ("AS = 0: row 0 hidden",
     {"candidates": [0b1111, 0b0001, 0, 0], "visible": 0b1110},
     {"ms": [1, 0, 0, 0], "active": 0b0001, "chosen": [0, 0b0001, 0, 0], "advance": 0}),
    # Priority staircase: lane 0 (level 1, the whole Z) sees its options k..7 set and none before, so it
    # must take option k; any swap of option k with a later one changes its MS. Lane 0's slots:
    # 1 (1,0)  2 (2,0)  3 (3,0)  4 (1,1)  5 (1,3)  6 (2,2)  7 (3,3).
    # k = 2: Z = (2,0) (3,0) (1,1) (1,3) (2,2) (3,3). Lane 0: (2,0) -> MS 2. Lane 1: (0,1) empty, (1,1) ->
    # MS 1. Lane 2: (0,2) (1,2) empty, (2,2) -> MS 2. Lane 3: (0,3) empty, (1,3) -> MS 1. Left (3,0) (3,3):
    # AS = 3.
    ("priority: option 2 before 3..7",
     {"candidates": [0, 0b1010, 0b0101, 0b1001], "visible": 0b1111},
     {"ms": [2, 1, 2, 1], "active": 0b1111, "chosen": [0, 0b1010, 0b0101, 0], "advance": 3}),
    # k = 3: Z = (3,0) (1,1) (1,3) (2,2) (3,3). Lane 0: (3,0) -> MS 3. Lane 1: (1,1) -> MS 1. Lane 2:
    # (2,2) -> MS 2. Lane 3: (1,3) -> MS 1. Left (3,3): AS = 3.
    ("priority: option 3 before 4..7",
     {"candidates": [0, 0b1010, 0b0100, 0b1001], "visible": 0b1111},
     {"ms": [3, 1, 2, 1], "active": 0b1111, "chosen": [0, 0b1010, 0b0100, 0b0001], "advance": 3}),
    # k = 4: Z = (1,1) (1,3) (2,2) (3,3): lookaside +1 before -1. Lane 0: (1,1) -> MS 4. Lane 1: (1,1) taken,
    # nothing else -> idle. Lane 2: (2,2) -> MS 2. Lane 3: (0,3) empty, (1,3) -> MS 1. Left (3,3): AS = 3.
    ("priority: option 4 before 5..7 (lookaside +1 before -1)",
     {"candidates": [0, 0b1010, 0b0100, 0b1000], "visible": 0b1111},
     {"ms": [4, 0, 2, 1], "active": 0b1101, "chosen": [0, 0b1010, 0b0100, 0], "advance": 3}),
    # k = 5: Z = (1,3) (2,2) (3,3). Lane 0: (1,3) -> MS 5. Lane 1: nothing -> idle. Lane 2: (2,2) -> MS 2.
    # Lane 3: (1,3) taken, (2,3) empty, (3,3) -> MS 3. Nothing left: AS = 4.
    ("priority: option 5 before 6, 7",
     {"candidates": [0, 0b1000, 0b0100, 0b1000], "visible": 0b1111},
     {"ms": [5, 0, 2, 3], "active": 0b1101, "chosen": [0, 0b1000, 0b0100, 0b1000], "advance": 4}),
    # k = 6: Z = (2,2) (3,3). Lane 0: (2,2) -> MS 6. Lane 1: nothing. Lane 2: (2,2) taken, nothing else ->
    # idle. Lane 3: (3,3) -> MS 3. AS = 4.
    ("priority: option 6 before 7",
     {"candidates": [0, 0, 0b0100, 0b1000], "visible": 0b1111},
     {"ms": [6, 0, 0, 3], "active": 0b1001, "chosen": [0, 0, 0b0100, 0b1000], "advance": 4}),
    # Depth-limited: every lane has pairs in rows 1..3 only; lanes take (1,i): rows 0 and 1 drain, AS = 2.
    ("AS = 2: rows 2 and 3 full",
     {"candidates": [0, 0b1111, 0b1111, 0b1111], "visible": 0b1111},
     {"ms": [1, 1, 1, 1], "active": 0b1111, "chosen": [0, 0b1111, 0, 0], "advance": 2}),
)


def _fig6(params):
    """:data:`FIG6_CASES` for the paper's 4 x 4 PE (empty for any other)."""
    if (params["lanes"], params["depth"]) != (4, 4) or spec.pattern_of(params) != PAPER_4X4:
        return []
    return [(vector, result) for _, vector, result in FIG6_CASES]


def scenarios(params, seed):
    lanes, depth = params["lanes"], params["depth"]
    table = []
    hand = _hand_worked(params)
    if hand:
        table.append(Scenario("hand-worked 4 x 4 vectors", {"i_candidates": [vector for vector, _ in hand]},
                              {"o_schedule": [result for _, result in hand]},
                              timing={"o_schedule": [k + spec.SCHEDULER_LATENCY for k in range(len(hand))]}))
    fig6 = _fig6(params)
    if fig6:
        table.append(Scenario("Fig. 6 and further hand-worked 4 x 4 vectors, full rate",
                              {"i_candidates": [vector for vector, _ in fig6]},
                              {"o_schedule": [result for _, result in fig6]},
                              timing={"o_schedule": [k + spec.SCHEDULER_LATENCY for k in range(len(fig6))]}))
        rng = rng_for(seed, "td_scheduler", "hand-worked, gaps and stalls")
        table.append(Scenario("Fig. 6 and further hand-worked 4 x 4 vectors, producer gaps and consumer stalls",
                              {"i_candidates": [vector for vector, _ in fig6]},
                              {"o_schedule": [result for _, result in fig6]},
                              valid={"i_candidates": random_pattern(rng, 0.5)},
                              ready={"o_schedule": random_pattern(rng, 0.5)}))
    corners = [[0] * depth, [(1 << lanes) - 1] * depth, [1] * depth,
               [(1 << lanes) - 1 if row % 2 == 0 else 0 for row in range(depth)]]
    vectors = [{"candidates": rows, "visible": (1 << depth) - 1} for rows in corners]
    table.append(Scenario("corner vectors", {"i_candidates": vectors},
                          {"o_schedule": [reference(params, v["candidates"], v["visible"]) for v in vectors]},
                          timing={"o_schedule": [k + spec.SCHEDULER_LATENCY for k in range(len(vectors))]}))
    for name, count, density, valid, ready in RANDOM:
        rng = rng_for(seed, "td_scheduler", name)
        vectors = []
        for _ in range(count):
            chance = density if density is not None else rng.choice([0.0001, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0])
            rows = [sum(1 << lane for lane in range(lanes) if rng.random() < chance) for _ in range(depth)]
            visible = sum(1 << row for row in range(depth) if rng.random() < 0.85)
            vectors.append({"candidates": rows, "visible": visible})
        timing = ({"o_schedule": [k + spec.SCHEDULER_LATENCY for k in range(count)]}
                  if valid >= 1 and ready >= 1 else {})
        table.append(Scenario(name, {"i_candidates": vectors},
                              {"o_schedule": [reference(params, v["candidates"], v["visible"]) for v in vectors]},
                              valid={"i_candidates": random_pattern(rng, valid)},
                              ready={"o_schedule": random_pattern(rng, ready)}, timing=timing))
    return table


def golden(params, scenario):
    lanes, depth = params["lanes"], params["depth"]
    vectors = scenario.stimulus["i_candidates"]
    z = np.array([[[bool(v["candidates"][row] >> lane & 1) for lane in range(lanes)] for row in range(depth)]
                  for v in vectors], dtype=bool).reshape(len(vectors), depth, lanes)
    visible = np.array([[bool(v["visible"] >> row & 1) for row in range(depth)] for v in vectors],
                       dtype=bool).reshape(len(vectors), depth)
    result = schedule(z, spec.pattern_of(params), visible)
    items = []
    for k in range(len(vectors)):
        items.append({
            "ms": [int(x) for x in result.ms[k]],
            "active": sum(1 << lane for lane in range(lanes) if result.active[k, lane]),
            "chosen": [sum(1 << lane for lane in range(lanes) if result.chosen[k, row, lane]) for row in range(depth)],
            "advance": int(result.advance[k]),
        })
    return Transactions({"o_schedule": items})
