"""Chip-to-chip and chip-to-memory transfer volumes of one layer, per pass, worked by hand.

The layer is a 1024 -> 1024 fully connected layer at a global minibatch of 256 on the
default Fig. 10 system: a 4 x 16 torus (M = 4 chips along X, N = 16 along Y), 80 GB/s out
of each chip along X and along Y, HBM at 256 GB/s x 0.8 = 204.8 GB/s, 2-byte elements,
2 GHz. Every expected value below is written out from the paper's Section II-D rules,
not computed by the model:

* gradient reduction (UPD, data-parallel dimensions): "first accumulating in the
  X-direction and then in Y-direction in a pipelined manner"; a reduce-scatter along X
  sends (M-1)/M of the gradient, the one along Y sends (N-1)/N of the 1/M shard left.
  "The updated weights are broadcast back first along Y and then along X": the same
  volumes again, so the non-overlapped once-per-layer time is twice the slowest link
  of one phase. DySM does not change it: "gradient reduction is done only after all
  spatial minibatch iterations are complete".
* rotation (model-parallel dimensions): M*N iterations, each chip holding 1/(MN) of
  the features F; "rotated once in the X-direction" every iteration except one in M
  (N(M-1) hops of F/(MN): F(M-1)/M), "once every M iterations ... along the
  Y-direction" (N-1 hops of F/(MN): F(N-1)/(MN)).
"""
import numpy as np
import pytest

from trainforge.sim.dsm.arch import default_architecture
from trainforge.sim.dsm.model import evaluate_pass
from trainforge.sim.dsm.workload import Layer

ARCH = default_architecture()
LAYER = Layer("fc", "fc", 1024, 1024)
N_MB = 256
M, N = 4, 16
LINK = 80e9                  # bytes/s out of a chip along X, and along Y
HBM = 256e9 * 0.8            # bytes/s
CLOCK = 2e9
#: CoreD split (in, out, ij, kij, mb) used for the per-pass checks: nothing split along a
#: reduction dimension of FWD (in, kij) or UPD (ij, mb), and small enough to fit the scratchpad.
SPLIT = np.array([[1, 32, 1, 1, 1]])

# Data parallelism: each chip has 256 / 64 = 4 samples and the whole 1024 x 1024 kernel.
DATA_FEATURES = 1024 * 4 * 2             # bytes of one chip's input (or output) features = 8192
KERNEL = 1024 * 1024 * 2                 # bytes of the whole kernel = 2 MiB
# Model parallelism: each chip has all 256 samples and 1024 / 64 = 16 outputs.
MODEL_ALL_FEATURES = 1024 * 256 * 2      # F, the input features every chip sees = 512 KiB
MODEL_OWN_FEATURES = MODEL_ALL_FEATURES // 64    # the 1/(MN) share in its own memory = 8192
MODEL_OUTPUTS = 16 * 256 * 2             # one chip's output slice = 8192
MODEL_KERNEL = 1024 * 16 * 2             # one chip's kernel slice = 32 KiB
ROTATE_X = MODEL_ALL_FEATURES * 3 / 4 / LINK          # F (M-1)/M = 384 KiB at 80 GB/s = 4.9152 us
ROTATE_Y = MODEL_ALL_FEATURES * 15 / 64 / LINK        # F (N-1)/(MN) = 120 KiB at 80 GB/s = 1.536 us


def _transfers(pass_name, parallelism, dysm=1, split=SPLIT):
    result = evaluate_pass(LAYER, pass_name, parallelism, ARCH, N_MB, dysm, splits=split)
    return result, {name: float(np.broadcast_to(value, result["total"].shape)[0])
                    for name, value in result["transfers"].items()}


def test_hand_worked_constants():
    # The constants above, in the units a reader would check them in.
    assert ROTATE_X == pytest.approx(4.9152e-6)
    assert ROTATE_Y == pytest.approx(1.536e-6)
    assert KERNEL / HBM == pytest.approx(10.24e-6)
    assert DATA_FEATURES / HBM == pytest.approx(40e-9)


@pytest.mark.parametrize("pass_name, fetch_inp, fetch_other, write", [
    # FWD: read activations and the kernel, write outputs.
    ("FWD", DATA_FEATURES, KERNEL, DATA_FEATURES),
    # BWD: read output errors and the kernel, write input errors.
    ("BWD", DATA_FEATURES, KERNEL, DATA_FEATURES),
    # UPD: read output errors and activations (reported under FetchKer, the pass's second
    # operand), write the kernel gradient.
    ("UPD", DATA_FEATURES, DATA_FEATURES, KERNEL),
])
def test_data_parallel_memory_volumes(pass_name, fetch_inp, fetch_other, write):
    _, transfers = _transfers(pass_name, "Data")
    assert transfers["FetchInp"] == pytest.approx(fetch_inp / HBM, rel=1e-12)
    assert transfers["FetchKer"] == pytest.approx(fetch_other / HBM, rel=1e-12)
    assert transfers["WriteOut"] == pytest.approx(write / HBM, rel=1e-12)
    assert not {"RotateAlongX", "RotateAlongY"} & set(transfers)


