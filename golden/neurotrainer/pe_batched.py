"""Batched model of the NeuroTrainer PE: :func:`~trainforge.golden.neurotrainer.pe.nt_pe`'s results, many passes at once.

``nt_pe`` runs one pass at a time (a few milliseconds each, so a full AlexNet layer of up to
2.3 M passes takes hours). This model gives the same dict, bit for bit and cycle for cycle
(``results``, ``last``, ``cycles``, ``accept``, ``out_buffer``), computing the passes in
batches:

- **Timing** is ``nt_pe``'s recurrence (pass acceptance, block completion and release), run
  as a plain loop over the passes: it needs only the pass shapes and the block sizes.
- **Buffers.** The half a pass reads holds its block's words over the older contents of the
  half (the block two before it, and so on, then zeros): the model keeps the two halves as
  they were before the batch and resolves every read to the block that wrote it.
- **Chains.** An ``accumulate`` MAC pass whose previous pass is a MAC pass of the same width
  and the same number of output rows starts exactly from that pass's results (the rows it
  wrote to BUF Output). Such passes form *chains* (a reduction split into blocks); the passes
  of a batch are computed wave by wave, the ``d``-th pass of every chain in wave ``d``, all
  passes of one program word in a wave at once. Any other ``accumulate`` pass reads BUF
  Output as the earlier passes left it, so it starts a new batch.
- **Arithmetic** is ``nt_mac``'s, step by step (the saturation is applied after every step):
  ``((y << F) + a x + r) >> F = y + ((a x + r) >> F)`` exactly (``y << F`` is a multiple of
  ``2**F``), so a step is ``y = saturate(y + ((a x + r) >> F))``; the 16-bit mode does it on
  each half with ``r = 0``. A preload row (``a = 1.0``) gives the stored word itself. The
  rounding offset of MAC row ``t`` of the job is the one ``nt_pe`` uses (SR-LO's shift
  register repeats with period 255 after its first 32 rows).
- MAX (max and argmax), route and product passes as in ``nt_pe``.

Blocks come from *feeds* (:class:`BlockList`, or any object with ``sizes`` and ``take``), so
a caller can stream a fill stream batch by batch instead of holding it whole.
"""
import numpy as np

from ...spec.neurotrainer.pe import PARAMS, ROW_DELAY
from ...spec.neurotrainer.pe_program import OP_MAC, OP_MAX, ROUTE_LOAD_STEPS, decode_pe_program
from .mac import rounding_offsets, sr_lo_words
from .pe import MAC_LATENCY, MAX_LATENCY

__all__ = ["BlockList", "nt_pe_batched"]

_MASK32 = (1 << 32) - 1
_DEFAULTS = PARAMS.defaults
#: SR-LO: rows before the shift register holds only LFSR output bits, and the LFSR period.
_SR_LO_PREFIX, _SR_LO_PERIOD = 32, 255
#: Pass kinds.
_MAC, _MAX, _ROUTE, _PRODUCT = 0, 1, 2, 3


def _signed(values, bits):
    values = np.asarray(values, dtype=np.int64) & np.int64((1 << bits) - 1)
    return values - ((values >> np.int64(bits - 1)) << np.int64(bits))


class BlockList:
    """A fill stream given as a list of blocks (what ``nt_pe`` takes), served block by block.

    Parameters
    ----------
    blocks : sequence of array_like of int
        The blocks, each reshaped to ``(entries, width)``.
    width : int
        Words per entry (1 for BUF Input 1, ``lanes`` for BUF Input 2).
    """

    def __init__(self, blocks, width):
        blocks = [np.asarray(block, dtype=np.int64).reshape(-1, width) & _MASK32 for block in blocks]
        self.sizes = [len(block) for block in blocks]
        self._flat = np.concatenate(blocks) if blocks else np.zeros((0, width), dtype=np.int64)
        self._edges = np.cumsum([0, *self.sizes])
        self._next = 0

    def take(self, count):
        """The entries of the next ``count`` blocks, shape ``(entries, width)``."""
        start, self._next = self._next, self._next + count
        return self._flat[self._edges[start]:self._edges[self._next]]


