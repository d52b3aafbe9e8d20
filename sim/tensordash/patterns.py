"""Search of TensorDash connectivity patterns (paper, Section III-A, Fig. 5; Section IV-D, "Connectivity Pattern").

A pattern is an ordered tuple of ``(step, offset)`` options, ``(0, 0)`` first
(:mod:`trainforge.spec.tensordash`); the order is the scheduler's priority.
The search keeps the mux width (``options``) and a bound on the scheduler's
levels (:func:`~trainforge.spec.tensordash.lane_levels`, which depend only on
the set of slots, not on their order), and looks for the pattern with the
highest speedup.

Method (:func:`search`):

1. **Space.** Every set of ``options - 1`` slots ``(step, offset mod lanes)``
   other than ``(0, 0)`` from a *universe* (:func:`universe`), with
   ``required`` slots in every set, whose levels are at most ``max_levels``.
   Offsets are written in ``(-lanes / 2, lanes / 2]``.
2. **Order rule** (:func:`heuristic_order`): ``(0, 0)``; the lookaheads
   ``(step, 0)`` by step; then the lookasides by step, then by ``|offset|``,
   ``+`` before ``-``. The paper's 4 x 4 pattern follows this rule.
3. **Screening**: every ordered set on the screening workloads (random
   sparsity, :func:`random_workloads`, few streams), score = geometric mean
   of the speedups (:func:`score`), one batched packed :func:`run_cores` call
   per pattern.
4. **Order refinement** of the ``finalists`` best sets: hill climbing over
   swaps of two non-dense options, on the screening workloads.
5. **Final evaluation** on fresh random streams (another seed, more streams)
   and on the digits-CNN training traces of ``trainforge tensordash
   training`` (:mod:`.training`); the best pattern is the one with the highest
   geometric mean over all final workloads. The reference patterns are scored
   the same way.

Speedup of a random workload = mean over streams of dense cycles (one row per
cycle) / TensorDash cycles, as :func:`.figures.speedup`; of the digits traces =
dense cycles / TensorDash cycles summed over every traced layer, operation and
epoch, as ``overall_speedup`` of :func:`.training.training_report`.
"""
import itertools
import math
import time
from dataclasses import dataclass, field

import numpy as np

from trainforge.golden.tensordash.core import run_cores
from trainforge.progress import progress
from trainforge.spec.tensordash import (PAPER_PATTERN, WIDE_PATTERN, format_pattern, lane_levels, parse_pattern,
                                        validate_pattern)
from trainforge.spec.tensordash_patterns import SEARCHED_4X4

from . import figures

__all__ = ["canonical_offset", "heuristic_order", "universe", "candidate_sets", "count_candidates",
           "Workload", "random_workloads", "digits_workloads", "score", "geometric_mean", "refine_order",
           "SHAPES", "search", "SearchResult", "search_report", "report_lines", "WIDE_COMPARISON_SPARSITY"]


def canonical_offset(offset, lanes):
    """``offset`` modulo ``lanes``, written in ``(-lanes / 2, lanes / 2]``."""
    offset %= lanes
    return offset - lanes if offset > lanes // 2 else offset


def heuristic_order(slots, lanes):
    """The options of a set of slots in the order rule of this module, ``(0, 0)`` first.

    Parameters
    ----------
    slots : iterable of (int, int)
        ``(step, offset)``; ``(0, 0)`` is added when absent.
    lanes : int

    Returns
    -------
    tuple of (int, int)
        Offsets canonical (:func:`canonical_offset`).
    """
    options = {(step, canonical_offset(offset, lanes)) for step, offset in slots} - {(0, 0)}
    lookahead = sorted(option for option in options if option[1] == 0)
    lookaside = sorted((option for option in options if option[1] != 0),
                       key=lambda option: (option[0], abs(option[1]), option[1] < 0))
    return ((0, 0),) + tuple(lookahead) + tuple(lookaside)


def universe(lanes, depth, max_offset=None, steps=None):
    """Every slot ``(step, offset)`` but ``(0, 0)``, offsets canonical, ``|offset| <= max_offset`` if given."""
    steps = range(depth) if steps is None else steps
    offsets = sorted({canonical_offset(offset, lanes) for offset in range(lanes)})
    return tuple((step, offset) for step in steps for offset in offsets
                 if (step, offset) != (0, 0) and (max_offset is None or abs(offset) <= max_offset))


