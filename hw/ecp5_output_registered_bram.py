"""On the ECP5: a memory with a registered read, built from DP16KD instances, with nothing between block and register.

Yosys 0.70 maps an Amaranth memory with a non-transparent read port onto DP16KDs by emulating the read-first
behaviour the two ports of a block do not give: the write reaches the block one cycle late from registers, and an
address compare with a multiplexer in front of the read's register supplies the word of a late write to the read
address. With a register behind the read port (the PE's SRAM output register) that multiplexer sits between the
BRAM (5.83 ns clock-to-out, ``REGMODE NOREG``: Yosys 0.70 has no other) and the register. Built here, the same
emulation puts the multiplexer behind the output register, so the route from the block to the register has no
logic; the register is either a fabric flip-flop straight behind the block or the block's own output register
(``REGMODE_B "OUTREG"``, 0.96 ns clock-to-out in nextpnr-ecp5 0.11.1), which takes the placer's freedom to put
the register between the block and the register's readers (``hw/caterpillar/README.md``, section "`cp_core`:
the PE SRAMs' own DP16KD output register", measured both).

Only the FPGA flow elaborates this form (a platform of the ``ecp5`` family); simulation and generic synthesis use
the Amaranth memory and a fabric register with the same cycles (Yosys has no simulation model of the DP16KD).
"""
from amaranth import Cat, ClockSignal, Const, Instance, Mux, ResetSignal, Signal

__all__ = ["DP16KD_CONFIGURATIONS", "dp16kd_configuration", "uses_output_registered_bram",
           "build_output_registered_bram"]

#: The DP16KD's true-dual-port configurations: (data bits per block, words, lowest address pin).
#: Narrower words are deeper; a word's address is on pins ``AD13 .. AD<lowest>``.
DP16KD_CONFIGURATIONS = ((18, 1024, 4), (9, 2048, 3), (4, 4096, 2), (2, 8192, 1), (1, 16384, 0))


def dp16kd_configuration(depth):
    """The widest DP16KD configuration holding ``depth`` words (one block deep, no output multiplexer), or ``None``.

    Parameters
    ----------
    depth : int
        Words of the memory.

    Returns
    -------
    tuple of (int, int, int) or None
        An entry of :data:`DP16KD_CONFIGURATIONS`; ``None`` beyond 16384 words.
    """
    for configuration in DP16KD_CONFIGURATIONS:
        if depth <= configuration[1]:
            return configuration
    return None


def uses_output_registered_bram(platform, depth):
    """Whether :func:`build_output_registered_bram` applies: an ECP5 platform and at most 16384 words."""
    return getattr(platform, "family", None) == "ecp5" and dp16kd_configuration(depth) is not None


