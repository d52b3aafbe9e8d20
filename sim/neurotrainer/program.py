"""NeuroTrainer program words: the 18-byte PMAG word, its 32-byte layout descriptor, the 4-byte PE word, the iBuffer.

The PMAG word is the paper's "18 Byte for PMAG" (Section 4): the seven counter ranges
``R1 .. R7`` (16 bits each, stored as the maximum counter value, count - 1, like the golden
model's ``max``) and the eight 4-bit routing codes of Fig. 4 / Table 2 (``s t u v a b c d``).
What the paper does not count -- the comparator routing ``h k`` and window mode of Table 3,
the constant ``r``, the base address, the four strides of ``f(a, b, c, d)`` and the window
bounds -- is the 32-byte *descriptor*. Word + descriptor = exactly the fields of
``NTPMAG.program_layout`` (``counter_bits = 16``), so :func:`pmag_rtl_payload` gives the
``i_program`` payload of the RTL and :func:`decode_pmag` gives back the dict the golden model
:func:`~trainforge.golden.neurotrainer.pmag.nt_pmag` consumes.

The PE word is :data:`~trainforge.spec.neurotrainer.pe_program.PE_PROGRAM_LAYOUT` (owned by the
PE, reused here).

All layouts are ``amaranth.lib.data`` layouts; bytes are the little-endian bytes of the
layout's bit value (field order = bit order, first field in the least significant bits).
"""
import numpy as np
from amaranth import unsigned
from amaranth.lib import data

from ...golden.neurotrainer.pmag import LEVELS, default_program
from ...spec.neurotrainer.pe_program import PE_PROGRAM_BYTES, decode_pe_program, encode_pe_program

__all__ = ["COUNTER_BITS", "BOUND_BITS", "PMAG_WORD_LAYOUT", "PMAG_DESCRIPTOR_LAYOUT", "PMAG_WORD_BYTES",
           "PMAG_DESCRIPTOR_BYTES", "PE_WORD_BYTES", "IBUFFER_BYTES", "ProgramError", "check_range",
           "encode_pmag", "decode_pmag", "pmag_rtl_payload", "encode_pe", "decode_pe", "ibuffer_image",
           "parse_ibuffer"]

#: Counter width the compiler targets (the paper's 16-bit counters).
COUNTER_BITS = 16
#: Width of the window bounds and of ``p``, ``q`` (one more than a counter).
BOUND_BITS = COUNTER_BITS + 1
#: The paper's iBuffer size ("a 16KB memory is sufficient as iBuffer").
IBUFFER_BYTES = 16 * 1024

_ROUTED = ("s", "t", "u", "v", "a", "b", "c", "d")

#: The 18-byte PMAG word: ranges R1..R7 (count - 1) and the routing codes of Fig. 4.
PMAG_WORD_LAYOUT = data.StructLayout({
    "max": data.ArrayLayout(unsigned(COUNTER_BITS), LEVELS),
    **{name: unsigned(4) for name in _ROUTED},
})

#: The 32-byte descriptor: the rest of ``NTPMAG.program_layout``.
PMAG_DESCRIPTOR_LAYOUT = data.StructLayout({
    "h": unsigned(4),
    "k": unsigned(4),
    "window": unsigned(2),
    "write": 1,
    "wide": 1,
    "const": unsigned(COUNTER_BITS),
    "base": unsigned(32),
    "stride": data.ArrayLayout(unsigned(32), 4),
    **{name: unsigned(BOUND_BITS) for name in ("h_lo", "h_hi", "k_lo", "k_hi")},
})

PMAG_WORD_BYTES = PMAG_WORD_LAYOUT.size // 8
PMAG_DESCRIPTOR_BYTES = PMAG_DESCRIPTOR_LAYOUT.size // 8
PE_WORD_BYTES = PE_PROGRAM_BYTES

# iBuffer record tags.
_TAG_PMAG = 0x01
_TAG_PE = 0x02
_TAG_LOOP = 0x03
_TAG_PMAG_LOOP = 0x04

_MASK32 = (1 << 32) - 1


