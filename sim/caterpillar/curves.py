"""Accuracy curves of the multi-seed training study: held-out folds, smoothing, crossings, spread.

- Folds: the data set is shuffled once (a fixed generator, seed 0) and cut
  into ``FOLDS`` equal folds; the run of the ``k``-th seed holds out fold
  ``k % FOLDS`` and trains on the rest, so that 5 seeds hold out every image
  once, and each run is evaluated on its whole held-out fold.
- Smoothing: a centred moving average over ``SMOOTHING_WINDOW`` = 3
  evaluations (an evaluation and its two neighbours; the first and the last
  average the two they have).
- Crossing: the first point where the smoothed curve reaches the target,
  linearly interpolated between that evaluation and the one before (in
  consumed training samples); the first evaluation itself when it already
  reaches it; ``None`` when the smoothed curve never does.
"""
import numpy as np

__all__ = ["FOLDS", "SMOOTHING_WINDOW", "fold_split", "smooth", "crossing", "spread"]

#: Held-out folds (20% of the data each, as the former fixed 80/20 split).
FOLDS = 5
#: Evaluations in the centred moving average.
SMOOTHING_WINDOW = 3


def fold_split(count, index, folds=FOLDS):
    """``(train, test)`` index arrays of run ``index``: fold ``index % folds`` of a fixed shuffle held out."""
    order = np.random.default_rng(0).permutation(count)
    fold = index % folds
    start, stop = fold * count // folds, (fold + 1) * count // folds
    return np.concatenate((order[:start], order[stop:])), order[start:stop]


def smooth(accuracy, window=SMOOTHING_WINDOW):
    """Centred moving average of ``accuracy`` over ``window`` (odd) evaluations, shortened at the ends."""
    values = np.asarray(accuracy, dtype=float)
    half = window // 2
    return np.array([values[max(0, i - half):i + half + 1].mean() for i in range(len(values))])


def crossing(samples, accuracy, target, window=SMOOTHING_WINDOW):
    """Training samples consumed when the smoothed curve first reaches ``target`` (interpolated), or None."""
    smoothed = smooth(accuracy, window)
    reached = np.flatnonzero(smoothed >= target)
    if reached.size == 0:
        return None
    i = int(reached[0])
    if i == 0:
        return float(samples[0])
    before, after = smoothed[i - 1], smoothed[i]
    fraction = (target - before) / (after - before)
    return float(samples[i - 1] + fraction * (samples[i] - samples[i - 1]))


def spread(values):
    """``{mean, std, min, max, n}`` of ``values`` (population standard deviation; ``std`` 0 for one value)."""
    values = np.asarray(values, dtype=float)
    return {"mean": float(values.mean()), "std": float(values.std()), "min": float(values.min()),
            "max": float(values.max()), "n": int(values.size)}
