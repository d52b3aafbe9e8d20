"""A vault with its two PMAGs (one for reads, one for writes) and a host port (NeuroTrainer, Sections 3.1-3.2)."""
from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ...spec.params import Param, ParamSchema
from ...spec.neurotrainer.integration import LUT_SELECT_SHIFT, WORD_LUT_STAGES
from ...spec.neurotrainer.pmag import end_mark
from .pmag import NTPMAG
from ...spec.neurotrainer import vault as vault_spec
from .vault import NTVault
from .word_lut import NTWordLUT
from .word_lut_pipeline import NTWordLUTPipeline

__all__ = ["NTVaultController"]

# What the response side expects back, in request order (2 bits), plus the END-MARK's width bit.
_TAG_DATA, _TAG_END_MARK, _TAG_PAD, _TAG_HOST = range(4)


class NTVaultController(wiring.Component):
    """One vault (:class:`~trainforge.hw.neurotrainer.vault.NTVault`) driven by a read PMAG, a write PMAG and a host.

    Exact rules:

    - Request priority, each cycle: host, then the write PMAG if it can go (its word is there,
      or its request is a pad), then the read PMAG. The host is used before and after a
      layer; a write waiting for its word never blocks the reads that word depends on.
    - Read PMAG: a data request becomes a vault read; a request with ``pad = 1`` makes no
      vault access and delivers the word 0; the END-MARK request makes no access and
      delivers the END-MARK word (``end = 1``, data 0xFFFF or 0xFFFFFFFF by the program's
      ``wide``). All three push a tag into a ``latency + 4``-entry FIFO (a request waits when
      it is full) and ``o_read`` gives the words in tag order, so in request order. The
      vault's read data go into a FIFO as deep as the tag FIFO, so they never stall the
      vault: a reader that stops taking words never blocks the writes (a PE stalled on its
      full input buffers still writes its results to the same vault).
    - Write PMAG: a data request is joined with the next word of ``i_write`` (address from
      the PMAG, data from the word) and written; a request with ``pad = 1`` writes 0 and
      consumes no word; the END-MARK request consumes the next word of ``i_write`` (the
      writer's END-MARK) without a vault access. ``i_write`` passes a 2-entry FIFO, which
      breaks any combinational ready loop through the writer.
    - Host reads come back on ``o_host_data`` in tag order too.
    - With ``lut`` (the PMAG's f(x) / f'(x) tables, Section 3.2): the data words of the read
      stream (not pad, END-MARK or host words) pass an
      :class:`~trainforge.hw.neurotrainer.word_lut.NTWordLUT` with the element width ``wide``,
      in the same cycle; the table is the one the read request's address bits 31 .. 30 select
      (0: unchanged, 1: f(x), 2: f'(x); the vault uses only the bits below its depth), carried
      with the request's tag. When the vault's ``latency`` exceeds
      :data:`~trainforge.spec.neurotrainer.integration.WORD_LUT_STAGES`, the tables run in the last
      cycles of the read latency instead (:class:`~trainforge.hw.neurotrainer.word_lut_pipeline.NTWordLUTPipeline`
      between a vault built that many cycles shorter and the read data FIFO, the select carried
      by a FIFO beside the vault), with the same cycles and words: the data word's select is its
      request's and its ``wide`` the one when it leaves the vault (``config`` is held over a layer).

    Parameters
    ----------
    depth, latency, interval : int
        The vault's parameters.
    lut : dict, optional
        :class:`~trainforge.hw.neurotrainer.word_lut.NTWordLUT`'s parameters; adds the ``wide`` input.

    Members
    -------
    i_host : In(stream.Signature(host_layout))
    o_host_data : Out(stream.Signature(unsigned(32)))
    i_read_program, i_write_program : In(stream.Signature(program_layout))
        Programs of the read and the write PMAG (16-bit counters), each run in order.
    o_read : Out(stream.Signature(word_layout))
        The read stream's words, each program's closed by its END-MARK word.
    i_write : In(stream.Signature(word_layout))
        The words to write, each write program's closed by an END-MARK word.
    idle : Out(1)
        Both PMAGs wait for a program and have no request pending: every write accepted so
        far is in the vault (sample it from the second cycle after the last program was taken).
    wide : In(1)
        With ``lut`` only: the element width of the read stream's data words.

    Attributes
    ----------
    host_layout : data.StructLayout
        ``address`` (32), ``write`` (1), ``data`` (32).
    program_layout : data.StructLayout
        :attr:`NTPMAG.program_layout` with 16-bit counters.
    word_layout : data.StructLayout
        ``data`` (32), ``end`` (1): the bus word.
    """

    PARAMS = vault_spec.PARAMS

    def __init__(self, *, lut=None, **params):
        self.PARAMS.apply(self, **params)
        #: The LUTs run inside the read latency (registered) when the vault's latency leaves room for them.
        self.pipelined_lut = lut is not None and self.latency > WORD_LUT_STAGES
        if lut is None:
            self.lut = None
        elif self.pipelined_lut:
            self.lut = NTWordLUTPipeline(**lut)
        else:
            self.lut = NTWordLUT(**lut)
        vault_latency = self.latency - WORD_LUT_STAGES if self.pipelined_lut else self.latency
        self.vault = NTVault(depth=self.depth, latency=vault_latency, interval=self.interval)
        self.read_pmag = NTPMAG(counter_bits=16)
        self.write_pmag = NTPMAG(counter_bits=16)
        self.host_layout = self.vault.request_layout
        self.program_layout = self.read_pmag.program_layout
        self.word_layout = data.StructLayout({"data": unsigned(32), "end": 1})
        self.tag_depth = self.latency + 4
        luts = {} if lut is None else {"wide": In(1)}
        super().__init__({
            **luts,
            "i_host": In(stream.Signature(self.host_layout)),
            "o_host_data": Out(stream.Signature(unsigned(32))),
            "i_read_program": In(stream.Signature(self.program_layout)),
            "i_write_program": In(stream.Signature(self.program_layout)),
            "o_read": Out(stream.Signature(self.word_layout)),
            "i_write": In(stream.Signature(self.word_layout)),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        vault, reader, writer = self.vault, self.read_pmag, self.write_pmag
        m.submodules.vault = vault
        m.submodules.read_pmag = reader
        m.submodules.write_pmag = writer
        m.submodules.tags = tags = SyncFIFO(width=5, depth=self.tag_depth)
        wiring.connect(m, wiring.flipped(self.i_read_program), reader.i_program)
        wiring.connect(m, wiring.flipped(self.i_write_program), writer.i_program)
        m.d.comb += self.idle.eq(reader.i_program.ready & ~reader.o_request.valid
                                 & writer.i_program.ready & ~writer.o_request.valid)

        m.submodules.incoming = incoming = SyncFIFO(width=33, depth=2)
        m.d.comb += [
            incoming.w_data.eq(Cat(self.i_write.payload.data, self.i_write.payload.end)),
            incoming.w_en.eq(self.i_write.valid),
            self.i_write.ready.eq(incoming.w_rdy),
        ]
        word = Signal(32)
        m.d.comb += word.eq(incoming.r_data[:32])

        host, read, write = self.i_host, reader.o_request, writer.o_request
        read_select = Signal(2)     # the table of the read the vault takes (0 for the host's)
        if self.pipelined_lut:
            m.submodules.selects = selects = SyncFIFO(width=2, depth=self.tag_depth)
            m.d.comb += [
                selects.w_data.eq(read_select),
                selects.w_en.eq(vault.i_request.valid & vault.i_request.ready & ~vault.i_request.payload.write),
            ]
        with m.If(host.valid):
            m.d.comb += [
                vault.i_request.payload.eq(host.payload),
                vault.i_request.valid.eq(host.payload.write | tags.w_rdy),
                host.ready.eq(vault.i_request.ready & (host.payload.write | tags.w_rdy)),
                tags.w_data.eq(_TAG_HOST),
                tags.w_en.eq(host.valid & host.ready & ~host.payload.write),
            ]
        with m.Elif(write.valid & write.payload.end & incoming.r_rdy):
            m.d.comb += [write.ready.eq(1), incoming.r_en.eq(1)]
        with m.Elif(write.valid & write.payload.pad):
            m.d.comb += [
                vault.i_request.payload.address.eq(write.payload.address),
                vault.i_request.payload.write.eq(1),
                vault.i_request.valid.eq(1),
                write.ready.eq(vault.i_request.ready),
            ]
        with m.Elif(write.valid & incoming.r_rdy):
            m.d.comb += [
                vault.i_request.payload.address.eq(write.payload.address),
                vault.i_request.payload.write.eq(1),
                vault.i_request.payload.data.eq(word),
                vault.i_request.valid.eq(1),
                write.ready.eq(vault.i_request.ready),
                incoming.r_en.eq(vault.i_request.ready),
            ]
        with m.Elif(read.valid & (read.payload.end | read.payload.pad)):
            m.d.comb += [
                read.ready.eq(tags.w_rdy),
                tags.w_data.eq(Cat(Mux(read.payload.end, _TAG_END_MARK, _TAG_PAD)[:2],
                                   read.payload.address == end_mark(True))),
                tags.w_en.eq(tags.w_rdy),
            ]
        with m.Elif(read.valid):
            m.d.comb += [
                vault.i_request.payload.address.eq(read.payload.address),
                vault.i_request.valid.eq(tags.w_rdy),
                read.ready.eq(vault.i_request.ready & tags.w_rdy),
                tags.w_data.eq(Cat(Const(_TAG_DATA, 2), Const(0, 1), read.payload.address[LUT_SELECT_SHIFT:])),
                read_select.eq(read.payload.address[LUT_SELECT_SHIFT:]),
                tags.w_en.eq(vault.i_request.ready & tags.w_rdy),
            ]

        # The vault's read data never wait: every read holds a tag until its word leaves, so at
        # most `tag_depth` words are in the vault pipeline or in `returned`, which holds them all.
        # A stalled reader therefore never blocks the writes that may be what it waits for.
        m.submodules.returned = returned = SyncFIFO(width=32, depth=self.tag_depth)
        read_data = returned.r_data
        if self.pipelined_lut:
            # The LUT stages make up the vault's missing read latency; every word in the vault, the stages or
            # ``returned`` holds a tag, so ``returned`` never fills and the stages never stall.
            m.submodules.lut = lut = self.lut
            m.d.comb += [
                lut.i_word.valid.eq(vault.o_data.valid),
                lut.i_word.payload.word.eq(vault.o_data.payload),
                lut.i_word.payload.select.eq(selects.r_data),
                lut.i_word.payload.wide.eq(self.wide),
                vault.o_data.ready.eq(lut.i_word.ready),
                selects.r_en.eq(vault.o_data.valid & vault.o_data.ready),
                returned.w_data.eq(lut.o_word.payload),
                returned.w_en.eq(lut.o_word.valid),
                lut.o_word.ready.eq(returned.w_rdy),
            ]
        else:
            m.d.comb += [
                returned.w_data.eq(vault.o_data.payload),
                returned.w_en.eq(vault.o_data.valid),
                vault.o_data.ready.eq(1),
            ]
        if self.lut is not None and not self.pipelined_lut:
            m.submodules.lut = lut = self.lut
            m.d.comb += [lut.i_word.eq(returned.r_data), lut.wide.eq(self.wide), lut.select.eq(tags.r_data[3:5])]
            read_data = lut.o_word
        tag, wide = tags.r_data[:2], tags.r_data[2]
        with m.If(tags.r_rdy & ((tag == _TAG_END_MARK) | (tag == _TAG_PAD))):
            m.d.comb += [
                self.o_read.valid.eq(1),
                self.o_read.payload.end.eq(tag == _TAG_END_MARK),
                self.o_read.payload.data.eq(Mux(tag == _TAG_PAD, 0,
                                                Mux(wide, end_mark(True), end_mark(False)))),
                tags.r_en.eq(self.o_read.ready),
            ]
        with m.Elif(tags.r_rdy & (tag == _TAG_DATA)):
            m.d.comb += [
                self.o_read.valid.eq(returned.r_rdy),
                self.o_read.payload.data.eq(read_data),
                returned.r_en.eq(self.o_read.ready),
                tags.r_en.eq(returned.r_rdy & self.o_read.ready),
            ]
        with m.Elif(tags.r_rdy):
            m.d.comb += [
                self.o_host_data.valid.eq(returned.r_rdy),
                self.o_host_data.payload.eq(returned.r_data),
                returned.r_en.eq(self.o_host_data.ready),
                tags.r_en.eq(returned.r_rdy & self.o_host_data.ready),
            ]
        return m
