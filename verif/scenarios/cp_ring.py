"""Scenario table of ``cp_ring``: programs of WRITE, READ, ALL_GATHER, REDUCE_SCATTER, LOAD and ring GEMV commands.

A scenario's stimulus is a program (command words on ``i_cmd``, their words on
``i_data``); the expected ``o_data`` words are what its READ commands return.

Reference (independent of the golden model): the ring buffers as Python lists,
the collectives stepped hop by hop as the command descriptions say, sums
wrapped to ``acc_width`` bits:

- WRITE / READ (``words``): ``words`` buffer words per core, core 0 first;
- ALL_GATHER (``cw``): at step ``s`` (``0 .. P - 2``) core ``k`` sends its chunk ``(k - s) % P`` and
  core ``k + 1`` overwrites its copy of that chunk;
- REDUCE_SCATTER (``cw``): at step ``s`` core ``k`` sends its chunk ``(k - s - 1) % P`` and core
  ``k + 1`` adds it to its own copy of that chunk (both read before the step's writes);
- LOAD (``core``, ``mb``, ``nb``, ``base``): the core's LOAD words, word ``a * n_r + r``
  (``a = jb * Mb + ib``) carrying ``W[ib * n_r + r, jb * n_r + c]`` on lane ``c``;
- ring GEMV (Fig. 4 on all ``P`` cores): ``W`` (``Mb x Nb`` blocks) split in ``P`` row panels of
  ``mb = ceil(Mb / P)`` blocks (the last ones zero-padded), panel ``k`` LOADed into core ``k`` at ``base``; forward,
  core ``k`` takes its part of ``x`` from its ring-buffer words ``k * mb ..`` (the low ``width`` bits of each
  lane, signed) and ``o_data`` carries the ``nb`` words of ``y = x^T W`` (the plain sum over all rows);
  backward, ``e`` comes as ``nb`` ``i_data`` words and ``o_data`` carries ``d = W e`` block-major: word ``b``
  of core 0's part, of core 1's, ..., of core ``P - 1``'s, then word ``b + 1``; each core's part also lands
  in its buffer words ``k * mb ..`` (a READ after it returns them). Sums wrap to ``acc_width`` bits.

``mac="fp16"``: the ring words' lanes are FP32 bit patterns, the cores' operands FP16 bit patterns (the low 16
bits of a lane, as for ``fixed``); every sum is a numpy float32 addition (flushed), in the order the ring adds:
a reduce-scatter adds the arriving partial to the receiver's own (a chunk ends as
``((p_{c+1} + p_{c+2}) + ...) + p_k``); the forward GEMV's chain is ``((y_0 + y_1) + y_2) + ...`` over the cores'
partial outputs, each computed as in the ``cp_core`` table (``scenarios.cp_core.fp16_gemv``).

Out-of-range commands (``spec.caterpillar.ring_command_limits``): the expected ``o_error`` word of each rejected
command is written by hand (the :class:`RingField` the row puts out of range, and the ``op``); a rejected command
has no ``i_data`` and no ``o_data`` words and changes nothing. Every scenario expects its ``o_error`` words.
"""
import numpy as np

from trainforge.golden.caterpillar import ring as golden_ring
from trainforge.spec.caterpillar import COMMAND_LATENCY, RingField, RingOp, count_shape

from scenario import Scenario, Transactions, random_pattern, rng_for
from scenarios.cp_core import fp16_gemv, fp32_lane_add


def _signed(value, bits):
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _command(op, words=1, core=0, overlap=0, mb=1, nb=1, base=0):
    return {"op": int(op), "core": core, "overlap": int(overlap), "mb": mb, "nb": nb, "base": base, "words": words}


