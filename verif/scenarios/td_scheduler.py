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


def _hand_worked(params):
    """Vectors of the paper's 4-lane, 4-deep PE with the default pattern, schedules worked out by hand."""
    if (params["lanes"], params["depth"], params["pattern"]) != (4, 4, "default"):
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


def scenarios(params, seed):
    lanes, depth = params["lanes"], params["depth"]
    table = []
    hand = _hand_worked(params)
    if hand:
        table.append(Scenario("hand-worked 4 x 4 vectors", {"i_candidates": [vector for vector, _ in hand]},
                              {"o_schedule": [result for _, result in hand]},
                              timing={"o_schedule": [k + spec.SCHEDULER_LATENCY for k in range(len(hand))]}))
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
