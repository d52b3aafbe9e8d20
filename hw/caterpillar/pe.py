"""LAC processing element of CATERPILLAR (Fig. 3(c)): a MAC unit, a local SRAM and the bus ports."""
from amaranth import Module, Mux, Signal, signed, unsigned
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from ...spec.caterpillar import PE_PARAMS, MacOp, addr_width
from .mac import MAC_UNITS

__all__ = ["MacOp", "CPPE"]


class CPPE(wiring.Component):
    """One PE of the linear algebra core: MAC unit, local SRAM, accumulator and reduction register.

    The PE is a two-stage slice of the core's pipeline, advanced by ``en``:

    - **issue**: ``rd_addr`` is read from the local SRAM (synchronous read);
      ``wr_en`` writes ``wr_data`` at ``wr_addr`` in the same cycle;
    - **execute** (one cycle later): ``mac_op`` selects the operands, the MAC
      adds their product to the accumulator (or to zero with ``mac_clear``);
      with ``handoff`` the new sum is also copied to the reduction register
      ``red``, which frees the accumulator for the next output block; with
      ``red_add`` (and no ``handoff``) ``red`` adds ``red_in``, a partial sum
      arriving on a bus or a neighbour link.

    The buses are ``acc_width`` wide; a multiplier operand taken from a bus is
    its low ``width`` bits (a sign-extended operand).

    Parameters
    ----------
    width : int
        Operand (weight and activation) width, two's complement fixed point.
    acc_width : int
        Accumulator, reduction and bus width; sums wrap around.
    sram_depth : int
        Words of ``width`` bits in the local SRAM (the paper's 16 KB is 8192 16-bit words).
    mac : str
        MAC unit, a key of :data:`~trainforge.hw.caterpillar.mac.MAC_UNITS`.

    Members
    -------
    en : In(1)
        Advance the pipeline this cycle.
    rd_addr : In(unsigned(addr_width))
    wr_en : In(1)
    wr_addr : In(unsigned(addr_width))
    wr_data : In(signed(width))
    mac_op : In(MacOp)
        A :class:`MacOp`, execute stage.
    mac_clear, handoff, red_add : In(1)
        Execute-stage controls.
    row_bus, col_bus, red_in : In(signed(acc_width))
    mem_data : Out(signed(width))
        The word read in the issue stage, valid in the execute stage (held while ``en`` is low).
    acc, red : Out(signed(acc_width))
        The accumulator and the reduction register.
    mac_sum : Out(signed(acc_width))
        The MAC unit's result in the execute stage (what ``acc`` takes at the next enabled
        edge): the core's in-place weight update writes back ``mem_data`` minus its scaled value.
    """

    PARAMS = PE_PARAMS

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.addr_width = addr_width(self.sram_depth)
        super().__init__({
            "en": In(1),
            "rd_addr": In(unsigned(self.addr_width)),
            "wr_en": In(1),
            "wr_addr": In(unsigned(self.addr_width)),
            "wr_data": In(signed(self.width)),
            "mac_op": In(MacOp),
            "mac_clear": In(1),
            "handoff": In(1),
            "red_add": In(1),
            "row_bus": In(signed(self.acc_width)),
            "col_bus": In(signed(self.acc_width)),
            "red_in": In(signed(self.acc_width)),
            "mem_data": Out(signed(self.width)),
            "acc": Out(signed(self.acc_width)),
            "red": Out(signed(self.acc_width)),
            "mac_sum": Out(signed(self.acc_width)),
        })

    def elaborate(self, platform):
        m = Module()
        self.build_into(m, "pe")
        return m

    def build_into(self, m, prefix):
        """Add this PE's logic to module ``m`` (no submodule: a core stays one flat Verilog module).

        Parameters
        ----------
        m : Module
        prefix : str
            Name prefix of the PE's memory and internal signals, unique within ``m``.
        """
        # The component is used for its ports only, never elaborated as a submodule: tell
        # Amaranth's unused-elaboratable check.
        self._MustUse__silence = True
        m.submodules[f"{prefix}_sram"] = sram = memory.Memory(
            shape=signed(self.width), depth=self.sram_depth, init=[])
        write = sram.write_port()
        read = sram.read_port()
        m.d.comb += [
            write.en.eq(self.wr_en),
            write.addr.eq(self.wr_addr),
            write.data.eq(self.wr_data),
            read.en.eq(self.en),
            read.addr.eq(self.rd_addr),
            self.mem_data.eq(read.data),
        ]

        mac_unit = MAC_UNITS[self.mac](self.width, self.acc_width)
        row_operand = self.row_bus[:self.width].as_signed()
        col_operand = self.col_bus[:self.width].as_signed()
        first_is_row = (self.mac_op == MacOp.ROW_MEM) | (self.mac_op == MacOp.ROW_COL)
        second_is_col = self.mac_op == MacOp.ROW_COL
        mac_result = Signal(signed(self.acc_width), name=f"{prefix}_mac_result")
        accumulator = Signal(signed(self.acc_width), name=f"{prefix}_accumulator")
        reduction = Signal(signed(self.acc_width), name=f"{prefix}_reduction")
        m.d.comb += [
            mac_result.eq(mac_unit.multiply_accumulate(
                Mux(first_is_row, row_operand, col_operand),
                Mux(second_is_col, col_operand, read.data),
                Mux(self.mac_clear, 0, accumulator))),
            self.acc.eq(accumulator),
            self.red.eq(reduction),
            self.mac_sum.eq(mac_result),
        ]
        with m.If(self.en):
            with m.If(self.mac_op != MacOp.NONE):
                m.d.sync += accumulator.eq(mac_result)
            with m.If(self.handoff):
                m.d.sync += reduction.eq(mac_result)
            with m.Elif(self.red_add):
                m.d.sync += reduction.eq(mac_unit.add(reduction, self.red_in))