@pytest.mark.parametrize("pass_name, fetch_inp, fetch_other, write", [
    # FWD: each chip reads only its own 1/(MN) of the activations; the rest arrives by rotation.
    ("FWD", MODEL_OWN_FEATURES, MODEL_KERNEL, MODEL_OUTPUTS),
    # BWD: output errors of the chip's 16 outputs, its kernel slice; it writes its own
    # 1/(MN) of the input errors after the rotation has summed them.
    ("BWD", MODEL_OUTPUTS, MODEL_KERNEL, MODEL_OWN_FEATURES),
    # UPD: output errors, its own share of the activations, the kernel slice's gradient.
    ("UPD", MODEL_OUTPUTS, MODEL_OWN_FEATURES, MODEL_KERNEL),
])
def test_model_parallel_memory_and_rotation_volumes(pass_name, fetch_inp, fetch_other, write):
    result, transfers = _transfers(pass_name, "Model")
    assert transfers["FetchInp"] == pytest.approx(fetch_inp / HBM, rel=1e-12)
    assert transfers["FetchKer"] == pytest.approx(fetch_other / HBM, rel=1e-12)
    assert transfers["WriteOut"] == pytest.approx(write / HBM, rel=1e-12)
    assert transfers["RotateAlongX"] == pytest.approx(ROTATE_X, rel=1e-12)
    assert transfers["RotateAlongY"] == pytest.approx(ROTATE_Y, rel=1e-12)
    assert "SumOfGradAlongX" not in transfers
    if pass_name == "BWD":
        # Not overlapped in BWD: one rotation group (slowest of X, Y and the on-chip ring,
        # F / (2 x 256 GB/s) = 1.024 us) per repetition, added to the non-overlapped time.
        # The split puts the 16 outputs on the 32 cores, a reduction dimension of BWD: each core
        # holds a partial sum of all the input errors (1024 x 256 samples x 2 B = 512 KiB), and
        # 31/32 of it crosses the 256 GB/s core-to-core links: 1.984 us.
        partial_sums = 1024 * 256 * 2 * 31 / 32 / 256e9
        assert transfers["PartialSumAcc"] == pytest.approx(partial_sums, rel=1e-12)
        assert result["nonovl"][0] == pytest.approx((ROTATE_X + partial_sums) * CLOCK, rel=1e-12)
    else:
        assert result["nonovl"][0] == 0.0


# Gradient reduction of the whole 2 MiB kernel over 64 data-parallel chips:
#   along X: (M-1)/M of 2 MiB = 1.5 MiB at 80 GB/s = 19.6608 us
#   along Y: (N-1)/N of the 1/M shard = 15/16 x 512 KiB = 480 KiB at 80 GB/s = 6.144 us
# The phases are pipelined, so one phase takes the slowest of X (19.66 us), Y (6.14 us),
# the on-chip ring (2 MiB / 512 GB/s = 4.1 us) and the HBM (2 MiB / 204.8 GB/s = 10.24 us):
# 19.6608 us. Reduce, then broadcast: 2 x 19.6608 us = 39.3216 us = 78,643.2 cycles.
SUM_X = KERNEL * 3 / 4 / LINK
SUM_Y = KERNEL / 4 * 15 / 16 / LINK
REDUCE_AND_BROADCAST_CYCLES = 2 * SUM_X * CLOCK
# The weight update on the chip's 1/64 shard, per core: 2 MiB / 2 B / 64 / 32 = 512 weights;
# read weight and gradient, write weight, 6 B each at the 64 B/cycle scratchpad port = 48 cycles
# (the 64-lane SFPs need 2 x 512 / 64 = 16).
UPDATE_CYCLES = 512 * 3 * 2 / 64


def test_gradient_reduction_and_broadcast_volumes():
    assert SUM_X == pytest.approx(19.6608e-6)
    assert SUM_Y == pytest.approx(6.144e-6)
    assert REDUCE_AND_BROADCAST_CYCLES == pytest.approx(78643.2)
    result, transfers = _transfers("UPD", "Data")
    assert transfers["SumOfGradAlongX"] == pytest.approx(SUM_X, rel=1e-12)
    assert transfers["SumOfGradAlongY"] == pytest.approx(SUM_Y, rel=1e-12)
    assert transfers["BroadcastWAlongX"] == pytest.approx(SUM_X, rel=1e-12)
    assert transfers["BroadcastWAlongY"] == pytest.approx(SUM_Y, rel=1e-12)
    # The split reduces nothing across cores, so the non-overlapped time is the reduction
    # and the broadcast alone, once per layer.
    assert transfers["PartialSumAcc"] == 0.0
    assert result["nonovl"][0] == pytest.approx(REDUCE_AND_BROADCAST_CYCLES, rel=1e-12)
    assert result["once"][0] == pytest.approx(REDUCE_AND_BROADCAST_CYCLES + UPDATE_CYCLES, rel=1e-12)


