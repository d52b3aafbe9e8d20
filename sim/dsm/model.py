"""Bandwidth-centric performance model (paper Section II-C/D, Figs. 4 and 5).

One call of :func:`evaluate_pass` times one layer and pass (FWD, BWD or UPD)
under one parallelism type and DySM factor for *every* core split at once
(numpy, one row per split). All times are in cycles of the architecture clock.

TotCy = reps * (MAX{PriComp, OvlDt} + AuxComp + NonOvlDt_rep) + NonOvlDt_once

where ``reps`` counts the sequential repetitions of the layer's work: timesteps
(LSTM), directions (bidirectional LSTM) and spatial minibatches (DySM). Each
data-transfer group is timed on its slowest link (Fig. 5 catalogue):

* overlapped: FetchInp, FetchKer, WriteOut (core <-> external memory) and
  RotateAlongX/Y in FWD and UPD;
* non-overlapped: PartialSumAcc (core <-> core), SumOfGradAlongX/Y and
  BroadcastWAlongX/Y (UPD, data-parallel dimensions), RotateAlongX/Y in BWD,
  RelayoutAlongX/Y (charged by the exploration when parallelism changes, see
  :func:`relayout_cycles`).
"""
from dataclasses import dataclass
import math

import numpy as np

from trainforge.sim.dsm.workload import AUX_COSTS

PASSES = ("FWD", "BWD", "UPD")
DIMS = ("in", "out", "ij", "kij", "mb")
IN, OUT, IJ, KIJ, MB = range(5)
#: Parallelism types: how N is divided into ChipD. Values: (mb split along X, mb along Y, out along X, out along Y).
PARALLELISMS = ("Data", "Model", "DataXModelY", "ModelXDataY")
#: Dimensions whose split across cores makes partial sums, per pass (the pass output does not span them).
REDUCTION_DIMS = {"FWD": (IN, KIJ), "BWD": (OUT, KIJ), "UPD": (IJ, MB)}


def core_splits(cores):
    """All ordered ways to split a power-of-two core count over the five dims, shape (K, 5)."""
    exponent = int(math.log2(cores))
    rows = []
    for a in range(exponent + 1):
        for b in range(exponent + 1 - a):
            for c in range(exponent + 1 - a - b):
                for d in range(exponent + 1 - a - b - c):
                    rows.append((a, b, c, d, exponent - a - b - c - d))
    return 2 ** np.array(rows, dtype=np.int64)


def chip_grid(parallelism, system):
    """Chips splitting mb and out: ``(mb_x, mb_y, out_x, out_y)`` for a parallelism type."""
    m, n = system.chips_x, system.chips_y
    return {"Data": (m, n, 1, 1), "Model": (1, 1, m, n),
            "DataXModelY": (m, 1, 1, n), "ModelXDataY": (1, n, m, 1)}[parallelism]


def chip_work(layer, n_mb, parallelism, system, dysm=1):
    """ChipD for one repetition: (in, out, ij, kij, mb), padded up when a split leaves a remainder."""
    mb_x, mb_y, out_x, out_y = chip_grid(parallelism, system)
    mb_per_chip = math.ceil(n_mb / (mb_x * mb_y))
    return np.array([layer.gemm_in, math.ceil(layer.gemm_out / (out_x * out_y)), layer.n_ij, layer.n_kij,
                     math.ceil(mb_per_chip / dysm)], dtype=np.int64)


