"""Golden models of the TensorDash PE and tile: bit-exact results and exact cycle counts.

Integer MACs give the dense PE's results (exact sums do not depend on the
order of the products). The floating-point MACs add in the hardware's order:
in each scheduling cycle, the lanes' products (an idle lane gives ``+0``, a
lane multiplies the pair its ``MS`` selects) go through the FP32 adder tree
(:func:`~trainforge.golden.fp.fp32_sum_tree`, lane order), and the tree's sum
goes to the interleaved accumulator (:func:`~trainforge.golden.fp.fp32_accumulate`:
the dot product's scheduling cycles counted from its first, cycle ``j`` added
to partial ``j mod partial_sums``, the result the adder tree over the partials). So a TensorDash PE's FP results depend on its schedule
and may differ from the dense PE's in the last bits.
"""
import numpy as np

from ...spec import mac as mac_spec, tensordash as spec
from ...spec.tensordash import option_slots
from ..dense_pe import dense_pe
from ..fp import fp32_accumulate, fp32_sum_tree, fp_mul_exact
from .core import pad_rows, run_cores

__all__ = ["pad_stream", "scheduled_fp_results", "td_pe", "td_pe_cycles", "td_tile", "td_tile_cycles"]


def _resolve(schema, params):
    """``params`` resolved through ``schema``: defaults for those not given, names the schema lacks ignored."""
    return schema.resolve(**{name: value for name, value in params.items() if name in schema.names})


def pad_stream(operands, clear, read, depth):
    """Pad a stream with zero rows without flags up to whole groups of ``depth`` rows.

    Parameters
    ----------
    operands : sequence of ndarray, each of shape (T, ...)
    clear, read : ndarray of bool, shape (T,)

    Returns
    -------
    tuple
        The padded operands, then ``clear`` and ``read``.
    """
    total = len(clear)
    extra = pad_rows(total, depth) - total
    padded = [np.concatenate([np.asarray(x), np.zeros((extra,) + np.shape(x)[1:], dtype=np.asarray(x).dtype)])
              for x in operands]
    flags = [np.concatenate([np.asarray(f, dtype=bool), np.zeros(extra, dtype=bool)]) for f in (clear, read)]
    return (*padded, *flags)


def _effectual(a, b, params, both_sides):
    """Effectual pairs, shape (rows, T, lanes): B non-zero (and A non-zero when ``both_sides``; A of column 0)."""
    effectual = ~mac_spec.zero_operands(np.moveaxis(np.asarray(b), 1, 0), params)
    if both_sides:
        effectual &= ~mac_spec.zero_operands(np.asarray(a)[:, 0], params)[None]
    return effectual


def scheduled_fp_results(a, b, clear, read, params, both_sides, offered=None, ready=None):
    """FP results of a PE or tile, adding each cycle's lane products as the hardware does (module docstring).

    Parameters
    ----------
    a : array_like of int, shape (T, cols, lanes)
        Operand bit patterns (FP16 or BF16, by ``params["mac"]``).
    b : array_like of int, shape (T, rows, lanes)
    clear, read : array_like of bool, shape (T,)
    params : dict
        Resolved PE or tile parameters.
    both_sides : bool
    offered : array_like of bool, optional
        The source's ``valid`` per clock cycle from the first group's transfer
        (:func:`~.core.run_cores`); gaps change which pairs share a scheduling cycle, and so the rounding.
    ready : array_like of bool, optional
        The sink's ``ready`` per clock cycle, counted as ``offered``: with gaps, output stalls move the
        takes against the schedule too.

    Returns
    -------
    ndarray of uint32, shape (reads, rows, cols)
        FP32 bit patterns of the accumulators at each ``read`` row.
    """
    fmt = mac_spec.FLOAT_FORMATS[params["mac"]]
    pattern = spec.pattern_of(params)
    depth, lanes = params["depth"], params["lanes"]
    a, b, clear, read = pad_stream((a, b), clear, read, depth)
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    rows, cols = b.shape[1], a.shape[1]
    run = run_cores(_effectual(a, b, params, both_sides)[None], read, clear, pattern, depth, record=True,
                    offered=offered, ready=ready, latency=spec.latency(params))
    cycles = int(run.cycles[0])
    # Only the cycles whose window held rows are rows of the accumulator (an empty window is a bubble).
    rows_of_accumulator = run.scheduled[:cycles, 0]
    reads = np.zeros(cycles, dtype=bool)
    reads[np.asarray(run.read_cycles[0], dtype=np.int64)] = True
    heads, selects, active = (x[:cycles, 0][rows_of_accumulator] for x in (run.heads, run.selects, run.active))
    reads = reads[rows_of_accumulator]
    slots = np.array([option_slots(pattern, lanes, lane) for lane in range(lanes)])  # (lanes, options, 2)
    lane_index = np.arange(lanes)
    stream_row = heads[:, None, None] + slots[lane_index, selects, 0]   # (C, rows, lanes)
    column = slots[lane_index, selects, 1]
    row_index = np.arange(rows)[None, :, None]
    b_values = b[stream_row, row_index, column]                         # (C, rows, lanes)
    a_values = a[stream_row[:, :, None, :], np.arange(cols)[None, None, :, None], column[:, :, None, :]]
    products = fp_mul_exact(a_values, b_values[:, :, None, :], fmt)     # (C, rows, cols, lanes)
    products = np.where(active[:, :, None, :], products, np.uint32(mac_spec.IDLE_PRODUCT))
    sums = fp32_sum_tree(products, axis=-1)                             # (C, rows, cols)
    out = fp32_accumulate(sums, np.asarray(clear, dtype=bool)[heads], params["partial_sums"], reads)
    return out.reshape(-1, rows, cols)


