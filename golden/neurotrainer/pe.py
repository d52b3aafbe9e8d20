"""Golden model of :class:`trainforge.hw.neurotrainer.pe.NTPE`: results bit-exact, cycles exact without backpressure.

The PE runs one *pass* per 4-byte program word (``spec/neurotrainer/pe_program.py``). The
rules (``hw/neurotrainer/README.md``, section ``nt_pe``):

- BUF Input 1 and BUF Input 2 are each two halves. Their fill streams write block after
  block, block ``b`` into half ``b % 2`` at addresses ``0, 1, ...``; a half is written
  again only after the pass reading its block has released it.
- A pass reads the next unreleased block of BUF2, and for MAC of BUF1; ``hold1``/``hold2``
  keep the block for the next pass. With ``O = cnt2_outer + 1``, ``I = cnt2_inner + 1``,
  ``C = cnt1 + 1``, step ``s = 0 .. O*I - 1`` reads BUF1 address ``s`` (row-major sweep of
  the ``O x I`` block) or, with ``transpose``, ``(s % O) * I + s // O`` (its transpose),
  and BUF2 row ``s % C``; output row ``s // C`` closes at ``s % C == C - 1`` or the last step.
- MAC: each output row is the NTMAC recurrence over its steps, from 0 or (``accumulate``)
  from one preload row ``a = 1.0, x = BUF Output[row]``; the k results of output row ``n``
  are written to BUF Output row ``n mod out_depth``. The MAC array's random state runs over
  every MAC row of every pass, preloads included.
- MAX: lane ``i`` of output row ``n`` is the maximum of the signed low 16 bits of lane ``i``
  of the window's BUF2 rows and the first position where it occurs (mod ``2**index_bits``);
  the result word is ``value & 0xFFFF | index << 16``.
- MAX with ``transpose`` (route, the max-pooling backward pass): step 0's BUF2 row gives lane
  ``i`` its index ``t_i`` (bits ``16 .. 16 + index_bits - 1`` of a MAX result word), step 1's
  row its value ``v_i`` (32 bits); every further step ``s`` emits output row ``e = s - 2``,
  lane ``i`` = ``v_i`` if ``t_i == e mod 2**index_bits`` else 0 (``N - 2`` output rows; a route
  pass of fewer than 3 steps is refused: it would have no output row).
- MAX with ``accumulate`` (product, the element-wise ``f'(x) * dY`` of the backward pass, on the
  MAC array): steps in pairs; the even step's BUF2 row gives each lane its own ``a``, the odd
  step's row is ``x``: output row ``t`` is one MAC row from 0, ``y = a x`` lane by lane (32- or
  16-bit by ``wide``, SR by ``sr``), also written to BUF Output. ``N`` must be even; ``N / 2``
  MAC rows (the random state steps on them only).
- Timing, cycle 0 being the first cycle every stream offers data, no backpressure: block
  ``b`` of a fill stream is written one word per cycle from ``max(end of block b-1 + 1,
  release of block b-2)``, complete one cycle after its last word; pass ``p`` is accepted in
  ``A = max(idle, its blocks complete)``, its ``J`` rows (steps plus preloads) enter the MAC
  array / comparators in ``A + D .. A + J + D - 1`` (``D`` = ``ROW_DELAY`` = 3: counters,
  block RAM read, registered read data), a closing row's result leaves ``LAT`` (MAC array
  ``LATENCY``, 1 for MAX) cycles after its row, and the PE is idle again, with the pass's
  blocks released, in ``A + J + D + 1 + LAT``.
"""
import numpy as np

from ...spec.neurotrainer.pe import PARAMS, ROW_DELAY
from ...spec.neurotrainer.pe_program import OP_MAC, OP_MAX, ROUTE_LOAD_STEPS, decode_pe_program
from ...spec.neurotrainer.mac import LATENCY as MAC_ARRAY_LATENCY
from .mac import rounding_offsets, round_shift

__all__ = ["MAC_LATENCY", "MAX_LATENCY", "pass_shape", "is_route", "is_product", "uses_mac", "mac_rows",
           "result_latency", "nt_pe"]

#: Cycles from a row entering the MAC array / the comparators to its result.
MAC_LATENCY = MAC_ARRAY_LATENCY
MAX_LATENCY = 1

_MASK32 = (1 << 32) - 1


def _signed(values, bits):
    values = np.asarray(values, dtype=np.int64) & np.int64((1 << bits) - 1)
    return values - ((values >> np.int64(bits - 1)) << np.int64(bits))