class ProgramError(ValueError):
    """A layer that does not fit the hardware: names the field, the value and the limit.

    Attributes
    ----------
    field : str
    value : int
    limit : int
    """

    def __init__(self, field, value, limit, why=""):
        self.field, self.value, self.limit = field, value, limit
        super().__init__(f"{field} = {value} exceeds the limit {limit}{': ' + why if why else ''}")


def check_range(field, value, limit, why=""):
    """Raise :class:`ProgramError` unless ``0 <= value <= limit``; returns ``value``."""
    if not 0 <= int(value) <= limit:
        raise ProgramError(field, int(value), limit, why)
    return int(value)


def _word_fields(program):
    return {"max": [int(m) for m in program["max"]], **{name: int(program[name]) for name in _ROUTED}}


def _descriptor_fields(program):
    fields = {name: int(program[name]) for name in ("h", "k", "window", "write", "wide", "const", "base",
                                                    "h_lo", "h_hi", "k_lo", "k_hi")}
    fields["stride"] = [int(s) & 0xFFFFFFFF for s in program["stride"]]
    return fields


def _check_pmag(program):
    for level, value in enumerate(program["max"]):
        check_range(f"PMAG R{level + 1} (max[{level}], count - 1)", value, (1 << COUNTER_BITS) - 1)
    for name in (*_ROUTED, "h", "k"):
        check_range(f"PMAG routing code '{name}'", program[name], 15)
    check_range("PMAG const", program["const"], (1 << COUNTER_BITS) - 1)
    check_range("PMAG base", program["base"], (1 << 32) - 1)
    for name in ("h_lo", "h_hi", "k_lo", "k_hi"):
        check_range(f"PMAG window bound '{name}'", program[name], (1 << BOUND_BITS) - 1)
    check_range("PMAG window", program["window"], 3)


def encode_pmag(program):
    """``(word, descriptor)``: the 18-byte PMAG word and the 32-byte descriptor of a golden-model program dict.

    Raises
    ------
    ProgramError
        A field outside its width (a counter range beyond 16 bits, ...).
    """
    _check_pmag(program)
    word = PMAG_WORD_LAYOUT.const(_word_fields(program)).as_bits()
    descriptor = PMAG_DESCRIPTOR_LAYOUT.const(_descriptor_fields(program)).as_bits()
    return word.to_bytes(PMAG_WORD_BYTES, "little"), descriptor.to_bytes(PMAG_DESCRIPTOR_BYTES, "little")


def decode_pmag(word, descriptor):
    """The golden-model program dict of an 18-byte word and its 32-byte descriptor."""
    if len(word) != PMAG_WORD_BYTES or len(descriptor) != PMAG_DESCRIPTOR_BYTES:
        raise ValueError(f"a PMAG word is {PMAG_WORD_BYTES} B and a descriptor {PMAG_DESCRIPTOR_BYTES} B; "
                         f"got {len(word)} B and {len(descriptor)} B")
    w = PMAG_WORD_LAYOUT.from_bits(int.from_bytes(word, "little"))
    d = PMAG_DESCRIPTOR_LAYOUT.from_bits(int.from_bytes(descriptor, "little"))
    program = default_program()
    program["max"] = [int(w.max[level]) for level in range(LEVELS)]
    for name in _ROUTED:
        program[name] = int(getattr(w, name))
    for name in ("h", "k", "window", "write", "wide", "const", "base", "h_lo", "h_hi", "k_lo", "k_hi"):
        program[name] = int(getattr(d, name))
    program["stride"] = [int(d.stride[i]) for i in range(4)]
    return program


def pmag_rtl_payload(program, program_layout):
    """The ``i_program`` payload bits of ``NTPMAG`` (pass the instance's ``program_layout``)."""
    _check_pmag(program)
    return program_layout.const({**_word_fields(program), **_descriptor_fields(program)}).as_bits()


def encode_pe(fields):
    """The 4 bytes of a PE program word (fields as :func:`~trainforge.spec.neurotrainer.pe_program.encode_pe_program`).

    Raises
    ------
    ProgramError
        A CNT range beyond the 8-bit fields (a count above 256).
    """
    for name in ("cnt2_outer", "cnt2_inner", "cnt1"):
        check_range(f"PE {name} (count - 1)", fields.get(name, 0), 255)
    return encode_pe_program(**fields).to_bytes(PE_WORD_BYTES, "little")