def td_pe(a, b, clear, read, *, offered=None, ready=None, **params):
    """Results of ``td_pe``.

    ``params`` are those of :data:`trainforge.spec.tensordash.PE_PARAMS` (defaults from there, other
    names ignored). With the ``integer`` MAC the results are the dense PE's (``acc_width`` and ``signed``
    shape them) and the TensorDash parameters change only the timing; with ``fp16`` or ``bf16`` they are
    FP32 bit patterns summed in the order of the schedule (module docstring), which ``offered`` (the
    source's ``valid`` per cycle) and ``ready`` (the sink's, :func:`~.core.run_cores`; default always
    valid and ready) shape.
    """
    params = _resolve(spec.PE_PARAMS, params)
    if mac_spec.is_float(params):
        return scheduled_fp_results(np.asarray(a)[:, None], np.asarray(b)[:, None], clear, read, params,
                                    params["mode"] == "both", offered, ready)[:, 0, 0]
    return dense_pe(a, b, clear, read, **params)


def td_pe_cycles(a, b, clear, read, *, record=False, offered=None, ready=None, **params):
    """Cycle model of ``td_pe`` over one stream (padded to whole groups).

    ``params`` are those of :data:`trainforge.spec.tensordash.PE_PARAMS` (defaults from there, other
    names ignored); ``lanes``, ``depth``, ``pattern`` and ``mode`` set the timing, ``offered`` (the
    source's ``valid`` per cycle from the first group's transfer) the arrivals and ``ready`` (the sink's)
    the stalls (:func:`~.core.run_cores`; default always valid and ready). With ``ready`` the run's
    ``result_clocks`` are the cycles of the results on ``o_sum``.

    Returns
    -------
    CoreRun
        ``cycles``, ``macs`` and, with ``record``, ``read_cycles`` and ``multiplicity`` for core 0.
    """
    params = _resolve(spec.PE_PARAMS, params)
    pattern = spec.pattern_of(params)
    a, b, clear, read = pad_stream((a, b), clear, read, params["depth"])
    effectual = _effectual(np.asarray(a)[:, None], np.asarray(b)[:, None], params, params["mode"] == "both")
    return run_cores(effectual[None], read, clear, pattern, params["depth"], record=record, offered=offered,
                     ready=ready, latency=spec.latency(params))


def td_tile(a, b, clear, read, *, offered=None, ready=None, **params):
    """Results of ``td_tile``: one ``rows`` x ``cols`` array per ``read`` row.

    ``params`` are those of :data:`trainforge.spec.tensordash.TILE_PARAMS` (defaults from there, other
    names ignored); ``mac``, ``acc_width`` and ``signed`` set the arithmetic, the shape comes from the operands.

    Parameters
    ----------
    a : array_like, shape (T, cols, lanes)
    b : array_like, shape (T, rows, lanes)
    clear, read : array_like of bool, shape (T,)
    offered, ready : array_like of bool, optional
        The source's ``valid`` and the sink's ``ready`` per cycle from the first group's transfer (FP: they
        shape the schedule's sums; :func:`~.core.run_cores`).

    Returns
    -------
    ndarray, shape (reads, rows, cols)
    """
    params = _resolve(spec.TILE_PARAMS, params)
    if mac_spec.is_float(params):
        return scheduled_fp_results(a, b, clear, read, params, both_sides=False, offered=offered, ready=ready)
    a = np.asarray(a)
    b = np.asarray(b)
    rows, cols = b.shape[1], a.shape[1]
    out = np.zeros((int(np.sum(read)), rows, cols),
                   dtype=np.int64 if params["signed"] else np.uint64)
    for r in range(rows):
        for c in range(cols):
            out[:, r, c] = dense_pe(a[:, c], b[:, r], clear, read, acc_width=params["acc_width"],
                                    signed=params["signed"])
    return out


def td_tile_cycles(a, b, clear, read, *, record=False, offered=None, ready=None, **params):
    """Cycle model of ``td_tile`` (B-only skipping, rows synchronized) over one stream.

    ``params`` are those of :data:`trainforge.spec.tensordash.TILE_PARAMS` (defaults from there, other
    names ignored); ``lanes``, ``depth`` and ``pattern`` set the timing, the shape comes from the operands.
    """
    params = _resolve(spec.TILE_PARAMS, params)
    pattern = spec.pattern_of(params)
    a, b, clear, read = pad_stream((a, b), clear, read, params["depth"])
    return run_cores(_effectual(a, b, params, False)[None], read, clear, pattern, params["depth"], record=record,
                     offered=offered, ready=ready, latency=spec.latency(params))
