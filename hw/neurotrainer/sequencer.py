"""The iBuffer and layer sequencer of NeuroTrainer (Section 4, Fig. 12): a multi-layer program run without the host."""
from amaranth import Module, Signal
from amaranth.lib import enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ...spec.neurotrainer import sequencer as spec
from .program_queue import NTProgramQueue

__all__ = ["NTSequencer"]


class SequencerState(enum.Enum, shape=3):
    """Where the sequencer is: waiting for ``i_start``, reading a layer's table entry, taking it, issuing
    the layer's program words, letting the system's ``idle`` settle, waiting for ``idle``."""
    IDLE = 0
    FETCH = 1
    LATCH = 2
    ISSUE = 3
    SETTLE = 4
    WAIT_IDLE = 5


class NTSequencer(wiring.Component):
    """The iBuffer: per-consumer program queues and a layer table, run layer by layer.

    The host loads, through ``i_load`` (only while the sequencer is not ``busy``), every queue's
    program words (``spec/neurotrainer/sequencer.py``: a queue per vault read PMAG, per vault
    write PMAG and per PE) in the order they run, and one layer table entry per layer (the
    layer's ``config`` and each queue's word count). ``i_start`` carries the number of layers
    ``L``; the sequencer then, for layers ``0 .. L - 1`` in turn:

    1. reads the layer's table entry and sets ``o_config`` to its ``config`` (held until the next
       layer's);
    2. has every queue send the layer's number of words on its stream, all queues at once,
       each in its own order (a PMAG or PE takes its words as it is ready for them);
    3. once every word is taken, waits :data:`~trainforge.spec.neurotrainer.sequencer.IDLE_SETTLE_CYCLES`
       cycles and then until ``system_idle`` (every PMAG done, every result written) is high.

    The queues' read pointers start at word 0 on ``i_start`` and carry on from layer to layer.
    ``busy`` is high from the accepted ``i_start`` until the last layer's ``system_idle``.

    Parameters
    ----------
    pes : int
        PEs of the system (queues: ``2 (pes + 1) + pes``).
    max_layers : int
        Entries of the layer table.
    queue_depth : int
        Program words per queue.

    Members
    -------
    i_load : In(stream.Signature(load_layout))
        ``target`` (a queue number, or ``layer_table_target``), ``address``, ``data``.
    i_start : In(stream.Signature(range(max_layers + 1)))
        The number of layers to run (accepted when not busy).
    system_idle : In(1)
    o_read_program, o_write_program : Out(stream.Signature(pmag_program_layout)).array(pes + 1)
    o_pe_program : Out(stream.Signature(32)).array(pes)
    o_config : Out(config_layout)
        The running layer's ``config`` (held after the run).
    o_layer : Out(range(max_layers + 1))
        The running layer's number (after a run: the number of layers run).
    busy : Out(1)
    """

    PARAMS = spec.PARAMS

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.config_layout = spec.config_layout()
        self.program_layout = spec.pmag_program_layout()
        self.entry_layout = spec.entry_layout(self.params)
        self.load_layout = spec.load_layout(self.params)
        super().__init__({
            "i_load": In(stream.Signature(self.load_layout)),
            "i_start": In(stream.Signature(range(self.max_layers + 1))),
            "system_idle": In(1),
            "o_read_program": Out(stream.Signature(self.program_layout)).array(self.pes + 1),
            "o_write_program": Out(stream.Signature(self.program_layout)).array(self.pes + 1),
            "o_pe_program": Out(stream.Signature(spec.PE_PROGRAM_BITS)).array(self.pes),
            "o_config": Out(self.config_layout),
            "o_layer": Out(range(self.max_layers + 1)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        widths = spec.queue_widths(self.pes)
        queues = [NTProgramQueue(width=width, depth=self.queue_depth) for width in widths]
        outputs = [*self.o_read_program, *self.o_write_program, *self.o_pe_program]
        for name, queue, output in zip(spec.queue_names(self.pes), queues, outputs):
            m.submodules[f"queue_{name}"] = queue
            m.d.comb += [
                output.valid.eq(queue.o_word.valid),
                output.payload.eq(queue.o_word.payload),
                queue.o_word.ready.eq(output.ready),
            ]
        m.submodules.layer_table = table = Memory(shape=self.entry_layout, depth=self.max_layers, init=[])
        table_write, table_read = table.write_port(), table.read_port()

        state = Signal(SequencerState)
        layer = Signal(range(self.max_layers + 1))
        layers = Signal(range(self.max_layers + 1))
        settle = Signal(range(spec.IDLE_SETTLE_CYCLES + 1))
        config = Signal(self.config_layout)
        every_queue_done = Signal()

        # Host loads, only while idle: the target queue's memory or the layer table.
        load = self.i_load.payload
        m.d.comb += self.i_load.ready.eq(state == SequencerState.IDLE)
        for number, queue in enumerate(queues):
            m.d.comb += [
                queue.i_load.valid.eq(self.i_load.valid & self.i_load.ready & (load.target == number)),
                queue.i_load.payload.address.eq(load.address),
                queue.i_load.payload.data.eq(load.data),
            ]
        m.d.comb += [
            table_write.en.eq(self.i_load.valid & self.i_load.ready & (load.target == spec.layer_table_target(
                self.params))),
            table_write.addr.eq(load.address),
            table_write.data.eq(load.data),
            table_read.addr.eq(layer),
            table_read.en.eq(state == SequencerState.FETCH),
            every_queue_done.eq(sum(queue.done for queue in queues) == len(queues)),
            self.o_config.eq(config),
            self.o_layer.eq(layer),
            self.busy.eq(state != SequencerState.IDLE),
            self.i_start.ready.eq(state == SequencerState.IDLE),
        ]
        entry = table_read.data
        for number, queue in enumerate(queues):
            m.d.comb += [
                queue.restart.eq(self.i_start.valid & self.i_start.ready),
                queue.issue.eq(state == SequencerState.LATCH),
                queue.count.eq(entry.counts[number]),
            ]

        with m.If(state == SequencerState.IDLE):
            with m.If(self.i_start.valid & (self.i_start.payload != 0)):
                m.d.sync += [layer.eq(0), layers.eq(self.i_start.payload), state.eq(SequencerState.FETCH)]
        with m.Elif(state == SequencerState.FETCH):
            m.d.sync += state.eq(SequencerState.LATCH)
        with m.Elif(state == SequencerState.LATCH):
            m.d.sync += [config.eq(entry.config), state.eq(SequencerState.ISSUE)]
        with m.Elif(state == SequencerState.ISSUE):
            with m.If(every_queue_done):
                m.d.sync += [settle.eq(spec.IDLE_SETTLE_CYCLES), state.eq(SequencerState.SETTLE)]
        with m.Elif(state == SequencerState.SETTLE):
            m.d.sync += settle.eq(settle - 1)
            with m.If(settle == 1):
                m.d.sync += state.eq(SequencerState.WAIT_IDLE)
        with m.Elif(state == SequencerState.WAIT_IDLE):
            with m.If(self.system_idle):
                m.d.sync += layer.eq(layer + 1)
                with m.If(layer + 1 == layers):
                    m.d.sync += state.eq(SequencerState.IDLE)
                with m.Else():
                    m.d.sync += state.eq(SequencerState.FETCH)
        return m
