"""Simulator and linter settings shared by the cocotb runs and the lint tests."""

#: Verilator warnings waived for Amaranth's generated Verilog, each for a reason
#: that holds for every block. Nothing else is waived.
VERILATOR_WAIVERS = [
    # Amaranth's back end sizes every operator by Amaranth's own rules and relies on
    # Verilog's context-determined extension when it writes `a + b` with narrower
    # operands; the result is exact by construction, so WIDTH reports no real bug.
    "-Wno-WIDTH",
    # Amaranth emits a named debug wire for every field of a struct or array view
    # (`\i_row__payload.a[0]`) and keeps the unused carry-out bits of adders whose
    # sums are truncated on purpose (wrap-around accumulators). They drive nothing.
    "-Wno-UNUSEDSIGNAL",
    # Amaranth writes a block and all of its submodules into the one file named after
    # the block, so every submodule's name differs from its file name by construction.
    "-Wno-DECLFILENAME",
]

#: Icarus options. cocotb compiles with -g2012, under which Icarus does not run an
#: `always @*` block at time zero unless one of its inputs changes; Amaranth's
#: start-up trigger (a `reg ... = 0` initialiser) makes no event in that mode, so
#: purely combinational logic can stay 'x' until its inputs move. Amaranth emits
#: Verilog-2005, and -g2005 (the later flag wins) restores the time-zero event.
ICARUS_BUILD_ARGS = ["-g2005"]

#: One time unit per ns, so that a 10 ns clock is exact in Icarus.
TIMESCALE = ("1ns", "1ps")

#: Clock period of every testbench, in ns.
CLOCK_PERIOD_NS = 10

#: Make variables for compiling Verilator's C++ model. The testbenches run a few
#: thousand cycles, so compile time dominates: -O0 builds about a third faster
#: than Verilator's default -Os, and the simulations stay well under a second.
VERILATOR_MAKE_VARIABLES = "OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0"
