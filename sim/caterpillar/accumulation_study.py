"""Counterfactual for the ``cp_pe`` FPU: FP32 accumulation (built) against FP16 accumulation, for dot products.

Each trial is a dot product of ``n`` FP16 activations (standard normal) and
FP16 weights (normal, standard deviation ``1 / sqrt(n)``), with subnormal
operands flushed as the FPU does. The built MAC
(:func:`trainforge.golden.caterpillar.pe.fp16_multiply_accumulate`) keeps the
sum in FP32; the counterfactual rounds the sum to FP16 after every MAC (a
half-precision accumulator). The error is measured against the float64 sum
of the same operands, relative to the RMS of the exact sums. A third
column is the FP32 sum with the interleaved accumulator of 4 partial sums
(``cp_pe`` ``partial_sums=4``: product ``j`` into partial ``j mod 4``, then
``(q0 + q1) + (q2 + q3)``; :func:`trainforge.golden.fp.fp32_accumulate`).

Run: ``.venv/bin/python -m trainforge.sim.caterpillar.accumulation_study``.
"""
import numpy as np

from ...golden.caterpillar.pe import fp16_multiply_accumulate
from ...golden.fp import fp32_accumulate, fp_mul_exact
from ...spec.fp import FP16

__all__ = ["accumulation_errors", "dot_product_operands"]


def dot_product_operands(n, trials, seed):
    """``(x, w, exact)``: ``trials`` rows of ``n`` FP16 activations (standard normal) and weights (normal, standard
    deviation ``1 / sqrt(n)``), subnormal operands flushed as the FPU does, and the float64 dot products."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((trials, n)).astype(np.float16)
    w = (rng.standard_normal((trials, n)) / np.sqrt(n)).astype(np.float16)
    x = np.where(np.abs(x) < 2.0 ** -14, np.float16(0), x)
    w = np.where(np.abs(w) < 2.0 ** -14, np.float16(0), w)
    return x, w, (x.astype(np.float64) * w.astype(np.float64)).sum(axis=1)


def accumulation_errors(n, trials=2000, seed=0, partials=4):
    """Relative errors ``(fp32, fp16, fp32 with partials)`` of ``trials`` dot products of length ``n`` (arrays of
    ``trials``)."""
    x, w, exact = dot_product_operands(n, trials, seed)
    acc32 = np.zeros(trials, np.uint32)
    acc16 = np.zeros(trials, np.uint32)
    for k in range(n):
        acc32 = fp16_multiply_accumulate(acc32, x.view(np.uint16)[:, k], w.view(np.uint16)[:, k])
        total = fp16_multiply_accumulate(acc16, x.view(np.uint16)[:, k], w.view(np.uint16)[:, k])
        acc16 = total.view(np.float32).astype(np.float16).astype(np.float32).view(np.uint32)
    products = fp_mul_exact(x.view(np.uint16).T, w.view(np.uint16).T, FP16)  # (n, trials)
    last = np.zeros(n, bool)
    last[-1] = True
    interleaved = fp32_accumulate(products, np.eye(1, n, 0, dtype=bool)[0], partials, last)[0]
    scale = np.sqrt(np.mean(exact ** 2))
    return (np.abs(acc32.view(np.float32) - exact) / scale, np.abs(acc16.view(np.float32) - exact) / scale,
            np.abs(interleaved.view(np.float32) - exact) / scale)


def main():
    print("    n  FP32 acc median / max   FP16 acc median / max   FP32, 4 partials median / max")
    for n in (16, 256, 784, 4096):
        e32, e16, e4 = accumulation_errors(n)
        print(f"{n:5d}  {np.median(e32):.1e} / {e32.max():.1e}       {np.median(e16):.1e} / {e16.max():.1e}"
              f"       {np.median(e4):.1e} / {e4.max():.1e}")


if __name__ == "__main__":
    main()
