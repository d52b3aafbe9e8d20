"""Scenario table of ``cp_core``: programs of LOAD, GEMV forward and backward, GEMM and UPDATE commands.

A scenario's stimulus is a program: the command words on ``i_cmd`` and all
their operand words on ``i_data``, in order; the expected ``o_data`` words are
the results of every command, in order.

Reference (independent of the golden model): plain Python integers. The
matrices are zero-padded to whole ``n_r x n_r`` blocks (``Mb``, ``Nb``,
``Kb``, ``Qb`` blocks); sums wrap to ``acc_width`` bits (two's complement).

- LOAD (``mb``, ``nb``, ``base``): word ``a * n_r + r`` (``a = jb * Mb + ib``) carries
  ``W[ib * n_r + r, jb * n_r + c]`` on lane ``c``;
- GEMV forward: ``Mb`` words of ``x`` in, ``Nb`` words of ``y = x^T W`` out (block ``jb`` on word ``jb``);
- GEMV backward: ``Nb`` words of ``e`` in, ``Mb`` words of ``d = W e`` out;
- GEMM (``mb``, ``nb`` = ``Kb``, ``qb``): for each output block ``(qb, ib)`` (``qb`` outer) the rows
  ``B[p, qb * n_r : (qb + 1) * n_r]``, ``p < Kb * n_r``, in; then the block's ``n_r`` rows of ``C = W B`` out;
- UPDATE (``mb``, ``nb``, ``qb`` = the batch ``b``, ``shift``): words ``ib * b + s`` bring ``x_s``, then words
  ``jb * b + s`` bring ``e_s``; ``W[i, j] -= floor(P / 2**shift + 1/2)`` with ``P = sum_s x_s[i] e_s[j]``
  wrapped to ``acc_width`` bits, the difference saturated to ``width`` bits; no output. The table reads the
  updated weights back with a GEMM by the identity (``C = W I``).

Out-of-range commands (``spec.caterpillar.core_command_limits``): the table writes the expected ``o_error`` word
of each rejected command by hand (the :class:`CommandField` the row puts out of range, and the command's ``op``);
a rejected command has no ``i_data`` words and no ``o_data`` words, and changes nothing (the next commands' results,
computed as if it had not been sent, show it). Every scenario expects its ``o_error`` words (none in most).
"""
import numpy as np

from trainforge.golden.caterpillar import core as golden_core
from trainforge.spec.caterpillar import (COMMAND_LATENCY, CommandField, CoreOp, core_reduction_latency, count_shape,
                                        max_shift, reduction_cycles)

from fp_oracle import QUIET_NAN16, QUIET_NAN32, flush, oracle_update_weight
from scenario import Scenario, Transactions, random_pattern, rng_for