def candidate_sets(slots, options, lanes, max_levels, required=()):
    """Ordered patterns (:func:`heuristic_order`) of every admissible set, in a fixed order.

    Parameters
    ----------
    slots : sequence of (int, int)
        The universe (:func:`universe`).
    options : int
        Mux width, ``(0, 0)`` included.
    lanes, max_levels : int
        A set is admissible when :func:`~trainforge.spec.tensordash.lane_levels` gives at most ``max_levels``.
    required : sequence of (int, int)
        Slots every set holds.

    Yields
    ------
    tuple of (int, int)
    """
    required = tuple(required)
    free = [slot for slot in slots if slot not in required]
    for chosen in itertools.combinations(free, options - 1 - len(required)):
        pattern = heuristic_order(required + chosen, lanes)
        if len(lane_levels(pattern, lanes)) <= max_levels:
            yield pattern


def count_candidates(slots, options, lanes, max_levels, required=()):
    """``(sets, admissible)``: the number of sets of the space, and of those within ``max_levels``."""
    free = len([slot for slot in slots if slot not in tuple(required)])
    total = math.comb(free, options - 1 - len(tuple(required)))
    return total, sum(1 for _ in candidate_sets(slots, options, lanes, max_levels, required))


@dataclass
class Workload:
    """Streams scored together: either random (``effectual``, ``clear``, ``read``) or digits traces (``traces``).

    Attributes
    ----------
    name : str
    effectual : ndarray of bool, shape (N, rows, T, lanes), or None
    clear, read : ndarray of bool, shape (T,), or None
    traces : list of dict, or None
        Traced epochs of :func:`.training.train_and_trace`.
    tile : dict
        ``rows``, ``lanes``, ``depth``.
    """
    name: str
    effectual: np.ndarray = None
    clear: np.ndarray = None
    read: np.ndarray = None
    traces: list = None
    tile: dict = field(default_factory=dict)


def random_workloads(sparsities, *, rows, lanes, depth, samples, stream_rows, seed):
    """One :class:`Workload` per sparsity: i.i.d. zeros in B (:func:`.figures.random_stream`), seed ``seed + k``."""
    workloads = []
    for index, sparsity in enumerate(sparsities):
        effectual, clear, read = figures.random_stream(sparsity, rows=rows, lanes=lanes, depth=depth,
                                                       samples=samples, stream_rows=stream_rows, seed=seed + index)
        workloads.append(Workload(f"random {round(sparsity * 100)}%", effectual, clear, read,
                                  tile={"rows": rows, "lanes": lanes, "depth": depth}))
    return workloads


def digits_workloads(*, lanes, depth, epochs, seed, rows=4, traces=None):
    """The digits-CNN traces (:func:`.training.train_and_trace`, batch 32, one traced batch per epoch) as one
    :class:`Workload` named ``"digits CNN"``."""
    from . import training
    if traces is None:
        traces = training.train_and_trace(epochs=epochs, batch=32, seed=seed)["traces"]
    return [Workload("digits CNN", traces=traces,
                     tile={"rows": rows, "lanes": lanes, "depth": depth})]


def _random_speedups(pattern, workloads):
    """Speedups of random workloads sharing one stream length, flags and tile: one batched :func:`run_cores`."""
    first = workloads[0]
    effectual = np.concatenate([w.effectual for w in workloads])
    run = run_cores(effectual, first.read, first.clear, pattern, first.tile["depth"])
    speedups = len(first.read) / run.cycles
    counts = np.cumsum([0] + [len(w.effectual) for w in workloads])
    return [float(np.mean(speedups[counts[k]:counts[k + 1]])) for k in range(len(workloads))]


def score(pattern, workloads):
    """Speedup of ``pattern`` on every workload: ``{name: speedup}``."""
    result = {}
    batchable = [w for w in workloads if w.traces is None]
    groups = {}
    for w in batchable:
        groups.setdefault((w.effectual.shape[1:], w.clear.tobytes(), w.read.tobytes()), []).append(w)
    for group in groups.values():
        result.update(zip([w.name for w in group], _random_speedups(pattern, group)))
    for w in workloads:
        if w.traces is not None:
            from . import training
            dense = tensordash = 0
            for trace in w.traces:
                for row in training.layer_speedups(trace, pattern=pattern, **w.tile):
                    dense += row["dense_cycles"]
                    tensordash += row["tensordash_cycles"]
            result[w.name] = dense / tensordash
    return {w.name: result[w.name] for w in workloads}


