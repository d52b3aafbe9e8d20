"""Comparator unit for max pooling and its backward pass (NeuroTrainer, Section 3.3.3)."""
from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec.neurotrainer import comparator as spec
from ..stream_stage import StreamStage

__all__ = ["NTComparator"]


class NTComparator(wiring.Component):
    """k 16-bit comparators computing ``y = max(x, y)`` and remembering the argmax.

    Lane ``i`` reduces one pooling window: each accepted row offers one element
    ``x[i]`` of every lane's window. A ``first`` row opens new windows (its elements
    are the running maxima, index 0); later rows replace the maximum only when
    strictly greater, so ties keep the earliest element. The index is the element's
    position in the window (0 .. r^2-1), counted in accepted rows since ``first``
    and wrapping modulo ``2**index_bits``. After a ``last`` row the k maxima and
    their indices are sent on ``o_max``; a row with both flags is a one-element window.

    One stage: a row per cycle unless a ``last`` row finds the output stage full; the
    result is valid :attr:`LATENCY` cycle after the ``last`` row was accepted. The result
    leaves through a :class:`~trainforge.hw.stream_stage.StreamStage` (it holds up to two
    results), so ``i_row.ready`` does not depend on ``o_max.ready`` within a cycle.

    Parameters
    ----------
    lanes : int
        Number of comparators k.
    index_bits : int
        Width of the argmax index.

    Members
    -------
    i_row : In(stream.Signature(row_layout))
    o_max : Out(stream.Signature(result_layout))

    Attributes
    ----------
    row_layout : data.StructLayout
        ``x`` (``lanes`` signed 16-bit values), ``first``, ``last``.
    result_layout : data.StructLayout
        ``value`` (``lanes`` signed 16-bit maxima) and ``index`` (``lanes`` indices).
    """

    PARAMS = spec.PARAMS

    #: Cycles from the acceptance of a ``last`` row to its result on ``o_max``, without stalls.
    LATENCY = spec.LATENCY

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.row_layout = spec.row_layout(self.params)
        self.result_layout = spec.result_layout(self.params)
        super().__init__({
            "i_row": In(stream.Signature(self.row_layout)),
            "o_max": Out(stream.Signature(self.result_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        row = self.i_row.payload
        m.submodules.output_stage = output_stage = StreamStage(self.result_layout)
        wiring.connect(m, output_stage.o_stream, wiring.flipped(self.o_max))
        accept = Signal()
        m.d.comb += [
            # A closing row hands its result to the stage; the stage's ready is a register.
            output_stage.i_stream.valid.eq(self.i_row.valid & row.last),
            self.i_row.ready.eq(~row.last | output_stage.i_stream.ready),
            accept.eq(self.i_row.valid & self.i_row.ready),
        ]

        position = Signal(self.index_bits)
        current = Signal(self.index_bits)
        m.d.comb += current.eq(Mux(row.first, 0, position))
        with m.If(accept):
            m.d.sync += position.eq(current + 1)

        for lane in range(self.lanes):
            best = Signal(signed(16), name=f"best_{lane}")
            best_index = Signal(self.index_bits, name=f"best_index_{lane}")
            take = Signal(name=f"take_{lane}")
            new_best = Signal(signed(16), name=f"new_best_{lane}")
            new_index = Signal(self.index_bits, name=f"new_index_{lane}")
            # take = first | (x > best) as one 17-bit unsigned comparison, so that it is the end of one
            # carry chain: the sign bits inverted (offset binary keeps the signed order) and ``first``
            # as a top bit that only x has.
            m.d.comb += [
                take.eq(Cat(row.x[lane][:15], ~row.x[lane][15], row.first) > Cat(best[:15], ~best[15], Const(0, 1))),
                new_best.eq(Mux(take, row.x[lane], best)),
                new_index.eq(Mux(take, current, best_index)),
            ]
            m.d.comb += [
                output_stage.i_stream.payload.value[lane].eq(new_best),
                output_stage.i_stream.payload.index[lane].eq(new_index),
            ]
            with m.If(accept):
                m.d.sync += [best.eq(new_best), best_index.eq(new_index)]
        return m
