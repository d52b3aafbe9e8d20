"""The interleaved FP32 accumulator of the FP MAC units (:mod:`trainforge.spec.mac`).

One FP32 adder of ``P`` register stages feeds ``P`` partial-sum registers
(``P`` = the PE's ``partial_sums``, :data:`~trainforge.spec.mac.PARTIAL_SUMS`),
and each row adds its sum to the partial that the row ``P`` before it wrote.
The adder's last step writes that partial directly (its last register stage
*is* the partial), so the loop partial -> the row's partial selected ->
adder -> partial is as long as the adder's stages and no longer: no stage
holds more than the pipelined adder's. With 8 partials the chosen partial and
the row's sum are registered first and the adder has 7 stages
(:func:`~trainforge.spec.mac.registers_addend`): the loop is 8 stages, the
choice among the partials in a stage of its own. A row's result is the
pairwise adder tree over the partials as they are after the row, a partial
not written since the clear counting as ``+0``, taken into a register (so
that the zeroing is not in front of the tree's first stage); the tree is
pipelined like the lane reduction.
"""
from amaranth import C, Cat, Mux, Signal

from ...spec import mac as spec
from ...spec.fp import FP32
from .add import fp32_add
from .stages import register_values

__all__ = ["InterleavedAccumulator"]


def _delayed(m, value, stages, enable, name):
    for stage in range(stages):
        value = register_values(m, {"d": value}, enable, f"{name}{stage}")["d"]
    return value


class InterleavedAccumulator:
    """The control of the interleaved accumulators of one PE or one tile, shared by its PEs' datapaths.

    Parameters
    ----------
    m : Module
        The PE's module.
    valid, clear, read : Value
        The flags of the row whose sum reaches the accumulator *next* cycle
        (registers of the stage before): a row is there, it starts a new sum,
        its result is wanted. They are registered here, so that the partial a
        row adds to is chosen by registers (a one-hot select made the cycle
        before) and not by logic at the head of the loop.
    enable : Value
        The PE's clock enable (every register here and in :meth:`add` obeys it).
    reduce : callable
        ``reduce(m, values, enable, name)``: the MAC unit's pipelined adder tree.
    partials : int
        Partial sums (1, 2, 4 or 8): the stages of the accumulating adder.
    name : str
        Prefix of the register names.

    Members
    -------
    result_valid : Signal
        A register: the result of a ``read`` row is at the output of :meth:`add` this cycle.
    """

    def __init__(self, m, valid, clear, read, enable, reduce, partials, name="accumulate"):
        stages = partials
        self.m, self.enable, self.reduce = m, enable, reduce
        self.partials = partials
        # The flags of the row at the accumulator's input.
        flags = register_values(m, {"valid": valid, "clear": clear, "read": read}, enable, f"{name}_row")
        # Rows since the last clear, before the row at the input: its partial unless it clears, and whether
        # every partial has been written.
        next_index = Signal(range(max(partials, 2)), name=f"{name}_next_index")
        all_written = Signal(name=f"{name}_all_written")
        index = Signal(range(max(partials, 2)), name=f"{name}_index")  # the row's partial
        adds_to_partial = Signal(name=f"{name}_adds_to_partial")       # the row adds to it (not to +0)
        last = index == partials - 1
        after_index = Signal(range(max(partials, 2)), name=f"{name}_after_index")
        after_all_written = Signal(name=f"{name}_after_all_written")
        m.d.comb += [
            index.eq(Mux(flags["clear"], 0, next_index)),
            adds_to_partial.eq(~flags["clear"] & all_written),
            after_index.eq(Mux(flags["valid"], Mux(last, 0, index + 1), next_index)),
            after_all_written.eq(Mux(flags["valid"], adds_to_partial | last, all_written)),
        ]
        with m.If(enable):
            m.d.sync += [next_index.eq(after_index), all_written.eq(after_all_written)]
        # The next row's partial, one-hot (all zero: it adds to +0), from the state after this row.
        early_index = Mux(clear, 0, after_index)
        self.select = register_values(m, {"select": Cat(
            ~clear & after_all_written & (early_index == k) for k in range(partials))}, enable,
            f"{name}_select")["select"]
        # Partials written after this row: all of them, or those up to the row's own.
        written = Cat(C(1, 1) if k == 0 else adds_to_partial | last | (index >= k) for k in range(partials))
        # Along the adder to the partials' write (stages - 1 registers), then one more to the tree's input.
        self.write_valid = _delayed(m, flags["valid"], stages - 1, enable, f"{name}_write_valid")
        self.write_index = _delayed(m, index, stages - 1, enable, f"{name}_write_index")
        self.written = _delayed(m, written, stages, enable, f"{name}_written")
        tree_stages = spec.reduce_partials_stages(partials)
        self.result_valid = _delayed(m, flags["valid"] & flags["read"], stages + 1 + tree_stages, enable,
                                     f"{name}_result_valid")

    def add(self, row_sum, name):
        """One PE's accumulator: ``row_sum`` (the lane sum, at the accumulator's input) in; its result out.

        Returns
        -------
        Value
            The FP32 bits of the result, meaningful when :attr:`result_valid` is high.
        """
        m, enable = self.m, self.enable
        partials = [Signal(FP32.width, name=f"{name}_partial{k}") for k in range(self.partials)]
        addend = Signal(FP32.width, name=f"{name}_addend")
        m.d.comb += addend.eq(Cat(*(
            Cat(*(self.select[k] & partial[bit] for k, partial in enumerate(partials))).any()
            for bit in range(FP32.width))))
        adder_stages = self.partials
        if spec.registers_addend(self.partials):
            operands = register_values(m, {"addend": addend, "row_sum": row_sum}, enable, f"{name}_operands")
            addend, row_sum, adder_stages = operands["addend"], operands["row_sum"], self.partials - 1
        total = fp32_add(m, addend, row_sum, adder_stages, enable, name=f"{name}_add", register_sum=False)
        for k, partial in enumerate(partials):
            with m.If(enable & self.write_valid & (self.write_index == k)):
                m.d.sync += partial.eq(total)
        # The partials after a row, those not written since its clear as +0, registered for the tree.
        masked = register_values(m, {f"p{k}": Mux(self.written[k], partial, C(0, FP32.width))
                                     for k, partial in enumerate(partials)}, enable, f"{name}_result_partials")
        if self.partials == 1:
            return masked["p0"]
        return self.reduce(self.m, list(masked.values()), enable, f"{name}_tree")
