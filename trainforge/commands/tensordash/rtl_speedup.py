"""RTL beside the golden model for the speedup figures: the same random streams through the emitted Verilog.

Every RTL point is a point of one of the speedup figures of
:mod:`~trainforge.sim.tensordash.figures`, at a size a simulation affords:
``samples`` dot products of ``stream_rows`` rows whose effectual B operands
are drawn by :func:`~trainforge.sim.tensordash.figures.random_stream` (the
figures' own sparsity model, so the golden cycle model sees exactly the
stimulus of the RTL). The B operands get random non-zero signed values where
they are effectual and zero elsewhere; the A operands are dense random
non-zero values.

The RTL block is the one the figure models, with the figure's rows, lanes and
depth and the default connectivity pattern:

- ``random_sparsity``: ``td_pe`` (4 lanes, 4 deep; ``both`` mode, whose
  effectual pairs are the B non-zeros since A is dense) and the 4x4 ``td_tile``;
- ``depth``: the 4x4 ``td_tile`` with D = 2..5, at :data:`SWEEP_SPARSITY`;
- ``rows``: ``td_tile`` with R rows and 4 columns, random and clustered
  sparsity, at :data:`SWEEP_SPARSITY`;
- ``wide_pe``: the 4x4 ``td_tile`` of 16-lane, 3-deep PEs.

All points of one block configuration run back to back in one simulation
(:func:`~trainforge.commands.tensordash.rtl.run_stream`: always-valid source,
always-ready sink, build cached in ``build/sim/``). Each dot product ends on
its ``read`` row, so the RTL cycles of dot product ``k`` are the cycles
between results ``k - 1`` and ``k`` (the first counted from the first
transfer, minus the pipeline latency). Compared exactly: the cycles of every
dot product against :func:`~trainforge.golden.tensordash.core.run_cores`,
and every result against the golden ``td_pe`` / ``td_tile`` values.
"""
import json

import numpy as np

from trainforge.golden.tensordash.core import run_cores
from trainforge.spec.tensordash import result_cycle
from trainforge.spec.tensordash import resolve_pattern
from trainforge.golden.tensordash.pe import td_pe, td_tile
from trainforge.hw.registry import get_block

from trainforge.sim.tensordash import figures
from trainforge.commands.tensordash.rtl import run_stream
from trainforge.progress import progress as show_progress

__all__ = ["FIGURES", "SPARSITIES", "SWEEP_SPARSITY", "DEPTHS", "ROWS", "rtl_points", "run_points"]

#: Figures with RTL points, in report order.
FIGURES = ("random_sparsity", "depth", "rows", "wide_pe")

#: Default sparsities of the RTL points of the random-sparsity and 16-lane figures.
SPARSITIES = (0.1, 0.5, 0.9, 0.99)

#: Sparsity of the depth and rows sweeps (as :func:`~.figures.depth_sweep` and :func:`~.figures.rows_sweep`).
SWEEP_SPARSITY = 0.62

#: Staging buffer depths of the RTL depth sweep (Fig. 12).
DEPTHS = (2, 3, 4, 5)

#: Tile rows of the RTL rows sweep (Fig. 13). 16 rows do not fit: the emitted Verilog of a 16-row tile is
#: about 25 MB (the 16-way minimum of the rows' AS and the per-row visibility logic), against 0.7 MB for 8 rows.
ROWS = (1, 2, 4, 8)


def _tile(rows=4, lanes=4, depth=4):
    return "td_tile", {"rows": rows, "cols": 4, "lanes": lanes, "depth": depth}


def rtl_points(figure_names=FIGURES, sparsities=SPARSITIES):
    """The RTL points of the given figures.

    Returns
    -------
    list of dict
        ``figure``, ``series`` (the golden series it sits beside), ``x``
        (the figure's abscissa), ``sparsity``, ``model`` (``random`` or
        ``clustered``), ``block`` and its ``params``.
    """
    points = []

    def add(figure, series, x, sparsity, model, block_params):
        block, params = block_params
        points.append({"figure": figure, "series": series, "x": x, "sparsity": sparsity, "model": model,
                       "block": block, "params": params})

    for name in figure_names:
        if name == "random_sparsity":
            for s in sparsities:
                add(name, "pe", s, s, "random", ("td_pe", {"lanes": 4, "depth": 4}))
            for s in sparsities:
                add(name, "tile_4x4", s, s, "random", _tile())
        elif name == "depth":
            for depth in DEPTHS:
                add(name, "tile_4x4", depth, SWEEP_SPARSITY, "random", _tile(depth=depth))
        elif name == "rows":
            for rows in ROWS:
                for model in ("random", "clustered"):
                    add(name, model, rows, SWEEP_SPARSITY, model, _tile(rows=rows))
        elif name == "wide_pe":
            for s in sparsities:
                add(name, "lanes16_depth3", s, s, "random", _tile(lanes=16, depth=3))
        else:
            raise ValueError(f"unknown figure {name!r}; known: {', '.join(FIGURES)}")
    return points