def geometric_mean(values):
    """Geometric mean of positive numbers (the search's objective over workloads)."""
    values = list(values)
    return float(np.exp(np.mean(np.log(values))))


def refine_order(pattern, workloads, rounds, cache=None):
    """Hill climbing on the priority order: swap two non-dense options while the geometric mean grows.

    Returns
    -------
    (pattern, objective, evaluations)
    """
    cache = {} if cache is None else cache

    def objective(candidate):
        if candidate not in cache:
            cache[candidate] = geometric_mean(score(candidate, workloads).values())
        return cache[candidate]

    best, best_value, evaluations = pattern, objective(pattern), 0
    for _ in range(rounds):
        improved = False
        for first, second in itertools.combinations(range(1, len(best)), 2):
            swapped = list(best)
            swapped[first], swapped[second] = swapped[second], swapped[first]
            swapped = tuple(swapped)
            evaluations += swapped not in cache
            value = objective(swapped)
            if value > best_value:
                best, best_value, improved = swapped, value, True
        if not improved:
            break
    return best, best_value, evaluations


#: The searched PE shapes: name -> space and references. ``universe``: keyword arguments of :func:`universe`.
SHAPES = {
    "4x4": {"lanes": 4, "depth": 4, "options": 8, "levels_of": PAPER_PATTERN, "universe": {}, "required": (),
            "references": {"paper": PAPER_PATTERN}},
    # The 4x4 space with the scheduler held to 2 levels (half the paper's): a shorter scheduling loop.
    "4x4-two-level": {"lanes": 4, "depth": 4, "options": 8, "levels_of": PAPER_PATTERN, "max_levels": 2,
                      "universe": {}, "required": (),
                      "references": {"paper": PAPER_PATTERN, "searched-4x4": SEARCHED_4X4}},
    "16x3": {"lanes": 16, "depth": 3, "options": 8, "levels_of": WIDE_PATTERN,
             "universe": {"max_offset": 4, "steps": (1, 2)}, "required": ((1, 0), (2, 0)),
             "references": {"wide": WIDE_PATTERN}},
}


@dataclass
class SearchResult:
    """Outcome of :func:`search` (JSON-able through :meth:`as_dict`)."""
    shape: str
    space: dict
    method: dict
    screened: list
    finalists: list
    references: dict
    best: dict
    cpu_seconds: float

    def as_dict(self):
        return {"shape": self.shape, "space": self.space, "method": self.method, "screened": self.screened,
                "finalists": self.finalists, "references": self.references, "best": self.best,
                "cpu_seconds": self.cpu_seconds}


def _entry(pattern, scores, lanes):
    return {"pattern": format_pattern(pattern), "levels": len(lane_levels(pattern, lanes)),
            "scores": scores, "geometric_mean": geometric_mean(scores.values())}