class _Buffer:
    """One input buffer's two halves: the blocks of the current batch over the contents left by earlier ones."""

    def __init__(self, feed, half, width):
        self.feed = feed
        self.sizes = np.asarray(feed.sizes, dtype=np.int64)
        self.half = half
        self.width = width
        self.banks = np.zeros((2, half, width), dtype=np.int64)   # contents before block `first`
        self.first = 0
        self.flat = np.zeros((0, width), dtype=np.int64)
        self.starts = np.zeros(0, dtype=np.int64)

    def fetch(self, last):
        """Make blocks ``first .. last`` readable (after :meth:`retire` of the earlier ones)."""
        count = last + 1 - self.first
        self.flat = np.asarray(self.feed.take(count), dtype=np.int64).reshape(-1, self.width) & _MASK32
        sizes = self.sizes[self.first:last + 1]
        if len(self.flat) != sizes.sum():
            raise ValueError(f"a fill stream delivered {len(self.flat)} entries for blocks of {sizes.sum()}")
        self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)

    def gather(self, block, position):
        """The entries at ``position`` of the half holding ``block`` when it is read: shape + ``(width,)``."""
        block, position = np.broadcast_arrays(np.asarray(block, dtype=np.int64), np.asarray(position, dtype=np.int64))
        local = block - self.first
        size = self.sizes[block]
        if (local >= 0).all() and (position < size).all():
            return self.flat[self.starts[local] + position]
        out = np.zeros(block.shape + (self.width,), dtype=np.int64)
        todo = np.ones(block.shape, dtype=bool)
        while todo.any():
            in_batch = local >= 0
            hit = todo & in_batch & (position < self.sizes[np.maximum(block, 0)])
            out[hit] = self.flat[self.starts[local[hit]] + position[hit]]
            old = todo & ~in_batch
            out[old] = self.banks[block[old] % 2, position[old]]
            todo &= ~(hit | old)
            block = block - 2
            local = local - 2
        return out

    def retire(self, last):
        """Keep the halves as they are after block ``last`` was read; the next batch starts at ``last + 1``."""
        positions = np.arange(self.half)
        for block in (last - 1, last):
            if block >= self.first:
                self.banks[block % 2] = self.gather(np.full(self.half, block), positions)
        self.first = last + 1


class _Offsets:
    """The 32-bit rounding offsets of MAC rows by their index in the job, as ``nt_pe``'s table holds them."""

    def __init__(self, rounding, frac_bits, seed, lanes, total_rows):
        self.rounding = rounding
        self.lanes = lanes
        self.last_row = max(total_rows - 1, 0)
        self.zero = rounding == "truncate" or frac_bits == 0 or total_rows == 0
        self.constant = (1 << (frac_bits - 1)) if rounding == "nearest" and not self.zero else None
        self.periodic = rounding == "sr_lo" and not self.zero and total_rows > _SR_LO_PREFIX + _SR_LO_PERIOD
        if self.zero or self.constant is not None:
            self.table = None
        elif self.periodic:
            words = sr_lo_words(seed, _SR_LO_PREFIX + _SR_LO_PERIOD)
            self.table = (words & np.uint64((1 << frac_bits) - 1)).astype(np.int64)[:, None]
        else:
            self.table = rounding_offsets(rounding, frac_bits, np.ones(total_rows, dtype=bool), seed, lanes,
                                          total_rows)

    def used(self, fields):
        """Whether a pass's 32-bit MAC rows take offsets (``nt_pe``: SR on, or the ``nearest`` variant)."""
        return bool(fields["wide"]) and (bool(fields["sr"]) or self.rounding == "nearest")

    def of(self, rows):
        """Offsets of MAC rows ``rows`` (int64 array): shape + ``(lanes,)``, or None when all zero."""
        if self.zero:
            return None
        rows = np.minimum(rows, self.last_row)          # rows past the last: masked steps
        if self.constant is not None:
            return np.full(np.shape(rows) + (self.lanes,), self.constant, dtype=np.int64)
        if self.periodic:
            rows = np.where(rows < _SR_LO_PREFIX, rows, _SR_LO_PREFIX + (rows - _SR_LO_PREFIX) % _SR_LO_PERIOD)
        return np.broadcast_to(self.table[rows], np.shape(rows) + (self.lanes,))