@pytest.mark.parametrize("dysm", [2, 4])
def test_gradient_reduction_once_per_layer_under_dysm(dysm):
    # DySM runs the layer in `dysm` spatial minibatches; the gradient of the whole minibatch is
    # reduced once, after the last of them (Section III-C, Fig. 8).
    result, transfers = _transfers("UPD", "Data", dysm=dysm)
    assert transfers["SumOfGradAlongX"] == pytest.approx(SUM_X, rel=1e-12)
    assert result["nonovl"][0] == pytest.approx(REDUCE_AND_BROADCAST_CYCLES, rel=1e-12)
    assert result["once"][0] == pytest.approx(REDUCE_AND_BROADCAST_CYCLES + UPDATE_CYCLES, rel=1e-12)
    # ... and the pass time is made of exactly these parts (TotCy = busy + AuxComp + NonOvlDt), so the
    # once-per-layer reduction enters the total once, not once per spatial minibatch.
    assert result["total"][0] == pytest.approx(result["busy"][0] + result["aux"][0] + result["nonovl"][0],
                                               rel=1e-12)
    single, _ = _transfers("UPD", "Data", dysm=1)
    assert (result["total"][0] - result["busy"][0] - result["aux"][0]
            == pytest.approx(single["total"][0] - single["busy"][0] - single["aux"][0], rel=1e-12))


@pytest.mark.parametrize("pass_name", ["FWD", "BWD", "UPD"])
@pytest.mark.parametrize("parallelism", ["Data", "Model", "DataXModelY", "ModelXDataY"])
def test_pass_time_is_the_sum_of_its_parts(pass_name, parallelism):
    """TotCy = reps x MAX{PriComp, OvlDt} + AuxComp + NonOvlDt for every split of the 126, with DySM:
    the reported parts the hand-worked tests pin are the ones the total is made of."""
    result = evaluate_pass(LAYER, pass_name, parallelism, ARCH, N_MB, 2)
    np.testing.assert_allclose(result["total"], result["busy"] + result["aux"] + result["nonovl"], rtol=1e-12)


def test_hybrid_grids_split_reduction_and_rotation():
    # DataXModelY: minibatch over the 4 X chips (64 samples each), outputs over the 16 Y chips
    # (64 each). The gradient of a 1024 x 64 kernel slice (128 KiB) is reduced along X only:
    # 3/4 of it = 96 KiB at 80 GB/s = 1.2288 us; nothing along Y. Features F = 1024 x 64
    # samples x 2 B = 128 KiB rotate along Y only, over a ring of 16: 15/16 of F = 1.536 us.
    _, transfers = _transfers("UPD", "DataXModelY")
    assert transfers["SumOfGradAlongX"] == pytest.approx(1024 * 64 * 2 * 3 / 4 / LINK, rel=1e-12)
    assert transfers["SumOfGradAlongY"] == 0.0
    assert transfers["RotateAlongX"] == 0.0
    assert transfers["RotateAlongY"] == pytest.approx(1024 * 64 * 2 * 15 / 16 / LINK, rel=1e-12)
    # ModelXDataY: outputs over the 4 X chips (256 each), minibatch over the 16 Y chips (16
    # samples each). Kernel slice 1024 x 256 x 2 B = 512 KiB reduced along Y: 15/16 of it at
    # 80 GB/s = 6.144 us. Features F = 1024 x 16 x 2 B = 32 KiB rotate along X: 3/4 of F.
    _, transfers = _transfers("UPD", "ModelXDataY")
    assert transfers["SumOfGradAlongX"] == 0.0
    assert transfers["SumOfGradAlongY"] == pytest.approx(1024 * 256 * 2 * 15 / 16 / LINK, rel=1e-12)
    assert transfers["RotateAlongX"] == pytest.approx(1024 * 16 * 2 * 3 / 4 / LINK, rel=1e-12)
    assert transfers["RotateAlongY"] == 0.0


def test_partial_sums_reduced_across_cores():
    # FWD with the input features split over all 32 cores: every core holds a partial sum of the
    # chip's whole output (1024 outputs x 4 samples x 2 B = 8 KiB) and 31/32 of it crosses the
    # 256 GB/s core-to-core links.
    _, transfers = _transfers("FWD", "Data", split=np.array([[32, 1, 1, 1, 1]]))
    assert transfers["PartialSumAcc"] == pytest.approx(1024 * 4 * 2 * 31 / 32 / 256e9, rel=1e-12)
