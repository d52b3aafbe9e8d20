"""Vault memory model for simulation: a memory with a configurable read latency and bandwidth."""
from amaranth import Module, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ...spec.neurotrainer import vault as spec

__all__ = ["NTVault"]


class NTVault(wiring.Component):
    """A vault as seen by the PMAG and the bus: 32-bit words, fixed read latency, limited request rate.

    Each accepted request on ``i_request`` either writes ``data`` to word ``address mod depth``
    or reads that word; read data leave on ``o_data`` in request order, :attr:`latency`
    cycles after the request was accepted when ``o_data`` is not stalled. A read sees every
    write accepted before it. At most one request is accepted every ``interval`` cycles, so
    the bandwidth is ``4 / interval`` bytes per cycle. A stalled ``o_data`` freezes the
    read pipeline and stops accepting requests. Real DRAM timing (banks, rows, refresh) is
    not modelled.

    Parameters
    ----------
    depth : int
        Words of storage (power of two).
    latency : int
        Cycles from a read request's acceptance to its data on ``o_data``.
    interval : int
        Minimum cycles between two accepted requests.

    Members
    -------
    i_request : In(stream.Signature(request_layout))
    o_data : Out(stream.Signature(unsigned(32)))

    Attributes
    ----------
    request_layout : data.StructLayout
        ``address`` (32), ``write`` (1), ``data`` (32).
    """

    PARAMS = spec.PARAMS

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.request_layout = spec.request_layout(self.params)
        super().__init__({
            "i_request": In(stream.Signature(self.request_layout)),
            "o_data": Out(stream.Signature(unsigned(32))),
        })

    def elaborate(self, platform):
        m = Module()
        address_bits = self.depth.bit_length() - 1
        m.submodules.storage = storage = Memory(shape=unsigned(32), depth=self.depth, init=[])
        write, read = storage.write_port(), storage.read_port()
        request = self.i_request.payload

        advance = Signal()
        accept = Signal()
        idle_gap = Signal()   # the interval since the last accepted request has passed
        m.d.comb += [
            advance.eq(~self.o_data.valid | self.o_data.ready),
            self.i_request.ready.eq(advance & idle_gap),
            accept.eq(self.i_request.valid & self.i_request.ready),
            write.en.eq(accept & request.write),
            write.addr.eq(request.address[:address_bits]),
            write.data.eq(request.data),
            read.en.eq(advance),
            read.addr.eq(request.address[:address_bits]),
        ]
        if self.interval > 1:
            wait = Signal(range(self.interval))
            m.d.comb += idle_gap.eq(wait == 0)
            with m.If(accept):
                m.d.sync += wait.eq(self.interval - 1)
            with m.Elif(wait != 0):
                m.d.sync += wait.eq(wait - 1)
        else:
            m.d.comb += idle_gap.eq(1)

        # Stage 0 is the read port's output register; stages 1 .. latency-1 delay it.
        valid = [Signal(name=f"stage_{stage}_valid") for stage in range(self.latency)]
        words = [read.data] + [Signal(32, name=f"stage_{stage}_data") for stage in range(1, self.latency)]
        with m.If(advance):
            m.d.sync += valid[0].eq(accept & ~request.write)
            for stage in range(1, self.latency):
                m.d.sync += [valid[stage].eq(valid[stage - 1]), words[stage].eq(words[stage - 1])]
        m.d.comb += [self.o_data.valid.eq(valid[-1]), self.o_data.payload.eq(words[-1])]
        return m