class _Passes:
    """Per-pass arrays of a program sequence (one decode per distinct word)."""

    def __init__(self, programs):
        words = np.asarray([int(word) & _MASK32 for word in programs], dtype=np.int64)
        unique, self.kind_of = np.unique(words, return_inverse=True)
        self.word = words
        self.fields = [decode_pe_program(int(word)) for word in unique]
        table = {name: np.array([f[name] for f in self.fields], dtype=np.int64)[self.kind_of]
                 for name in ("op", "wide", "sr", "transpose", "accumulate", "emit", "hold1", "hold2",
                              "cnt2_outer", "cnt2_inner", "cnt1")}
        self.__dict__.update(table)
        self.steps = (self.cnt2_outer + 1) * (self.cnt2_inner + 1)
        self.per_output = self.cnt1 + 1
        route = (self.op == OP_MAX) & (self.transpose == 1)
        product = (self.op == OP_MAX) & (self.accumulate == 1) & (self.transpose == 0)
        self.kind = np.where(self.op == OP_MAC, _MAC, np.where(route, _ROUTE, np.where(product, _PRODUCT, _MAX)))
        self.preload = ((self.op == OP_MAC) & (self.accumulate == 1)).astype(np.int64)
        self.outputs = np.where(route, np.maximum(self.steps - ROUTE_LOAD_STEPS, 0),
                                np.where(product, self.steps // 2, -(-self.steps // self.per_output)))
        self.rows_sent = np.where(self.preload == 1, self.steps + self.outputs, self.steps)
        self.mac_rows = np.where(self.kind == _MAC, self.rows_sent, np.where(product, self.outputs, 0))
        self.latency = np.where((self.kind == _MAC) | product, MAC_LATENCY, MAX_LATENCY)


def _timing(passes, sizes1, sizes2):
    """``nt_pe``'s acceptance cycle of every pass and the BUF1 / BUF2 block each pass reads.

    Block ``b`` of a fill stream ends in ``max(end[b - 1] + 1, release[b - 2]) + size[b] - 1``; a pass is
    accepted in ``max(idle, end2[its BUF2 block] + 1, end1[its BUF1 block] + 1 if MAC)`` and leaves the PE
    idle ``rows_sent + ROW_DELAY + 1 + latency`` cycles later, releasing the blocks it does not hold.
    """
    mac = passes.kind == _MAC
    advance1 = mac & (passes.hold1 == 0)
    advance2 = passes.hold2 == 0
    block1_of = np.concatenate([[0], np.cumsum(advance1)[:-1]]).astype(np.int64)
    block2_of = np.concatenate([[0], np.cumsum(advance2)[:-1]]).astype(np.int64)
    busy = (passes.rows_sent + ROW_DELAY + 1 + passes.latency).tolist()
    names = ("BUF Input 1", "BUF Input 2")
    state = []
    for which, sizes in enumerate((sizes1, sizes2)):
        state.append(([], [None] * (len(sizes) + 2), list(sizes)))       # ends, releases, sizes

    def complete(which, block):
        end, release, size = state[which]
        if block >= len(size):
            raise ValueError(f"a pass needs {names[which]} block {block}, but only {len(size)} are given")
        while len(end) <= block:
            index = len(end)
            start = end[-1] + 1 if end else 0
            if index >= 2:
                if release[index - 2] is None:
                    raise ValueError(f"{names[which]} block {index} waits for the release of block {index - 2}, "
                                     "which no earlier pass releases (deadlock)")
                start = max(start, release[index - 2])
            end.append(start + size[index] - 1)
        return end[block] + 1

    accepts = []
    idle = 0
    end1, release1, _ = state[0]
    end2, release2, _ = state[1]
    for b1, b2, is_mac, leave1, leave2, cycles in zip(block1_of.tolist(), block2_of.tolist(), mac.tolist(),
                                                      advance1.tolist(), advance2.tolist(), busy):
        ready = end2[b2] + 1 if b2 < len(end2) else complete(1, b2)
        accept = idle if idle > ready else ready
        if is_mac:
            ready = end1[b1] + 1 if b1 < len(end1) else complete(0, b1)
            accept = accept if accept > ready else ready
        accepts.append(accept)
        idle = accept + cycles
        if leave1:
            release1[b1] = idle
        if leave2:
            release2[b2] = idle
    return np.array(accepts, dtype=np.int64), block1_of, block2_of


def _check(passes, out_depth, sizes1, half1, sizes2, half2):
    """``nt_pe``'s refusals: a block longer than its half, an accumulate pass beyond BUF Output, a route pass
    without an output row, a product pass of an odd number of steps."""
    for name, sizes, half in (("BUF Input 1", sizes1, half1), ("BUF Input 2", sizes2, half2)):
        for index, size in enumerate(sizes):
            if not 1 <= size <= half:
                raise ValueError(f"{name} block {index} has {size} entries; allowed 1..{half} (half the buffer)")
    for index in np.flatnonzero((passes.preload == 1) & (passes.outputs > out_depth))[:1]:
        raise ValueError(f"an accumulate pass has {passes.outputs[index]} output rows; BUF Output holds {out_depth}")
    for index in np.flatnonzero((passes.kind == _ROUTE) & (passes.outputs == 0))[:1]:
        raise ValueError(f"a route pass of {passes.steps[index]} steps has no output row; it needs at least "
                         f"{ROUTE_LOAD_STEPS + 1} steps")
    for index in np.flatnonzero((passes.kind == _PRODUCT) & ((passes.steps % 2 == 1) | (passes.steps == 0)))[:1]:
        raise ValueError(f"a product pass takes its rows in pairs; it has {passes.steps[index]} steps")


def _chained(passes):
    """Passes that start from the previous pass's results: ``accumulate`` MAC after a MAC pass of the same
    width and number of output rows."""
    chained = np.zeros(len(passes.word), dtype=bool)
    chained[1:] = (passes.preload[1:] == 1) & (passes.kind[:-1] == _MAC) & (passes.wide[1:] == passes.wide[:-1]) \
        & (passes.outputs[1:] == passes.outputs[:-1])
    return chained


def _batches(passes, chained, budget):
    """``(start, stop)`` pass ranges: at most about ``budget`` words of operands each; an ``accumulate`` pass
    that is not chained to its predecessor starts a batch (it reads BUF Output as all earlier passes left it)."""
    cost = np.cumsum(passes.steps * 2 + passes.outputs * passes.per_output)
    irregular = np.flatnonzero((passes.preload == 1) & ~chained)
    bounds, start, count = [], 0, len(passes.word)
    next_irregular = 0
    while start < count:
        stop = int(np.searchsorted(cost, (cost[start - 1] if start else 0) + budget, side="right"))
        stop = min(max(stop, start + 1), count)
        while next_irregular < len(irregular) and irregular[next_irregular] <= start:
            next_irregular += 1
        if next_irregular < len(irregular):
            stop = min(stop, int(irregular[next_irregular]))
        bounds.append((start, stop))
        start = stop
    return bounds


def _words_of(y, wide):
    """32-bit words of MAC values: ``y`` signed, (..., lanes) in 32-bit mode or (..., 2, lanes) halves."""
    if wide:
        return y & np.int64(_MASK32)
    return (y[..., 0, :] & 0xFFFF) | ((y[..., 1, :] & 0xFFFF) << 16)


def _values_of(words, wide):
    """Signed MAC values of 32-bit words: (..., lanes), or (..., 2, lanes) halves in 16-bit mode."""
    if wide:
        return _signed(words, 32)
    return np.stack([_signed(words, 16), _signed(words >> 16, 16)], axis=-2)


def nt_pe_batched(programs, blocks1, blocks2, *, lanes=_DEFAULTS["lanes"], in1_depth=_DEFAULTS["in1_depth"],
                  in2_depth=_DEFAULTS["in2_depth"], out_depth=_DEFAULTS["out_depth"],
                  frac_bits=_DEFAULTS["frac_bits"], frac_bits16=_DEFAULTS["frac_bits16"],
                  rounding=_DEFAULTS["rounding"], seed=_DEFAULTS["seed"], index_bits=_DEFAULTS["index_bits"],
                  out_buffer=None, batch_words=1 << 23, **_):
    """``nt_pe``'s results and cycles of a sequence of passes, computed in batches.

    Parameters
    ----------
    programs : sequence of int
        32-bit program words, one per pass, in order.
    blocks1, blocks2 : sequence of array_like of int, or feed
        The BUF Input 1 / BUF Input 2 fill streams, as for ``nt_pe`` (a list of blocks), or a feed:
        an object with ``sizes`` (entries per block) and ``take(count)`` (the entries of the next
        ``count`` blocks, shape ``(entries, 1)`` or ``(entries, lanes)``), read in order.
    lanes, in1_depth, in2_depth, out_depth, frac_bits, frac_bits16, rounding, seed, index_bits, out_buffer :
        As for :func:`~trainforge.golden.neurotrainer.pe.nt_pe`.
    batch_words : int
        About how many operand words a batch of passes reads (memory: a few times this, in int64).

    Returns
    -------
    dict
        The same keys and values as ``nt_pe``: ``results``, ``last``, ``cycles``, ``accept``,
        ``out_buffer``.

    Raises
    ------
    ValueError
        As ``nt_pe``.
    """
    passes = _Passes(programs)
    feed1 = blocks1 if hasattr(blocks1, "take") else BlockList(blocks1, 1)
    feed2 = blocks2 if hasattr(blocks2, "take") else BlockList(blocks2, lanes)
    half1, half2 = in1_depth // 2, in2_depth // 2
    _check(passes, out_depth, feed1.sizes, half1, feed2.sizes, half2)
    accepts, block1_of, block2_of = _timing(passes, feed1.sizes, feed2.sizes)
    out = np.zeros((out_depth, lanes), dtype=np.int64) if out_buffer is None \
        else np.asarray(out_buffer, dtype=np.int64).reshape(out_depth, lanes) & _MASK32
    rows_before = np.concatenate([[0], np.cumsum(passes.mac_rows)[:-1]]).astype(np.int64)
    offsets = _Offsets(rounding, frac_bits, seed, lanes, int(passes.mac_rows.sum()))
    buffer1, buffer2 = _Buffer(feed1, half1, 1), _Buffer(feed2, half2, lanes)
    chained = _chained(passes)
    arithmetic = dict(frac_bits=frac_bits, frac_bits16=frac_bits16, index_bits=index_bits, offsets=offsets)
    results, last, cycles = [], [], []
    for start, stop in _batches(passes, chained, batch_words):
        span = slice(start, stop)
        mac = passes.kind[span] == _MAC
        if mac.any():
            buffer1.fetch(int(block1_of[span][mac].max()))
        buffer2.fetch(int(block2_of[stop - 1]))
        words, row_start = _run_batch(passes, start, stop, chained, block1_of, block2_of, rows_before, buffer1,
                                      buffer2, out, **arithmetic)
        out = _out_after(passes, start, stop, words, row_start, out)
        for which, buffer, block_of in ((0, buffer1, block1_of), (1, buffer2, block2_of)):
            used = block_of[span][mac] if which == 0 else block_of[span]
            if len(used):
                buffer.retire(int(used.max()))
        emit = np.flatnonzero(passes.emit[span] == 1) + start
        if len(emit):
            counts = passes.outputs[emit]
            index = np.repeat(row_start[emit - start], counts) + _ranges(counts)
            results.append(words[index])
            n = _ranges(counts)
            per_output, preload, steps = (np.repeat(getattr(passes, name)[emit], counts)
                                          for name in ("per_output", "preload", "steps"))
            kind = np.repeat(passes.kind[emit], counts)
            closing = n * (per_output + preload) + preload + np.minimum(per_output, steps - n * per_output) - 1
            closing = np.where(kind == _ROUTE, ROUTE_LOAD_STEPS + n, np.where(kind == _PRODUCT, 2 * n + 1, closing))
            cycles.append(np.repeat(accepts[emit], counts) + ROW_DELAY + closing + np.repeat(passes.latency[emit],
                                                                                            counts))
            last.append(n == np.repeat(counts - 1, counts))

    def joined(parts, dtype, shape):
        return np.concatenate(parts).astype(dtype) if parts else np.zeros(shape, dtype=dtype)

    return {
        "results": joined(results, np.uint64, (0, lanes)),
        "last": joined(last, bool, (0,)),
        "cycles": joined(cycles, np.int64, (0,)),
        "accept": accepts,
        "out_buffer": out.astype(np.uint64),
    }


def _ranges(counts):
    """``0 .. c - 1`` for each count, concatenated."""
    counts = np.asarray(counts, dtype=np.int64)
    if not len(counts):
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    return np.arange(ends[-1], dtype=np.int64) - np.repeat(ends - counts, counts)


def _out_after(passes, start, stop, words, row_start, out):
    """BUF Output after the batch: each row from the last MAC or product pass that wrote it."""
    span = slice(start, stop)
    writers = np.flatnonzero((passes.kind[span] == _MAC) | (passes.kind[span] == _PRODUCT))
    if not len(writers):
        return out
    depth = len(out)
    cover = np.minimum(passes.outputs[span][writers], depth)
    best = np.full(depth + 1, -1, dtype=np.int64)
    np.maximum.at(best, cover, writers)                     # the last writer covering rows 0 .. cover - 1
    last_writer = np.maximum.accumulate(best[::-1])[::-1][1:]   # row r: the last writer with cover > r
    out = out.copy()
    rows = np.flatnonzero(last_writer >= 0)
    writer = last_writer[rows]
    outputs = passes.outputs[span][writer]
    n = rows + depth * ((outputs - 1 - rows) // depth)          # the output row kept in BUF Output row r
    out[rows] = words[row_start[writer] + n]
    return out


def _run_batch(passes, start, stop, chained, block1_of, block2_of, rows_before, buffer1, buffer2, out, *, frac_bits,
               frac_bits16, index_bits, offsets):
    """Result words of passes ``start .. stop - 1``: (rows, lanes) int64, and each pass's first row."""
    count = stop - start
    outputs = passes.outputs[start:stop]
    row_start = np.concatenate([[0], np.cumsum(outputs)[:-1]]).astype(np.int64)
    words = np.zeros((int(outputs.sum()), buffer2.width), dtype=np.int64)
    head = ~chained[start:stop]
    head[0] = True
    chain = np.cumsum(head) - 1
    depth = np.arange(count) - np.flatnonzero(head)[chain]
    order = np.lexsort((passes.kind_of[start:stop], depth))
    wave_of = depth[order]
    bounds = np.flatnonzero(np.diff(wave_of) | np.diff(passes.kind_of[start:stop][order])) + 1
    for group in np.split(order, bounds):
        index = group + start
        fields_index = passes.kind_of[index[0]]
        kind = passes.kind[index[0]]
        if kind == _MAC:
            if depth[group[0]] > 0:
                previous = row_start[group - 1][:, None] + np.arange(outputs[group[0]])
                y0 = _values_of(words[previous], passes.wide[index[0]])
            elif passes.preload[index[0]]:
                y0 = _values_of(out[np.arange(outputs[group[0]])][None], passes.wide[index[0]])
            else:
                y0 = None
            values = _mac_group(passes, fields_index, index, y0, block1_of, block2_of, rows_before, buffer1,
                                buffer2, frac_bits, frac_bits16, offsets)
        elif kind == _PRODUCT:
            values = _product_group(passes, fields_index, index, block2_of, rows_before, buffer2, frac_bits,
                                    frac_bits16, offsets)
        elif kind == _ROUTE:
            values = _route_group(passes, index, block2_of, buffer2, index_bits)
        else:
            values = _max_group(passes, index, block2_of, buffer2, index_bits)
        rows = row_start[group][:, None] + np.arange(outputs[group[0]])
        words[rows] = values
    return words, row_start


def _x_rows(passes, index, block2_of, buffer2, steps):
    """BUF2 rows of steps ``0 .. steps - 1`` of the passes (one shape): (passes, steps, lanes)."""
    per_output = passes.per_output[index[0]]
    return buffer2.gather(block2_of[index][:, None], (np.arange(steps) % per_output % buffer2.half)[None, :])


def _mac_group(passes, fields_index, index, y0, block1_of, block2_of, rows_before, buffer1, buffer2, frac_bits,
               frac_bits16, offsets):
    """MAC passes of one program word: their output rows' words (passes, outputs, lanes)."""
    fields = passes.fields[fields_index]
    first = index[0]
    steps, per_output, outputs = (int(x) for x in (passes.steps[first], passes.per_output[first], passes.outputs[first]))
    preload, wide = int(passes.preload[first]), bool(passes.wide[first])
    rows, columns = fields["cnt2_outer"] + 1, fields["cnt2_inner"] + 1
    step = np.arange(steps, dtype=np.int64)
    address1 = (step % rows) * columns + step // rows if fields["transpose"] else step
    a_flat = np.zeros((len(index), outputs * per_output), dtype=np.int64)
    a_flat[:, :steps] = buffer1.gather(block1_of[index][:, None], (address1 % buffer1.half)[None, :])[..., 0]
    a = a_flat.reshape(len(index), outputs, per_output)                       # zero where no step: adds 0
    x = _x_rows(passes, index, block2_of, buffer2, min(per_output, steps))   # (passes, C', lanes)
    lanes = buffer2.width
    use_offsets = offsets.used(fields)
    first_row = rows_before[index][:, None] + np.arange(outputs) * (per_output + preload) + preload
    if wide:
        a, x = _signed(a, 32), _signed(x, 32)
        y = np.zeros((len(index), outputs, lanes), dtype=np.int64) if y0 is None \
            else np.broadcast_to(y0, (len(index), outputs, lanes)).copy()
        low, high = -(1 << 31), (1 << 31) - 1
        for position in range(x.shape[1]):
            term = a[:, :, position, None] * x[:, None, position, :]
            if use_offsets:
                offset = offsets.of(first_row + position)
                if offset is not None:
                    term += offset
            if frac_bits:
                term >>= frac_bits
            y += term
            np.clip(y, low, high, out=y)
    else:
        a = np.stack([_signed(a, 16), _signed(a >> 16, 16)], axis=-1)         # (passes, outputs, C, 2)
        x = np.stack([_signed(x, 16), _signed(x >> 16, 16)], axis=-2)         # (passes, C', 2, lanes)
        y = np.zeros((len(index), outputs, 2, lanes), dtype=np.int64) if y0 is None \
            else np.broadcast_to(y0, (len(index), outputs, 2, lanes)).copy()
        low, high = -(1 << 15), (1 << 15) - 1
        for position in range(x.shape[1]):
            term = a[:, :, position, :, None] * x[:, None, position]
            if frac_bits16:
                term >>= frac_bits16
            y += term
            np.clip(y, low, high, out=y)
    return _words_of(y, wide)


def _product_group(passes, fields_index, index, block2_of, rows_before, buffer2, frac_bits, frac_bits16, offsets):
    """Product passes of one program word: ``y = a x`` lane by lane on row pairs (passes, outputs, lanes)."""
    fields = passes.fields[fields_index]
    first = index[0]
    steps, outputs, wide = int(passes.steps[first]), int(passes.outputs[first]), bool(passes.wide[first])
    x_rows = _x_rows(passes, index, block2_of, buffer2, steps)
    a, x = x_rows[:, 0::2], x_rows[:, 1::2]
    if wide:
        term = _signed(a, 32) * _signed(x, 32)
        if offsets.used(fields):
            offset = offsets.of(rows_before[index][:, None] + np.arange(outputs))
            if offset is not None:
                term = term + offset
        return np.clip(term >> frac_bits, -(1 << 31), (1 << 31) - 1) & np.int64(_MASK32)
    halves = [np.clip((_signed(a >> shift, 16) * _signed(x >> shift, 16)) >> frac_bits16, -(1 << 15), (1 << 15) - 1)
              & 0xFFFF for shift in (0, 16)]
    return halves[0] | (halves[1] << 16)


def _route_group(passes, index, block2_of, buffer2, index_bits):
    """Route passes of one program word: dY at the argmax position, 0 elsewhere (passes, outputs, lanes)."""
    first = index[0]
    steps, outputs = int(passes.steps[first]), int(passes.outputs[first])
    x_rows = _x_rows(passes, index, block2_of, buffer2, ROUTE_LOAD_STEPS)
    argmax, value = (x_rows[:, 0] >> 16) & ((1 << index_bits) - 1), x_rows[:, 1]
    position = (np.arange(outputs) % (1 << index_bits))[None, :, None]
    return np.where(position == argmax[:, None, :], value[:, None, :], 0)


def _max_group(passes, index, block2_of, buffer2, index_bits):
    """MAX passes of one program word: max and argmax of each window (passes, outputs, lanes)."""
    first = index[0]
    steps, per_output, outputs = (int(x) for x in (passes.steps[first], passes.per_output[first],
                                                   passes.outputs[first]))
    x = _x_rows(passes, index, block2_of, buffer2, min(per_output, steps))     # (passes, C', lanes)
    valid = (np.arange(outputs)[:, None] * per_output + np.arange(x.shape[1])[None, :]) < steps
    values = np.where(valid[None, :, :, None], _signed(x, 16)[:, None], -(1 << 20))
    argmax = np.argmax(values, axis=2) % (1 << index_bits)
    return (values.max(axis=2) & 0xFFFF) | (argmax << 16)
