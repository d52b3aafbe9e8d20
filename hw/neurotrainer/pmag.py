"""Programmable memory address generator (NeuroTrainer, Section 3.2, Fig. 4, Tables 2 and 3)."""
from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec.neurotrainer import pmag as spec
from ...spec.neurotrainer.pmag import LEVELS, SETUP_CYCLES, SOURCE_NAMES, WindowMode, end_mark
from ..stream_stage import StreamStage

__all__ = ["NTPMAG"]


class NTPMAG(wiring.Component):
    """Seven nested counters, decoders and an address function issuing a vault request stream.

    A program is loaded with one transfer on ``i_program``; the PMAG then walks the counters
    ``r1`` (outermost) .. ``r7`` (innermost), counter ``i`` from 0 to ``max[i]``, and for each
    counter tuple computes (Fig. 4)::

        p = src(s) + src(t)          q = src(u) + src(v)
        address = base + src(a)*stride[0] + src(b)*stride[1] + src(c)*stride[2] + src(d)*stride[3]

    where ``src(code)`` is 0 (code 0), ``r1..r7`` (1..7), ``const`` (8), ``p`` (9) or ``q`` (10)
    and any other code reads 0 (``s, t, u, v`` read 0 for ``p`` and ``q`` too). The two
    comparators of Table 3 test ``h_lo <= src(h) < h_hi`` and ``k_lo <= src(k) < k_hi``:
    with ``window = 1`` steps outside that window issue nothing (remove pad, partition), with
    ``window = 2`` they are issued with ``pad = 1`` (add pad), otherwise the window is not used.
    Each issued step sends ``(address, write, pad, end = 0)`` on ``o_request``; after the last
    tuple the END-MARK ``(0xFFFF or 0xFFFFFFFF by wide, write, 0, end = 1)`` closes the stream
    and the next program is accepted.

    The address and the window values ``h`` and ``k`` are computed without a multiplier in
    the stepping loop: they are linear in the counters, so each level keeps a register of
    each and adds its weight (a stride sum for the address, 0, 1 or 2 for ``h`` and ``k``)
    when it steps; a step at level ``i`` copies the sums to every inner level, whose counters
    wrap to 0. After a program is accepted,
    :data:`~trainforge.spec.neurotrainer.pmag.SETUP_CYCLES` cycles register the per-level
    weights, the ``const`` terms (the address's is the one multiplication) and the start values.

    Requests leave through a :class:`~trainforge.hw.stream_stage.StreamStage` (registered
    ``ready``, up to two requests held). One counter step per cycle: an issued step when the
    stage is ready, a skipped step in any cycle; the first request is valid :attr:`LATENCY`
    cycles after the program was accepted (the cycle model is
    :func:`~trainforge.golden.neurotrainer.pmag.transfer_cycles`).

    Parameters
    ----------
    counter_bits : int
        Width of every counter (16 in the paper); ``p`` and ``q`` are one bit wider.

    Members
    -------
    i_program : In(stream.Signature(program_layout))
        Programs, one per transfer; accepted only when the previous one has issued its END-MARK.
    o_request : Out(stream.Signature(request_layout))
        Read or write requests to the vault, each program's closed by an END-MARK.

    Attributes
    ----------
    program_layout : data.StructLayout
        ``max`` (7 x counter_bits), ``s t u v a b c d h k`` (4-bit source codes), ``const``
        (counter_bits), ``base`` (32), ``stride`` (4 x 32), ``h_lo h_hi k_lo k_hi``
        (counter_bits + 1), ``window`` (2), ``write`` (1), ``wide`` (1).
    request_layout : data.StructLayout
        ``address`` (32), ``write``, ``pad``, ``end``.
    program : Signal(program_layout)
        The loaded program (held while the PMAG is busy).
    counters : list of Signal(counter_bits)
        ``r1`` .. ``r7``.
    at_max : list of Signal
        Per counter: it is at its maximum (a register set with the counter, see :meth:`count`).
    busy, setup : Signal
        A program is loaded; the setup cycles left before its walk.

    The last five are the state that properties speak of (``trainforge.hw.neurotrainer.formal``).
    """

    PARAMS = spec.PARAMS

    #: Cycles from the acceptance of a program to its first request, without stalls.
    LATENCY = spec.LATENCY

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.program_layout = spec.program_layout(self.params)
        self.request_layout = spec.request_layout(self.params)
        self.program = Signal(self.program_layout, name="program")
        self.counters = [Signal(self.counter_bits, name=f"r{level + 1}") for level in range(LEVELS)]
        self.at_max = [Signal(name=f"r{level + 1}_at_max") for level in range(LEVELS)]
        self.busy = Signal(name="busy")
        self.setup = Signal(range(SETUP_CYCLES), name="setup")
        super().__init__({
            "i_program": In(stream.Signature(self.program_layout)),
            "o_request": Out(stream.Signature(self.request_layout)),
        })

    @staticmethod
    def count(counter, at_max, max_is_zero, max_less_one):
        """One counter's step: ``(next counter, next at_max)``. It wraps to 0 from its maximum, else
        increments; ``at_max`` is then ``max == 0`` after a wrap, ``counter == max - 1`` before an
        increment (``max_is_zero`` and ``max_less_one`` are registers of the program's ``max``)."""
        return Mux(at_max, 0, counter + 1), Mux(at_max, max_is_zero, counter == max_less_one)

    def elaborate(self, platform):
        m = Module()
        bits = self.counter_bits
        program, counters, at_max = self.program, self.counters, self.at_max

        # Every walked value is linear in the counters and ``const``: value = start + sum over levels
        # of r_i * level_weight[i], where a source's weight sums the weights of the selects that
        # read it, directly or through ``p``/``q`` (p and q never wrap: two counter_bits values
        # fit in counter_bits + 1 bits). The address weights are the strides of ``a..d``; the
        # window values ``h`` and ``k`` have weight 1. Weights depend on the program only and are
        # registered every cycle (setup cycles 1 and 2 leave them ready).
        def multiplicity(name, code):
            """How many times the source ``code`` enters ``select`` (0, 1 or 2): a 2-bit register
            (setup cycle 1)."""
            through_p = (program.s == code).as_unsigned() + (program.t == code).as_unsigned()
            through_q = (program.u == code).as_unsigned() + (program.v == code).as_unsigned()
            select = getattr(program, name)
            count = Signal(2, name=f"{name}_count_{code}")
            m.d.sync += count.eq(Mux(select == code, 1, Mux(select == SOURCE_NAMES["p"], through_p,
                                                            Mux(select == SOURCE_NAMES["q"], through_q, 0))))
            return count

        def weighted(count, weight, width):
            return Mux(count[1], (weight << 1)[:width], Mux(count[0], weight, 0))

        def stride_sum(code, name):
            total = Signal(32, name=name)
            terms = [weighted(multiplicity(select, code), program.stride[index], 32)
                     for index, select in enumerate("abcd")]
            m.d.sync += total.eq((terms[0] + terms[1]) + (terms[2] + terms[3]))
            return total

        level_strides = [stride_sum(level + 1, f"r{level + 1}_stride") for level in range(LEVELS)]
        const_stride = stride_sum(SOURCE_NAMES["const"], "const_stride")
        window_weights = {select: [multiplicity(select, level + 1) for level in range(LEVELS)]
                          for select in "hk"}
        # Setup cycle 3: the const terms (the address's is the only multiplication, off the stepping loop).
        const_term = Signal(32)
        m.d.sync += const_term.eq((program.const * const_stride)[:32])
        window_const = {select: Signal(bits + 1, name=f"{select}_const") for select in "hk"}
        m.d.sync += [window_const[select].eq(weighted(multiplicity(select, SOURCE_NAMES["const"]),
                                                      program.const, bits + 1))
                     for select in "hk"]

        # Odometer: r7 fastest; the last tuple is the one with every counter at its maximum.
        # "At its maximum" is a register per counter, set with the counter: after a wrap to 0 it
        # is ``max == 0``, after an increment ``r == max - 1`` (both compare registers only).
        max_is_zero = [Signal(name=f"r{level + 1}_max_is_zero") for level in range(LEVELS)]
        max_less_one = [Signal(bits, name=f"r{level + 1}_max_less_one") for level in range(LEVELS)]
        m.d.sync += [max_is_zero[level].eq(program.max[level] == 0) for level in range(LEVELS)]
        m.d.sync += [max_less_one[level].eq(program.max[level] - 1) for level in range(LEVELS)]
        last_tuple = Signal()
        m.d.comb += last_tuple.eq(Cat(*at_max).all())
        inner_at_max = [Cat(*at_max[level + 1:]).all() if level + 1 < LEVELS else Const(1)
                        for level in range(LEVELS)]
        stepping_level = [Signal(name=f"r{level + 1}_steps") for level in range(LEVELS)]
        m.d.comb += [stepping_level[level].eq(inner_at_max[level] & ~at_max[level]) for level in range(LEVELS)]

        # Per-level registers of each walked value: level[i] = start + sum over j <= i of
        # r_j * weight[j]; the current value is the innermost one. A step at level i adds
        # weight[i] to level[i] and copies the sum to every inner level (whose counters wrap to
        # 0): adders only, one per level.
        walks = []

        def walk(name, width, weights):
            levels = [Signal(width, name=f"{name}_r{level + 1}") for level in range(LEVELS)]
            stepped = [Signal(width, name=f"{name}_r{level + 1}_stepped") for level in range(LEVELS)]
            m.d.comb += [stepped[level].eq(levels[level] + weights[level]) for level in range(LEVELS)]
            walks.append((levels, stepped))
            return levels

        address_levels = walk("address", 32, level_strides)
        window_levels = {select: walk(select, bits + 1, window_weights[select]) for select in "hk"}
        address = address_levels[-1]
        h = window_levels["h"][-1]
        k = window_levels["k"][-1]

        # The window comparators, from registers.
        in_window = Signal()
        skip_mode = Signal()
        pad_mode = Signal()
        inside = Signal()
        m.d.comb += [
            in_window.eq((h >= program.h_lo) & (h < program.h_hi) & (k >= program.k_lo) & (k < program.k_hi)),
            skip_mode.eq(program.window == WindowMode.SKIP),
            pad_mode.eq(program.window == WindowMode.PAD),
            inside.eq(in_window | ~(skip_mode | pad_mode)),
        ]

        # The walk runs one step ahead of the issue: the look-ahead register holds the next step
        # (its address, whether it is inside the window, whether it is the END-MARK). Issuing
        # from it keeps the comparators and the counter logic off the path to the stage.
        ahead_valid = Signal()
        ahead_address = Signal(32)
        ahead_inside = Signal()
        ahead_end = Signal()

        # Requests leave through the shared stream stage; its ready is a register and its valid
        # comes from the look-ahead register only.
        m.submodules.output_stage = output_stage = StreamStage(self.request_layout)
        wiring.connect(m, output_stage.o_stream, wiring.flipped(self.o_request))
        busy, setup = self.busy, self.setup
        walking = Signal()
        marking = Signal()
        walked = Signal()
        issue = Signal()
        step = Signal()
        advance = Signal()
        request = output_stage.i_stream.payload
        m.d.comb += [
            issue.eq(ahead_valid & (ahead_end | ahead_inside | pad_mode)),
            output_stage.i_stream.valid.eq(issue),
            request.address.eq(Mux(ahead_end, Mux(program.wide, end_mark(True), end_mark(False)), ahead_address)),
            request.write.eq(program.write),
            request.pad.eq(~ahead_end & ~ahead_inside),
            request.end.eq(ahead_end),
            # A skipped step takes its cycle; an issued one waits for the stage.
            step.eq(ahead_valid & (~issue | output_stage.i_stream.ready)),
            advance.eq(~ahead_valid | step),
            walking.eq(busy & (setup == 0) & ~walked),
            self.i_program.ready.eq(~busy),
        ]
        with m.If(advance):
            m.d.sync += [
                ahead_valid.eq(walking),
                ahead_address.eq(address),
                ahead_inside.eq(inside),
                ahead_end.eq(marking),
            ]

        # The stepping level's sum, one selection per walked value shared by every level: at most one
        # level steps (``stepping_level`` is one-hot or zero), and a level loads only when the
        # stepping level is itself or an outer one, so each level's own selection would be this one.
        next_values = []
        for name, (levels, stepped) in zip(("address", "h", "k"), walks):
            next_value = Signal(len(levels[0]), name=f"{name}_next")
            selected = 0
            for level in range(LEVELS):
                selected = selected | Mux(stepping_level[level], stepped[level], 0)
            m.d.comb += next_value.eq(selected)
            next_values.append(next_value)

        # Control: idle (accepting a program), setting up, walking the counters into the
        # look-ahead register, then the END-MARK; the program ends when its END-MARK is issued.
        starts = [program.base + const_term, window_const["h"], window_const["k"]]
        with m.If(~busy):
            with m.If(self.i_program.valid):
                m.d.sync += [
                    program.eq(self.i_program.payload),
                    busy.eq(1),
                    setup.eq(SETUP_CYCLES - 1),
                    marking.eq(0),
                    walked.eq(0),
                    *(counter.eq(0) for counter in counters),
                ]
        with m.Elif(setup != 0):
            m.d.sync += setup.eq(setup - 1)
            with m.If(setup == 1):
                for (levels, _), start in zip(walks, starts):
                    m.d.sync += [register.eq(start) for register in levels]
                m.d.sync += [at_max[level].eq(max_is_zero[level]) for level in range(LEVELS)]
        with m.Else():
            with m.If(walking & advance & ~marking):
                for level in range(LEVELS):
                    with m.If(inner_at_max[level]):
                        counter, counter_at_max = self.count(counters[level], at_max[level], max_is_zero[level],
                                                             max_less_one[level])
                        m.d.sync += [counters[level].eq(counter), at_max[level].eq(counter_at_max)]
                    # The stepping level is one of the outer ones (or this one), or none at the last tuple:
                    # the level takes the stepping level's sum.
                    with m.If(Cat(*stepping_level[:level + 1]).any()):
                        for (levels, _), next_value in zip(walks, next_values):
                            m.d.sync += levels[level].eq(next_value)
                with m.If(last_tuple):
                    m.d.sync += marking.eq(1)
            with m.If(walking & advance & marking):
                m.d.sync += walked.eq(1)
            with m.If(step & ahead_end):
                m.d.sync += busy.eq(0)
        return m
