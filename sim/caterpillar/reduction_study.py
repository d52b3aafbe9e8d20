"""Counterfactual for the ``cp_pe`` reduction order: the bus reduction in turn against the interleaved one.

Each trial is a GEMV output of ``n`` terms on a core of ``n_r`` PEs per column:
``n`` FP16 activations (standard normal) times FP16 weights (normal, standard
deviation ``1 / sqrt(n)``), subnormal operands flushed as the FPU does. PE
``d`` of the column sums the products ``d, d + n_r, d + 2 n_r, ...`` in FP32
in turn (the one-cycle accumulate stage), then the bus reduction adds the
``n_r`` partial sums ``v0`` (the diagonal PE's), ``v1``, ... into the diagonal
PE: in turn, ``((v0 + v1) + v2) + ...`` (``reduction_partials`` 1), or by the
interleaved reduction (``reduction_partials`` 4: ``v_j`` into partial
``j mod 4``, then ``(q0 + q1) + (q2 + q3)``;
:func:`trainforge.golden.fp.fp32_accumulate`, as the golden ``cp_pe``). The
error is measured against the float64 sum of the same operands, relative to
the RMS of the exact sums.

Run: ``.venv/bin/python -m trainforge.sim.caterpillar.reduction_study``.
"""
import numpy as np

from ...golden.fp import fp32_accumulate, fp_mul_exact
from .accumulation_study import dot_product_operands
from ...spec.fp import FP16

__all__ = ["reduction_errors"]


def reduction_errors(n, n_r, trials=2000, seed=0, partials=4):
    """Relative errors ``(in turn, interleaved)`` of ``trials`` GEMV outputs of ``n`` terms reduced over ``n_r``
    PEs (arrays of ``trials``); ``n`` must be a multiple of ``n_r``."""
    x, w, exact = dot_product_operands(n, trials, seed)
    products = fp_mul_exact(x.view(np.uint16), w.view(np.uint16), FP16)  # (trials, n)
    # Each PE's partial sum in turn: rows are the products of PE d, d + n_r, ...; trailing axes the trials, PEs.
    rows = products.reshape(trials, n // n_r, n_r).transpose(1, 0, 2)
    last = np.zeros(n // n_r, bool)
    last[-1] = True
    first = np.zeros(n // n_r, bool)
    first[0] = True
    pe_sums = fp32_accumulate(rows, first, 1, last)[0]  # (trials, n_r)
    reduce_last = np.zeros(n_r, bool)
    reduce_last[-1] = True
    reduce_first = np.zeros(n_r, bool)
    reduce_first[0] = True
    in_turn = fp32_accumulate(pe_sums.T, reduce_first, 1, reduce_last)[0]
    interleaved = fp32_accumulate(pe_sums.T, reduce_first, partials, reduce_last)[0]
    scale = np.sqrt(np.mean(exact ** 2))
    return (np.abs(in_turn.view(np.float32) - exact) / scale,
            np.abs(interleaved.view(np.float32) - exact) / scale)


def main():
    print("    n  n_r  in turn: median / max   4 partials: median / max")
    for n, n_r in ((16, 4), (784, 4), (784, 16), (4096, 16)):
        turn, interleaved = reduction_errors(n, n_r)
        print(f"{n:5d}  {n_r:3d}  {np.median(turn):.1e} / {turn.max():.1e}        "
              f"{np.median(interleaved):.1e} / {interleaved.max():.1e}")


if __name__ == "__main__":
    main()
