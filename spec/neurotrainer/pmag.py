"""What the PMAG's generator and golden model share: parameters, source codes, window modes, END-MARK.

Parameters
----------
See :data:`PARAMS`: ``counter_bits``.
"""
from amaranth import unsigned
from amaranth.lib import data, enum

from ..params import Param, ParamSchema

__all__ = ["PARAMS", "LEVELS", "WindowMode", "SOURCE_NAMES", "WINDOW_MODES", "SETUP_CYCLES", "LATENCY", "end_mark", "program_layout", "request_layout"]

#: The parameters of ``nt_pmag``.
PARAMS = ParamSchema((
    Param("counter_bits", int, 16, "width of the seven nested counters", minimum=2, maximum=16),
))

#: Number of nested counters.
LEVELS = 7

#: Source codes of the decoders, by name.
SOURCE_NAMES = {"0": 0, **{f"r{level}": level for level in range(1, LEVELS + 1)}, "const": 8, "p": 9, "q": 10}

class WindowMode(enum.IntEnum, shape=2):
    """The ``window`` field of a program: how the comparators of Table 3 are used (3 acts as ``OFF``)."""
    #: Every step is inside: the window is not used.
    OFF = 0
    #: Steps outside the window issue nothing (remove pad, partition).
    SKIP = 1
    #: Steps outside the window are issued with ``pad = 1`` (add pad).
    PAD = 2


#: ``window`` field values, by name.
WINDOW_MODES = {"off": WindowMode.OFF, "skip": WindowMode.SKIP, "pad": WindowMode.PAD}

#: Cycles after the acceptance of a program before its first counter step (the PMAG is busy and
#: does not step): four register the source multiplicities, the per-level weights, the ``const``
#: terms (one multiplication) and the start values; in the fifth the first step enters the
#: look-ahead register, from which the steps are issued.
SETUP_CYCLES = 5

#: Cycles from the acceptance of a program to its first request, without stalls: the setup cycles,
#: the first counter step, and the output stream stage.
LATENCY = 2 + SETUP_CYCLES

_MASK32 = (1 << 32) - 1


def end_mark(wide):
    """The END-MARK word: 0xFFFFFFFF for 32-bit data, 0xFFFF for 16-bit data."""
    return _MASK32 if wide else 0xFFFF


def program_layout(params):
    """Payload of ``i_program``: the seven maxima, the decoder and comparator selects, ``const``,
    ``base``, four strides, the window bounds (``counter_bits + 1`` bits), ``window``, ``write``, ``wide``."""
    bits = params["counter_bits"]
    return data.StructLayout({
        "max": data.ArrayLayout(unsigned(bits), LEVELS),
        **{name: unsigned(4) for name in ("s", "t", "u", "v", "a", "b", "c", "d", "h", "k")},
        "const": unsigned(bits),
        "base": unsigned(32),
        "stride": data.ArrayLayout(unsigned(32), 4),
        **{name: unsigned(bits + 1) for name in ("h_lo", "h_hi", "k_lo", "k_hi")},
        "window": unsigned(2),
        "write": 1,
        "wide": 1,
    })


def request_layout(params):
    """Payload of ``o_request``: ``address`` (32 bits), ``write``, ``pad``, ``end``."""
    return data.StructLayout({"address": unsigned(32), "write": 1, "pad": 1, "end": 1})