def search(shape="4x4", *, sparsities=(0.3, 0.5, 0.62, 0.7, 0.9), tile_rows=4, screen_samples=16,
           screen_rows=256, samples=64, stream_rows=512, epochs=4, finalists=6, refine_rounds=2, seed=0,
           max_sets=None, keep=20, space=None, screen_workloads=None, final_workloads=None, traces=None):
    """Search the patterns of one PE shape (:data:`SHAPES`); see the module's method.

    Parameters
    ----------
    shape : str
        Key of :data:`SHAPES`, or any name when ``space`` is given.
    sparsities : sequence of float
        Random workloads (screening and final).
    tile_rows : int
        PE rows of the tile sharing one schedule (4: the paper's Tensorcore tile; 1: one PE).
    screen_samples, screen_rows : int
        Streams and rows per stream of each screening workload (seed ``seed``).
    samples, stream_rows : int
        Of each final random workload (seed ``seed + 1000``).
    epochs : int
        Traced epochs of the digits CNN in the final evaluation (0: none).
    finalists, refine_rounds : int
        Sets whose order is refined, and hill-climbing rounds (0: keep the order rule's order).
    max_sets : int, optional
        Screen only the first ``max_sets`` admissible sets (a quick run).
    keep : int
        Screened patterns kept in the result (best first).
    space : dict, optional
        A space in the form of a :data:`SHAPES` value (tests).
    screen_workloads, final_workloads : list of Workload, optional
        Replace the random/digits workloads (tests).
    traces : list of dict, optional
        Digits-CNN traces already made (:func:`.training.train_and_trace` with ``epochs`` and ``seed``).

    Returns
    -------
    SearchResult
    """
    start = time.process_time()
    space = space or SHAPES[shape]
    lanes, depth, options = space["lanes"], space["depth"], space["options"]
    max_levels = space.get("max_levels") or len(lane_levels(space["levels_of"], lanes))
    slots = space["slots"] if "slots" in space else universe(lanes, depth, **space["universe"])
    required = tuple(space.get("required", ()))
    total, admissible = count_candidates(slots, options, lanes, max_levels, required)
    if screen_workloads is None:
        screen_workloads = random_workloads(sparsities, rows=tile_rows, lanes=lanes, depth=depth,
                                            samples=screen_samples, stream_rows=screen_rows, seed=seed)
    if final_workloads is None:
        final_workloads = random_workloads(sparsities, rows=tile_rows, lanes=lanes, depth=depth, samples=samples,
                                           stream_rows=stream_rows, seed=seed + 1000)
        if epochs:
            final_workloads += digits_workloads(lanes=lanes, depth=depth, epochs=epochs, seed=seed, rows=tile_rows,
                                                traces=traces)
    candidates = list(itertools.islice(candidate_sets(slots, options, lanes, max_levels, required),
                                       max_sets))
    cache = {}
    for pattern in progress(candidates, f"screening {shape} patterns", unit="pattern"):
        cache[pattern] = geometric_mean(score(validate_pattern(pattern, lanes, depth), screen_workloads).values())
    ranked = sorted(candidates, key=lambda p: -cache[p])
    refined, evaluations = [], 0
    for pattern in progress(ranked[:finalists], f"refining {shape} orders", unit="set"):
        better, _, count = refine_order(pattern, screen_workloads, refine_rounds, cache)
        refined.append(better)
        evaluations += count
    references = dict(space.get("references", {}))
    final = {}
    for pattern in progress(list(dict.fromkeys(refined + list(references.values()))), f"final {shape} scores",
                            unit="pattern"):
        final[pattern] = _entry(pattern, score(pattern, final_workloads), lanes)
    for pattern in references.values():
        value = cache[pattern] if pattern in cache else geometric_mean(score(pattern, screen_workloads).values())
        final[pattern]["screen_geometric_mean"] = value
        final[pattern]["screen_rank"] = 1 + sum(cache[p] > value for p in candidates)
    finalist_entries = sorted((final[p] for p in dict.fromkeys(refined)), key=lambda e: -e["geometric_mean"])
    for entry in finalist_entries:
        entry["screen_geometric_mean"] = cache[parse_pattern(entry["pattern"])]
    return SearchResult(
        shape=shape,
        space={"lanes": lanes, "depth": depth, "options": options, "max_levels": max_levels,
               "universe": [list(slot) for slot in slots], "required": [list(slot) for slot in required],
               "sets": total, "admissible_sets": admissible, "screened_sets": len(candidates),
               "ordered_patterns_of_admissible_sets": admissible * math.factorial(options - 1)},
        method={"order_rule": "(0,0); lookaheads by step; lookasides by step, |offset|, + before -",
                "tile_rows": tile_rows, "sparsities": list(sparsities),
                "screen": {"samples": screen_samples, "stream_rows": screen_rows, "seed": seed,
                           "workloads": [w.name for w in screen_workloads]},
                "final": {"samples": samples, "stream_rows": stream_rows, "seed": seed + 1000, "epochs": epochs,
                          "workloads": [w.name for w in final_workloads]},
                "finalists": finalists, "refine_rounds": refine_rounds, "refine_evaluations": evaluations,
                "objective": "geometric mean of the speedups over the workloads"},
        screened=[{"pattern": format_pattern(p), "screen_geometric_mean": cache[p]} for p in ranked[:keep]],
        finalists=finalist_entries,
        references={name: final[pattern] for name, pattern in references.items()},
        best=finalist_entries[0],
        cpu_seconds=time.process_time() - start,
    )


