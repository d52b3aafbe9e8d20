"""A small NeuroTrainer module for the integration test: vaults with PMAGs, the bus and the PEs (Sections 3.1-3.4)."""
from amaranth import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ...spec.neurotrainer import integration as spec
from ...spec.neurotrainer.sequencer import config_layout
from .bus import NTBus
from .pe import NTPE
from .row_packer import NTRowPacker
from .row_unpacker import NTRowUnpacker
from .sequencer import NTSequencer
from .vault_controller import NTVaultController

__all__ = ["NTSystem"]


class NTSystem(wiring.Component):
    """The common vault, ``pes`` PEs each with its own vault, and the bus between them.

    Vault ``0`` is the common vault, vault ``1 + i`` PE ``i``'s independent vault. Each vault
    is an :class:`~trainforge.hw.neurotrainer.vault_controller.NTVaultController`: the vault
    model, a read PMAG, a write PMAG and a host port. Glue (held constant over a layer by
    ``config``):

    - The common vault's read stream is the bus's broadcast input (to every PE); the bus's
      merged words are the common vault's write stream.
    - Per PE, the broadcast stream and the PE's own vault's read stream go through row
      packers (:class:`~trainforge.hw.neurotrainer.row_packer.NTRowPacker`) into BUF Input 1
      (one word per row; in 16-bit layers each half of a word is one row, in both halves) and
      BUF Input 2 (``lanes`` words per row; 16-bit: two elements per word,
      ``spec/neurotrainer/packing.py``): the broadcast fills
      BUF Input 1 when ``config.broadcast_in1`` (convolution FF/BP: the kernels), else BUF
      Input 2 (FC and conv UP: the common operand); the own vault fills BUF Input 1 when
      ``config.local_in1`` (FC, conv UP), else BUF Input 2 (convolution FF/BP, max pooling).
      A broadcast routed to the own vault's buffer is not connected (max pooling has no
      broadcast).
    - The PE's results go through a row unpacker
      (:class:`~trainforge.hw.neurotrainer.row_unpacker.NTRowUnpacker`, an END-MARK after
      every ``config.out_rows`` rows) to the bus's merge input when ``config.merge``, else to
      the PE's own vault's write stream.
    - Merge order is fixed, PE 0, 1, ..., one burst (one result block, one write program) per
      turn, round and round: PE ``i`` raises REQ only in its turn and the turn passes on its
      END-MARK, because the common vault's write PMAG runs the compiler's merged write programs
      in that order (block 0 of PE 0, 1, ..., then block 1 of each PE, ...).
    - Activation LUTs (Section 3.2: the PMAG computes f(x) and f'(x) with look-up tables):
      every vault controller's read stream passes its data words (not pad or END-MARK words)
      through f(x) or f'(x) of ``activation`` (:class:`~trainforge.hw.neurotrainer.word_lut.NTWordLUT`,
      same cycle) as each read request's address bits 31 .. 30 select (0: none, 1: f(x),
      2: f'(x)), the element width by ``config.wide``.
    - Credit-gated broadcast: each PE takes the broadcast through a ``broadcast_credits``-word
      FIFO, and a credit counter per PE counts its free FIFO words not yet promised to a word
      on the bus: it starts full, loses one when the bus accepts a broadcast word and regains
      one when a word leaves the PE's FIFO. The common vault's read stream is offered to the
      bus (``valid`` and ``ready`` both gated) only while every PE has a credit, so a
      broadcast word always finds room at every PE and never waits at the bus output, where
      it would hold up the merge words behind it ("broadcasting mode is set when all PE can
      take data").

    Parameters
    ----------
    pes : int
    lanes : int
        MACs per PE.
    vault_depth, pe_vault_depth : int
        Words of the common vault and of each PE's vault.
    vault_latency, vault_interval : int
        Every vault's read latency and request interval.
    broadcast_credits : int
        Words of each PE's broadcast FIFO (the credits of the credit-gated broadcast).
    in1_depth, in2_depth, out_depth, frac_bits, frac_bits16, rounding, seed, index_bits :
        The PEs' parameters (:class:`~trainforge.hw.neurotrainer.pe.NTPE`).
    activation : str
        f(x) of the LUTs (``relu``, ``tanh``, ``sigmoid``); f'(x) is its derivative.
    lut_table_bits, lut_frac_bits, lut_out_frac_bits : int
        The LUTs' ``table_bits``, ``frac_bits``, ``out_frac_bits`` (:class:`~trainforge.hw.neurotrainer.lut.NTLUT`).
    max_layers, queue_depth : int
        The iBuffer's layer table entries and program words per queue.

    Members
    -------
    i_host : In(stream.Signature(host_layout)).array(pes + 1)
    o_host_data : Out(stream.Signature(unsigned(32))).array(pes + 1)
    i_read_program, i_write_program : In(stream.Signature(pmag_program_layout)).array(pes + 1)
    i_pe_program : In(stream.Signature(unsigned(32))).array(pes)
    config : In(config_layout)
    idle : Out(1)
        Every PMAG waits for a program with no request pending (sample it from the second
        cycle after the last program was taken): all writes are in the vaults.
    i_ibuffer : In(stream.Signature(ibuffer_load_layout))
        Host loads of the iBuffer (:class:`~trainforge.hw.neurotrainer.sequencer.NTSequencer`'s ``i_load``).
    i_start : In(stream.Signature(range(max_layers + 1)))
        Runs the iBuffer's first ``L`` layers without the host.
    busy : Out(1)
        The sequencer runs a program: it drives every program stream and ``config`` (the
        ``i_*_program`` ports and ``config`` are ignored).

    Attributes
    ----------
    host_layout, pmag_program_layout : data.StructLayout
    config_layout : data.StructLayout
        ``wide`` (32-bit elements, else 16-bit packed two per vault and buffer word), ``broadcast_in1``,
        ``local_in1``, ``merge``, ``in1_block`` (BUF1 words per block), ``in2_block`` (BUF2 rows per block),
        ``out_rows`` (result rows per write program), 16 bits each.
    """

    PARAMS = spec.PARAMS

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.pe_params = {"lanes": self.lanes, "in1_depth": self.in1_depth, "in2_depth": self.in2_depth, "out_depth": self.out_depth,
                          "frac_bits": self.frac_bits, "frac_bits16": self.frac_bits16, "rounding": self.rounding, "seed": self.seed,
                          "index_bits": self.index_bits}
        lut = {"activation": self.activation, **{lut_key: self.params[key] for key, lut_key in spec.LUT_KEYS.items()}}
        self.vaults = [NTVaultController(depth=self.vault_depth, latency=self.vault_latency, interval=self.vault_interval,
                                         lut=lut)] + [
            NTVaultController(depth=self.pe_vault_depth, latency=self.vault_latency, interval=self.vault_interval,
                              lut=lut)
            for _ in range(self.pes)]
        self.bus = NTBus(pes=self.pes, width=32)
        self.pe = [NTPE(**self.pe_params) for _ in range(self.pes)]
        self.packer1 = [NTRowPacker(lanes=1, splat=True) for _ in range(self.pes)]
        self.packer2 = [NTRowPacker(lanes=self.lanes) for _ in range(self.pes)]
        self.unpacker = [NTRowUnpacker(lanes=self.lanes) for _ in range(self.pes)]
        self.host_layout = self.vaults[0].host_layout
        self.pmag_program_layout = self.vaults[0].program_layout
        self.config_layout = config_layout()
        self.sequencer = NTSequencer(pes=self.pes, **{key: self.params[key] for key in spec.SEQUENCER_KEYS})
        self.ibuffer_load_layout = self.sequencer.load_layout
        super().__init__({
            "i_host": In(stream.Signature(self.host_layout)).array(self.pes + 1),
            "o_host_data": Out(stream.Signature(unsigned(32))).array(self.pes + 1),
            "i_read_program": In(stream.Signature(self.pmag_program_layout)).array(self.pes + 1),
            "i_write_program": In(stream.Signature(self.pmag_program_layout)).array(self.pes + 1),
            "i_pe_program": In(stream.Signature(unsigned(32))).array(self.pes),
            "config": In(self.config_layout),
            "idle": Out(1),
            "i_ibuffer": In(stream.Signature(self.ibuffer_load_layout)),
            "i_start": In(stream.Signature(range(self.max_layers + 1))),
            "busy": Out(1),
        })

    @staticmethod
    def _join(m, source, sink, enable):
        """Drive stream ``sink`` from ``source`` (same payload) when ``enable``."""
        with m.If(enable):
            m.d.comb += [sink.valid.eq(source.valid), sink.payload.eq(source.payload), source.ready.eq(sink.ready)]

    def elaborate(self, platform):
        m = Module()
        bus, sequencer = self.bus, self.sequencer
        m.submodules.bus = bus
        # The iBuffer / layer sequencer: while it runs a program (busy) it drives every program stream and
        # the config; otherwise the program ports and ``config`` do.
        m.submodules.sequencer = sequencer
        wiring.connect(m, wiring.flipped(self.i_ibuffer), sequencer.i_load)
        wiring.connect(m, wiring.flipped(self.i_start), sequencer.i_start)
        autonomous = sequencer.busy
        config = Signal(self.config_layout)
        m.d.comb += [
            config.eq(Mux(autonomous, sequencer.o_config, self.config)),
            self.busy.eq(autonomous),
        ]
        for index, vault in enumerate(self.vaults):
            m.submodules[f"vault_{index}"] = vault
            wiring.connect(m, wiring.flipped(self.i_host[index]), vault.i_host)
            wiring.connect(m, wiring.flipped(self.o_host_data[index]), vault.o_host_data)
            self._join(m, sequencer.o_read_program[index], vault.i_read_program, autonomous)
            self._join(m, self.i_read_program[index], vault.i_read_program, ~autonomous)
            self._join(m, sequencer.o_write_program[index], vault.i_write_program, autonomous)
            self._join(m, self.i_write_program[index], vault.i_write_program, ~autonomous)
            m.d.comb += vault.wide.eq(config.wide)
        idle = Signal()
        m.d.comb += [
            idle.eq(sum(vault.idle for vault in self.vaults) == len(self.vaults)),
            sequencer.system_idle.eq(idle),
            self.idle.eq(idle),
        ]

        common = self.vaults[0]
        # Credit-gated broadcast: a word goes on the bus only when every PE's FIFO has a free word for it.
        credits = [Signal(range(self.broadcast_credits + 1), name=f"credits_{index}", init=self.broadcast_credits)
                   for index in range(self.pes)]
        queues = [SyncFIFO(width=bus.word_layout.size, depth=self.broadcast_credits) for _ in range(self.pes)]
        every_pe_can_take = Signal()
        broadcast_taken = Signal()
        m.d.comb += [
            every_pe_can_take.eq(Cat(credit != 0 for credit in credits).all()),
            bus.broadcast_mask.eq((1 << self.pes) - 1),
            bus.i_broadcast.valid.eq(common.o_read.valid & every_pe_can_take),
            bus.i_broadcast.payload.data.eq(common.o_read.payload.data),
            bus.i_broadcast.payload.end.eq(common.o_read.payload.end),
            common.o_read.ready.eq(bus.i_broadcast.ready & every_pe_can_take),
            broadcast_taken.eq(bus.i_broadcast.valid & bus.i_broadcast.ready),
            common.i_write.valid.eq(bus.o_merge.valid),
            common.i_write.payload.data.eq(bus.o_merge.payload.data),
            common.i_write.payload.end.eq(bus.o_merge.payload.end),
            bus.o_merge.ready.eq(common.i_write.ready),
        ]

        turn = Signal(range(self.pes))
        for index, pe in enumerate(self.pe):
            own = self.vaults[1 + index]
            packer1, packer2, unpacker = self.packer1[index], self.packer2[index], self.unpacker[index]
            m.submodules[f"pe_{index}"] = pe
            m.submodules[f"pe_{index}_packer1"] = packer1
            m.submodules[f"pe_{index}_packer2"] = packer2
            m.submodules[f"pe_{index}_unpacker"] = unpacker
            self._join(m, sequencer.o_pe_program[index], pe.i_program, autonomous)
            self._join(m, self.i_pe_program[index], pe.i_program, ~autonomous)
            m.d.comb += [
                packer1.wide.eq(config.wide), packer1.block.eq(config.in1_block),
                packer2.wide.eq(config.wide), packer2.block.eq(config.in2_block),
                unpacker.wide.eq(config.wide), unpacker.rows.eq(config.out_rows),
            ]
            queue = queues[index]
            m.submodules[f"pe_{index}_broadcast_fifo"] = queue
            m.d.comb += [
                queue.w_data.eq(bus.o_broadcast[index].payload),
                queue.w_en.eq(bus.o_broadcast[index].valid),
                bus.o_broadcast[index].ready.eq(queue.w_rdy),
            ]
            broadcast = stream.Signature(bus.word_layout).create(path=(f"pe_{index}_broadcast",))
            m.d.comb += [
                broadcast.valid.eq(queue.r_rdy),
                broadcast.payload.eq(queue.r_data),
                queue.r_en.eq(broadcast.ready),
            ]
            freed = queue.r_rdy & queue.r_en
            m.d.sync += credits[index].eq(credits[index] + freed - broadcast_taken)
            self._join(m, own.o_read, packer1.i_word, config.local_in1)
            self._join(m, own.o_read, packer2.i_word, ~config.local_in1)
            self._join(m, broadcast, packer1.i_word, config.broadcast_in1 & ~config.local_in1)
            self._join(m, broadcast, packer2.i_word, ~config.broadcast_in1 & config.local_in1)
            m.d.comb += [
                pe.i_in1.valid.eq(packer1.o_row.valid),
                pe.i_in1.payload.data.eq(packer1.o_row.payload.data[0]),
                pe.i_in1.payload.last.eq(packer1.o_row.payload.last),
                packer1.o_row.ready.eq(pe.i_in1.ready),
            ]
            wiring.connect(m, packer2.o_row, pe.i_in2)
            wiring.connect(m, pe.o_result, unpacker.i_row)

            words, send = unpacker.o_word, bus.i_merge[index]
            self._join(m, words, send, config.merge)
            self._join(m, words, own.i_write, ~config.merge)
            m.d.comb += bus.merge_request[index].eq(config.merge & (turn == index) & send.valid)
            with m.If(send.valid & send.ready & send.payload.end):
                m.d.sync += turn.eq((index + 1) % self.pes)
        return m
