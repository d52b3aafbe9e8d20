"""What the PE's generator and golden model share: the parameters (also the integrated system's PE parameters).

Parameters
----------
See :data:`PARAMS`: ``lanes``, ``in1_depth``, ``in2_depth``, ``out_depth``, ``frac_bits``,
``frac_bits16``, ``rounding``, ``seed``, ``index_bits``.
"""
from ...errors import ParameterError
from ..params import Param, ParamSchema
from .mac import ROUNDINGS, check_seed

__all__ = ["PARAMS", "BUFFER_DEPTHS", "ROW_DELAY"]

#: A pass accepted in cycle ``A`` sends its rows to the MAC array / the comparators from cycle
#: ``A + ROW_DELAY``, one per cycle: the step counters, the buffer read (block RAM), and the
#: register of the read data (the block RAM outputs are registered before the multipliers).
ROW_DELAY = 3

#: The buffer depth parameters (each a power of two).
BUFFER_DEPTHS = ("in1_depth", "in2_depth", "out_depth")


#: The parameters of ``nt_pe``.
PARAMS = ParamSchema((
    Param("lanes", int, 4, "MACs and comparators k", minimum=1, maximum=64),
    Param("in1_depth", int, 512, "BUF Input 1 depth in 32-bit words (two halves)",
          minimum=4, maximum=1 << 16, power_of_two=True),
    Param("in2_depth", int, 128, "BUF Input 2 depth in rows of k words (two halves)",
          minimum=4, maximum=1 << 16, power_of_two=True),
    Param("out_depth", int, 64, "BUF Output depth in rows of k partial sums",
          minimum=2, maximum=1 << 16, power_of_two=True),
    Param("frac_bits", int, 16, "fraction bits of the 32-bit fixed-point format", minimum=0, maximum=30),
    Param("frac_bits16", int, 8, "fraction bits of the 16-bit fixed-point format", minimum=0, maximum=14),
    Param("rounding", str, "sr_lo", "32-bit rounding of the MACs", choices=ROUNDINGS),
    Param("seed", int, 0xA5, "random generator seed of the MACs (1..255 for sr_lo)",
          minimum=1, maximum=(1 << 32) - 1),
    Param("index_bits", int, 8, "comparator argmax index width", minimum=1, maximum=16),
), constraints=(check_seed,))