#: Sparsity of the wide-PE comparison: the paper's average potential of 2.6x (Fig. 1), as ``wide_pe`` of
#: :mod:`.figures`; the paper says the 16-lane 3-deep PE has "almost the same performance" as the 4 x 4.
WIDE_COMPARISON_SPARSITY = 0.62


def search_report(shapes=("4x4", "16x3"), *, epochs=4, seed=0, **options):
    """:func:`search` of every shape (one digits training shared), and the wide-against-narrow comparison.

    Returns
    -------
    dict
        JSON-able: ``shapes`` (shape -> :meth:`SearchResult.as_dict`), ``wide_vs_narrow`` (or None when a
        shape or the 0.62 workload is missing), ``cpu_seconds``.
    """
    start = time.process_time()
    traces = None
    if epochs:
        from . import training
        traces = training.train_and_trace(epochs=epochs, batch=32, seed=seed)["traces"]
    results = {shape: search(shape, epochs=epochs, seed=seed, traces=traces, **options).as_dict()
               for shape in shapes}
    return {"shapes": results, "wide_vs_narrow": _wide_vs_narrow(results),
            "cpu_seconds": time.process_time() - start}


def _wide_vs_narrow(results):
    name = f"random {round(WIDE_COMPARISON_SPARSITY * 100)}%"
    if not {"4x4", "16x3"} <= set(results) or name not in results["4x4"]["best"]["scores"]:
        return None
    narrow, wide = results["4x4"], results["16x3"]
    speedups = {"paper_4x4": narrow["references"]["paper"]["scores"][name],
                "searched_4x4": narrow["best"]["scores"][name],
                "wide_16x3": wide["references"]["wide"]["scores"][name],
                "searched_16x3": wide["best"]["scores"][name]}
    return {"sparsity": WIDE_COMPARISON_SPARSITY, "tile_rows": narrow["method"]["tile_rows"], "speedups": speedups,
            "wide_16x3_vs_paper_4x4": speedups["wide_16x3"] / speedups["paper_4x4"] - 1,
            "searched_16x3_vs_paper_4x4": speedups["searched_16x3"] / speedups["paper_4x4"] - 1,
            "searched_16x3_vs_searched_4x4": speedups["searched_16x3"] / speedups["searched_4x4"] - 1}


def report_lines(report):
    """The text summary of :func:`search_report`'s report (what the command prints)."""
    lines = []
    for shape, result in report["shapes"].items():
        space = result["space"]
        lines.append(f"{shape} PE ({space['lanes']} lanes, {space['depth']} deep, {space['options']} options,"
                     f" <= {space['max_levels']} levels): {space['sets']} sets, {space['admissible_sets']}"
                     f" admissible, {space['screened_sets']} screened; {result['cpu_seconds']:.0f} s CPU")
        rows = [("best", result["best"])] + list(result["references"].items())
        names = list(result["best"]["scores"])
        width = max(len(n) for n in names) + 2
        lines.append("  " + f"{'':<8}{'pattern':<40}" + "".join(f"{n:>{width}}" for n in names) + f"{'geo-mean':>10}")
        for label, entry in rows:
            lines.append("  " + f"{label:<8}{entry['pattern']:<40}"
                         + "".join(f"{entry['scores'][n]:>{width}.3f}" for n in names)
                         + f"{entry['geometric_mean']:>10.3f}")
    comparison = report["wide_vs_narrow"]
    if comparison:
        s = comparison["speedups"]
        lines.append(f"at {comparison['sparsity']:.0%} sparsity ({comparison['tile_rows']}-row tile): 16x3 wide"
                     f" {s['wide_16x3']:.3f}x, searched {s['searched_16x3']:.3f}x; 4x4 paper {s['paper_4x4']:.3f}x,"
                     f" searched {s['searched_4x4']:.3f}x; wide vs paper 4x4"
                     f" {comparison['wide_16x3_vs_paper_4x4']:+.1%}, searched 16x3 vs paper 4x4"
                     f" {comparison['searched_16x3_vs_paper_4x4']:+.1%}")
    lines.append(f"total CPU time {report['cpu_seconds']:.0f} s")
    return lines