def decode_pe(word):
    """The fields of 4 PE word bytes."""
    if len(word) != PE_WORD_BYTES:
        raise ValueError(f"a PE word is {PE_WORD_BYTES} B; got {len(word)} B")
    return decode_pe_program(int.from_bytes(word, "little"))


def _runs(words):
    """Run-length records ``[0x02, pe, repeat (2 B), word (4 B)]`` of a pass sequence, as (repeat, word)."""
    runs = []
    for word in words:
        if runs and runs[-1][1] == word and runs[-1][0] < 0xFFFF:
            runs[-1][0] += 1
        else:
            runs.append([1, word])
    return runs


def _pe_records(pe, words):
    """The shortest coding of one PE's passes: runs, or a body looped ``repeat`` times plus a tail.

    The body is either a period of the words (up to 64 words) or a period of their runs (up to
    255 runs, the loop record's limit), e.g. the first / accumulating / emitting passes of one
    result block of a long reduction.
    """
    def runs_bytes(runs):
        return b"".join(bytes((_TAG_PE, pe)) + repeat.to_bytes(2, "little") + int(word).to_bytes(PE_WORD_BYTES, "little")
                        for repeat, word in runs)

    def looped(body_runs, repeat, tail_runs):
        return runs_bytes(body_runs) + bytes((_TAG_LOOP, pe)) + repeat.to_bytes(2, "little") \
            + len(body_runs).to_bytes(1, "little") + runs_bytes(tail_runs)

    all_runs = _runs(words)
    best = runs_bytes(all_runs)
    array = np.asarray(words, dtype=np.int64)
    for period in range(1, min(len(words) // 2, 64) + 1):
        repeat = len(words) // period
        if repeat > 0xFFFF or not np.array_equal(array[:period * repeat].reshape(repeat, period),
                                                 np.broadcast_to(array[:period], (repeat, period))):
            continue
        body_runs = _runs(words[:period])
        if len(body_runs) > 255:
            continue
        coded = looped(body_runs, repeat, _runs(words[period * repeat:]))
        if len(coded) < len(best):
            best = coded
    pairs = [tuple(run) for run in all_runs]
    for period in range(1, min(len(pairs) // 2, 255) + 1):
        body = pairs[:period]
        if pairs[period:2 * period] != body:
            continue
        repeat = 2
        while repeat < 0xFFFF and pairs[repeat * period:(repeat + 1) * period] == body:
            repeat += 1
        coded = looped([list(run) for run in body], repeat, [list(run) for run in pairs[repeat * period:]])
        if len(coded) < len(best):
            best = coded
    return best


def _rebased(program, step):
    return {**program, "base": (program["base"] + step) & _MASK32}


def _shifted(item, step):
    if isinstance(item, dict):
        return _rebased(item, step)
    repeat, inner, body = item
    return (repeat, inner, _shifted(body, step))


def _first_base(item):
    return item["base"] if isinstance(item, dict) else _first_base(item[2])


def _pmag_items(pmag_programs):
    """``(unit, item)`` of the programs, runs of one unit's programs equal up to a constant base step folded
    into loop items, again and again (so a block-major, PE-minor schedule of merged writes folds into nested
    loops); a loop saves a 52 B record for 8 B."""
    items = list(pmag_programs)
    changed = True
    while changed:
        changed, folded, index = False, [], 0
        while index < len(items):
            unit, item = items[index]
            end = index + 1
            if end < len(items) and items[end][0] == unit:
                step = (_first_base(items[end][1]) - _first_base(item)) & _MASK32
                while end < len(items) and end - index < 0xFFFF and items[end][0] == unit \
                        and items[end][1] == _shifted(item, (end - index) * step):
                    end += 1
            if end - index > 1:
                folded.append((unit, (end - index, step, item)))
                changed = True
            else:
                folded.append((unit, item))
            index = end
        items = folded
    return items


def _pmag_records(unit, item):
    if isinstance(item, dict):
        word, descriptor = encode_pmag(item)
        return bytes((_TAG_PMAG, unit)) + word + descriptor
    repeat, step, body = item
    return _pmag_records(unit, body) + bytes((_TAG_PMAG_LOOP, unit)) + repeat.to_bytes(2, "little") \
        + step.to_bytes(4, "little")


def ibuffer_image(pmag_programs, pe_passes, limit=IBUFFER_BYTES):
    """The iBuffer (program memory) content of one compiled layer.

    Records, in order: every PMAG program ``[0x01, unit, 18 B word, 32 B descriptor]`` (unit 0 =
    the common-vault PMAG, ``1 + i`` = vault ``i``'s PMAG) in issue order per unit, where a PMAG
    loop record ``[0x04, unit, repeat (2 B), step (4 B)]`` runs the PMAG record before it (a
    program, or a loop: they nest) ``repeat`` times in all, the ``r``-th time with every base
    address + ``r * step`` (mod 2**32; e.g. one merged write program per result block); then every
    PE's passes as run-length records ``[0x02, pe, repeat (2 B), 4 B word]`` (the word runs
    ``repeat`` times), where a loop record ``[0x03, pe, repeat (2 B), n (1 B)]`` runs the PE's
    ``n`` records before it ``repeat`` times in all (whichever coding is shorter). Multi-byte
    counts are little-endian.

    Parameters
    ----------
    pmag_programs : sequence of (int, dict)
        ``(unit, program)`` pairs.
    pe_passes : sequence of sequence of int
        Per PE, its 32-bit pass words in order.
    limit : int
        iBuffer size in bytes.

    Raises
    ------
    ProgramError
        The image is larger than ``limit``.
    """
    image = bytearray()
    for unit, _ in pmag_programs:
        check_range("iBuffer PMAG unit", unit, 255)
    for unit, item in _pmag_items(pmag_programs):
        image += _pmag_records(unit, item)
    for pe, words in enumerate(pe_passes):
        image += _pe_records(check_range("iBuffer PE index", pe, 255), words)
    if len(image) > limit:
        raise ProgramError("iBuffer image (bytes)", len(image), limit, "the layer's programs do not fit the iBuffer")
    return bytes(image)


def parse_ibuffer(image):
    """Inverse of :func:`ibuffer_image`: ``(pmag_programs, pe_passes)`` with runs and loops expanded."""
    pmag_records, records = [], {}
    position = 0
    while position < len(image):
        tag, unit = image[position], image[position + 1]
        position += 2
        if tag == _TAG_PMAG:
            word = image[position:position + PMAG_WORD_BYTES]
            position += PMAG_WORD_BYTES
            descriptor = image[position:position + PMAG_DESCRIPTOR_BYTES]
            position += PMAG_DESCRIPTOR_BYTES
            pmag_records.append((unit, [decode_pmag(word, descriptor)]))
        elif tag == _TAG_PMAG_LOOP:
            repeat = int.from_bytes(image[position:position + 2], "little")
            step = int.from_bytes(image[position + 2:position + 6], "little")
            position += 6
            if not pmag_records or pmag_records[-1][0] != unit:
                raise ValueError(f"iBuffer PMAG loop record at byte {position - 8} follows no PMAG record of unit {unit}")
            body = pmag_records[-1][1]
            pmag_records[-1] = (unit, [_rebased(program, r * step) for r in range(repeat) for program in body])
        elif tag == _TAG_PE:
            repeat = int.from_bytes(image[position:position + 2], "little")
            word = int.from_bytes(image[position + 2:position + 2 + PE_WORD_BYTES], "little")
            position += 2 + PE_WORD_BYTES
            records.setdefault(unit, []).append([word] * repeat)
        elif tag == _TAG_LOOP:
            repeat = int.from_bytes(image[position:position + 2], "little")
            count = image[position + 2]
            position += 3
            body = records[unit][-count:]
            records[unit][-count:] = [[word for run in body for word in run] * repeat]
        else:
            raise ValueError(f"iBuffer record at byte {position - 2} has tag {tag:#x}; expected 0x01 to 0x04")
    count = max(records) + 1 if records else 0
    pmag_programs = [(unit, program) for unit, programs in pmag_records for program in programs]
    return pmag_programs, [[word for run in records.get(pe, []) for word in run] for pe in range(count)]
