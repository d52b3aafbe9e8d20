"""Rounding-error statistics of the MAC variants (mean bias, lane and cycle correlation of SR-LO)."""
import numpy as np

from ...spec.neurotrainer.mac import PARAMS
from .mac import round_shift, rounding_offsets

__all__ = ["sr_lo_predicted_bias", "rounding_error_statistics"]


def sr_lo_predicted_bias(frac_bits):
    """Expected mean rounding error of SR-LO in LSBs: ``(1 - 2**-F) / 510``.

    Each bit of the shift register is 1 in 128 of the LFSR's 255 states, so the
    masked random offset averages ``(2**F - 1) * 128 / 255`` instead of
    ``(2**F - 1) / 2``: an m-sequence has one more 1 than 0.
    """
    return (1.0 - 2.0 ** -frac_bits) / 510.0


def rounding_error_statistics(rounding, samples=100_000, frac_bits=PARAMS["frac_bits"].default,
                              seed=PARAMS["seed"].default, data_seed=2024, lanes=2):
    """Round ``samples`` random exact sums per lane and measure the errors.

    The exact values are uniformly random 2F-fraction-bit sums (independent per lane);
    the rounding offsets are the variant's own, row by row, exactly as the hardware
    applies them (:func:`~trainforge.golden.neurotrainer.mac.rounding_offsets`).

    Returns
    -------
    dict
        Over lane 0's ``samples`` errors: ``mean`` (LSBs of the result), ``std``, ``sigma_of_mean`` (``std / sqrt(n)``),
        ``z`` (``mean / sigma_of_mean``), ``lane_correlation`` (Pearson correlation of
        lane 0's and lane 1's errors), ``lag1_correlation`` (of one lane's errors in
        consecutive rows), ``samples``.
    """
    generator = np.random.default_rng(data_seed)
    exact = generator.integers(-(1 << (2 * frac_bits + 8)), 1 << (2 * frac_bits + 8), size=(samples, lanes))
    offsets = rounding_offsets(rounding, frac_bits, np.ones(samples, dtype=bool), seed, lanes, samples)
    rounded = round_shift(exact, frac_bits, offsets, 64)
    errors = ((rounded << np.int64(frac_bits)) - exact).astype(np.float64) / float(1 << frac_bits)
    flat = errors[:, 0]  # one lane: the lanes of SR-LO share their random bits
    std = float(flat.std())
    sigma = std / np.sqrt(flat.size)
    mean = float(flat.mean())
    return {
        "rounding": rounding,
        "samples": int(flat.size),
        "mean": mean,
        "std": std,
        "sigma_of_mean": float(sigma),
        "z": float(mean / sigma),
        "lane_correlation": float(np.corrcoef(errors[:, 0], errors[:, 1])[0, 1]),
        "lag1_correlation": float(np.corrcoef(errors[:-1, 0], errors[1:, 0])[0, 1]),
    }
