"""One program queue of the iBuffer: a memory of program words issued in order, a given number at a time."""
from amaranth import Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ...errors import ParameterError
from ..stream_stage import StreamStage

__all__ = ["NTProgramQueue"]


class NTProgramQueue(wiring.Component):
    """Program words stored by the host, issued ``count`` at a time from a read pointer that carries on.

    The host writes word ``address`` through ``i_load``. ``restart`` sets the read pointer to word
    0. ``issue`` (with ``count``) makes the queue send the next ``count`` words on ``o_word``, in
    order, one per cycle at full rate (the memory read, then the shared
    :class:`~trainforge.hw.stream_stage.StreamStage`); ``done`` is high when every issued word has
    been taken. ``issue`` is only obeyed while ``done`` is high. The pointer wraps at ``depth``.

    Not a registered block: a part of :class:`~trainforge.hw.neurotrainer.sequencer.NTSequencer`
    (``depth`` and ``width`` come from the sequencer's schema and the program layouts).

    Parameters
    ----------
    width : int
        Bits of a program word.
    depth : int
        Words of the memory (a power of two).

    Members
    -------
    i_load : In(stream.Signature(load_layout))
        ``address``, ``data``: always ready.
    restart, issue : In(1)
    count : In(range(depth + 1))
        Words to send on ``issue``.
    done : Out(1)
    o_word : Out(stream.Signature(unsigned(width)))
    """

    def __init__(self, *, width, depth):
        if not isinstance(depth, int) or depth < 2 or depth & (depth - 1):
            raise ParameterError(f"parameter 'depth' = {depth!r} is invalid; allowed: a power of two >= 2")
        if not isinstance(width, int) or width < 1:
            raise ParameterError(f"parameter 'width' = {width!r} is invalid; allowed: an integer >= 1")
        self.width, self.depth = width, depth
        self.load_layout = data.StructLayout({"address": unsigned((depth - 1).bit_length()),
                                              "data": unsigned(width)})
        super().__init__({
            "i_load": In(stream.Signature(self.load_layout)),
            "restart": In(1),
            "issue": In(1),
            "count": In(range(depth + 1)),
            "done": Out(1),
            "o_word": Out(stream.Signature(unsigned(width))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.words = words = Memory(shape=unsigned(self.width), depth=self.depth, init=[])
        write, read = words.write_port(), words.read_port()
        m.submodules.output_stage = stage = StreamStage(unsigned(self.width))
        wiring.connect(m, stage.o_stream, wiring.flipped(self.o_word))

        m.d.comb += [
            self.i_load.ready.eq(1),
            write.en.eq(self.i_load.valid),
            write.addr.eq(self.i_load.payload.address),
            write.data.eq(self.i_load.payload.data),
        ]
        pointer = Signal(range(self.depth))
        remaining = Signal(range(self.depth + 1))
        fetched = Signal()          # read.data holds a word not yet in the stage
        advance = Signal()
        fetch = Signal()
        m.d.comb += [
            advance.eq(~fetched | stage.i_stream.ready),
            fetch.eq(advance & (remaining != 0)),
            read.en.eq(advance),    # held while the stage cannot take the word (the port keeps its data)
            read.addr.eq(pointer),
            stage.i_stream.valid.eq(fetched),
            stage.i_stream.payload.eq(read.data),
            self.done.eq((remaining == 0) & ~fetched & ~stage.o_stream.valid),
        ]
        with m.If(advance):
            m.d.sync += fetched.eq(fetch)
        with m.If(self.issue & self.done):
            m.d.sync += remaining.eq(self.count)
        with m.Elif(fetch):
            m.d.sync += [remaining.eq(remaining - 1), pointer.eq(pointer + 1)]
        with m.If(self.restart):
            m.d.sync += pointer.eq(0)
        return m
