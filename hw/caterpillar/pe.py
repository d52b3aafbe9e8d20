"""LAC processing element of CATERPILLAR (Fig. 3(c)): a MAC unit, a local SRAM and the bus ports."""
from amaranth import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from ...spec.caterpillar import PE_MAC_LATENCY, PE_PARAMS, PE_READ_LATENCY, MacOp, addr_width, pe_accumulate_latency
from ..ecp5_output_registered_bram import build_output_registered_bram, uses_output_registered_bram
from ..fp.stages import register_values
from ..mac import FloatMAC
from .mac import MAC_UNITS

__all__ = ["MacOp", "CPPE"]

# The registers below are the SRAM output register (read latency 2) and the multiplier's input and
# output registers (MAC latency 2): the spec's latencies describe this structure.
assert (PE_READ_LATENCY, PE_MAC_LATENCY) == (2, 2), "the spec's PE latencies differ from this pipeline"


class CPPE(wiring.Component):
    """One PE of the linear algebra core: MAC unit, local SRAM, accumulator and reduction register.

    The PE is a pipelined slice of the core's pipeline; every register
    advances only in a cycle with ``en`` high (a low cycle changes nothing):

    - **issue** (cycle ``t``): with ``rd_en``, ``rd_addr`` is read from the
      local SRAM (synchronous read; without it the SRAM is not read and its
      read port holds the last word read, which the output register then
      takes again); ``wr_en`` writes ``wr_data`` at ``wr_addr`` in the same
      cycle;
    - **SRAM output register** (``t + 1``): the read word is registered (the
      DP16KD output register), so ``mem_data`` carries it in cycle
      ``t + PE_READ_LATENCY``;
    - **operand stage** (``t + 2``): ``mac_op`` selects the operands from the
      buses and ``mem_data``; they enter the multiplier's input registers,
      with ``mac_clear`` and ``handoff``;
    - **multiply** (``t + 3``): the product enters the multiplier's output register;
    - **accumulate** (``t + 4``, ``PE_MAC_LATENCY`` cycles after the operand
      stage): the MAC adds the product to the accumulator (or to zero with
      ``mac_clear``) and writes ``acc`` at the end of the cycle; with
      ``handoff`` the new sum is also copied to the reduction register
      ``red``, which frees the accumulator for the next output block.

    ``red_add`` acts in its own cycle: ``red`` adds ``red_in``, a partial sum
    arriving on a bus or a neighbour link, unless a handoff reaches the
    accumulate stage in the same cycle (the handoff wins). A ``handoff`` is
    only given with a MAC (``mac_op`` not ``NONE``). The first
    ``PE_READ_LATENCY`` enabled cycles after a reset have no word read yet:
    their ``mac_op`` must not take ``mem_data``.

    The buses are ``acc_width`` wide; a multiplier operand taken from a bus is
    its low ``width`` bits (a sign-extended operand).

    With ``mac="fp16"`` (the paper's half-precision FPU, ``width`` 16 and
    ``acc_width`` 32) the same pipeline carries bit patterns: the SRAM words
    and the operands taken from the buses (their low 16 bits) are FP16, the
    multiply stage makes their exact FP32 product, and the accumulator, the
    reduction register, ``red_in`` and the buses are FP32; both adders round
    to nearest even (:class:`~trainforge.hw.caterpillar.mac.CPHalfPrecisionMAC`).

    With ``fp16`` and ``partial_sums`` ``P`` above 1 the accumulate stage is
    the interleaved accumulator of the TensorDash FP PEs
    (:class:`~trainforge.hw.fp.accumulate.InterleavedAccumulator`): a
    ``P``-stage FP32 adder whose last stage is one of ``P`` partial sums, the
    products since the last ``mac_clear`` added in turn to partial ``j mod P``,
    then the pairwise adder tree over the partials (7 stages per level). A
    product's result (the order: :mod:`trainforge.golden.caterpillar.pe`) is
    written into ``acc``, and with its ``handoff`` into ``red``,
    :func:`~trainforge.spec.caterpillar.pe_accumulate_latency` cycles after
    its accumulate stage; a handoff without a MAC is ignored. The loop of the
    accumulator is then one adder stage long.

    With ``fp16`` and ``reduction_partials`` ``R`` above 1 the reduction
    register's add is pipelined the same way: a landing handoff is row 0 of a
    new reduction (and is written into ``red`` at once), each ``red_add`` is
    the next row (its ``red_in``), registered, then added by an interleaved
    accumulator of ``R`` partials; a ``red_add`` row's result is written into
    ``red`` :func:`~trainforge.spec.caterpillar.pe_reduction_latency` cycles
    after its ``red_add`` (a handoff landing then wins). One ``red_in`` per
    cycle, as with the one-cycle add.

    Parameters
    ----------
    width : int
        Operand (weight and activation) width, two's complement fixed point (16 with ``fp16``).
    acc_width : int
        Accumulator, reduction and bus width; sums wrap around.
    sram_depth : int
        Words of ``width`` bits in the local SRAM (the paper's 16 KB is 8192 16-bit words).
    mac : str
        MAC unit, a key of :data:`~trainforge.hw.caterpillar.mac.MAC_UNITS`.
    partial_sums : int
        ``fp16`` only: 1 (the one-cycle accumulate stage), or the partial sums of the interleaved accumulator.
    reduction_partials : int
        ``fp16`` only: 1 (the one-cycle ``red_add``), or the partials of the interleaved reduction.

    Members
    -------
    en : In(1)
        Advance the pipeline this cycle.
    rd_en : In(1)
        Issue stage: read the SRAM this cycle (the core raises it only when the word is used).
    rd_addr : In(unsigned(addr_width))
        Issue stage.
    wr_en : In(1)
    wr_addr : In(unsigned(addr_width))
    wr_data : In(signed(width))
    mac_op : In(MacOp)
        A :class:`MacOp`, operand stage.
    mac_clear, handoff : In(1)
        Operand stage; they act in the accumulate stage.
    red_add : In(1)
        Adds ``red_in`` to ``red`` in this cycle.
    row_bus, col_bus : In(signed(acc_width))
        Operand stage.
    red_in : In(signed(acc_width))
    mem_data : Out(signed(width))
        The SRAM output register: the word read ``PE_READ_LATENCY`` enabled cycles earlier
        (held while ``en`` is low).
    acc, red : Out(signed(acc_width))
        The accumulator and the reduction register.

    Energy events (:class:`~trainforge.spec.caterpillar.CoreEvent`) are named one-bit signals of the
    generated Verilog, ``<prefix>_read_enable`` and ``<prefix>_write_enable`` (the SRAM's read and write),
    ``<prefix>_mac_enable`` (a MAC in the accumulate stage) and ``<prefix>_add_enable`` (a reduction add),
    where the testbenches count them.
    """

    PARAMS = PE_PARAMS

    #: On the ECP5, whether the SRAM output register is the DP16KD's own (``REGMODE OUTREG``) instead of a fabric
    #: register straight behind the block. Measured on ``cp_core`` (hw/caterpillar/README.md, section
    #: "`cp_core`: the PE SRAMs' own DP16KD output register"): the block's own register made the route from the
    #: BRAM to the row bus one hop (94.5 / 86.4 MHz on two placer seeds), the fabric register 104.5 MHz.
    SRAM_REGISTER_IN_BLOCK = False

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.addr_width = addr_width(self.sram_depth)
        super().__init__({
            "en": In(1),
            "rd_en": In(1),
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
        })

    def elaborate(self, platform):
        m = Module()
        self.build_into(m, "pe", platform)
        return m

    def build_into(self, m, prefix, platform=None):
        """Add this PE's logic to module ``m`` (no submodule: a core stays one flat Verilog module).

        Elaborated for an ECP5 platform (the FPGA flow), the SRAM is DP16KD instances and its output register
        is loaded straight from their read ports
        (:func:`~trainforge.hw.ecp5_output_registered_bram.build_output_registered_bram`; a fabric register, or
        with :attr:`SRAM_REGISTER_IN_BLOCK` the block's own): Yosys's mapping of the Amaranth memory puts its
        read-first emulation's multiplexer between the BRAM and the register, this form puts it behind the
        register. Same cycles and words; the Amaranth form is the one the testbenches simulate, and
        ``verif/test_pe_sram_ecp5_equivalence.py`` runs both side by side.

        Parameters
        ----------
        m : Module
        prefix : str
            Name prefix of the PE's memory and internal signals, unique within ``m``.
        platform : Platform or None
            The elaboration's platform.
        """
        # The component is used for its ports only, never elaborated as a submodule: tell
        # Amaranth's unused-elaboratable check.
        self._MustUse__silence = True
        output_registered_bram = uses_output_registered_bram(platform, self.sram_depth)
        read_enable = Signal(name=f"{prefix}_read_enable")
        write_enable = Signal(name=f"{prefix}_write_enable")
        sram_output = Signal(signed(self.width), name=f"{prefix}_sram_output")
        if output_registered_bram:
            m.d.comb += [read_enable.eq(self.en & self.rd_en), write_enable.eq(self.wr_en)]
            build_output_registered_bram(
                m, f"{prefix}_sram", width=self.width, depth=self.sram_depth, write_enable=write_enable,
                write_addr=self.wr_addr, write_data=self.wr_data, read_enable=read_enable, read_addr=self.rd_addr,
                output_enable=self.en, output=sram_output, register_in_block=self.SRAM_REGISTER_IN_BLOCK)
            m.d.comb += self.mem_data.eq(sram_output)
        else:
            m.submodules[f"{prefix}_sram"] = sram = memory.Memory(
                shape=signed(self.width), depth=self.sram_depth, init=[])
            write = sram.write_port()
            read = sram.read_port()
            m.d.comb += [read_enable.eq(self.en & self.rd_en), write_enable.eq(self.wr_en)]
            m.d.comb += [
                write.en.eq(write_enable),
                write.addr.eq(self.wr_addr),
                write.data.eq(self.wr_data),
                read.en.eq(read_enable),
                read.addr.eq(self.rd_addr),
                self.mem_data.eq(sram_output),
            ]

        mac_unit = MAC_UNITS[self.mac](self.width, self.acc_width, m, f"{prefix}_fpu")
        row_operand = self.row_bus[:self.width].as_signed()
        col_operand = self.col_bus[:self.width].as_signed()
        first_is_row = (self.mac_op == MacOp.ROW_MEM) | (self.mac_op == MacOp.ROW_COL)
        second_is_col = self.mac_op == MacOp.ROW_COL
        # Multiplier input registers (with the controls of the operand stage), output register.
        multiplicand = Signal(signed(self.width), name=f"{prefix}_multiplicand")
        multiplier = Signal(signed(self.width), name=f"{prefix}_multiplier")
        product = Signal(signed(2 * self.width), name=f"{prefix}_product")
        multiply_controls = Signal(3, name=f"{prefix}_multiply_controls")  # active, clear, handoff
        accumulate_controls = Signal(3, name=f"{prefix}_accumulate_controls")
        accumulator = Signal(signed(self.acc_width), name=f"{prefix}_accumulator")
        reduction = Signal(signed(self.acc_width), name=f"{prefix}_reduction")
        active, clear, handoff = accumulate_controls[0], accumulate_controls[1], accumulate_controls[2]
        total = Signal(signed(self.acc_width), name=f"{prefix}_sum")
        mac_enable = Signal(name=f"{prefix}_mac_enable")
        add_enable = Signal(name=f"{prefix}_add_enable")
        # The MAC unit's datapaths, outside the enable's conditions (an FP unit adds named nets to ``m``).
        next_product = mac_unit.multiply(multiplicand, multiplier)
        one_cycle_reduction = self.reduction_partials == 1  # else the interleaved reduction
        reduction_sum = mac_unit.add(reduction, self.red_in) if one_cycle_reduction else None
        one_cycle = self.partial_sums == 1  # else the interleaved accumulator (_build_interleaved)
        if one_cycle:
            m.d.comb += [
                mac_enable.eq(self.en & active),
                add_enable.eq(self.en & ~handoff & self.red_add),
                total.eq(mac_unit.add(Mux(clear, 0, accumulator), product)),
                self.acc.eq(accumulator),
                self.red.eq(reduction),
            ]
        else:
            m.d.comb += [mac_enable.eq(self.en & active), self.acc.eq(accumulator), self.red.eq(reduction)]
        with m.If(self.en):
            if not output_registered_bram:  # else the DP16KD's output register
                m.d.sync += sram_output.eq(read.data)
            m.d.sync += [
                multiplicand.eq(Mux(first_is_row, row_operand, col_operand)),
                multiplier.eq(Mux(second_is_col, col_operand, sram_output)),
                multiply_controls.eq(Cat(self.mac_op != MacOp.NONE, self.mac_clear, self.handoff)),
                product.eq(next_product),
                accumulate_controls.eq(multiply_controls),
            ]
            if one_cycle:
                with m.If(active):
                    m.d.sync += accumulator.eq(total)
                if one_cycle_reduction:
                    with m.If(handoff):
                        m.d.sync += reduction.eq(total)
                    with m.Elif(self.red_add):
                        m.d.sync += reduction.eq(reduction_sum)
        if not one_cycle:
            self._build_interleaved(m, prefix, product, multiply_controls, accumulate_controls, accumulator,
                                    reduction, reduction_sum, add_enable)
        elif not one_cycle_reduction:
            self._build_interleaved_reduction(m, prefix, handoff, total, reduction)

    def _build_interleaved(self, m, prefix, product, multiply_controls, accumulate_controls, accumulator,
                           reduction, reduction_sum, add_enable):
        """The pipeline registers up to the product are built; add the interleaved accumulator behind them."""
        # Its flags are those of the row whose product reaches the accumulate stage next cycle (the multiply
        # stage's controls); every product's result is wanted (read).
        interleaved = FloatMAC({"mac": "fp16", "lanes": 1, "partial_sums": self.partial_sums}).accumulator(
            m, valid=multiply_controls[0], clear=multiply_controls[1], read=1, enable=self.en,
            name=f"{prefix}_accumulate")
        result = interleaved.add(product, f"{prefix}_accumulate")
        # The handoff travels beside the row's result, pe_accumulate_latency cycles from the accumulate stage.
        landing = accumulate_controls[0] & accumulate_controls[2]
        for stage in range(pe_accumulate_latency(self.partial_sums)):
            landing = register_values(m, {"d": landing}, self.en, f"{prefix}_handoff{stage}")["d"]
        m.d.comb += add_enable.eq(self.en & ~landing & self.red_add)
        with m.If(self.en):
            with m.If(interleaved.result_valid):
                m.d.sync += accumulator.eq(result)
            if self.reduction_partials == 1:
                with m.If(landing):
                    m.d.sync += reduction.eq(result)
                with m.Elif(self.red_add):
                    m.d.sync += reduction.eq(reduction_sum)
        if self.reduction_partials != 1:
            self._build_interleaved_reduction(m, prefix, landing, result, reduction)

    def _build_interleaved_reduction(self, m, prefix, landing, handoff_value, reduction):
        """The interleaved reduction register (``reduction_partials`` above 1).

        ``landing`` (a register) says that a handoff lands this cycle with ``handoff_value``. The row of this
        cycle, the handoff's value (a clear row) or else ``red_in`` (with ``red_add``), is registered with its
        flags, then added by the interleaved accumulator of ``reduction_partials`` partials; a ``red_add`` row's
        result is written into ``red`` ``pe_reduction_latency`` cycles after its ``red_add``. A landing handoff
        writes ``red`` in its own cycle and wins over a result landing then.
        """
        row_valid = landing | self.red_add
        interleaved = FloatMAC({"mac": "fp16", "lanes": 1, "partial_sums": self.reduction_partials}).accumulator(
            m, valid=row_valid, clear=landing, read=~landing, enable=self.en, name=f"{prefix}_reduce")
        # The row register: no path runs from red_in (a bus across the core) into the adder.
        row = register_values(m, {"value": Mux(landing, handoff_value, self.red_in)}, self.en,
                              f"{prefix}_reduce_row")["value"]
        result = interleaved.add(row, f"{prefix}_reduce")
        with m.If(self.en):
            with m.If(landing):
                m.d.sync += reduction.eq(handoff_value)
            with m.Elif(interleaved.result_valid):
                m.d.sync += reduction.eq(result)
