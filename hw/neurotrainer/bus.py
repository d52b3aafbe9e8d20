"""Broadcast/merge bus between the common vault and the PEs (NeuroTrainer, Section 3.4)."""
from amaranth import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec.neurotrainer import bus as spec
from ...spec.neurotrainer.bus import LATENCY
from ..stream_stage import StreamStage

__all__ = ["NTBus"]


class NTBus(wiring.Component):
    """One shared 4-stage pipelined bus: broadcast (common vault to PEs) or merge (PEs to common vault).

    Every word is ``{data, end}``; ``end = 1`` marks the END-MARK word that closes a stream
    (its ``data`` is 0xFFFF or 0xFFFFFFFF by convention; the bus forwards it unchanged and looks
    only at ``end``). The three-way handshake REQ-ACK-SEND maps onto the ports as follows:

    - broadcast: REQ is ``i_broadcast.valid`` (the common vault has a word), ACK is
      ``i_broadcast.ready``, SEND is the transfer; on the PE side each enabled PE receives the
      word on its own ``o_broadcast[i]`` stream;
    - merge: REQ is ``merge_request[i]`` (PE ``i`` wants to write back), ACK is
      ``merge_grant[i]`` (a register), SEND is a transfer on ``i_merge[i]``; the words leave on
      ``o_merge`` towards the common vault, tagged with their ``source`` PE.

    Exact rules, evaluated every cycle:

    1. The input stage takes at most one word per cycle, when the pipeline advances (its output
       stage is empty or its word retires in this cycle): the broadcast word if
       ``i_broadcast.valid``, otherwise the granted PE's word if it is valid. Broadcast has
       priority word by word: a merge burst pauses while the common vault offers words.
    2. A broadcast word goes to the PEs whose bit of ``broadcast_mask`` is set in the cycle the
       bus accepts it. At the output each such PE gets it exactly once on ``o_broadcast[i]``
       (PEs may accept it in different cycles); the word retires when every one of them has
       accepted it. A word with an empty mask retires as soon as it reaches the output.
    3. ``merge_grant`` is one-hot or zero. In a cycle with no grant and ``i_broadcast.valid``
       low (REQs are ignored during broadcast), the lowest-index PE with ``merge_request`` set
       is granted from the next cycle on. The grant holds until the bus accepts that PE's word
       with ``end = 1`` (the END-MARK closes the burst); it is zero in the next cycle, which
       is the earliest cycle of the next arbitration. REQ is not looked at while a PE holds
       the grant.
    4. The pipeline has :data:`LATENCY` = 4 register stages: a word accepted in cycle ``c``
       is at the output in cycle ``c + 4``. The last one is a
       :class:`~trainforge.hw.stream_stage.StreamStage` per output stream (registered
       ``ready``: no input's ``ready`` depends on an output's ``ready`` within a cycle). The
       whole pipeline stalls while its third register's word is not taken by the stages it
       goes to, so throughput is one word per cycle without backpressure.

    Reset clears the pipeline, the per-PE delivery flags and the grant.

    Parameters
    ----------
    pes : int
        Number of PEs on the bus.
    width : int
        Data width of a word, 16 or 32.

    Members
    -------
    i_broadcast : In(stream.Signature(word_layout))
        Words from the common vault to broadcast.
    broadcast_mask : In(pes)
        PEs that receive a broadcast word, sampled when the word is accepted.
    o_broadcast : Out(stream.Signature(word_layout)).array(pes)
        Broadcast words, one stream per PE.
    merge_request : In(pes)
        REQ of each PE for merge mode.
    merge_grant : Out(pes)
        ACK: the PE that owns the bus for merging (one-hot or zero).
    i_merge : In(stream.Signature(word_layout)).array(pes)
        Words each PE writes back (SEND); only the granted PE's are accepted.
    o_merge : Out(stream.Signature(merge_layout))
        Merged words to the common vault.

    Attributes
    ----------
    word_layout : data.StructLayout
        ``data`` (width), ``end`` (1).
    merge_layout : data.StructLayout
        ``data`` (width), ``end`` (1), ``source`` (index of the sending PE).
    """

    PARAMS = spec.PARAMS

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.word_layout = spec.word_layout(self.params)
        self.merge_layout = spec.merge_layout(self.params)
        super().__init__({
            "i_broadcast": In(stream.Signature(self.word_layout)),
            "broadcast_mask": In(self.pes),
            "o_broadcast": Out(stream.Signature(self.word_layout)).array(self.pes),
            "merge_request": In(self.pes),
            "merge_grant": Out(self.pes),
            "i_merge": In(stream.Signature(self.word_layout)).array(self.pes),
            "o_merge": Out(stream.Signature(self.merge_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        stage_layout = data.StructLayout({
            "valid": 1,
            "broadcast": 1,
            "data": unsigned(self.width),
            "end": 1,
            "mask": unsigned(self.pes),
            "source": range(self.pes),
        })
        # LATENCY - 1 pipeline registers, then the shared stream stages (the last of the LATENCY stages).
        stages = [Signal(stage_layout, name=f"stage_{index + 1}") for index in range(LATENCY - 1)]
        last = stages[-1]

        # Output stages: per-PE delivery of a broadcast word, or one merge transfer. Their ready
        # is a register, so nothing here depends on an output's ready within a cycle.
        broadcast_stages = []
        for pe in range(self.pes):
            m.submodules[f"broadcast_stage_{pe}"] = broadcast_stage = StreamStage(self.word_layout)
            wiring.connect(m, broadcast_stage.o_stream, wiring.flipped(self.o_broadcast[pe]))
            broadcast_stages.append(broadcast_stage.i_stream)
        m.submodules.merge_stage = merge_stage = StreamStage(self.merge_layout)
        wiring.connect(m, merge_stage.o_stream, wiring.flipped(self.o_merge))
        delivered = Signal(self.pes)   # PEs whose stage already took the last register's broadcast word
        pending = Signal(self.pes)
        done = Signal(self.pes)
        accepted = Signal(self.pes)
        m.d.comb += pending.eq(last.mask & ~delivered)
        for pe, port in enumerate(broadcast_stages):
            m.d.comb += [
                port.valid.eq(last.valid & last.broadcast & pending[pe]),
                port.payload.data.eq(last.data),
                port.payload.end.eq(last.end),
                accepted[pe].eq(port.valid & port.ready),
                done[pe].eq(~pending[pe] | port.ready),
            ]
        merge_port = merge_stage.i_stream
        m.d.comb += [
            merge_port.valid.eq(last.valid & ~last.broadcast),
            merge_port.payload.data.eq(last.data),
            merge_port.payload.end.eq(last.end),
            merge_port.payload.source.eq(last.source),
        ]
        retire = Signal()
        m.d.comb += retire.eq(last.valid & Mux(last.broadcast, done.all(), merge_port.ready))
        with m.If(retire):
            m.d.sync += delivered.eq(0)
        with m.Else():
            m.d.sync += delivered.eq(delivered | accepted)

        advance = Signal()
        m.d.comb += advance.eq(~last.valid | retire)

        # Input stage: the broadcast word first, else the granted PE's word.
        grant = self.merge_grant
        merge_valid = Signal()
        merge_word = Signal(self.word_layout)
        merge_source = Signal(range(self.pes))
        for pe in range(self.pes):
            with m.If(grant[pe]):
                m.d.comb += [
                    merge_valid.eq(self.i_merge[pe].valid),
                    merge_word.eq(self.i_merge[pe].payload),
                    merge_source.eq(pe),
                ]
        broadcasting = self.i_broadcast.valid
        take_merge = Signal()
        m.d.comb += [
            self.i_broadcast.ready.eq(advance),
            take_merge.eq(advance & ~broadcasting & merge_valid),
        ]
        for pe in range(self.pes):
            m.d.comb += self.i_merge[pe].ready.eq(advance & ~broadcasting & grant[pe])

        with m.If(advance):
            m.d.sync += [
                stages[0].valid.eq(broadcasting | take_merge),
                stages[0].broadcast.eq(broadcasting),
                stages[0].data.eq(Mux(broadcasting, self.i_broadcast.payload.data, merge_word.data)),
                stages[0].end.eq(Mux(broadcasting, self.i_broadcast.payload.end, merge_word.end)),
                stages[0].mask.eq(self.broadcast_mask),
                stages[0].source.eq(merge_source),
            ]
            m.d.sync += [later.eq(earlier) for earlier, later in zip(stages, stages[1:])]

        # Merge arbitration (REQ -> registered ACK): lowest index first, held until the END-MARK.
        with m.If(grant == 0):
            with m.If(~broadcasting):
                for pe in reversed(range(self.pes)):
                    with m.If(self.merge_request[pe]):
                        m.d.sync += grant.eq(1 << pe)
        with m.Elif(take_merge & merge_word.end):
            m.d.sync += grant.eq(0)
        return m