def _geometry(block, params):
    rows, cols = (params["rows"], params["cols"]) if block == "td_tile" else (1, 1)
    return rows, cols, params["lanes"], params["depth"]


def _operands(generator, mask, width):
    """Signed ``width``-bit values, non-zero where ``mask`` and zero elsewhere."""
    low, high = -(1 << (width - 1)), (1 << (width - 1)) - 1
    values = generator.integers(low, high, size=mask.shape, endpoint=True)
    values[values == 0] = 1
    return np.where(mask, values, 0)


def _run_group(block, params, points, samples, stream_rows, seed, simulator):
    """Run the points of one block configuration in one simulation; fill in their golden and RTL results."""
    params = get_block(block).resolve(**params)
    rows, cols, lanes, depth = _geometry(block, params)
    pattern = resolve_pattern(params["pattern"], lanes, depth)
    generator = np.random.default_rng(seed)
    streams, golden = [], []
    for point in points:
        effectual, clear, read = figures.random_stream(point["sparsity"], rows=rows, lanes=lanes, depth=depth,
                                                       samples=samples, stream_rows=stream_rows,
                                                       model=point["model"], seed=seed)
        golden.append(run_cores(effectual, read, clear, pattern, depth).cycles)
        b = _operands(generator, np.moveaxis(effectual, 1, 2).reshape(-1, rows, lanes), params["width"])
        a = _operands(generator, np.ones((len(b), cols, lanes), bool), params["width"])
        streams.append((a, b, np.tile(clear, samples), np.tile(read, samples)))
        point["stream_rows"] = len(read)
    a, b, clear, read = (np.concatenate([stream[k] for stream in streams]) for k in range(4))
    if block == "td_tile":
        expected = td_tile(a, b, clear, read, **params).reshape(-1, rows * cols)
    else:
        expected = td_pe(a[:, 0], b[:, 0], clear, read, **params)[:, None]
    try:
        values, cycles = run_stream((a, b, clear, read), simulator, block, params)
        error = None
    except RuntimeError as failure:
        values, cycles, error = np.zeros((0, rows * cols), np.int64), np.zeros(0, np.int64), str(failure)
    if error is None and len(cycles) != len(expected):
        error = f"the RTL gave {len(cycles)} results, expected {len(expected)}"
    per_product = np.diff(np.concatenate([[result_cycle(params, 0) - 1], cycles]))
    first = 0
    for point, golden_cycles in zip(points, golden):
        total = point["stream_rows"]
        rtl_cycles = per_product[first:first + samples]
        complete = error is None and len(rtl_cycles) == samples
        values_agree = complete and np.array_equal(values[first:first + samples], expected[first:first + samples])
        cycles_agree = complete and np.array_equal(rtl_cycles, golden_cycles)
        point.update({
            "params": params, "samples": samples, "dense_cycles": samples * total,
            "golden_cycles": int(golden_cycles.sum()), "rtl_cycles": int(rtl_cycles.sum()) if complete else None,
            "golden_speedup": float(np.mean(total / golden_cycles)),
            "rtl_speedup": float(np.mean(total / np.maximum(rtl_cycles, 1))) if complete else None,
            "cycles_agree": bool(cycles_agree), "values_agree": bool(values_agree),
            "agree": bool(cycles_agree and values_agree),
            "ideal": figures.ideal(point["sparsity"], depth), "error": error})
        first += samples


def run_points(points, samples=8, stream_rows=64, seed=0, simulator="verilator", progress=None):
    """Run :func:`rtl_points` through the RTL and the golden cycle model, one simulation per block configuration.

    Parameters
    ----------
    points : list of dict
        From :func:`rtl_points`; filled in place with ``golden_cycles``,
        ``rtl_cycles``, ``golden_speedup``, ``rtl_speedup`` (mean over the
        dot products of dense / TensorDash cycles), ``cycles_agree``,
        ``values_agree``, ``agree``, ``ideal`` and ``error`` (``None``, or why
        the simulation gave no usable results).
    samples, stream_rows : int
        Dot products per point and rows per dot product (padded to whole groups).
    seed : int
        Seed of the effectual bits (as the figures' ``seed``) and of the values.
    simulator : str
        ``"verilator"`` or ``"icarus"``.
    progress : callable, optional
        Called with a line of text before each simulation.

    Returns
    -------
    list of dict
        ``points``.
    """
    groups = {}
    for point in points:
        groups.setdefault((point["block"], json.dumps(point["params"], sort_keys=True)), []).append(point)
    for (block, params), members in show_progress(list(groups.items()), f"RTL points ({simulator})", unit="build"):
        if progress is not None:
            progress(f"{simulator}: {block} {params}, {len(members)} point(s)")
        _run_group(block, json.loads(params), members, samples, stream_rows, seed, simulator)
    return points