def pass_shape(fields):
    """Step count ``N``, steps per output row ``C``, output rows and rows sent (``J``) of a pass.

    Parameters
    ----------
    fields : dict
        A decoded program word.
    """
    steps = (fields["cnt2_outer"] + 1) * (fields["cnt2_inner"] + 1)
    per_output = fields["cnt1"] + 1
    if is_route(fields):
        return steps, per_output, max(steps - ROUTE_LOAD_STEPS, 0), steps
    if is_product(fields):
        return steps, per_output, steps // 2, steps
    outputs = -(-steps // per_output)
    preload = int(fields["op"] == OP_MAC and bool(fields["accumulate"]))
    return steps, per_output, outputs, steps + preload * outputs


def is_route(fields):
    """A route pass (max-pooling backward): ``op`` MAX with ``transpose``."""
    return fields["op"] == OP_MAX and bool(fields["transpose"])


def is_product(fields):
    """A product pass (element-wise ``a * x`` on the MAC array): ``op`` MAX with ``accumulate``, no ``transpose``."""
    return fields["op"] == OP_MAX and bool(fields["accumulate"]) and not fields["transpose"]


def uses_mac(fields):
    """The pass runs on the MAC array (MAC and product passes)."""
    return fields["op"] == OP_MAC or is_product(fields)


def mac_rows(fields):
    """Rows the pass sends into the MAC array (the random generators step once per row)."""
    if is_product(fields):
        return pass_shape(fields)[2]
    return pass_shape(fields)[3] if fields["op"] == OP_MAC else 0


def result_latency(fields):
    """Cycles from a closing row entering its unit to its result: the MAC array's or the comparators' / route unit's."""
    return MAC_LATENCY if uses_mac(fields) else MAX_LATENCY


def _addresses(fields):
    """BUF1 addresses and BUF2 rows of every step of a pass (int64 arrays)."""
    steps, per_output, _, _ = pass_shape(fields)
    step = np.arange(steps, dtype=np.int64)
    rows, columns = fields["cnt2_outer"] + 1, fields["cnt2_inner"] + 1
    if fields["transpose"]:
        address1 = (step % rows) * columns + step // rows
    else:
        address1 = step
    return address1, step % per_output


def _mac_step(a, x, y, offset, wide, frac_bits, frac_bits16):
    """One MAC row: ``a`` (outputs,) or per lane (outputs, lanes), ``x`` and ``y`` (outputs, lanes) 32-bit
    words -> new ``y``."""
    a = np.asarray(a, dtype=np.int64)
    a = a[:, None] if a.ndim == 1 else a
    if wide:
        total = _signed(a, 32) * _signed(x, 32) + (_signed(y, 32) << np.int64(frac_bits))
        return round_shift(total, frac_bits, offset, 32) & _MASK32
    halves = []
    for half in range(2):
        shift = np.int64(16 * half)
        total = _signed(a >> shift, 16) * _signed(x >> shift, 16) \
            + (_signed(y >> shift, 16) << np.int64(frac_bits16))
        halves.append(round_shift(total, frac_bits16, 0, 16) & 0xFFFF)
    return halves[0] | (halves[1] << 16)


class _FillStream:
    """Block timing and half contents of one input buffer's fill stream."""

    def __init__(self, blocks, half, width, name):
        self.blocks = blocks
        self.half = half
        self.name = name
        self.banks = np.zeros((2, half, width), dtype=np.int64)
        self.ends = []          # cycle of each block's last word
        self.releases = {}      # block -> first cycle its half may be written again
        self.loaded = -1

    def complete(self, block):
        """First cycle in which ``block`` is complete (readable by a pass)."""
        if block >= len(self.blocks):
            raise ValueError(f"a pass needs {self.name} block {block}, but only {len(self.blocks)} are given")
        while len(self.ends) <= block:
            index = len(self.ends)
            start = self.ends[-1] + 1 if self.ends else 0
            if index >= 2:
                if index - 2 not in self.releases:
                    raise ValueError(f"{self.name} block {index} waits for the release of block {index - 2}, "
                                     "which no earlier pass releases (deadlock)")
                start = max(start, self.releases[index - 2])
            self.ends.append(start + len(self.blocks[index]) - 1)
        return self.ends[block] + 1

    def read(self, block):
        """The half holding ``block`` (its words written over the half's older contents)."""
        if block != self.loaded:
            words = self.blocks[block]
            self.banks[block % 2, :len(words)] = words
            self.loaded = block
        return self.banks[block % 2]


_DEFAULTS = PARAMS.defaults


def nt_pe(programs, blocks1, blocks2, *, lanes=_DEFAULTS["lanes"], in1_depth=_DEFAULTS["in1_depth"],
          in2_depth=_DEFAULTS["in2_depth"], out_depth=_DEFAULTS["out_depth"], frac_bits=_DEFAULTS["frac_bits"],
          frac_bits16=_DEFAULTS["frac_bits16"], rounding=_DEFAULTS["rounding"], seed=_DEFAULTS["seed"],
          index_bits=_DEFAULTS["index_bits"], out_buffer=None, **_):
    """Results and result cycles of a sequence of passes.

    Parameters
    ----------
    programs : sequence of int
        32-bit program words, one per pass, in order.
    blocks1 : sequence of array_like of int
        The BUF Input 1 fill stream, block by block (32-bit words; the last closes the block).
    blocks2 : sequence of array_like of int, each shape (rows, lanes)
        The BUF Input 2 fill stream, block by block.
    lanes, in1_depth, in2_depth, out_depth, frac_bits, frac_bits16, rounding, seed, index_bits :
        Block parameters (see :class:`~trainforge.hw.neurotrainer.pe.NTPE`).
    out_buffer : array_like of int, shape (out_depth, lanes), optional
        Initial BUF Output contents (zero, as after configuration, when not given).

    Returns
    -------
    dict
        ``results`` (uint64, (results, lanes)): the words sent on ``o_result`` in order;
        ``last`` (bool): each result's ``last`` flag; ``cycles`` (int64): each result's
        transfer cycle without backpressure, cycle 0 being the first cycle every stream
        offers data; ``accept`` (int64): each pass's program acceptance cycle;
        ``out_buffer`` (uint64, (out_depth, lanes)): the final BUF Output.

    Raises
    ------
    ValueError
        A block longer than its half, a pass needing a block not given, an
        ``accumulate`` pass with more output rows than ``out_depth``, or a route pass of fewer
        than 3 steps.
    """
    fields_list = [decode_pe_program(word) for word in programs]
    half1, half2 = in1_depth // 2, in2_depth // 2
    blocks1 = [np.asarray(block, dtype=np.int64).reshape(-1, 1) & _MASK32 for block in blocks1]
    blocks2 = [np.asarray(block, dtype=np.int64).reshape(-1, lanes) & _MASK32 for block in blocks2]
    for name, blocks, half in (("BUF Input 1", blocks1, half1), ("BUF Input 2", blocks2, half2)):
        for index, block in enumerate(blocks):
            if not 1 <= len(block) <= half:
                raise ValueError(f"{name} block {index} has {len(block)} entries; allowed 1..{half} (half the buffer)")
    fill1 = _FillStream(blocks1, half1, 1, "BUF Input 1")
    fill2 = _FillStream(blocks2, half2, lanes, "BUF Input 2")
    out = np.zeros((out_depth, lanes), dtype=np.int64) if out_buffer is None \
        else np.asarray(out_buffer, dtype=np.int64).reshape(out_depth, lanes) & _MASK32

    total_mac_rows = sum(mac_rows(f) for f in fields_list)
    # Rounding offsets of every MAC row (as if SR were on), shape (rows, lanes); a pass uses them
    # only in 32-bit mode with sr on (SR variants) or always (nearest).
    offset_table = rounding_offsets(rounding, frac_bits, np.ones(total_mac_rows, dtype=bool), seed, lanes,
                                    total_mac_rows) if total_mac_rows else np.zeros((1, lanes), dtype=np.int64)
    rows_before = 0

    results, last, cycles, accepts = [], [], [], []
    idle = 0
    block1 = block2 = 0
    for fields in fields_list:
        is_mac = fields["op"] == OP_MAC
        steps, per_output, outputs, rows_sent = pass_shape(fields)
        preload = rows_sent > steps
        if preload and outputs > out_depth:
            raise ValueError(f"an accumulate pass has {outputs} output rows; BUF Output holds {out_depth}")
        if is_route(fields) and not outputs:
            raise ValueError(f"a route pass of {steps} steps has no output row; it needs at least "
                             f"{ROUTE_LOAD_STEPS + 1} steps")
        if is_product(fields) and (steps % 2 or not steps):
            raise ValueError(f"a product pass takes its rows in pairs; it has {steps} steps")
        accept = max(idle, fill2.complete(block2), fill1.complete(block1) if is_mac else 0)
        accepts.append(accept)
        address1, row2 = _addresses(fields)
        x_rows = fill2.read(block2)[row2 % half2]                               # (steps, lanes)
        windows = -(-steps // per_output)            # the output rows of a MAC or MAX pass
        valid = np.zeros(windows * per_output, dtype=bool)
        valid[:steps] = True
        valid = valid.reshape(windows, per_output)
        padded = np.zeros((windows * per_output, lanes), dtype=np.int64)
        padded[:steps] = x_rows
        x_grid = padded.reshape(windows, per_output, lanes)
        if is_mac:
            a_flat = np.zeros(outputs * per_output, dtype=np.int64)
            a_flat[:steps] = fill1.read(block1)[address1 % half1, 0]
            a_grid = a_flat.reshape(outputs, per_output)
            stride = per_output + preload
            first_row = rows_before + np.arange(outputs) * stride
            use_offsets = fields["wide"] and (fields["sr"] or rounding == "nearest")
            offsets = lambda row: offset_table[row] if use_offsets else np.zeros((outputs, lanes), dtype=np.int64)
            y = np.zeros((outputs, lanes), dtype=np.int64)
            if preload:
                one = (1 << frac_bits) if fields["wide"] else (1 << frac_bits16) * 0x10001
                y = _mac_step(np.full(outputs, one), out[np.arange(outputs) % out_depth], y,
                              offsets(first_row), fields["wide"], frac_bits, frac_bits16)
            for position in range(per_output):
                rows = np.minimum(first_row + preload + position, len(offset_table) - 1)  # padding: masked
                updated = _mac_step(a_grid[:, position], x_grid[:, position], y, offsets(rows),
                                    fields["wide"], frac_bits, frac_bits16)
                y = np.where(valid[:, position, None], updated, y)
            rows_before += rows_sent
            keep = np.arange(max(0, outputs - out_depth), outputs)
            out[keep % out_depth] = y[keep]
            words = y
            latency = MAC_LATENCY
        elif is_product(fields):
            use_offsets = fields["wide"] and (fields["sr"] or rounding == "nearest")
            rows = rows_before + np.arange(outputs)
            offsets = offset_table[rows] if use_offsets else np.zeros((outputs, lanes), dtype=np.int64)
            words = _mac_step(x_rows[0::2], x_rows[1::2], np.zeros((outputs, lanes), dtype=np.int64), offsets,
                              fields["wide"], frac_bits, frac_bits16)
            rows_before += outputs
            keep = np.arange(max(0, outputs - out_depth), outputs)
            out[keep % out_depth] = words[keep]
            latency = MAC_LATENCY
        elif is_route(fields):
            rows = x_rows
            words = np.zeros((outputs, lanes), dtype=np.int64)
            if outputs:
                index, value = (rows[0] >> 16) & ((1 << index_bits) - 1), rows[1]
                position = np.arange(outputs)[:, None] % (1 << index_bits)
                words = np.where(position == index[None, :], value[None, :], 0)
            latency = MAX_LATENCY
        else:
            values = np.where(valid[:, :, None], _signed(x_grid, 16), -(1 << 20))
            index = np.argmax(values, axis=1) % (1 << index_bits)
            words = (values.max(axis=1) & 0xFFFF) | (index << 16)
            latency = MAX_LATENCY
        if fields["emit"]:
            closing_row = np.arange(outputs) * (per_output + preload) + preload \
                + np.minimum(per_output, steps - np.arange(outputs) * per_output) - 1
            if is_route(fields):
                closing_row = ROUTE_LOAD_STEPS + np.arange(outputs)
            if is_product(fields):
                closing_row = 2 * np.arange(outputs) + 1
            results.append(words)
            cycles.append(accept + ROW_DELAY + closing_row + latency)
            last.append(np.arange(outputs) == outputs - 1)
        idle = accept + rows_sent + ROW_DELAY + 1 + latency
        if is_mac and not fields["hold1"]:
            fill1.releases[block1] = idle
            block1 += 1
        if not fields["hold2"]:
            fill2.releases[block2] = idle
            block2 += 1

    def joined(parts, dtype, shape):
        return np.concatenate(parts).astype(dtype) if parts else np.zeros(shape, dtype=dtype)

    return {
        "results": joined(results, np.uint64, (0, lanes)),
        "last": joined(last, bool, (0,)),
        "cycles": joined(cycles, np.int64, (0,)),
        "accept": np.array(accepts, dtype=np.int64),
        "out_buffer": out.astype(np.uint64),
    }