def _blocks(size, n_r):
    return max(1, -(-size // n_r))


class _Program:
    def __init__(self, params):
        self.cores, self.n_r, self.acc_width = params["cores"], params["n_r"], params["acc_width"]
        self.width = params["width"]
        self.fp16, self.reduction = params.get("mac") == "fp16", params["reduction"]
        depth = params["cores"] * params["max_blocks"]
        self.buffers = [[[0] * self.n_r for _ in range(depth)] for _ in range(self.cores)]
        self.commands, self.inputs, self.outputs, self.errors = [], [], [], []

    def reject(self, field, op, **fields):
        """A command the ring must reject with ``field`` (a :class:`RingField`): no words in or out."""
        self.commands.append(_command(op, **fields))
        self.errors.append({"field": int(field), "op": int(op)})

    def write(self, words):
        """``words[k]``: the words of core ``k``, at buffer word 0."""
        self.commands.append(_command(RingOp.WRITE, len(words[0])))
        for core, core_words in enumerate(words):
            self.inputs += [list(word) for word in core_words]
            self.buffers[core][:len(core_words)] = [list(word) for word in core_words]

    def read(self, count):
        self.commands.append(_command(RingOp.READ, count))
        for core in range(self.cores):
            self.outputs += [list(word) for word in self.buffers[core][:count]]

    def _step_chunks(self, cw, offset, combine):
        cores = self.cores
        for step in range(cores - 1):
            sent = {}
            for core in range(cores):
                chunk = (core - step - offset) % cores
                sent[(core + 1) % cores] = (chunk, [list(word) for word in
                                                    self.buffers[core][chunk * cw:(chunk + 1) * cw]])
            for receiver, (chunk, words) in sent.items():
                own = self.buffers[receiver][chunk * cw:(chunk + 1) * cw]
                self.buffers[receiver][chunk * cw:(chunk + 1) * cw] = [
                    [combine(mine, theirs) for mine, theirs in zip(own_word, word)]
                    for own_word, word in zip(own, words)]

    def all_gather(self, cw):
        self.commands.append(_command(RingOp.ALL_GATHER, cw))
        self._step_chunks(cw, 0, lambda mine, theirs: theirs)

    def reduce_scatter(self, cw):
        self.commands.append(_command(RingOp.REDUCE_SCATTER, cw))
        if self.fp16:
            self._step_chunks(cw, 1, fp32_lane_add)
            return
        self._step_chunks(cw, 1, lambda mine, theirs: _signed(mine + theirs, self.acc_width))

    def load(self, core, panel, mb, nb, base):
        """LOAD of a zero-padded ``mb * n_r x nb * n_r`` panel into ``core``."""
        n_r = self.n_r
        self.commands.append(_command(RingOp.LOAD, core=core, mb=mb, nb=nb, base=base))
        for jb in range(nb):
            for ib in range(mb):
                self.inputs += [[panel[ib * n_r + r][jb * n_r + c] for c in range(n_r)] for r in range(n_r)]

    def ring_gemv(self, weights, base, x, e, overlap, forwards=1):
        """LOAD the ``P`` row panels (one per core), put ``x`` in the ring buffers by a WRITE of each core's part
        and an all-gather, then the GEMV forward (``overlap``; ``forwards`` times, back to back) and backward (the
        other ``overlap``), then a read-back of the buffers (core ``k``'s part of ``d`` in its chunk ``k``)."""
        n_r, acc, width, cores = self.n_r, self.acc_width, self.width, self.cores
        rows, cols = len(weights), len(weights[0])
        mb, nb = -(-_blocks(rows, n_r) // cores), _blocks(cols, n_r)
        padded = [[weights[i][j] if i < rows and j < cols else 0 for j in range(nb * n_r)]
                  for i in range(cores * mb * n_r)]
        for core in range(cores):
            self.load(core, padded[core * mb * n_r:(core + 1) * mb * n_r], mb, nb, base)
        x = [x[i] if i < rows else 0 for i in range(cores * mb * n_r)]
        parts = [[[0] * n_r for _ in range(cores * mb)] for _ in range(cores)]
        for core in range(cores):  # core k starts with its part of x as its chunk k
            for word in range(mb):
                parts[core][core * mb + word] = x[(core * mb + word) * n_r:(core * mb + word + 1) * n_r]
        self.write(parts)
        self.all_gather(mb)
        # Forward: each core's operands are the low width bits of its buffer words k * mb ..; y = x^T W.
        operands = []
        for core in range(cores):
            for word in self.buffers[core][core * mb:(core + 1) * mb]:
                operands += [_signed(lane, width) for lane in word]
        if self.fp16:  # each core's partial output, then the chain of FP32 adds from core 0 to core P - 1
            rows = mb * n_r
            partials = [fp16_gemv(padded[k * rows:(k + 1) * rows], mb, nb, operands[k * rows:(k + 1) * rows], True,
                                  n_r, self.reduction) for k in range(cores)]
            y = partials[0]
            for partial in partials[1:]:
                y = [fp32_lane_add(total, lane) for total, lane in zip(y, partial)]
        else:
            y = [_signed(sum(operands[i] * padded[i][j] for i in range(cores * mb * n_r)), acc)
                 for j in range(nb * n_r)]
        for _ in range(forwards):
            self.commands.append(_command(RingOp.GEMV_FORWARD, overlap=overlap, mb=mb, nb=nb, base=base))
            self.outputs += [y[b * n_r:(b + 1) * n_r] for b in range(nb)]
        # Backward: e on i_data, d = W e; word b of core 0, 1, ..., P - 1, then word b + 1; core k's words
        # also stay in its buffer words k * mb ...
        e = [e[j] if j < cols else 0 for j in range(nb * n_r)]
        self.commands.append(_command(RingOp.GEMV_BACKWARD, overlap=not overlap, mb=mb, nb=nb, base=base))
        self.inputs += [e[b * n_r:(b + 1) * n_r] for b in range(nb)]
        if self.fp16:
            rows = mb * n_r
            d = sum((fp16_gemv(padded[k * rows:(k + 1) * rows], mb, nb, e, False, n_r, self.reduction)
                     for k in range(cores)), [])
        else:
            d = [_signed(sum(padded[i][j] * e[j] for j in range(nb * n_r)), acc) for i in range(cores * mb * n_r)]
        for b in range(mb):
            for core in range(cores):
                self.outputs.append(d[(core * mb + b) * n_r:(core * mb + b + 1) * n_r])
        for core in range(cores):
            for b in range(mb):
                self.buffers[core][core * mb + b] = d[(core * mb + b) * n_r:(core * mb + b + 1) * n_r]
        self.read(cores * mb)

    def collectives(self, partials):
        """Reduce-scatter of the partial vectors (one per core), read-back, all-gather, read-back."""
        cores, n_r = self.cores, self.n_r
        size = len(partials[0])
        cw = -(-size // (cores * n_r))
        padded = [list(partial) + [0] * (cores * cw * n_r - size) for partial in partials]
        self.write([[partial[w * n_r:(w + 1) * n_r] for w in range(cores * cw)] for partial in padded])
        self.reduce_scatter(cw)
        self.read(cores * cw)
        self.all_gather(cw)
        self.read(cores * cw)


def _random_weights(params, rng, rows_most, cols_most, base=0):
    """A random ``rows x cols`` matrix whose ``cores`` row panels fit the PEs' memories above ``base``."""
    n_r = params["n_r"]
    rows, cols = rng.randint(1, rows_most), rng.randint(1, cols_most)
    while -(-_blocks(rows, n_r) // params["cores"]) * _blocks(cols, n_r) > params["sram_depth"] - base:
        rows = max(1, rows // 2)
    return [_random_vector(params, rng, cols) for _ in range(rows)]


def _random_vector(params, rng, size, bits=None):
    """Random operands (``bits`` = ``width``, the default) or ring words' lanes (``acc_width``): integers, or with
    ``mac="fp16"`` FP16 normals of magnitude 2**-5 .. 2**5 (as signed 16-bit values) and FP32 normals of
    magnitude 2**-20 .. 2**20 (as signed 32-bit values)."""
    bits = bits or params["width"]
    if params.get("mac") == "fp16":
        if bits == 16:
            return [_signed((rng.randrange(2) << 15) | (rng.randint(10, 19) << 10) | rng.randrange(1 << 10), 16)
                    for _ in range(size)]
        return [_signed((rng.randrange(2) << 31) | (rng.randint(107, 147) << 23) | rng.randrange(1 << 23), 32)
                for _ in range(size)]
    return [rng.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1) for _ in range(size)]


def _gemvs(params, rng, program, count):
    """``count`` random ring GEMVs of random shapes (panels up to ``max_blocks`` blocks each way)."""
    n_r, max_blocks = params["n_r"], params["max_blocks"]
    for _ in range(count):
        weights = _random_weights(params, rng, params["cores"] * max_blocks * n_r, max_blocks * n_r)
        program.ring_gemv(weights, 0, _random_vector(params, rng, len(weights)),
                              _random_vector(params, rng, len(weights[0])), rng.randrange(2))


def _random_vectors(params, rng):
    """Collectives on random partial vectors of random sizes, then random ring GEMVs."""
    cores, n_r, max_blocks = params["cores"], params["n_r"], params["max_blocks"]
    program = _Program(params)
    for _ in range(2):
        size = rng.randint(1, cores * n_r * max_blocks)
        program.collectives([_random_vector(params, rng, size, params["acc_width"]) for _ in range(cores)])
    _gemvs(params, rng, program, 2)
    return program


def _directed_corners(params, rng):
    """All zeros; a vector shorter than ``n_r``; a length not divisible by ``cores * n_r``; extreme sums;
    zero, extreme, one-row and one-column GEMVs."""
    cores, n_r, width, acc = params["cores"], params["n_r"], params["width"], params["acc_width"]
    program = _Program(params)
    program.collectives([[0] * (2 * cores * n_r) for _ in range(cores)])
    for size in (n_r - 1, cores * n_r + 1):
        program.collectives([_random_vector(params, rng, size, acc) for _ in range(cores)])
    low, high = -(1 << (acc - 1)), (1 << (acc - 1)) - 1
    program.write([[[high if core % 2 == 0 else low] * n_r for _ in range(cores)] for core in range(cores)])
    program.reduce_scatter(1)
    program.read(cores)
    program.ring_gemv([[0] * (2 * n_r) for _ in range(n_r + 1)], 0, [0] * (n_r + 1), [0] * (2 * n_r), 1)
    low, high = -(1 << (width - 1)), (1 << (width - 1)) - 1
    program.ring_gemv([[low] * n_r for _ in range((cores + 1) * n_r)], 0, [low] * ((cores + 1) * n_r),
                      [high] * n_r, 0)
    program.ring_gemv([_random_vector(params, rng, n_r - 1)], 4, _random_vector(params, rng, 1),
                          _random_vector(params, rng, n_r - 1), 1)
    program.ring_gemv([[value] for value in _random_vector(params, rng, n_r + 1)], 4,
                          _random_vector(params, rng, n_r + 1), _random_vector(params, rng, 1), 0)
    return program


def _program(params, rng, extreme):
    cores, n_r, acc = params["cores"], params["n_r"], params["acc_width"]
    low, high = -(1 << (acc - 1)), (1 << (acc - 1)) - 1
    program = _Program(params)

    def words(count):
        return [[[low] * n_r if extreme else _random_vector(params, rng, n_r, acc) for _ in range(count)]
                for _ in range(cores)]

    cw = rng.randint(1, params["max_blocks"])
    program.write(words(cores * cw))
    program.all_gather(cw)
    program.read(cores * cw)
    cw = rng.randint(1, params["max_blocks"])
    program.write(words(cores * cw))
    program.reduce_scatter(cw)
    program.read(cores * cw)
    program.reduce_scatter(cw)
    program.all_gather(cw)
    program.read(rng.randint(1, cores * cw))
    _gemvs(params, rng, program, 1)
    return program


def _out_of_range(params, rng):
    """Each checked field just in range (the command runs) and just out of range (rejected with the field's code),
    each rejection followed by a command that runs normally; the read-backs and the GEMVs after the rejections
    show that nothing changed and that no rejected command took an ``i_data`` word."""
    cores, n_r, acc = params["cores"], params["n_r"], params["acc_width"]
    max_blocks, depth = params["max_blocks"], params["sram_depth"]
    buffer = cores * max_blocks
    words_most = (1 << buffer.bit_length()) - 1  # the largest value the words field holds
    count_most = (1 << count_shape(max_blocks).width) - 1
    program = _Program(params)
    # words: WRITE and READ of whole buffers run; 0 and one word more are rejected.
    program.write([[_random_vector(params, rng, n_r, acc) for _ in range(buffer)] for _ in range(cores)])
    program.reject(RingField.WORDS, RingOp.WRITE, words=0)
    if buffer + 1 <= words_most:
        program.reject(RingField.WORDS, RingOp.WRITE, words=buffer + 1)
    program.read(buffer)
    program.reject(RingField.WORDS, RingOp.READ, words=0)
    # chunk words (collectives): max_blocks runs; max_blocks + 1 and 0 are rejected.
    program.all_gather(max_blocks)
    program.reject(RingField.WORDS, RingOp.REDUCE_SCATTER, words=max_blocks + 1)
    program.reject(RingField.WORDS, RingOp.ALL_GATHER, words=0)
    program.reduce_scatter(max_blocks)
    program.read(buffer)
    # op 7 (6 is the largest op).
    program.reject(RingField.OP, 7, words=0)
    # core, mb, nb, base of LOAD: core cores - 1 at base sram_depth - 1 runs (its words are taken: the GEMVs
    # below get theirs); core = cores, mb and nb at 0 and max_blocks + 1, base = sram_depth are rejected.
    if cores <= (1 << max(1, (cores - 1).bit_length())) - 1:
        program.reject(RingField.CORE, RingOp.LOAD, core=cores)
    program.load(cores - 1, [_random_vector(params, rng, n_r) for _ in range(n_r)], 1, 1, depth - 1)
    program.reject(RingField.MB, RingOp.LOAD, core=cores - 1, mb=0)
    if max_blocks + 1 <= count_most:
        program.reject(RingField.MB, RingOp.GEMV_FORWARD, mb=max_blocks + 1)
        program.reject(RingField.NB, RingOp.LOAD, nb=max_blocks + 1)
    program.reject(RingField.NB, RingOp.GEMV_BACKWARD, nb=0)
    if depth <= (1 << max(1, (depth - 1).bit_length())) - 1:
        program.reject(RingField.BASE, RingOp.LOAD, base=depth)
    # GEMVs at mb = nb = max_blocks (as far as the memory holds them) run.
    nb = max(1, min(max_blocks, depth // max_blocks))
    weights = [_random_vector(params, rng, nb * n_r) for _ in range(cores * max_blocks * n_r)]
    program.ring_gemv(weights, 0, _random_vector(params, rng, len(weights)),
                          _random_vector(params, rng, nb * n_r), rng.randrange(2))
    return program


#: Largest row-panel height (blocks) of the stalled-sums scenario's GEMVs.
STALLED_SUMS_MAX_MB = 4


def _stalled_sums(params, rng):
    """Forward GEMVs of ``max_blocks`` output words each, their sums all negative (every lane's high bits ones),
    then all positive (zeros): under long output stalls the last sum hop holds a sum while the next one arrives
    behind it (its skid register), so each bit of a held sum is seen in both values. ``mb`` is at most
    ``STALLED_SUMS_MAX_MB``: the stalls, not the panel's height, pile the sums up, and at the ring's defaults
    ``mb = max_blocks`` would load 132 352 words, more than the fast regression's testbench holds per port."""
    cores, n_r, max_blocks, depth = params["cores"], params["n_r"], params["max_blocks"], params["sram_depth"]
    nb = max_blocks
    mb = max(1, min(max_blocks, depth // nb, STALLED_SUMS_MAX_MB))
    program = _Program(params)
    for sign in (-1, 1, -1, 1):
        weights = [[sign * rng.randint(1, 100) for _ in range(nb * n_r)] for _ in range(cores * mb * n_r)]
        program.ring_gemv(weights, 0, [rng.randint(1, 100) for _ in range(len(weights))],
                          [rng.randint(-100, 100) for _ in range(nb * n_r)], rng.randrange(2))
    return program


def _back_to_back_forwards(params, rng):
    """Forward GEMVs three times back to back (``max_blocks`` output words each), once with positive and once with
    negative weights. A forward GEMV ends when its last sum enters the output stage, so under long output stalls
    the next one starts with two words still there: its sums fill sum hop 2, then sum hop 1, whose skid register
    holds core 0's partial of the last word (the first GEMV of a run never gets that far: the output stage and
    hop 2 hold ``4 >= max_blocks`` words). Every lane 1 of core 0's partials has bit 8 set (``x_0 = 1`` and
    ``W[0, j]`` chosen for it) and lane 2 is all positive, then all negative (its high bits zeros, then ones), so a
    held bit and a bit the skid register could mix into it are both seen set and clear."""
    cores, n_r, max_blocks, depth = params["cores"], params["n_r"], params["max_blocks"], params["sram_depth"]
    nb = max_blocks
    mb = max(1, min(max_blocks, depth // nb, STALLED_SUMS_MAX_MB))
    rows = cores * mb * n_r
    program = _Program(params)
    for sign in (1, -1):
        x = [1] + [rng.randint(1, 100) for _ in range(rows - 1)]
        weights = [[sign * rng.randint(1, 100) for _ in range(nb * n_r)] for _ in range(rows)]
        for column in range(min(1, n_r - 1), nb * n_r, n_r):  # lane 1 of every output word (lane 0 if n_r = 1)
            rest = sum(x[i] * weights[i][column] for i in range(1, mb * n_r))  # core 0's partial without row 0
            weights[0][column] = next(w for w in (sign * v for v in rng.sample(range(1, 1024), 1023))
                                      if (rest + w) >> 8 & 1)
        program.ring_gemv(weights, 0, x, [rng.randint(-100, 100) for _ in range(nb * n_r)], rng.randrange(2),
                          forwards=3)
    return program


def power_on_scenario(params, seed):
    """Forward GEMVs over every word of every PE's local memory before any LOAD, with ``x`` lanes of 1: the
    memories start at zero (``cp_core``'s golden image), so every ``y`` word is 0. Not in :func:`scenarios`: it
    holds only on a ring that has loaded nothing since power-on (``tb_cp_ring.power_on_weights_are_zero``, the
    testbench's first test)."""
    cores, n_r, max_blocks, depth = params["cores"], params["n_r"], params["max_blocks"], params["sram_depth"]
    mb = nb = max(1, min(max_blocks, int(depth ** 0.5)))
    program = _Program(params)
    program.write([[[1] * n_r for _ in range(cores * mb)] for _ in range(cores)])
    base = 0
    while True:
        base = min(base, depth - mb * nb)
        program.commands.append(_command(RingOp.GEMV_FORWARD, mb=mb, nb=nb, base=base))
        program.outputs += [[0] * n_r for _ in range(nb)]  # W = 0 at power-on: y = x^T W = 0
        if base + mb * nb >= depth:
            break
        base += mb * nb
    return _scenario("power-on local memories read as zero", program, rng_for(seed, "cp_ring", "power-on"))


def _scenario(name, program, rng, valid=None, ready=None):
    handshake = {}
    if valid is not None:
        handshake = {"valid": {"i_cmd": random_pattern(rng, valid), "i_data": random_pattern(rng, valid)},
                     "ready": {"o_data": random_pattern(rng, ready), "o_error": random_pattern(rng, ready)}}
    return Scenario(name, {"i_cmd": program.commands, "i_data": program.inputs},
                    {"o_data": program.outputs, "o_error": program.errors}, **handshake)


def _fp16_scenarios(params, seed):
    """The ``mac="fp16"`` table: FP32 collectives and ring GEMVs, unstalled (cycle exact) and under backpressure
    (the range-check and extreme-value rows are the fixed-point table's: they do not depend on the MAC)."""
    table = []
    for name, build, valid, ready in (("fp16: full rate, cycle exact", lambda p, r: _program(p, r, False), None, None),
                                      ("fp16: random vectors with backpressure", _random_vectors, 0.7, 0.6),
                                      ("fp16: random vectors, cycle exact", _random_vectors, None, None)):
        rng = rng_for(seed, "cp_ring", name)
        table.append(_scenario(name, build(params, rng), rng, valid, ready))
    return table


def scenarios(params, seed):
    if params.get("mac") == "fp16":
        return _fp16_scenarios(params, seed)
    table = []
    for name, valid, ready, extreme in (("full rate, cycle exact", None, None, False),
                                        ("input gaps, output stalls", 0.6, 0.5, False),
                                        ("most negative words (sums wrap)", 0.8, 0.7, True)):
        rng = rng_for(seed, "cp_ring", name)
        table.append(_scenario(name, _program(params, rng, extreme), rng, valid, ready))
    for name, build, valid, ready in (("out-of-range command fields, cycle exact", _out_of_range, None, None),
                                      ("out-of-range command fields with backpressure", _out_of_range, 0.6, 0.4),
                                      ("random vectors with backpressure", _random_vectors, 0.7, 0.6),
                                      ("random vectors, cycle exact", _random_vectors, None, None),
                                      ("directed corners", _directed_corners, 0.8, 0.7)):
        rng = rng_for(seed, "cp_ring", name)
        table.append(_scenario(name, build(params, rng), rng, valid, ready))
    # o_data ready one cycle in 48: the words of a forward GEMV pile up in the output stage and the sum hops.
    name = "sums held in the last hop under long output stalls"
    program = _stalled_sums(params, rng_for(seed, "cp_ring", name))
    table.append(Scenario(name, {"i_cmd": program.commands, "i_data": program.inputs},
                          {"o_data": program.outputs, "o_error": program.errors},
                          ready={"o_data": (0,) * 47 + (1,)}))
    # o_data ready after 29 and 30 idle cycles in turn: sum hop 1's skid register holds a word for an odd and for
    # an even number of cycles.
    name = "forward GEMVs back to back under output stalls (sums held in hop 1)"
    program = _back_to_back_forwards(params, rng_for(seed, "cp_ring", name))
    table.append(Scenario(name, {"i_cmd": program.commands, "i_data": program.inputs},
                          {"o_data": program.outputs, "o_error": program.errors},
                          ready={"o_data": (0,) * 29 + (1,) + (0,) * 30 + (1,)}))
    return table


def _low_bits(words, width):
    """The low ``width`` bits of each lane, signed: what a core takes from a ring word."""
    words = np.asarray(words, dtype=np.int64) & ((1 << width) - 1)
    return np.where(words >> (width - 1), words - (1 << width), words)


def golden(params, scenario):
    """Run the golden ring-buffer and ring GEMV functions command by command on the ring buffers and a
    local-memory image of every core (``image[core, r, c, address]``); cycles from :func:`ring_schedule`."""
    cores, n_r, width = params["cores"], params["n_r"], params["width"]
    buffers = np.zeros((cores, cores * params["max_blocks"], n_r), dtype=np.int64)
    image = np.zeros((cores, n_r, n_r, params["sram_depth"]), dtype=np.int64)
    words = iter(scenario.stimulus["i_data"])
    outputs, cycles, accepted = [], [], 0
    errors, error_cycles = [], []

    def take(count):
        return np.array([next(words) for _ in range(count)], dtype=np.int64).reshape(count, n_r)

    def resident(core, mb, nb, base):
        """``W[ib * n_r + r, jb * n_r + c] = image[core, r, c, base + jb * mb + ib]``."""
        region = image[core, :, :, base:base + mb * nb].reshape(n_r, n_r, nb, mb)
        return region.transpose(3, 0, 2, 1).reshape(mb * n_r, nb * n_r)

    for command in scenario.stimulus["i_cmd"]:
        op, count = command["op"], command["words"]
        mb, nb, base, overlap = command["mb"], command["nb"], command["base"], bool(command["overlap"])
        schedule = golden_ring.command_schedule(command, **params)
        error = golden_ring.command_error(command, **params)
        if error is not None:  # rejected: no words in or out, nothing changed
            errors.append(error)
            error_cycles += [accepted + int(offset) for offset in schedule.error_offsets]
        elif op == RingOp.WRITE:
            buffers[:, :count] = take(cores * count).reshape(cores, count, n_r)
        elif op == RingOp.READ:
            outputs += buffers[:, :count].reshape(-1, n_r).tolist()
        elif op == RingOp.ALL_GATHER:
            buffers = golden_ring.all_gather_buffers(buffers, count)
        elif op == RingOp.REDUCE_SCATTER:
            buffers = golden_ring.reduce_scatter_buffers(buffers, count, acc_width=params["acc_width"],
                                                         mac=params["mac"])
        elif op == RingOp.LOAD:
            loaded = _low_bits(take(mb * nb * n_r), width).reshape(mb * nb, n_r, n_r)
            image[command["core"], :, :, base:base + mb * nb] = loaded.transpose(1, 2, 0)
        else:
            weights = np.concatenate([resident(core, mb, nb, base) for core in range(cores)])
            if op == RingOp.GEMV_FORWARD:
                x = np.concatenate([_low_bits(buffers[core, core * mb:(core + 1) * mb], width).reshape(-1)
                                    for core in range(cores)])
                y, _ = golden_ring.ring_gemv_forward(weights, x, overlap=overlap, padded=True, **params)
                outputs += golden_ring.vector_words(y, nb, n_r).tolist()
            else:
                e = _low_bits(take(nb), width).reshape(-1)
                d, _ = golden_ring.ring_gemv_backward(weights, e, overlap=overlap, padded=True, **params)
                outputs += golden_ring.backward_words(d, mb, n_r, cores).tolist()
                buffers = golden_ring.backward_buffers(buffers, d, mb)
        cycles += [accepted + int(offset) for offset in schedule.output_offsets]
        accepted += schedule.issue_cycles + COMMAND_LATENCY
    timed = not scenario.valid and not scenario.ready
    return Transactions({"o_data": outputs, "o_error": errors},
                        {"o_data": cycles, "o_error": error_cycles} if timed else {})
