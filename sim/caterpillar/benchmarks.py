"""CATERPILLAR workloads for ``trainforge bench`` (timed there, never asserted here).

The golden GEMV and GEMM run at the full size of the large network's biggest
layer (2500 x 2000, 16-bit operands, 16 x 16 PEs); the training study trains the
paper's small network (784-500-500-500-10) with CP and SGD for one epoch on the
default data, then prices it on the architecture model.
"""
import numpy as np

from trainforge.golden.caterpillar import core
from trainforge.sim.caterpillar import arch
from trainforge.sim.caterpillar import training

_N_R = 16
_ROWS, _COLS = 2500, 2000
_GENERATOR = np.random.default_rng(0)
_WEIGHTS = _GENERATOR.integers(-(1 << 15), 1 << 15, size=(_ROWS, _COLS))
_X = _GENERATOR.integers(-(1 << 15), 1 << 15, size=_ROWS)
_E = _GENERATOR.integers(-(1 << 15), 1 << 15, size=_COLS)
_B = _GENERATOR.integers(-(1 << 15), 1 << 15, size=(_COLS, 50))
_STUDY_NETWORK = "500-500-500-10"


def _gemv_forward_and_backward():
    """Golden GEMV forward and backward, 2500 x 2000 on a 16 x 16 core, with their schedules."""
    core.gemv_forward(_WEIGHTS, _X, n_r=_N_R)
    core.gemv_backward(_WEIGHTS, _E, n_r=_N_R)
    mb, nb = core.blocks(_ROWS, _N_R), core.blocks(_COLS, _N_R)
    core.schedule(core.OP_GEMV_FORWARD, mb, nb, n_r=_N_R, reduction="tree", overlap=True)


def _gemm_minibatch_50():
    """Golden GEMM by rank-1 updates: 2500 x 2000 times 2000 x 50 (a b = 50 minibatch) on a 16 x 16 core."""
    core.gemm(_WEIGHTS, _B, n_r=_N_R)


def _training_study_epoch():
    """Training study: 784-500-500-500-10, CP and SGD, one epoch on the default data, energy and time."""
    x, labels, _ = training.load_dataset()
    split = int(0.8 * len(x))
    widths = arch.NETWORKS[_STUDY_NETWORK]
    config = arch.CONFIGS["2x16-cores-4x4"]
    for method in ("CP", "SGD"):
        training.train(widths, method, x[:split], labels[:split], x[split:], labels[split:], epochs=1, seed=0)
        arch.epoch_energy(widths, method, split, config)
        arch.epoch_cycles(widths, method, split, config)


BENCHMARKS = {
    "caterpillar_golden_gemv_2500x2000_nr16": (
        _gemv_forward_and_backward, {"m": _ROWS, "n": _COLS, "n_r": _N_R, "passes": ["forward", "backward"]}),
    "caterpillar_golden_gemm_2500x2000x50_nr16": (
        _gemm_minibatch_50, {"m": _ROWS, "k": _COLS, "q": 50, "n_r": _N_R}),
    "caterpillar_study_500x3_cp_sgd_1_epoch": (
        _training_study_epoch, {"network": _STUDY_NETWORK, "methods": ["CP", "SGD"], "epochs": 1,
                                "config": "2x16-cores-4x4"}),
}
