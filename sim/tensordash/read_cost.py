"""What a partial-sum reduction serialised over ``read`` rows would cost in cycles (issue 14, not built).

Today every FP PE sums its ``partial_sums`` interleaved partials with a pipelined adder tree of its own
(7 FP32 adders for 8 partials, :mod:`trainforge.hw.fp.accumulate`), so a ``read`` row costs no cycle.
Two ways to drop those adders, both keeping the additions and their order (the same pairwise tree over the
same partials, so the FP results would not change), change only *when* results come out and whether the
schedule stops:

``shared`` (one reducer per tile of ``pes`` PEs)
    A ``read`` row snapshots every PE's partials; one pipelined tree takes one PE's partials per cycle, so
    two snapshots are at least ``pes`` enabled cycles apart, and the pipeline stops while a ``read`` row
    waits for the reducer. A pass (the cycles from one ``read`` row to the next) of ``c`` cycles then costs
    ``max(0, pes - c)`` more; the first pass waits for nothing.
``fold`` (through the PE's own accumulating adder)
    The partials re-enter the accumulating adder pairwise (8 -> 4 -> 2 -> 1): 7 additions per ``read``,
    each taking the adder slot of a row. Interleaved with the rows, at least ``7`` cycles per pass when the
    adder is busy every cycle (a lower bound: a pass shorter than the fold's dependency chain waits more);
    blocking (the pipeline stops until the fold is out: the last row's ``partial_sums`` stages, then 3
    levels of ``partial_sums`` stages each), ``4 * partial_sums`` = 32 cycles per pass.

The pass cycles come from the golden cycle model (:func:`trainforge.golden.tensordash.layer.pass_cycles`,
:func:`trainforge.golden.tensordash.core.run_cores`); the dense tile pays the same reduction.
"""
import numpy as np

from trainforge.golden.tensordash.core import run_cores
from trainforge.golden.tensordash.layer import OPERATIONS, lower, pass_cycles
from trainforge.spec.tensordash import resolve_pattern

from .figures import random_stream

__all__ = ["shared_reducer_extra", "fold_extra", "DESIGNS", "with_design", "fig15_costs", "digits_costs"]

#: Adder slots of the pairwise fold of 8 partials (4 + 2 + 1 additions).
FOLD_ADDITIONS = 7


def shared_reducer_extra(cycles, pes):
    """Extra cycles of one reducer shared by ``pes`` PEs over back-to-back passes of ``cycles`` each.

    Parameters
    ----------
    cycles : array_like of int
        Cycles of each pass, from the previous ``read`` row to its own, in order.
    pes : int
        PEs served by the reducer (one per cycle).

    Returns
    -------
    int
        Cycles the pipeline stops: ``sum(max(0, pes - c))`` over every pass but the first.
    """
    cycles = np.asarray(cycles, dtype=np.int64)
    return int(np.maximum(0, pes - cycles[1:]).sum())


def fold_extra(cycles, per_read):
    """Extra cycles of a fold through each PE's accumulating adder: ``per_read`` for every pass."""
    return int(per_read) * len(np.asarray(cycles))


#: The designs costed, by name: a function of (pass cycles, PEs sharing a reducer) -> extra cycles.
DESIGNS = {
    "shared": shared_reducer_extra,
    "fold, interleaved (>=)": lambda cycles, pes: fold_extra(cycles, FOLD_ADDITIONS),
    "fold, blocking": lambda cycles, pes: fold_extra(cycles, 4 * 8),
}


def with_design(tensordash, dense, pes):
    """Per design: (TensorDash cycles, dense cycles) with the extra cycles of the reduction added."""
    return {name: (int(np.sum(tensordash)) + extra(tensordash, pes), int(np.sum(dense)) + extra(dense, pes))
            for name, extra in DESIGNS.items()}


def fig15_costs(sparsities=(0.2, 0.5, 0.9, 0.99), rows=4, cols=4, samples=64, stream_rows=512, seed=0):
    """Fig. 15's tile (``samples`` dot products of ``stream_rows`` rows run back to back): speedup per design.

    Returns
    -------
    list of dict
        ``sparsity``, ``now`` (today's speedup, the mean over samples as :func:`.figures.speedup`), and per
        design the speedup with its extra cycles (total dense over total TensorDash cycles).
    """
    out = []
    for sparsity in sparsities:
        effectual, clear, read = random_stream(sparsity, rows=rows, samples=samples, stream_rows=stream_rows,
                                               seed=seed)
        tensordash = run_cores(effectual, read, clear, resolve_pattern("default", 4, 4), 4).cycles
        dense = np.full(samples, len(read), dtype=np.int64)
        row = {"sparsity": sparsity, "now": float(np.mean(dense / tensordash))}
        for name, (td, de) in with_design(tensordash, dense, rows * cols).items():
            row[name] = de / td
        row["tensordash_cycles"] = int(tensordash.sum())
        out.append(row)
    return out


def digits_costs(trace, layers, rows=4, cols=4):
    """The digits CNN's traced layers, every operation as :func:`.training.layer_speedups` runs it.

    Returns
    -------
    rows_out : list of dict
        Per layer and operation: passes, TensorDash and dense cycles, mean pass, and per design the extra
        TensorDash cycles.
    totals : dict
        ``now`` and per design: (TensorDash cycles, dense cycles) over all of them.
    """
    rows_out, totals = [], {"now": [0, 0], **{name: [0, 0] for name in DESIGNS}}
    for index, (name, kind, _) in enumerate(layers):
        tensors = trace[name]
        for operation in OPERATIONS:
            if operation == "GxW" and index == 0:
                continue
            lowered = lower(operation, tensors["A"], tensors["W"], tensors["G"], 1, 1 if kind == "conv" else 0)
            tensordash, dense = pass_cycles(lowered, rows=rows, cols=cols)
            row = {"layer": name, "operation": operation, "passes": len(tensordash),
                   "tensordash": int(tensordash.sum()), "dense": int(dense.sum()),
                   "mean_pass": float(tensordash.mean())}
            totals["now"][0] += row["tensordash"]
            totals["now"][1] += row["dense"]
            for design, (td, de) in with_design(tensordash, dense, rows * cols).items():
                row[design] = td - row["tensordash"]
                totals[design][0] += td
                totals[design][1] += de
            rows_out.append(row)
    return rows_out, totals


def main(epochs=8):
    """Print both tables (the numbers in hw/tensordash/README.md)."""
    from .training import LAYERS, train_and_trace
    for row in fig15_costs():
        print("Fig. 15 tile", {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()})
    trace = train_and_trace(epochs=epochs)["traces"]
    totals_all = {key: [0, 0] for key in ("now", *DESIGNS)}
    for epoch, epoch_trace in enumerate(trace):
        table, totals = digits_costs(epoch_trace, LAYERS)
        if epoch == len(trace) - 1:
            for row in table:
                print(row)
        for key, (td, de) in totals.items():
            totals_all[key][0] += td
            totals_all[key][1] += de
    for key, (td, de) in totals_all.items():
        print(f"digits CNN, {epochs} traced batches, {key}: speedup {de / td:.3f}, TensorDash cycles "
              f"{td} ({td / totals_all['now'][0] - 1:+.1%})")


if __name__ == "__main__":
    main()
