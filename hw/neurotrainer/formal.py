"""Formal wrapper of the NeuroTrainer PMAG: its nested counters stay within the loaded program's bounds."""
from amaranth import Elaboratable, Module, Signal
from amaranth.hdl import Assert

from ...spec.neurotrainer.pmag import LEVELS
from .pmag import NTPMAG

__all__ = ["PMAGCounterProperties"]


class PMAGCounterProperties(Elaboratable):
    """A PMAG with free programs, a free consumer and free resets, and the bounds of its counters.

    Asserted in every cycle, for every counter ``r_i`` (``i`` = 1 .. 7) of the program loaded:

    - while the program's setup runs, ``r_i = 0``;
    - after it (the walk, then the END-MARK), ``r_i <= max_i`` and ``at_max_i`` is exactly
      ``r_i = max_i``.

    These are the bounds the address function rests on (the addresses are linear in the
    counters, Table 2): a counter past its maximum would issue an address outside the tensor.
    The inputs are free in every cycle (no stream rules assumed: the PMAG takes a program only
    while idle and holds it while busy), so the proof holds for any program and any stalls.

    Parameters
    ----------
    counter_bits : int
        The PMAG's counter width (small, so that the solver covers every bound).
    pmag : NTPMAG, optional
        The PMAG under proof; an :class:`~trainforge.hw.neurotrainer.pmag.NTPMAG` of ``counter_bits``
        when omitted (a deliberately broken one, e.g. with another :meth:`~NTPMAG.count`, shows that
        the proof can fail).

    Attributes
    ----------
    ports : list of Value
        The free inputs: program valid and payload, request ready.
    """

    def __init__(self, counter_bits=3, pmag=None):
        self.pmag = NTPMAG(counter_bits=counter_bits) if pmag is None else pmag
        self.program_valid = Signal()
        self.program_payload = Signal(len(self.pmag.program.as_value()))
        self.request_ready = Signal()
        self.ports = [self.program_valid, self.program_payload, self.request_ready]

    def elaborate(self, platform):
        m = Module()
        m.submodules.pmag = pmag = self.pmag
        m.d.comb += [
            pmag.i_program.valid.eq(self.program_valid),
            pmag.i_program.payload.as_value().eq(self.program_payload),
            pmag.o_request.ready.eq(self.request_ready),
        ]
        maxima = pmag.program.max
        in_setup = pmag.busy & (pmag.setup != 0)
        walking = pmag.busy & (pmag.setup == 0)
        for level in range(LEVELS):
            counter, at_max = pmag.counters[level], pmag.at_max[level]
            with m.If(in_setup):
                m.d.comb += Assert(counter == 0, f"r{level + 1} is not 0 during the setup")
            with m.If(walking):
                m.d.comb += [
                    Assert(counter <= maxima[level], f"r{level + 1} is past its maximum"),
                    Assert(at_max == (counter == maxima[level]), f"r{level + 1}_at_max is not r{level + 1} == max"),
                ]
        return m


