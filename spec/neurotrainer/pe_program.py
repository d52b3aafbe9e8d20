"""The 4-byte PE program word of NeuroTrainer (Section 4, Table 4): layout, encoding and decoding.

Table 4 programs a PE with the data width ("Bit": 16 or 32), the two ranges of CNT2
(``HK, WK`` for convolution, ``P, L`` for a partial matrix, ``h, 1`` for the outer
product) and the range of CNT1 (``WK x HK``, ``L`` or ``1``); Section 4 adds the
operation type (MAC or MAX) and SR on or off. All of it fits the paper's 4 bytes when
each range is 8 bits, which is what this layout does (field order = bit order, LSB first):

========== ==== ==========================================================================
field      bits meaning
========== ==== ==========================================================================
op         1    0 = MAC (``y = a*x + y``), 1 = MAX (``y = max(x, y)`` with argmax; with
                ``transpose``: route, the max-pooling backward pass, below)
wide       1    0 = 16-bit mode (two 16-bit pairs per lane), 1 = 32-bit mode (MAC only)
sr         1    stochastic rounding (32-bit MAC only; the 16-bit mode always truncates)
transpose  1    sweep CNT2 in the other order: reads the BUF1 block as its transpose (W^T);
                with MAX (which reads no BUF1): route, the transpose of the pooling
accumulate 1    MAC: each output row starts from its partial sum in the output buffer, not 0;
                with MAX (no partial sums) and no ``transpose``: product, below
emit       1    send the pass's results on the output stream (MAC results are always also
                written to the output buffer)
hold1      1    keep the BUF1 block after the pass: the next MAC pass reads it again
hold2      1    keep the BUF2 block after the pass: the next pass reads it again
cnt2_outer 8    R - 1 of CNT2's outer level: the rows of the BUF1 block (``HK``, ``P``, ``h``)
cnt2_inner 8    R - 1 of CNT2's inner level: the columns of the block (``WK``, ``L``, ``1``)
cnt1       8    R - 1 of CNT1: steps per output row (``WK x HK``, ``L``, ``1``)
========== ==== ==========================================================================

Route (``op`` = MAX, ``transpose`` = 1; the derivative of max pooling, Section 3.3.3: the
comparator "returns the maximum value and its ID for backpropagation"): of the ``N`` steps,
step 0's BUF2 row gives each lane its argmax (bits 16 and up of a MAX result word), step 1's
row its dY; each further step emits one output row, position ``e = s - 2`` of the window:
dY where ``e`` is the argmax, 0 elsewhere (:data:`ROUTE_LOAD_STEPS` rows load, ``N - 2``
rows emit; a route pass needs at least 3 steps).

Product (``op`` = MAX, ``accumulate`` = 1, ``transpose`` = 0; the element-wise ``f'(z) * dx`` of
the backward pass, on the MAC array): the steps come in pairs; the even step's BUF2 row is each
lane's own ``a``, the odd step's row ``x``; one MAC row from 0 per pair (``wide`` and ``sr`` as
a MAC pass), ``N / 2`` output rows, ``N`` even.

Ranges are stored as the maximum counter value (count - 1, minimum 0) like the PMAG's
``R1 .. R7``, so every count from 1 to 256 is encodable.
"""
from amaranth.lib import data, enum

from ...errors import ProgramError

__all__ = ["PEOp", "PE_PROGRAM_LAYOUT", "PE_PROGRAM_BYTES", "OP_MAC", "OP_MAX", "RANGE_LIMIT", "ROUTE_LOAD_STEPS",
           "encode_pe_program", "decode_pe_program"]

#: Layout of the PE program word (the first field is the least significant bit).
PE_PROGRAM_LAYOUT = data.StructLayout({
    "op": 1,
    "wide": 1,
    "sr": 1,
    "transpose": 1,
    "accumulate": 1,
    "emit": 1,
    "hold1": 1,
    "hold2": 1,
    "cnt2_outer": 8,
    "cnt2_inner": 8,
    "cnt1": 8,
})

#: Size of the program word in bytes (the paper's "4Byte for PE").
PE_PROGRAM_BYTES = PE_PROGRAM_LAYOUT.size // 8

class PEOp(enum.IntEnum, shape=1):
    """The ``op`` field: the operation of a pass."""
    #: ``y = a*x + y`` on the MAC array.
    MAC = 0
    #: ``y = max(x, y)`` with argmax on the comparators.
    MAX = 1


#: ``op`` values (aliases of :class:`PEOp`'s members).
OP_MAC = PEOp.MAC
OP_MAX = PEOp.MAX

#: Steps of a route pass that load its BUF2 rows (the argmax row, then the dY row) before it emits.
ROUTE_LOAD_STEPS = 2

#: Largest count of a range field (its maximum value is ``RANGE_LIMIT - 1``).
RANGE_LIMIT = 256

_FLAGS = ("op", "wide", "sr", "transpose", "accumulate", "emit", "hold1", "hold2")
_RANGES = ("cnt2_outer", "cnt2_inner", "cnt1")


def encode_pe_program(*, op=OP_MAC, wide=1, sr=0, transpose=0, accumulate=0, emit=1, hold1=0, hold2=0,
                      cnt2_outer=0, cnt2_inner=0, cnt1=0):
    """The 32-bit program word of the given fields (ranges as maximum values, count - 1).

    Raises
    ------
    ProgramError
        A flag that is not 0 or 1, or a range outside ``0 .. RANGE_LIMIT - 1``, naming the field.
    """
    fields = dict(op=op, wide=wide, sr=sr, transpose=transpose, accumulate=accumulate, emit=emit,
                  hold1=hold1, hold2=hold2, cnt2_outer=cnt2_outer, cnt2_inner=cnt2_inner, cnt1=cnt1)
    for name in _FLAGS:
        if int(fields[name]) not in (0, 1):
            raise ProgramError(f"PE program field '{name}' = {fields[name]!r} must be 0 or 1")
    for name in _RANGES:
        if not 0 <= int(fields[name]) < RANGE_LIMIT:
            raise ProgramError(f"PE program field '{name}' = {fields[name]!r} must be in 0..{RANGE_LIMIT - 1} "
                             f"(a count of 1..{RANGE_LIMIT}, stored as count - 1)")
    return PE_PROGRAM_LAYOUT.const({name: int(value) for name, value in fields.items()}).as_bits()


#: ``(name, offset, mask)`` of every field of :data:`PE_PROGRAM_LAYOUT`, for decoding with shifts (an Amaranth
#: view per word cost 0.3 ms, a third of a golden PE run that decodes a word per pass).
_FIELD_SLICES = tuple((name, field.offset, (1 << field.width) - 1) for name, field in PE_PROGRAM_LAYOUT)


def decode_pe_program(word):
    """The fields of a 32-bit program word, as a dict of ints."""
    word = int(word)
    return {name: (word >> offset) & mask for name, offset, mask in _FIELD_SLICES}