def build_output_registered_bram(m, name, *, width, depth, write_enable, write_addr, write_data, read_enable,
                                 read_addr, output_enable, output, register_in_block):
    """Add the DP16KDs of a ``depth`` x ``width`` memory and its output register to ``m``: port A writes, port B reads.

    Cycles and values are those of an Amaranth memory with one write port and one synchronous,
    non-transparent read port, followed by a register enabled by ``output_enable`` and cleared by a reset:
    with ``write_enable``, ``write_data`` is written at ``write_addr``; with ``read_enable`` the word at
    ``read_addr`` (written before this cycle, not in it) enters the read latch (``CEB``), which otherwise holds
    its word; in a cycle with ``output_enable`` the output register (``OCEB``) takes the latch's word, visible on
    ``output`` in the next cycle. After a reset the word is 0 until the output register takes a word; with the
    register in the block that word may be 0 instead of a word read before the reset (``RSTB`` may clear the
    latch too).

    A DP16KD's read of the address its other port writes in the same cycle is undefined, so the blocks are not
    written in the write's cycle: the write enters registers (a whole cycle of routing from the writer's logic to
    the blocks, as with the registers Yosys adds when it maps the Amaranth memory) and the blocks take it in the
    next cycle, so a read never sees a write of its own cycle. A read of the address the registered write lands
    at in its cycle takes the registered word instead of the block's: a flag and the word, carried through a
    copy of the latch (enabled by ``read_enable``) and of the output register (``output_enable``), select it
    behind the output register.

    Parameters
    ----------
    m : Module
    name : str
        Prefix of the instances and their nets, unique within ``m``.
    width, depth : int
        Word width and words (``depth`` at most 16384).
    write_enable, read_enable, output_enable : Value
        One bit each.
    write_addr, read_addr : Value
        Word addresses (below ``depth``).
    write_data : Value
        ``width`` bits.
    output : Signal
        ``width`` bits, driven (combinationally) from the output register and the bypass registers.
    register_in_block : bool
        The output register is the blocks' own (``REGMODE_B "OUTREG"``, ``OCEB`` = ``output_enable``, ``RSTB`` =
        the reset); else a fabric register loaded straight from the blocks' read ports (``REGMODE_B "NOREG"``).
    """
    block_bits, words, lowest_pin = dp16kd_configuration(depth)
    address_bits = max(1, (depth - 1).bit_length())
    assert address_bits <= 14 - lowest_pin and len(write_addr) <= address_bits >= len(read_addr), \
        (depth, len(write_addr), len(read_addr))

    def address_pins(port, address):
        pins = {}
        for pin in range(14):
            bit = pin - lowest_pin
            if 0 <= bit < len(address):
                pins[f"i_AD{port}{pin}"] = address[bit]
            else:
                # x18: AD1 and AD0 are the write byte enables (both bytes written); other pins unused.
                pins[f"i_AD{port}{pin}"] = Const(int(block_bits == 18 and port == "A" and pin < 2))
        return pins

    # The registered write (no reset, as the memory's write port ignores it) and the bypass of its word.
    late_enable = Signal(name=f"{name}_late_write_enable", reset_less=True)
    late_addr = Signal(len(write_addr), name=f"{name}_late_write_addr", reset_less=True)
    late_data = Signal(width, name=f"{name}_late_write_data", reset_less=True)
    m.d.sync += [late_enable.eq(write_enable), late_addr.eq(write_addr), late_data.eq(write_data)]
    latch_bypass = Signal(name=f"{name}_latch_bypass", reset_less=True)
    latch_word = Signal(width, name=f"{name}_latch_bypass_word", reset_less=True)
    output_bypass = Signal(name=f"{name}_output_bypass")  # cleared by a reset, as the output register
    output_word = Signal(width, name=f"{name}_output_bypass_word", reset_less=True)
    with m.If(read_enable):
        m.d.sync += [latch_bypass.eq(late_enable & (late_addr == read_addr)), latch_word.eq(late_data)]
    with m.If(output_enable):
        m.d.sync += [output_bypass.eq(latch_bypass), output_word.eq(latch_word)]

    read_words = []
    for block in range((width + block_bits - 1) // block_bits):
        bits = range(block * block_bits, min(width, (block + 1) * block_bits))
        data_out = Signal(18, name=f"{name}_{block}_dob")
        ports = {f"i_DIA{k}": late_data[bits[k]] if k < len(bits) else Const(0) for k in range(18)}
        ports.update({f"i_DIB{k}": Const(0) for k in range(18)})
        ports.update({f"o_DOB{k}": data_out[k] for k in range(18)})
        ports.update(address_pins("A", late_addr))
        ports.update(address_pins("B", read_addr))
        m.submodules[f"{name}_{block}"] = Instance(
            "DP16KD",
            p_DATA_WIDTH_A=block_bits, p_DATA_WIDTH_B=block_bits,
            p_REGMODE_A="NOREG", p_REGMODE_B="OUTREG" if register_in_block else "NOREG",
            p_RESETMODE="SYNC", p_ASYNC_RESET_RELEASE="SYNC",
            p_CSDECODE_A="0b000", p_CSDECODE_B="0b000",
            p_WRITEMODE_A="NORMAL", p_WRITEMODE_B="NORMAL",
            p_GSR="DISABLED",
            i_CLKA=ClockSignal(), i_CEA=Const(1), i_OCEA=Const(1), i_WEA=late_enable, i_RSTA=Const(0),
            i_CSA0=Const(0), i_CSA1=Const(0), i_CSA2=Const(0),
            i_CLKB=ClockSignal(), i_CEB=read_enable, i_OCEB=output_enable if register_in_block else Const(1),
            i_WEB=Const(0), i_RSTB=ResetSignal(allow_reset_less=True) if register_in_block else Const(0),
            i_CSB0=Const(0), i_CSB1=Const(0), i_CSB2=Const(0),
            **ports,
        )
        read_words.append(data_out[:len(bits)])
    if register_in_block:
        registered = Cat(*read_words)
    else:
        registered = Signal(width, name=f"{name}_fabric_word")  # the fabric output register, cleared by a reset
        with m.If(output_enable):
            m.d.sync += registered.eq(Cat(*read_words))
    m.d.comb += output.eq(Mux(output_bypass, output_word, registered))