def _signed(value, bits):
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _blocks(size, n_r):
    return max(1, -(-size // n_r))


def _padded(matrix, rows, cols):
    return [[matrix[i][j] if i < len(matrix) and j < len(matrix[0]) else 0 for j in range(cols)]
            for i in range(rows)]


def _command(op, mb=1, nb=1, qb=1, base=0, overlap=0, shift=0):
    return {"op": int(op), "overlap": int(overlap), "mb": mb, "nb": nb, "qb": qb, "base": base, "shift": shift}


def _float32(bits16):
    """FP16 bit patterns (any integers) as float32, subnormals flushed (the datapath's input policy)."""
    return flush((np.asarray(bits16, dtype=np.int64) & 0xFFFF).astype(np.uint16).view(np.float16)).astype(np.float32)


def _multiply(a, b):
    """numpy float32 product of two widened FP16 values: exact (11 x 11 bits fit 24), flushed."""
    with np.errstate(all="ignore"):
        return flush((a * b).astype(np.float32))


def _add(a, b):
    """numpy float32 sum, one rounding to nearest even, flushed on output (inputs are flushed already)."""
    with np.errstate(all="ignore"):
        return flush((a + b).astype(np.float32))


def _lane32(values):
    """float32 results as the signed 32-bit lanes of ``o_data`` (a NaN as the canonical quiet NaN)."""
    values = np.asarray(values, dtype=np.float32)
    bits = np.where(np.isnan(values), np.uint32(QUIET_NAN32), values.view(np.uint32)).astype(np.uint32)
    return bits.view(np.int32).astype(np.int64)


def _interleaved(terms, partials):
    """The sum of ``terms`` (float32 arrays, in order) as an interleaved accumulator of ``partials`` adds them
    (hw/caterpillar/README.md, "Pipelined FP32 accumulation in cp_pe"): term ``j`` into partial ``j mod partials``,
    each partial from +0, then the partials summed pairwise, ``(q0 + q1) + (q2 + q3)``, an unwritten partial +0.
    With 1 partial: ``((+0 + t0) + t1) + ...``."""
    sums = [np.zeros_like(terms[0])] * partials
    for index, term in enumerate(terms):
        sums[index % partials] = _add(sums[index % partials], term)
    while len(sums) > 1:
        sums = [_add(sums[k], sums[k + 1]) for k in range(0, len(sums), 2)]
    return sums[0]


def _reduce(partials, reduction, reduction_partials=1):
    """The diagonal PE's sum of a line's partial sums, ``partials[d]`` at distance ``d`` from the diagonal:
    ``bus`` adds ``d = 1, 2, ...`` in turn to the diagonal's own (with ``reduction_partials`` above 1: the
    interleaved order of :func:`_interleaved` over ``d = 0, 1, ...``); ``tree`` adds at step ``s`` the partial at
    ``d + 2**s`` to each ``d`` that is a multiple of ``2**(s + 1)`` (hw/caterpillar/README.md)."""
    partials = list(partials)
    if reduction == "bus":
        if reduction_partials != 1:
            return _interleaved(partials, reduction_partials)
        total = partials[0]
        for partial in partials[1:]:
            total = _add(total, partial)
        return total
    stride = 1
    while stride < len(partials):
        for position in range(0, len(partials), 2 * stride):
            if position + stride < len(partials):
                partials[position] = _add(partials[position], partials[position + stride])
        stride *= 2
    return partials[0]


def fp16_gemv(padded, mb, nb, vector, forward, n_r, reduction, partial_sums=1, reduction_partials=1):
    """The output lanes (signed 32-bit, FP32 bits) of an ``fp16`` GEMV on the padded ``Mb n_r x Nb n_r`` matrix of
    FP16 bits, by numpy float32 in the core's order: each PE's products in issue order (:func:`_interleaved` of
    ``partial_sums``), then the line's partial sums reduced into the diagonal PE (:func:`_reduce`)."""
    weights, vector = _float32(padded), _float32(vector)
    lanes = np.arange(n_r)
    if forward:  # PE (r, j % n_r) adds x[ib n_r + r] W[ib n_r + r, j] for ib = 0, 1, ...
        sums = _interleaved([_multiply(vector[ib * n_r + lanes][:, None], weights[ib * n_r + lanes, :])
                             for ib in range(mb)], partial_sums)
        outputs = np.arange(nb * n_r)
        partials = [sums[(outputs % n_r + d) % n_r, outputs] for d in range(n_r)]
    else:  # PE (i % n_r, c) adds e[jb n_r + c] W[i, jb n_r + c] for jb = 0, 1, ...
        sums = _interleaved([_multiply(vector[jb * n_r + lanes][None, :], weights[:, jb * n_r + lanes])
                             for jb in range(nb)], partial_sums)
        outputs = np.arange(mb * n_r)
        partials = [sums[outputs, (outputs % n_r + d) % n_r] for d in range(n_r)]
    return _lane32(_reduce(partials, reduction, reduction_partials)).tolist()


def fp32_lane_add(x, y):
    """numpy float32 sum of two FP32 lanes (signed 32-bit integers of their bits), as such a lane."""
    a = flush(np.array([x & 0xFFFFFFFF], dtype=np.uint32).view(np.float32))
    b = flush(np.array([y & 0xFFFFFFFF], dtype=np.uint32).view(np.float32))
    return int(_lane32(_add(a, b))[0])


class _Program:
    """Commands, operand words and expected result words, built with the reference arithmetic.

    ``mac="fp16"``: operands and weights are FP16 bit patterns (signed 16-bit lanes), results FP32 bit patterns
    (signed 32-bit lanes), computed with numpy float32 in the order the core adds (hw/caterpillar/README.md,
    "Half-precision FPU in cp_core"): each PE sums its products in issue order from +0; a GEMV's partial sums
    are reduced into the diagonal PE in the order of the ``reduction`` (:func:`_reduce`); the UPDATE write-back
    is numpy's ``float16(float32(W) - float32(P * 2**-shift))`` (``fp_oracle.oracle_update_weight``).
    """

    def __init__(self, params):
        self.n_r, self.acc_width = params["n_r"], params["acc_width"]
        self.fp16 = params.get("mac") == "fp16"
        self.reduction = params.get("reduction", "bus")
        self.partial_sums = params["partial_sums"]
        self.reduction_partials = params["reduction_partials"]
        self.commands, self.inputs, self.outputs, self.errors = [], [], [], []

    def _gemv_fp16(self, padded, mb, nb, vector, forward):
        return fp16_gemv(padded, mb, nb, vector, forward, self.n_r, self.reduction, self.partial_sums,
                         self.reduction_partials)

    def _gemm_fp16(self, padded, b):
        """``C = W B`` in FP: each element summed over ``p`` in issue order (:func:`_interleaved`, one PE each)."""
        weights, b = _float32(padded), _float32(b)
        sums = _interleaved([_multiply(weights[:, p][:, None], b[p, :][None, :]) for p in range(weights.shape[1])],
                            self.partial_sums)
        return _lane32(sums).tolist()

    def _update_fp16(self, padded, xs, es, shift):
        """The updated FP16 weights (signed 16-bit lanes): ``P = sum_s x_s e_s^T`` in issue order
        (:func:`_interleaved`), then numpy's ``float16(W - P * 2**-shift)`` with the datapath's flushes."""
        x, e = _float32(xs), _float32(es)
        sums = _interleaved([_multiply(x[s][:, None], e[s][None, :]) for s in range(x.shape[0])],
                            self.partial_sums)
        weights = (np.asarray(padded, dtype=np.int64) & 0xFFFF).astype(np.uint16)
        updated = oracle_update_weight(weights, sums.view(np.uint32), shift)
        bits = np.where(np.isnan(updated), np.uint16(QUIET_NAN16), updated.view(np.uint16)).astype(np.uint16)
        return bits.view(np.int16).astype(np.int64).tolist()

    def reject(self, field, op, mb=1, nb=1, qb=1, base=0, overlap=0, shift=0):
        """A command the core must reject with ``field`` (a :class:`CommandField`): no operands, no result."""
        self.commands.append(_command(op, mb, nb, qb, base, overlap, shift))
        self.errors.append({"field": int(field), "op": int(op)})

    def load(self, weights, base):
        n_r = self.n_r
        mb, nb = _blocks(len(weights), n_r), _blocks(len(weights[0]), n_r)
        padded = _padded(weights, mb * n_r, nb * n_r)
        self.commands.append(_command(CoreOp.LOAD, mb, nb, base=base))
        for jb in range(nb):
            for ib in range(mb):
                for r in range(n_r):
                    self.inputs.append([padded[ib * n_r + r][jb * n_r + c] for c in range(n_r)])
        return mb, nb, padded

    def gemv(self, padded, mb, nb, vector, base, forward, overlap):
        n_r, acc = self.n_r, self.acc_width
        length = (mb if forward else nb) * n_r
        vector = [vector[i] if i < len(vector) else 0 for i in range(length)]
        op = CoreOp.GEMV_FORWARD if forward else CoreOp.GEMV_BACKWARD
        self.commands.append(_command(op, mb, nb, base=base, overlap=overlap))
        self.inputs += [vector[k * n_r:(k + 1) * n_r] for k in range(length // n_r)]
        if self.fp16:
            result = self._gemv_fp16(padded, mb, nb, vector, forward)
            self.outputs += [result[k * n_r:(k + 1) * n_r] for k in range(len(result) // n_r)]
            return
        if forward:
            result = [sum(vector[i] * padded[i][j] for i in range(mb * n_r)) for j in range(nb * n_r)]
        else:
            result = [sum(padded[i][j] * vector[j] for j in range(nb * n_r)) for i in range(mb * n_r)]
        result = [_signed(value, acc) for value in result]
        self.outputs += [result[k * n_r:(k + 1) * n_r] for k in range(len(result) // n_r)]

    def gemm(self, padded, mb, kb, b, base):
        n_r, acc = self.n_r, self.acc_width
        qb = _blocks(len(b[0]), n_r)
        b = _padded(b, kb * n_r, qb * n_r)
        self.commands.append(_command(CoreOp.GEMM, mb, kb, qb, base=base))
        c = self._gemm_fp16(padded, b) if self.fp16 else None
        for q in range(qb):
            for ib in range(mb):
                self.inputs += [b[p][q * n_r:(q + 1) * n_r] for p in range(kb * n_r)]
                if c is not None:
                    self.outputs += [c[ib * n_r + r][q * n_r:(q + 1) * n_r] for r in range(n_r)]
                    continue
                for r in range(n_r):
                    row = padded[ib * n_r + r]
                    self.outputs.append([_signed(sum(row[p] * b[p][q * n_r + c] for p in range(kb * n_r)), acc)
                                         for c in range(n_r)])


    def update(self, padded, mb, nb, xs, es, shift, base, width, read_back=True, overlap=0):
        """Rank-``len(xs)`` update in place of ``padded`` (returned), then (``read_back``) its read-back."""
        n_r, acc = self.n_r, self.acc_width
        batch = len(xs)
        xs = [[x[i] if i < len(x) else 0 for i in range(mb * n_r)] for x in xs]
        es = [[e[j] if j < len(e) else 0 for j in range(nb * n_r)] for e in es]
        self.commands.append(_command(CoreOp.UPDATE, mb, nb, batch, base=base, overlap=overlap, shift=shift))
        for ib in range(mb):
            self.inputs += [xs[s][ib * n_r:(ib + 1) * n_r] for s in range(batch)]
        for jb in range(nb):
            self.inputs += [es[s][jb * n_r:(jb + 1) * n_r] for s in range(batch)]
        if self.fp16:
            updated = self._update_fp16(padded, xs, es, shift)
            if read_back:
                self.read_back(updated, mb, nb, base)
            return updated
        low, high = -(1 << (width - 1)), (1 << (width - 1)) - 1
        updated = []
        for i, row in enumerate(padded):
            new_row = []
            for j, weight in enumerate(row):
                product = _signed(sum(xs[s][i] * es[s][j] for s in range(batch)), acc)
                delta = (product + (1 << (shift - 1))) >> shift if shift else product
                new_row.append(min(high, max(low, weight - delta)))
            updated.append(new_row)
        if read_back:
            self.read_back(updated, mb, nb, base)
        return updated

    def read_back(self, padded, mb, nb, base):
        """Every weight of the resident ``padded`` matrix, by the GEMM ``C = W I``."""
        one = 0x3C00 if self.fp16 else 1  # FP16 1.0
        identity = [[one * int(p == q) for q in range(nb * self.n_r)] for p in range(nb * self.n_r)]
        self.gemm(padded, mb, nb, identity, base)


def _matrix(rng, rows, cols, low, high):
    return [[_operand(rng, low, high) for _ in range(cols)] for _ in range(rows)]


#: ``_operand_range`` of an ``fp16`` core: not a range of integers; ``_operand`` then draws a random FP16 normal.
_FP16_OPERANDS = ("fp16", "fp16")


def _operand(rng, low, high):
    """A random operand: an integer in ``low .. high``, or with ``_FP16_OPERANDS`` the bits (as a signed 16-bit
    lane) of an FP16 normal of random sign and fraction, exponent field 10..19 (magnitudes 2**-5 .. 2**5)."""
    if (low, high) == _FP16_OPERANDS:
        return _signed((rng.randrange(2) << 15) | (rng.randint(10, 19) << 10) | rng.randrange(1 << 10), 16)
    return rng.randint(low, high)


def _program(params, rng, extreme=False):
    n_r, width = params["n_r"], params["width"]
    low, high = -(1 << (width - 1)), (1 << (width - 1)) - 1
    most = min(params["max_blocks"], 3) * n_r
    program = _Program(params)
    base = 0
    for _ in range(2):
        m, n = rng.randint(1, most), rng.randint(1, most)
        if _blocks(m, n_r) * _blocks(n, n_r) + base > params["sram_depth"]:
            m = n = 1
        weights = [[low] * n for _ in range(m)] if extreme else _matrix(rng, m, n, low, high)
        mb, nb, padded = program.load(weights, base)
        for forward in (True, False):
            size = m if forward else n
            vector = [low] * size if extreme else [rng.randint(low, high) for _ in range(size)]
            program.gemv(padded, mb, nb, vector, base, forward, overlap=rng.randrange(2))
        q = rng.randint(1, min(params["max_blocks"], 2) * n_r)
        b = [[low] * q for _ in range(n)] if extreme else _matrix(rng, n, q, low, high)
        program.gemm(padded, mb, nb, b, base)
        batch = rng.randint(1, max(1, params["max_blocks"] // max(mb, nb)))
        if batch * max(mb, nb) <= params["max_blocks"]:
            xs = [[low] * m if extreme else [rng.randint(low, high) for _ in range(m)] for _ in range(batch)]
            es = [[low] * n if extreme else [rng.randint(low, high) for _ in range(n)] for _ in range(batch)]
            shift = rng.randint(0, max_shift(params["acc_width"]))
            padded = program.update(padded, mb, nb, xs, es, shift, base, width)
            program.gemv(padded, mb, nb, [rng.randint(low, high) for _ in range(m)], base, True, overlap=0)
        base += mb * nb
    return program


def _operand_range(params):
    if params.get("mac") == "fp16":
        return _FP16_OPERANDS
    half = 1 << (params["width"] - 1)
    return -half, half - 1


def _random_vector(rng, params, size):
    low, high = _operand_range(params)
    return [_operand(rng, low, high) for _ in range(size)]


def _update_shifts(params):
    """The range of random UPDATE shifts: fixed point ``width - 1 .. 2 width - 1`` (the fraction bits of the
    products); ``fp16`` ``0 .. 12`` (an FP16 weight near 1 keeps 11 bits: larger shifts of sums near 1 round
    away)."""
    if params.get("mac") == "fp16":
        return 0, 12
    width, shifts = params["width"], max_shift(params["acc_width"])
    return min(width - 1, shifts), min(2 * width - 1, shifts)


#: Largest side, in blocks, of a random matrix: the read-back (GEMM by the identity) of an ``Mb x Kb`` matrix takes
#: ``Mb * Kb**2 * n_r`` words, 1 M at the shipped default's 64 x 64 blocks (the edge shapes and the out-of-range
#: rows reach ``max_blocks`` itself).
RANDOM_SIDE_BLOCKS = 16


def _random_shape(rng, params, most_words):
    """Rows and columns up to ``min(max_blocks, RANDOM_SIDE_BLOCKS) * n_r`` whose block grid fits ``most_words``
    local words."""
    n_r, largest = params["n_r"], min(params["max_blocks"], RANDOM_SIDE_BLOCKS) * params["n_r"]
    while True:
        rows, cols = rng.randint(1, largest), rng.randint(1, largest)
        if _blocks(rows, n_r) * _blocks(cols, n_r) <= most_words:
            return rows, cols


def _matrices_program(params, rng, matrices, base=0, program=None):
    """LOAD of each matrix (the first at local word ``base``, the next behind it); forward, backward (opposite
    overlap settings) and GEMM on each; then a random rank-``b`` UPDATE of each (``b`` up to what the buffers
    allow), a forward on the updated weights and a read-back of them. Appended to ``program`` when given."""
    n_r, width, acc_width, max_blocks = params["n_r"], params["width"], params["acc_width"], params["max_blocks"]
    low, high = _operand_range(params)
    program = program or _Program(params)
    placed = []
    for weights in matrices:
        mb, nb, padded = program.load(weights, base)
        placed.append((len(weights), len(weights[0]), mb, nb, padded, base))
        base += mb * nb
    for rows, cols, mb, nb, padded, base in placed:
        overlap = rng.randrange(2)
        program.gemv(padded, mb, nb, _random_vector(rng, params, rows), base, True, overlap)
        program.gemv(padded, mb, nb, _random_vector(rng, params, cols), base, False, 1 - overlap)
        columns = rng.randint(1, 2 * n_r)
        program.gemm(padded, mb, nb, _matrix(rng, cols, columns, low, high), base)
    for rows, cols, mb, nb, padded, base in placed:
        batch = rng.randint(1, max_blocks // max(mb, nb))
        shift = rng.randint(*_update_shifts(params))
        xs = [_random_vector(rng, params, rows) for _ in range(batch)]
        es = [_random_vector(rng, params, cols) for _ in range(batch)]
        updated = program.update(padded, mb, nb, xs, es, shift, base, width, read_back=False)
        program.gemv(updated, mb, nb, _random_vector(rng, params, rows), base, True, rng.randrange(2))
        program.read_back(updated, mb, nb, base)
    return program


def _random_matrices(params, rng):
    """Three random non-square matrices of random sizes, each in a third of the local memory."""
    low, high = _operand_range(params)
    shapes = [_random_shape(rng, params, params["sram_depth"] // 3) for _ in range(3)]
    return _matrices_program(params, rng, [_matrix(rng, rows, cols, low, high) for rows, cols in shapes])


def _top_of_memory(params, rng):
    """Two random matrices, each ending at the last local word (``base = sram_depth - Mb * Nb``): every command
    walks the highest local addresses (the other rows place their matrices from word 0)."""
    low, high = _operand_range(params)
    program = _Program(params)
    for _ in range(2):
        rows, cols = _random_shape(rng, params, params["sram_depth"] // 3)
        blocks = _blocks(rows, params["n_r"]) * _blocks(cols, params["n_r"])
        _matrices_program(params, rng, [_matrix(rng, rows, cols, low, high)], params["sram_depth"] - blocks, program)
    return program


def _edge_shapes(params, rng):
    """An uneven 3 x 2 block matrix, one row, one column of ``max_blocks`` blocks (where they fit)."""
    n_r, low, high = params["n_r"], *_operand_range(params)
    shapes = [(n_r * 2 + 1, n_r * 3), (1, n_r + 1), (n_r * params["max_blocks"], 1)]
    matrices = [_matrix(rng, rows, cols, low, high) for rows, cols in shapes
                if _blocks(rows, n_r) * _blocks(cols, n_r) <= params["sram_depth"] // 3]
    return _matrices_program(params, rng, matrices)


def _directed_corners(params, rng):
    """All zeros; most negative operands everywhere; a matrix of one column shorter than ``n_r``."""
    n_r, low, high = params["n_r"], *_operand_range(params)
    program = _Program(params)
    zeros = [[0] * (2 * n_r) for _ in range(n_r + 1)]
    mb, nb, padded = program.load(zeros, 0)
    program.gemv(padded, mb, nb, [0] * (n_r + 1), 0, True, 1)
    program.gemv(padded, mb, nb, [0] * (2 * n_r), 0, False, 0)
    program.gemm(padded, mb, nb, [[0] * 3 for _ in range(2 * n_r)], 0)
    extreme = [[low] * n_r for _ in range(2 * n_r)]
    mb, nb, padded = program.load(extreme, 8)
    program.gemv(padded, mb, nb, [low] * (2 * n_r), 8, True, 0)
    program.gemv(padded, mb, nb, [high] * n_r, 8, False, 1)
    program.gemm(padded, mb, nb, [[low] * n_r for _ in range(n_r)], 8)
    short = _matrix(rng, n_r - 1, 1, low, high)  # one output; vectors shorter than n_r
    mb, nb, padded = program.load(short, 16)
    program.gemv(padded, mb, nb, _random_vector(rng, params, n_r - 1), 16, True, 1)
    program.gemv(padded, mb, nb, _random_vector(rng, params, 1), 16, False, 1)
    program.gemm(padded, mb, nb, _matrix(rng, 1, 1, low, high), 16)
    return program


def _update_corners(params, rng):
    """UPDATE corners, each checked by a read-back: all zeros; vectors shorter than ``n_r``; non-square and
    uneven at the largest batch; back-to-back updates of the same words; saturation both ways; the largest
    batch of extreme products (a sum that wraps); shift 0 and the largest shift; the overlap flag (ignored)."""
    n_r, width, max_blocks = params["n_r"], params["width"], params["max_blocks"]
    low, high = _operand_range(params)
    program = _Program(params)
    free = [0]

    def fresh(rows, cols, value=None):
        weights = _matrix(rng, rows, cols, low, high) if value is None else [[value] * cols for _ in range(rows)]
        base = free[0]
        mb, nb, padded = program.load(weights, base)
        free[0] += mb * nb
        return mb, nb, padded, base

    def update(matrix, xs, es, shift, read_back=True, overlap=0):
        mb, nb, padded, base = matrix
        return mb, nb, program.update(padded, mb, nb, xs, es, shift, base, width, read_back, overlap), base

    def vectors(count, size):
        return [_random_vector(rng, params, size) for _ in range(count)]

    update(fresh(n_r + 1, 2 * n_r, 0), [[0] * (n_r + 1)], [[0] * (2 * n_r)], 0)
    mb, nb, padded, base = update(fresh(n_r - 1, 1), vectors(1, n_r - 1), vectors(1, 1), width - 1, read_back=False)
    program.gemv(padded, mb, nb, _random_vector(rng, params, n_r - 1), base, True, 0)
    program.read_back(padded, mb, nb, base)
    rows, cols, batch = 2 * n_r + 1, n_r + 1, max_blocks // 3  # 3 x 2 blocks at the largest batch
    matrix = update(fresh(rows, cols), vectors(batch, rows), vectors(batch, cols), width, read_back=False, overlap=1)
    mb, nb, padded, base = update(matrix, vectors(1, rows), vectors(1, cols), 0, read_back=False)
    program.gemv(padded, mb, nb, _random_vector(rng, params, cols), base, False, 1)
    program.read_back(padded, mb, nb, base)
    update(fresh(n_r, n_r, high), [[low] * n_r], [[low] * n_r], 0)  # P > 0, huge: saturates low
    update(fresh(n_r, n_r, low), [[low] * n_r], [[high] * n_r], 1)  # P < 0, huge: saturates high
    # max_blocks samples of low * low = 2**(2 width - 2) each: the sum wraps modulo 2**acc_width.
    matrix = update(fresh(n_r, 1), [[low] * n_r] * max_blocks, [[low]] * max_blocks, width - 1, read_back=False)
    mb, nb, padded, base = update(matrix, vectors(max_blocks, n_r), vectors(max_blocks, 1),
                                  max_shift(params["acc_width"]), read_back=False)
    program.gemv(padded, mb, nb, _random_vector(rng, params, n_r), base, True, 1)
    program.read_back(padded, mb, nb, base)
    return program


def _update_hazards(params, rng):
    """Every command right after an UPDATE of the words it reads or writes (the read-after-write hazard of the
    pipelined write-back): GEMV forward, UPDATE, GEMV backward, LOAD and a GEMM read-back, each issued as soon
    as the core takes it, on one block (the write-back of its only word is the latest) and on 2 x 2 blocks."""
    n_r, width = params["n_r"], params["width"]
    low, high = _operand_range(params)
    program = _Program(params)
    shift = 4 if params.get("mac") == "fp16" else min(width, max_shift(params["acc_width"]))

    def vectors(size):
        return [_random_vector(rng, params, size)]

    mb, nb, padded = program.load(_matrix(rng, n_r, n_r, low, high), 0)
    padded = program.update(padded, mb, nb, vectors(n_r), vectors(n_r), shift, 0, width, read_back=False)
    program.gemv(padded, mb, nb, _random_vector(rng, params, n_r), 0, True, 0)
    padded = program.update(padded, mb, nb, vectors(n_r), vectors(n_r), shift, 0, width, read_back=False)
    padded = program.update(padded, mb, nb, vectors(n_r), vectors(n_r), shift, 0, width, read_back=False)
    program.gemv(padded, mb, nb, _random_vector(rng, params, n_r), 0, False, 1)
    program.update(padded, mb, nb, vectors(n_r), vectors(n_r), shift, 0, width, read_back=False)
    mb, nb, padded = program.load(_matrix(rng, n_r, n_r, low, high), 0)  # LOAD over the words just updated
    program.read_back(padded, mb, nb, 0)
    mb, nb, padded = program.load(_matrix(rng, 2 * n_r, 2 * n_r, low, high), 1)
    padded = program.update(padded, mb, nb, vectors(2 * n_r), vectors(2 * n_r), shift, 1, width, read_back=True)
    padded = program.update(padded, mb, nb, vectors(2 * n_r), vectors(2 * n_r), shift, 1, width, read_back=False)
    program.gemv(padded, mb, nb, _random_vector(rng, params, 2 * n_r), 1, True, 1)
    return program


def _out_of_range(params, rng):
    """Each checked command field just in range (the command runs) and just out of range (rejected, with the
    field's code), each rejection followed by a command that runs normally. The read-backs after the rejected
    UPDATEs show the weights unchanged; a rejected GEMV or LOAD takes no ``i_data`` word (the next command's
    operands follow at once)."""
    n_r, width, max_blocks, depth = params["n_r"], params["width"], params["max_blocks"], params["sram_depth"]
    low, high = _operand_range(params)
    count_limit = (1 << count_shape(max_blocks).width) - 1  # the largest value a count field holds
    too_many = max_blocks + 1 if max_blocks + 1 <= count_limit else None  # just above: only if the field holds it
    program = _Program(params)
    # mb: LOAD and GEMV forward at mb = max_blocks run; mb = max_blocks + 1 and mb = 0 are rejected.
    tall = _matrix(rng, max_blocks * n_r, n_r - 1, low, high)
    mb, nb, tall_padded = program.load(tall, 0)
    program.gemv(tall_padded, mb, nb, _random_vector(rng, params, max_blocks * n_r), 0, True, 0)
    if too_many:
        program.reject(CommandField.MB, CoreOp.GEMV_FORWARD, mb=too_many, nb=1)
    program.gemv(tall_padded, mb, nb, _random_vector(rng, params, n_r - 1), 0, False, 1)
    program.reject(CommandField.MB, CoreOp.LOAD, mb=0, nb=1, base=max_blocks)
    program.reject(CommandField.MB, CoreOp.GEMV_BACKWARD, mb=0, nb=0)  # both out: mb is checked first
    # nb: a 1 x max_blocks block matrix at base max_blocks; GEMV backward at nb = max_blocks runs.
    wide_base = max_blocks
    wide = _matrix(rng, 1, max_blocks * n_r, low, high)
    if too_many:
        program.reject(CommandField.NB, CoreOp.LOAD, mb=1, nb=too_many, base=wide_base)
    mb_w, nb_w, wide_padded = program.load(wide, wide_base)
    program.reject(CommandField.NB, CoreOp.GEMV_FORWARD, mb=1, nb=0, base=wide_base)
    program.gemv(wide_padded, mb_w, nb_w, _random_vector(rng, params, max_blocks * n_r), wide_base, False, 0)
    # qb: GEMM at qb = max_blocks runs; qb = 0 and max_blocks + 1 are rejected; a GEMV ignores its qb.
    program.gemm(tall_padded[:n_r], 1, 1, _matrix(rng, n_r, max_blocks * n_r, low, high), 0)
    program.reject(CommandField.QB, CoreOp.GEMM, mb=1, nb=1, qb=0)
    if too_many:
        program.reject(CommandField.QB, CoreOp.GEMM, mb=1, nb=1, qb=too_many)
    program.commands.append(_command(CoreOp.GEMV_FORWARD, 1, 1, qb=0, base=0))  # qb unused: runs
    vector = _random_vector(rng, params, n_r)
    program.inputs.append(vector)
    program.outputs.append([_signed(sum(vector[i] * tall_padded[i][j] for i in range(n_r)), params["acc_width"])
                            for j in range(n_r)])
    # op: 4 (UPDATE) is the largest op; 5 and 7 are rejected (op before every other field).
    program.reject(CommandField.OP, 5)
    program.reject(CommandField.OP, 7, mb=0, nb=0, qb=0)
    # base: sram_depth - 1 runs; sram_depth is rejected (a base field holds it only if sram_depth is not a power
    # of two).
    if depth < (1 << max(1, (depth - 1).bit_length())):
        program.reject(CommandField.BASE, CoreOp.LOAD, base=depth)
    last = _matrix(rng, 1, 1, low, high)
    mb_l, nb_l, last_padded = program.load(last, depth - 1)
    program.gemv(last_padded, mb_l, nb_l, _random_vector(rng, params, 1), depth - 1, True, 1)
    # UPDATE: qb * mb and qb * nb at max_blocks run; just above, with mb, nb and qb each in range, rejected, and
    # the read-back shows the weights unchanged.
    if max_blocks >= 2:
        batch = max_blocks // 2
        square = _matrix(rng, 2 * n_r, 2 * n_r, low, high)
        base = 2 * max_blocks
        mb_s, nb_s, square_padded = program.load(square, base)
        program.reject(CommandField.BATCH_MB, CoreOp.UPDATE, mb=2, nb=1, qb=batch + 1, base=base, shift=1)
        program.reject(CommandField.BATCH_NB, CoreOp.UPDATE, mb=1, nb=2, qb=batch + 1, base=base, shift=1)
        program.read_back(square_padded, mb_s, nb_s, base)
        xs = [_random_vector(rng, params, 2 * n_r) for _ in range(batch)]
        es = [_random_vector(rng, params, 2 * n_r) for _ in range(batch)]
        shift = min(width, max_shift(params["acc_width"]))
        square_padded = program.update(square_padded, mb_s, nb_s, xs, es, shift, base, width, read_back=False)
        program.reject(CommandField.BATCH_MB, CoreOp.UPDATE, mb=2, nb=2, qb=batch + 1, base=base, shift=shift)
        program.read_back(square_padded, mb_s, nb_s, base)
    return program


def _error_bursts(params, rng):
    """Runs of rejected commands back to back, in random order: every ``op`` code (0 .. 7, odd and even, so
    every bit of the error word's ``op`` is 1 and 0 across the run), each with a field out of range
    (``mb = 0`` for a :class:`CoreOp`, the op itself for 5 .. 7; GEMM also ``nb = 0`` and ``qb = 0``). Meant for
    an ``o_error`` that is seldom ready (``_error_stalls``): error words wait in the error stream's stage
    (both its registers) while the next rejected commands arrive. A LOAD and a GEMV after the runs show the core
    still runs commands."""
    n_r = params["n_r"]
    low, high = _operand_range(params)
    program = _Program(params)
    rejects = [(CommandField.MB, op, {"mb": 0}) for op in CoreOp]
    rejects += [(CommandField.NB, CoreOp.GEMV_BACKWARD, {"nb": 0}), (CommandField.QB, CoreOp.GEMM, {"qb": 0})]
    rejects += [(CommandField.OP, op, {"mb": rng.randint(0, 1), "qb": rng.randint(0, 1)}) for op in (5, 6, 7)]
    for _ in range(3):
        for field, op, fields in rng.sample(rejects, len(rejects)):
            program.reject(field, op, **fields)
    weights = _matrix(rng, n_r, n_r, low, high)
    mb, nb, padded = program.load(weights, 0)
    program.gemv(padded, mb, nb, _random_vector(rng, params, n_r), 0, True, 0)
    return program


def _error_stalls(rng):
    """An ``o_error`` ready pattern that is low for runs of 2 .. 6 cycles between single ready cycles."""
    pattern = []
    while len(pattern) < 61:
        pattern += [0] * rng.randint(2, 6) + [1]
    return tuple(pattern)


def _scenario(name, program, rng=None, valid=None, ready=None):
    handshake = {}
    if valid is not None:
        handshake = {"valid": {"i_cmd": random_pattern(rng, valid), "i_data": random_pattern(rng, valid)},
                     "ready": {"o_data": random_pattern(rng, ready), "o_error": random_pattern(rng, ready)}}
    return Scenario(name, {"i_cmd": program.commands, "i_data": program.inputs},
                    {"o_data": program.outputs, "o_error": program.errors}, **handshake)


def _fp16_specials(params, rng):
    """``fp16`` corners, each read back: random bit patterns everywhere (every special: signed zeros,
    subnormals, infinities, NaNs) through GEMV both ways, GEMM and UPDATE; an UPDATE that overflows FP16
    (``65504 - 65504**2`` is -Inf), then a GEMV on the infinite weights with zeros in ``x`` (Inf * 0 is NaN);
    write-backs below FP16's smallest normal (flushed to zero) and just above it; signed zeros."""
    n_r = params["n_r"]
    program = _Program(params)
    free = [0]

    def bits(count):
        return [_signed(rng.randrange(1 << 16), 16) for _ in range(count)]

    def load(weights):
        base = free[0]
        mb, nb, padded = program.load(weights, base)
        free[0] += mb * nb
        return mb, nb, padded, base

    rows, cols = n_r + 1, n_r + 1
    mb, nb, padded, base = load([bits(cols) for _ in range(rows)])
    program.gemv(padded, mb, nb, bits(rows), base, True, 0)
    program.gemv(padded, mb, nb, bits(cols), base, False, 1)
    program.gemm(padded, mb, nb, [bits(n_r) for _ in range(cols)], base)
    program.update(padded, mb, nb, [bits(rows)], [bits(cols)], rng.randint(0, 31), base, 16)
    largest, smallest, one, minus_one = 0x7BFF, 0x0400, 0x3C00, _signed(0xBC00, 16)
    mb, nb, padded, base = load([[largest, _signed(0xFBFF, 16)][:n_r] + [largest] * (n_r - 2) for _ in range(n_r)])
    updated = program.update(padded, mb, nb, [[largest] * n_r], [[largest] * n_r], 0, base, 16)
    program.gemv(updated, mb, nb, [0] + [one] * (n_r - 1), base, True, 1)
    mb, nb, padded, base = load([[smallest] * n_r for _ in range(n_r)])
    program.update(padded, mb, nb, [[smallest] * n_r], [[one, minus_one] * (n_r // 2) + [one] * (n_r % 2)], 1,
                   base, 16)
    negative_zero = _signed(0x8000, 16)
    mb, nb, padded, base = load([[negative_zero] * n_r for _ in range(n_r)])
    program.gemv(padded, mb, nb, [negative_zero] * n_r, base, True, 0)
    program.gemv(padded, mb, nb, [one] * n_r, base, False, 0)
    program.update(padded, mb, nb, [[negative_zero] * n_r], [[one] * n_r], 0, base, 16)
    return program


def _landing_collisions(params, rng):
    """GEMVs whose block period, before :func:`~trainforge.spec.caterpillar.gemv_block_gap` lengthens it, divides
    ``R + Lr`` (``R`` reduction cycles, ``Lr`` the interleaved reduction's latency), with enough blocks that a later
    block's handoff would land in the diagonal PE in the cycle an earlier block's sum is written (forward and
    backward, with and without overlap; none where no such shape fits ``max_blocks`` and the memory)."""
    n_r, max_blocks, depth = params["n_r"], params["max_blocks"], params["sram_depth"]
    drain = reduction_cycles(n_r, params["reduction"]) + 1
    span = drain - 1 + core_reduction_latency(params)
    program = _Program(params)
    for period in range(drain, span + 1):
        if span % period:
            continue
        blocks = span // period + 1
        for overlap, steps in ((0, period - drain), (1, period)):
            if not 1 <= steps <= max_blocks or blocks > max_blocks or steps * blocks > depth:
                continue
            forward = rng.randrange(2)
            rows, cols = (steps, blocks) if forward else (blocks, steps)
            weights = _matrix(rng, rows * n_r, cols * n_r, *_operand_range(params))
            mb, nb, padded = program.load(weights, 0)
            program.gemv(padded, mb, nb, _random_vector(rng, params, (mb if forward else nb) * n_r), 0, forward,
                         overlap)
    return program


def _fp16_scenarios(params, seed):
    """The ``mac="fp16"`` table: the UPDATE hazards and the edge shapes unstalled with every output cycle, random
    matrices and the FP corners under backpressure. Operands are random FP16 normals of magnitude 2**-5 .. 2**5
    (``_operand``), except in the corners. The range-check rows are the fixed-point table's (the checks do not
    depend on the MAC unit)."""
    table = []
    for name, build, valid, ready in (("fp16: update read-after-write hazards, cycle exact", _update_hazards, None, None),
                                      ("fp16: edge shapes, cycle exact", _edge_shapes, None, None),
                                      ("fp16: random matrices with backpressure", _random_matrices, 0.7, 0.6),
                                      ("fp16: specials with backpressure", _fp16_specials, 0.8, 0.7)):
        rng = rng_for(seed, "cp_core", name)
        table.append(_scenario(name, build(params, rng), rng, valid, ready))
    if core_reduction_latency(params):
        name = "fp16: landing collisions of the interleaved reduction, cycle exact"
        program = _landing_collisions(params, rng_for(seed, "cp_core", name))
        if program.commands:
            table.append(_scenario(name, program))
    return table


def scenarios(params, seed):
    if params.get("mac") == "fp16":
        return _fp16_scenarios(params, seed)
    table = []
    for name, build, valid, ready in (("out-of-range command fields, cycle exact", _out_of_range, None, None),
                                      ("out-of-range command fields with backpressure", _out_of_range, 0.6, 0.4),
                                      ("update read-after-write hazards, cycle exact", _update_hazards, None, None),
                                      ("random matrices with backpressure", _random_matrices, 0.7, 0.6),
                                      ("edge shapes, cycle exact", _edge_shapes, None, None),
                                      ("directed corners", _directed_corners, 0.8, 0.7),
                                      ("update corners", _update_corners, 0.8, 0.7),
                                      ("matrices at the top of the local memory", _top_of_memory, 0.8, 0.7)):
        rng = rng_for(seed, "cp_core", name)
        program = build(params, rng)
        table.append(_scenario(name, program, rng, valid, ready))
    name = "rejected commands back to back while o_error stalls"
    rng = rng_for(seed, "cp_core", name)
    program = _error_bursts(params, rng)
    table.append(Scenario(name, {"i_cmd": program.commands, "i_data": program.inputs},
                          {"o_data": program.outputs, "o_error": program.errors},
                          ready={"o_error": _error_stalls(rng)}))
    for name, valid, ready, extreme in (("full rate, cycle exact", None, None, False),
                                        ("operand gaps, result stalls", 0.6, 0.5, False),
                                        ("most negative operands", 0.8, 0.8, True)):
        rng = rng_for(seed, "cp_core", name)
        program = _program(params, rng, extreme)
        handshake = {}
        if valid is not None:
            handshake = {"valid": {"i_cmd": random_pattern(rng, valid), "i_data": random_pattern(rng, valid)},
                         "ready": {"o_data": random_pattern(rng, ready)}}
        table.append(Scenario(name, {"i_cmd": program.commands, "i_data": program.inputs},
                              {"o_data": program.outputs, "o_error": program.errors}, **handshake))
    return table


def golden(params, scenario):
    """Run the golden model command by command on a local-memory image (``image[r, c, address]``)."""
    n_r = params["n_r"]
    image = np.zeros((n_r, n_r, params["sram_depth"]), dtype=np.int64)
    words = iter(scenario.stimulus["i_data"])
    outputs, cycles, accepted = [], [], 0
    errors, error_cycles = [], []

    def take(count):
        return np.array([next(words) for _ in range(count)], dtype=np.int64).reshape(count, n_r)

    for command in scenario.stimulus["i_cmd"]:
        op, mb, nb, qb, base = command["op"], command["mb"], command["nb"], command["qb"], command["base"]
        schedule = golden_core.command_schedule(command, **params)
        error = golden_core.command_error(command, **params)
        if error is not None:  # rejected: no operand, no result, nothing written
            errors.append(error)
            error_cycles += [accepted + int(offset) for offset in schedule.error_offsets]
        elif op == CoreOp.LOAD:
            loaded = take(mb * nb * n_r).reshape(mb * nb, n_r, n_r)
            image[:, :, base:base + mb * nb] = loaded.transpose(1, 2, 0)
        else:
            # W[ib * n_r + r, jb * n_r + c] = image[r, c, base + jb * mb + ib]
            region = image[:, :, base:base + mb * nb].reshape(n_r, n_r, nb, mb)
            weights = region.transpose(3, 0, 2, 1).reshape(mb * n_r, nb * n_r)
            if op == CoreOp.UPDATE:
                x = take(qb * mb).reshape(mb, qb, n_r).transpose(1, 0, 2).reshape(qb, mb * n_r)
                e = take(qb * nb).reshape(nb, qb, n_r).transpose(1, 0, 2).reshape(qb, nb * n_r)
                updated = golden_core.update(weights, x, e, command["shift"], **params)[1]
                # back into the image: image[r, c, base + jb * mb + ib] = W'[ib * n_r + r, jb * n_r + c]
                image[:, :, base:base + mb * nb] = updated.reshape(mb, n_r, nb, n_r).transpose(1, 3, 2, 0).reshape(
                    n_r, n_r, nb * mb)
            elif op == CoreOp.GEMV_FORWARD:
                outputs += golden_core.gemv_forward(weights, take(mb).reshape(-1), **params)[1].tolist()
            elif op == CoreOp.GEMV_BACKWARD:
                outputs += golden_core.gemv_backward(weights, take(nb).reshape(-1), **params)[1].tolist()
            else:
                panels = take(qb * mb * nb * n_r).reshape(qb, mb, nb * n_r, n_r)[:, 0]
                b = panels.transpose(1, 0, 2).reshape(nb * n_r, qb * n_r)
                outputs += golden_core.gemm(weights, b, **params)[1].tolist()
        cycles += [accepted + int(offset) for offset in schedule.output_offsets]
        accepted += schedule.issue_cycles + COMMAND_LATENCY
    timed = not scenario.valid and not scenario.ready
    return Transactions({"o_data": outputs, "o_error": errors},
                        {"o_data": cycles, "o_error": error_cycles} if timed else {})
