"""Formal wrapper of the shared stream stage: the stream rules and every transaction passed once, in order."""
from amaranth import Elaboratable, Module, Signal, unsigned
from amaranth.hdl import Assert, Assume, Cover, Fragment

from ...errors import ParameterError
from ...spec import stream_stage as spec
from ..stream_stage import StreamStage

__all__ = ["PROPERTIES", "StreamStageProperties"]

#: The groups of properties, each asserted unless left out (a test breaks one at a time): ``output_rules``
#: (valid and payload hold until ready), ``transactions`` (none lost, made up or duplicated; order kept),
#: ``ready`` (``i_stream.ready`` exactly when the stage has room) and ``lemmas`` (the skid register against
#: the model: what makes the k-induction go through).
PROPERTIES = ("output_rules", "transactions", "ready", "lemmas")

#: Registers of :class:`~trainforge.hw.stream_stage.StreamStage` that the induction lemmas name.
INTERNAL_REGISTERS = ("skid_valid", "skid_payload")


class StreamStageProperties(Elaboratable):
    """A stream stage between a free producer and a free consumer, with its properties.

    Assumed: the producer keeps the stream rules (once ``i_stream.valid`` is
    high, valid and payload hold until the stage is ready). Asserted:

    - the output keeps the stream rules (``o_stream.valid`` and payload hold until ready);
    - ghost counters of accepted and emitted transactions differ by at most
      :data:`~trainforge.spec.stream_stage.CAPACITY`, and the output is valid
      exactly when they differ (no transaction lost, none made up);
    - a two-entry FIFO model follows the accepted payloads: every emitted
      payload is the oldest one not yet emitted (none duplicated, order kept).

    A reset may come at any cycle; it empties the stage and the model alike.
    The payloads are free values, so the proof holds for any data (the stage
    never looks at them). For k-induction the wrapper also states how the
    stage's skid register relates to the model (lemmas on the registers of
    :data:`INTERNAL_REGISTERS`, found by name in the elaborated stage); a
    stage without them is checked on the ports only.

    Parameters
    ----------
    width : int
        Payload width of the stage under proof.
    stage : wiring.Component, optional
        The stage under proof, with ``i_stream`` and ``o_stream`` of ``unsigned(width)`` payloads;
        a :class:`~trainforge.hw.stream_stage.StreamStage` when omitted (a deliberately broken one
        shows that the proof can fail).

    properties : sequence of str
        The groups of :data:`PROPERTIES` to assert (all by default).

    Attributes
    ----------
    i_valid, i_payload, o_ready : Signal
        The free inputs: producer and consumer.
    ports : list of Value
    """

    def __init__(self, width=4, stage=None, properties=PROPERTIES):
        unknown = set(properties) - set(PROPERTIES)
        if unknown:
            raise ParameterError(f"unknown stream stage properties {sorted(unknown)}; known: {', '.join(PROPERTIES)}")
        self.properties = tuple(properties)
        self.width = width
        self.stage = StreamStage(unsigned(width)) if stage is None else stage
        self.i_valid = Signal()
        self.i_payload = Signal(width)
        self.o_ready = Signal()
        self.ports = [self.i_valid, self.i_payload, self.o_ready]

    def elaborate(self, platform):
        m = Module()

        def check(group, condition, message):
            # src_loc_at=1: a failure names the line that called check(), not this one.
            if group in self.properties:
                m.d.comb += Assert(condition, message, src_loc_at=1)

        fragment = Fragment.get(self.stage, platform)
        internal = {}
        for statements in fragment.statements.values():
            for statement in statements:
                for signal in statement._lhs_signals():
                    if signal.name in INTERNAL_REGISTERS:
                        internal[signal.name] = signal
        m.submodules.stage = fragment
        stage = self.stage
        m.d.comb += [
            stage.i_stream.valid.eq(self.i_valid),
            stage.i_stream.payload.eq(self.i_payload),
            stage.o_stream.ready.eq(self.o_ready),
        ]
        i_ready = stage.i_stream.ready
        o_valid = stage.o_stream.valid
        o_payload = stage.o_stream.payload
        accept = self.i_valid & i_ready
        emit = o_valid & self.o_ready

        # The cycle before: the stream rules are about what held then.
        past_known = Signal()
        past_i_valid, past_i_ready, past_o_valid, past_o_ready = Signal(), Signal(), Signal(), Signal()
        past_i_payload = Signal(self.width)
        past_o_payload = Signal(self.width)
        m.d.sync += [
            past_known.eq(1),
            past_i_valid.eq(self.i_valid), past_i_ready.eq(i_ready), past_i_payload.eq(self.i_payload),
            past_o_valid.eq(o_valid), past_o_ready.eq(self.o_ready), past_o_payload.eq(o_payload),
        ]
        with m.If(past_known & past_i_valid & ~past_i_ready):
            m.d.comb += Assume(self.i_valid & (self.i_payload == past_i_payload))
        with m.If(past_known & past_o_valid & ~past_o_ready):
            check("output_rules", o_valid, "o_stream.valid dropped before o_stream.ready")
            check("output_rules", o_payload == past_o_payload, "o_stream.payload changed before o_stream.ready")

        # Ghost counters, and the FIFO model of the transactions inside (oldest first).
        accepted = Signal(4)
        emitted = Signal(4)
        held = Signal(4)
        oldest = Signal(self.width, reset_less=True)
        newest = Signal(self.width, reset_less=True)
        m.d.comb += held.eq(accepted - emitted)
        with m.If(accept):
            m.d.sync += accepted.eq(accepted + 1)
        with m.If(emit):
            m.d.sync += [emitted.eq(emitted + 1), oldest.eq(newest)]
            with m.If(accept):
                with m.If(held == 1):
                    m.d.sync += oldest.eq(self.i_payload)
                with m.Else():
                    m.d.sync += newest.eq(self.i_payload)
        with m.Elif(accept):
            with m.If(held == 0):
                m.d.sync += oldest.eq(self.i_payload)
            with m.Else():
                m.d.sync += newest.eq(self.i_payload)

        check("transactions", held <= spec.CAPACITY, "more transactions inside than the stage holds")
        check("transactions", o_valid == (held != 0), "o_stream.valid is not 'a transaction is inside'")
        check("transactions", ~o_valid | (o_payload == oldest), "o_stream.payload is not the oldest inside")
        check("ready", i_ready == (held < spec.CAPACITY), "i_stream.ready is not 'the stage has room'")
        m.d.comb += Cover(emit & (held == spec.CAPACITY))
        if set(internal) == set(INTERNAL_REGISTERS):
            skid_valid, skid_payload = internal["skid_valid"], internal["skid_payload"]
            check("lemmas", skid_valid == (held == spec.CAPACITY), "lemma: the skid register is full iff the stage is")
            check("lemmas", ~skid_valid | (skid_payload == newest), "lemma: the skid register holds the newest")
        return m
