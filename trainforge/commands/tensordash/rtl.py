"""RTL beside the golden model: traced layers of the digits CNN run through the ``td_tile`` RTL under a simulator.

For each of the three training operations of one traced layer (a few
samples, so it fits a simulation), the operands are quantised to the tile's
signed integers *keeping every zero a zero and every non-zero non-zero*
(so the sparsity is the traced one), lowered with
:func:`~trainforge.golden.tensordash.layer.lower`, streamed through the RTL
tile by ``verif/tb_td_tile_layer.py`` at full rate, and compared:

- values: the tile's results folded back (:func:`~trainforge.golden.tensordash.layer.assemble`)
  against a direct convolution / gradient of the quantised tensors;
- cycles: the RTL's scheduling cycles (last result cycle minus the first
  transfer, minus the pipeline latency) against
  :func:`~trainforge.golden.tensordash.layer.layer_cycles`, and the dense count.

Needs a source checkout (``verif/``) and the simulator (``make simulators``);
the build is shared with the test suite's cache in ``build/sim/``.
"""
import shutil
import uuid

import numpy as np

from trainforge.errors import UsageError
from trainforge.spec.tensordash import TILE_PARAMS, result_cycle
from trainforge.golden.tensordash.layer import (OPERATIONS, assemble, direct_conv, direct_input_gradient,
                                                direct_weight_gradient, layer_cycles, lower, tile_program)

__all__ = ["quantise", "require_simulator", "run_stream", "check_operations", "rtl_layer_check"]

SIMULATOR_TOOLS = {"icarus": "iverilog", "verilator": "verilator"}


def quantise(x, width=8):
    """Signed ``width``-bit integers proportional to ``x``: zeros stay zero, non-zeros stay non-zero."""
    x = np.asarray(x, dtype=np.float64)
    top = (1 << (width - 1)) - 1
    scale = np.abs(x).max() or 1.0
    magnitude = np.clip(np.rint(np.abs(x) / scale * top), 1, top)
    return np.where(x == 0, 0, np.sign(x) * magnitude).astype(np.int64)


def require_simulator(simulator):
    """Raise :class:`UsageError` unless the simulator's tool is on PATH."""
    if shutil.which(SIMULATOR_TOOLS[simulator]) is None:
        raise UsageError(f"the RTL runs need {SIMULATOR_TOOLS[simulator]} on PATH (install it with 'make simulators')")


def run_stream(stream, simulator, block="td_tile", params=None):
    """Run one prepared stream through ``td_tile`` or ``td_pe`` at full rate; return (values, cycles) per result.

    Parameters
    ----------
    stream : tuple of ndarray
        ``a`` (T, cols, lanes), ``b`` (T, rows, lanes), ``clear`` and ``read`` (T,); a PE is 1 x 1.
    simulator : str
        ``"verilator"`` or ``"icarus"``.
    block : str
        ``"td_tile"`` or ``"td_pe"``.
    params : dict, optional
        Parameters of the block (defaults: the 4x4 tile); the build is cached in ``build/sim/``.

    Returns
    -------
    values : ndarray, shape (results, rows * cols)
    cycles : ndarray, shape (results,)
        Cycle each result left the block, counted from the first transfer.
    """
    from trainforge import simulation

    stage = simulation.BUILD_ROOT / "td_layer" / uuid.uuid4().hex[:8]
    stage.mkdir(parents=True)
    stimulus, results = stage / "stimulus.npz", stage / "results.npz"
    a, b, clear, read = stream
    np.savez(stimulus, a=a, b=b, clear=clear, read=read)
    run_dir = simulation.run(block, "tb_td_tile_layer", params or {}, simulator, seed=0,
                             extra_env={"TD_LAYER_STIMULUS": str(stimulus), "TD_LAYER_RESULTS": str(results)})
    if not results.exists():
        raise RuntimeError(f"the {simulator} run wrote no results (log in {run_dir})")
    out = np.load(results)
    return out["values"], out["cycles"]


def _reference(operation, acts, weights, grads, padding):
    if weights.ndim == 2:
        acts4, weights4, grads4 = acts[:, :, None, None], weights[:, :, None, None], grads[:, :, None, None]
    else:
        acts4, weights4, grads4 = acts, weights, grads
    if operation == "AxW":
        out = direct_conv(acts4, weights4, 1, padding)
    elif operation == "GxW":
        out = direct_input_gradient(grads4, weights4, acts4.shape, 1, padding)
    else:
        out = direct_weight_gradient(grads4, acts4, weights4.shape[2:], 1, padding)
    return out[:, :, 0, 0] if weights.ndim == 2 else out


def check_operations(acts, weights, grads, padding, simulator="verilator", operations=OPERATIONS, label="layer"):
    """Run operations of one layer (signed integer tensors, stride 1) through the 4x4 RTL tile.

    The operations' tile programs run back to back in one simulation; each
    ends on a ``read`` row, so the cycles of operation ``k`` are the cycles
    between the last results of operations ``k - 1`` and ``k``.

    Returns
    -------
    list of dict
        Per operation: dense, golden and RTL cycles, whether cycles and values agree, speedups.
    """
    require_simulator(simulator)
    lowered = [lower(operation, acts, weights, grads, 1, padding) for operation in operations]
    programs = [tile_program(item) for item in lowered]
    stream = tuple(np.concatenate([program[k] for program in programs]) for k in range(4))
    values, cycles = run_stream(stream, simulator)
    rows, first, previous = [], 0, result_cycle(TILE_PARAMS.resolve(), 0) - 1  # the cycle before the first
    for operation, item, program in zip(operations, lowered, programs):
        model = layer_cycles(item)
        count = int(program[3].sum())
        last = int(cycles[first + count - 1]) if count and first + count <= len(cycles) else previous
        rtl_cycles = last - previous
        result = assemble(item, values[first:first + count].reshape(-1, 4, 4), program[4])
        reference = _reference(operation, acts, weights, grads, padding)
        rows.append({"layer": label, "operation": operation, "simulator": simulator,
                     "targeted": item.targeted, "stream_rows": len(program[3]), "dense_cycles": model.dense,
                     "golden_cycles": model.tensordash, "rtl_cycles": rtl_cycles,
                     "cycles_agree": rtl_cycles == model.tensordash,
                     "values_agree": bool(result.shape == reference.shape and np.array_equal(result, reference)),
                     "golden_speedup": model.speedup, "rtl_speedup": model.dense / max(rtl_cycles, 1)})
        first, previous = first + count, last
    return rows


def rtl_layer_check(trace, layer="conv2", samples=1, simulator="verilator", operations=OPERATIONS):
    """Run the operations of one traced layer, quantised to int8, through the RTL tile (:func:`check_operations`).

    Parameters
    ----------
    trace : dict
        One epoch of :func:`~.training.train_and_trace`'s ``traces``.
    layer : str
    samples : int
        Leading samples of the traced mini-batch to use.
    simulator : str
        ``"verilator"`` or ``"icarus"``.
    """
    tensors = trace[layer]
    acts, weights, grads = (quantise(tensors["A"][:samples]), quantise(tensors["W"]),
                            quantise(tensors["G"][:samples]))
    rows = check_operations(acts, weights, grads, 1 if weights.ndim == 4 else 0, simulator, operations, layer)
    for row in rows:
        row["samples"] = samples
    return rows