def _ceil_div(a, b):
    return -(-a // b)


@dataclass(frozen=True)
class PassContext:
    """What the rest of the schedule provides to one layer and pass.

    Parameters
    ----------
    input_resident : bool
        The pass's feature input (activations in FWD, output errors in BWD and
        UPD) is already in the scratchpads (inter-layer reuse).
    producer_split : tuple or None
        CoreD split of the producer of a resident input; a consumer split that
        does not match it pays an on-chip re-layout.
    held_bytes : float
        Bytes per core held for other layers (resident tensors, preloaded weights).
    weight_fetches : int or None
        How many repetitions fetch the kernel (``None``: all; 0: preloaded).
    keep_kernel : bool
        Keep the kernel on chip across repetitions (LSTM timesteps) for the
        splits where it fits next to the resident data: fetched once.
    drop_write : bool
        The output stays on chip for the next layer and is not written by this
        pass: discarded (inference) or written back by the next layer
        (training, see ``carried_write_bytes``).
    shortcut_resident : bool
        The residual shortcut tensor is in the scratchpads.
    carried_write_bytes : float
        Per-chip bytes of the resident input (the producer's FWD output) that
        this pass writes back to external memory while it computes (Section
        III-B: in training the held output "can then be written back to the
        external memory when the next layer is in progress"). Spread evenly
        over the repetitions and added to the overlapped group (WriteOut).
    """

    input_resident: bool = False
    producer_split: tuple = None
    held_bytes: float = 0.0
    weight_fetches: int = None
    drop_write: bool = False
    shortcut_resident: bool = False
    keep_kernel: bool = False
    carried_write_bytes: float = 0.0


def evaluate_pass(layer, pass_name, parallelism, arch, n_mb, dysm=1, context=PassContext(), splits=None):
    """Time one layer and pass for every core split.

    Parameters
    ----------
    layer : Layer
    pass_name : str
        ``FWD``, ``BWD`` or ``UPD``.
    parallelism : str
        One of :data:`PARALLELISMS`.
    arch : Architecture
    n_mb : int
        Global minibatch.
    dysm : int
        DySM factor ``N_mb / S_mb``.
    context : PassContext
    splits : ndarray or None
        Core splits (K, 5); default all of :func:`core_splits`.

    Returns
    -------
    dict of ndarray
        Per split, in cycles: ``total``, ``pri`` (with startup and padding),
        ``ideal`` (MACs / peak), ``ovl``, ``aux``, ``nonovl`` and ``transfers``
        (a dict naming each Fig. 5 transfer), plus ``splits``.
    """
    if splits is None:
        splits = core_splits(arch.chip.cores)
    system, chip, core = arch.system, arch.chip, arch.core
    bpe = arch.bytes_per_element
    freq = arch.frequency
    chipd = chip_work(layer, n_mb, parallelism, system, dysm)
    cored = _ceil_div(chipd[None, :], splits)                      # (K, 5)
    reps = layer.n_ts * layer.directions * dysm
    mb_x, mb_y, out_x, out_y = chip_grid(parallelism, system)
    in_c, out_c, ij_c, kij_c, mb_c = (cored[:, d] for d in range(5))
    # One PE array works on ceil(ij*mb / arrays) of the core's positions.
    pos_array = _ceil_div(ij_c * mb_c, core.arrays)
    lanes, rows, cols = arch.pe.simd_lanes, arch.array.rows, arch.array.cols
    if pass_name == "FWD":
        dim_lane, dim_row, dim_col = in_c, out_c, pos_array
    elif pass_name == "BWD":
        dim_lane, dim_row, dim_col = out_c, in_c, pos_array
    else:
        dim_lane, dim_row, dim_col = pos_array, out_c, in_c
    padded = (_ceil_div(dim_lane, lanes) * _ceil_div(dim_row, rows) * _ceil_div(dim_col, cols)) * kij_c
    spad_bytes_per_cycle = core.scratchpad_bw / freq
    startup = rows + cols + lanes + (lanes * (rows + cols)) * bpe / spad_bytes_per_cycle
    pri = padded.astype(float) + startup
    ideal = layer.macs(n_mb) / (arch.macs_per_core * chip.cores * system.chips) / reps

    # Data structures per core and per chip for one repetition (elements).
    stride2 = layer.stride ** 2
    act_c = (in_c * mb_c * ij_c * stride2).astype(float)
    ker_c = (in_c * out_c * kij_c).astype(float)
    out_c_el = (out_c * mb_c * ij_c).astype(float)
    act_chip = float(chipd[IN] * chipd[MB] * chipd[IJ] * stride2)
    ker_chip = float(chipd[IN] * chipd[OUT] * chipd[KIJ])
    out_chip = float(chipd[OUT] * chipd[MB] * chipd[IJ])
    rot_chips = out_x * out_y          # chips sharing one set of features (model dims)
    # Feature input and other read / written structure of the pass.
    if pass_name == "FWD":
        # The SFPs pool before the output leaves the core: the tensor written back is the
        # stored (pooled) output, the same tensor the next layer reads as its input.
        pooled = float(layer.pool_stride ** 2)
        feat_c, feat_chip, other_c, other_chip = act_c, act_chip, ker_c, ker_chip
        write_c, write_chip = out_c_el / pooled, out_chip / pooled
    elif pass_name == "BWD":
        feat_c, feat_chip, other_c, other_chip, write_c, write_chip = out_c_el, out_chip, ker_c, ker_chip, act_c, act_chip
    else:
        feat_c, feat_chip, other_c, other_chip, write_c, write_chip = out_c_el, out_chip, act_c, act_chip, ker_c, ker_chip
    weight_is_other = pass_name != "UPD"
    # FWD and UPD rotate activations, BWD rotates partial input errors: all activation-shaped.
    rot_el = act_chip
    # Under model dimensions the chip's memory holds 1/rot_chips of the
    # activations (FWD/UPD input, BWD output); the rest arrives by rotation.
    act_ext_fraction = 1.0 / rot_chips
    feat_ext_chip = feat_chip * (act_ext_fraction if pass_name == "FWD" else 1.0)
    other_ext_chip = other_chip * (act_ext_fraction if pass_name == "UPD" else 1.0)
    if pass_name == "BWD":
        write_chip = write_chip * act_ext_fraction

    usable = core.scratchpad_bytes - context.held_bytes
    resident_c = feat_c * bpe if context.input_resident else 0.0
    stream_capacity = np.maximum(usable - resident_c, core.scratchpad_bytes * core.stream_buffer_fraction)

    # Refetch: if the two read structures and the written one exceed the scratchpad,
    # keep the cheaper one stationary in tiles of half the streaming space and
    # stream the other once per tile.
    feat_reads = np.zeros_like(feat_c) if context.input_resident else feat_c
    working = (feat_reads + other_c + write_c) * bpe
    tile = stream_capacity / 2.0
    k_other = np.ceil(feat_reads * bpe / tile)
    k_feat = np.ceil(other_c * bpe / tile)
    fits = working <= stream_capacity
    other_stationary = feat_reads * k_feat + other_c
    feat_stationary = feat_reads + other_c * np.maximum(k_other, 1)
    use_feat_stationary = feat_stationary <= other_stationary
    refetch_feat = np.where(fits | use_feat_stationary, 1.0, k_feat)
    refetch_other = np.where(fits | ~use_feat_stationary, 1.0, np.maximum(k_other, 1))

    # Weight fetches over the repetitions (kernel reuse / preloading).
    if weight_is_other:
        w_reps = reps if context.weight_fetches is None else context.weight_fetches
    else:
        w_reps = reps
    # The producer's output, held on chip, written back during this pass (per repetition).
    carried_chip = context.carried_write_bytes / reps / bpe
    carried_c = carried_chip / chip.cores
    # Per-repetition bytes, computing the variant with and without the kernel.
    def ovl_group(with_kernel):
        kernel_scale = 1.0 if (with_kernel or not weight_is_other) else 0.0
        feat_mem = 0.0 if context.input_resident else 1.0
        reads_chip = feat_mem * feat_ext_chip * refetch_feat + kernel_scale * other_ext_chip * refetch_other
        own_write = 0.0 if context.drop_write else 1.0
        writes_chip = own_write * write_chip + carried_chip
        shortcut = 0.0
        if "residual" in layer.aux and not context.shortcut_resident and pass_name == "FWD":
            shortcut = out_chip
        ext = (reads_chip + writes_chip + shortcut) * bpe
        ring = (feat_mem * feat_chip * refetch_feat + kernel_scale * other_chip * refetch_other
                + writes_chip + shortcut) * bpe
        port = (feat_mem * feat_c * refetch_feat + kernel_scale * other_c * refetch_other
                + own_write * write_c + carried_c) * bpe
        times = {
            "FetchInp": feat_mem * feat_ext_chip * refetch_feat * bpe / (chip.ext_mem_bw * chip.ext_mem_efficiency) * np.ones_like(port),
            "FetchKer": kernel_scale * other_ext_chip * refetch_other * bpe / (chip.ext_mem_bw * chip.ext_mem_efficiency) * np.ones_like(port),
            "WriteOut": (writes_chip + shortcut) * bpe / (chip.ext_mem_bw * chip.ext_mem_efficiency) * np.ones_like(port),
            "ExtMemBus": ext / (chip.ext_mem_bw * chip.ext_mem_efficiency),
            "OnChipNet": ring / chip.link_bw,
            "ScratchpadPort": port / core.scratchpad_bw,
        }
        if rot_chips > 1 and pass_name in ("FWD", "UPD"):
            rx, ry = _rotation_bytes(rot_el * bpe, out_x, out_y, mb_x)
            times["RotateAlongX"] = np.full_like(port, rx / system.link_bw_x)
            times["RotateAlongY"] = np.full_like(port, ry / system.link_bw_y)
            times["OnChipNet"] = times["OnChipNet"] + rot_el * bpe / chip.link_bw
        group = np.maximum.reduce([times[name] for name in ("ExtMemBus", "OnChipNet", "ScratchpadPort")]
                                  + [times[n] for n in ("RotateAlongX", "RotateAlongY") if n in times])
        return group * freq, times

    ovl_w, transfers = ovl_group(True)
    ovl_now, _ = ovl_group(False)

    # Non-overlapped, every repetition.
    red_dims = REDUCTION_DIMS[pass_name]
    reducers = np.prod(splits[:, list(red_dims)], axis=1)
    pass_out_c = out_c_el if pass_name == "FWD" else write_c     # partial sums are reduced before pooling
    psum = pass_out_c * bpe * (reducers - 1) / reducers / chip.core_to_core_bw
    if pass_name == "FWD" and "batchnorm" in layer.aux:
        bn_reducers = splits[:, IJ] * splits[:, MB]
        psum = psum + 2 * out_c * bpe * (bn_reducers - 1) / bn_reducers / chip.core_to_core_bw
    if pass_name == "FWD" and "softmax" in layer.aux:
        sm_reducers = splits[:, OUT]
        psum = psum + mb_c * bpe * (sm_reducers - 1) / sm_reducers / chip.core_to_core_bw
    nonovl_rep = psum * freq
    transfers["PartialSumAcc"] = psum
    if context.input_resident and context.producer_split is not None:
        p = context.producer_split
        if pass_name == "FWD":
            match = (splits[:, IN] == p[OUT]) & (splits[:, IJ] == p[IJ]) & (splits[:, MB] == p[MB]) & (splits[:, KIJ] == 1)
        else:
            match = (splits[:, OUT] == p[IN]) & (splits[:, IJ] == p[IJ]) & (splits[:, MB] == p[MB]) & (splits[:, KIJ] == 1)
        reshuffle = np.where(match, 0.0, feat_chip * bpe / chip.link_bw)
        transfers["CoreRelayout"] = reshuffle
        nonovl_rep = nonovl_rep + reshuffle * freq
    if rot_chips > 1 and pass_name == "BWD":
        rx, ry = _rotation_bytes(rot_el * bpe, out_x, out_y, mb_x)
        t_rot = max(rx / system.link_bw_x, ry / system.link_bw_y, rot_el * bpe / chip.link_bw)
        transfers["RotateAlongX"] = np.full_like(psum, rx / system.link_bw_x)
        transfers["RotateAlongY"] = np.full_like(psum, ry / system.link_bw_y)
        nonovl_rep = nonovl_rep + t_rot * freq

    # Auxiliary computations on the SFPs, every repetition.
    aux_ops = sum(AUX_COSTS[op][0] for op in layer.aux)
    aux_reads = sum(AUX_COSTS[op][1] for op in layer.aux)
    if pass_name == "UPD":
        aux_elements = out_c_el if "bias" in layer.aux else np.zeros_like(out_c_el)
        aux_bytes = aux_elements * bpe
        aux_ops_total = aux_elements
    elif aux_ops:
        stored = out_c_el / layer.pool_stride ** 2
        aux_elements = out_c_el
        aux_bytes = (out_c_el * (1 + aux_reads) + stored) * bpe
        aux_ops_total = aux_elements * aux_ops
    else:
        aux_bytes = np.zeros_like(out_c_el)
        aux_ops_total = np.zeros_like(out_c_el)
    aux = np.maximum(aux_ops_total / core.sfp_lanes, aux_bytes / spad_bytes_per_cycle)

    # Non-overlapped, once per layer: gradient reduction and weight distribution (UPD).
    nonovl_once = np.zeros_like(psum)
    aux_once = np.zeros_like(psum)
    if pass_name == "UPD":
        grad = ker_chip * layer.directions * bpe
        gx, gy = _reduction_bytes(grad, mb_x, mb_y)
        memory = grad / (chip.ext_mem_bw * chip.ext_mem_efficiency)
        if mb_x * mb_y > 1:
            sum_group = max(gx / system.link_bw_x, gy / system.link_bw_y, grad / chip.link_bw, memory)
            transfers["SumOfGradAlongX"] = np.full_like(psum, gx / system.link_bw_x)
            transfers["SumOfGradAlongY"] = np.full_like(psum, gy / system.link_bw_y)
            transfers["BroadcastWAlongX"] = transfers["SumOfGradAlongX"]
            transfers["BroadcastWAlongY"] = transfers["SumOfGradAlongY"]
            nonovl_once = nonovl_once + 2 * sum_group * freq
        # Weight update on the chip's shard: read weight and gradient, write weight.
        shard = ker_chip * layer.directions / (mb_x * mb_y) / chip.cores
        aux_once = aux_once + np.maximum(2 * shard / core.sfp_lanes, 3 * shard * bpe / spad_bytes_per_cycle)

    reps_with_w = np.full(len(splits), min(w_reps, reps), dtype=float)
    if context.keep_kernel and weight_is_other:
        # The kernel stays if it fits next to the resident input and the stream space: the
        # stream-buffer reservation, or less when a double-buffered per-repetition stream
        # (inputs read, outputs written) is smaller than it (batch-1 inference). Each direction
        # of a bidirectional layer has its own kernel, fetched once per direction.
        stream_c = feat_reads + (0.0 if context.drop_write else write_c) + carried_c
        stream_space = np.minimum(2.0 * stream_c * bpe, usable * core.stream_buffer_fraction)
        kernel_fits = ker_c * bpe + stream_space + resident_c <= usable
        reps_with_w = np.where(kernel_fits, min(layer.directions, w_reps), reps_with_w)
    per_rep_core = aux + nonovl_rep
    total = (reps_with_w * np.maximum(pri, ovl_w) + (reps - reps_with_w) * np.maximum(pri, ovl_now)
             + reps * per_rep_core + nonovl_once + aux_once)
    ovl_mean = (reps_with_w * ovl_w + (reps - reps_with_w) * ovl_now) / reps
    return {
        "total": total,
        "pri": pri * reps,
        "ideal": np.full_like(total, ideal * reps),
        "busy": reps_with_w * np.maximum(pri, ovl_w) + (reps - reps_with_w) * np.maximum(pri, ovl_now),
        "ovl": ovl_mean * reps,
        "aux": aux * reps + aux_once,
        "nonovl": nonovl_rep * reps + nonovl_once,
        "once": nonovl_once + aux_once,
        "write_bytes": np.full_like(total, write_chip * bpe * reps) if pass_name == "FWD" else np.zeros_like(total),
        "transfers": transfers,
        "splits": splits,
    }


def _rotation_bytes(feature_bytes, out_x, out_y, mb_x):
    """Bytes each chip sends along X and Y to rotate features over the model-split chips.

    ``feature_bytes`` is the full feature set of the chip's minibatch share. M*N
    iterations: X every iteration except one in M, Y once every M (Section II-D).
    """
    del mb_x
    m, n = out_x, out_y
    return feature_bytes * (m - 1) / m, feature_bytes * (n - 1) / (m * n)


def _reduction_bytes(grad_bytes, mb_x, mb_y):
    """Per-chip bytes to reduce gradients along X (first) and then the 1/M shards along Y."""
    gx = grad_bytes * (mb_x - 1) / mb_x
    gy = grad_bytes / mb_x * (mb_y - 1) / mb_y
    return gx, gy


def relayout_cycles(tensor_elements, arch):
    """RelayoutAlongX/Y: every chip sends one 1/(M N) portion of its features to every other chip.

    Dimension-ordered all-to-all on a bidirectional torus ring (average distance
    M/4), through the memory bus (read and write) and the on-chip network.
    Returns the group time in cycles and the per-link times in seconds.
    """
    system, chip = arch.system, arch.chip
    share = tensor_elements * arch.bytes_per_element / system.chips
    tx = share * (system.chips_x - 1) / 4 / system.link_bw_x
    ty = share * (system.chips_y - 1) / 4 / system.link_bw_y
    memory = 2 * share / (chip.ext_mem_bw * chip.ext_mem_efficiency)
    ring = share / chip.link_bw
    return max(tx, ty, memory, ring) * arch.frequency, {"RelayoutAlongX": tx, "RelayoutAlongY": ty}
